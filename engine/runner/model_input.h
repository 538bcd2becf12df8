// One step's batch as the model runner consumes it: built on the engine thread from the scheduler's
// output (token ids, positions, slot_mapping, block tables, and the device sampler's settings). Host
// memory; the runner copies it to the backend. Sequences appear in the order the scheduler listed them.
#pragma once

#include "backend.h"

#include <cstdint>
#include <vector>

namespace kvscope {

struct ModelInput {
    std::vector<int32_t> token_ids;        // [num_tokens]
    std::vector<int32_t> positions;        // [num_tokens]
    std::vector<int64_t> slot_mapping;     // [num_tokens]
    std::vector<int32_t> query_start_loc;  // [num_seqs + 1]
    std::vector<int32_t> seq_lens;         // [num_seqs]: context length after this step
    std::vector<int32_t> block_tables;     // [num_seqs, max_blocks_per_seq], padded with 0 (by finalize)
    int max_blocks_per_seq = 0;
    std::vector<std::vector<int32_t>> seq_block_tables;  // per sequence, before finalize()
    std::vector<int32_t> logits_indices;   // token rows whose logits are wanted (last token of a sampling seq)
    // Token rows whose logits give prompt log-probabilities (requests with prompt_logprobs only): the
    // runner projects them after the step, a buffer of logits rows at a time (ModelRunner::prompt_logits).
    std::vector<int32_t> prompt_logits_indices;
    // The device sampler's settings, one per logits row; empty: no device sampling (logits only).
    std::vector<SamplingRow> sampling_rows;  // [logits_indices.size()] or empty
    bool logits_to_host = true;              // some row still needs its logits on the host

    int num_tokens() const { return static_cast<int>(token_ids.size()); }
    int num_seqs() const { return static_cast<int>(seq_lens.size()); }
    void clear() {
        token_ids.clear();
        positions.clear();
        slot_mapping.clear();
        query_start_loc.assign(1, 0);
        seq_lens.clear();
        block_tables.clear();
        max_blocks_per_seq = 0;
        seq_block_tables.clear();
        logits_indices.clear();
        prompt_logits_indices.clear();
        sampling_rows.clear();
        logits_to_host = true;
    }
    // Appends one sequence's chunk: tokens [start, start + n) of `tokens`, positions start..start+n-1,
    // reading its block table for the slots. want_logits: the chunk ends at the sequence's last token.
    void add_sequence(const int32_t* tokens, int start, int n, const std::vector<int32_t>& block_table, int block_size,
                      bool want_logits);
    // Appends n padding rows that attend over the first context_len (>= 1) tokens of block_table
    // without writing the cache (slot -1) and without logits. A padding sequence cannot hold more rows
    // than its context, so long runs are split into several.
    void add_padding(int n, int context_len, const std::vector<int32_t>& block_table);
    // Flattens the block tables into a padded rectangle; call after the last add_sequence.
    void finalize();
    // This finalized decode-only step (one token per sequence, every sequence sampled) padded to num_seqs
    // sequences with block tables max_blocks_per_seq wide, for a captured graph of that shape. A padding
    // sequence holds token 0 at position 0 with seq_len 1, slot -1 (write_kv skips it) and a table of
    // block 0 (read, never written), and samples greedily; its rows never mix with the real ones (every
    // op is per token or per sequence). The real sequences keep their values and order.
    void pad_decode_to(int num_seqs, int max_blocks_per_seq, ModelInput& out) const;
};

}  // namespace kvscope
