#include "runner/model_input.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kvscope {

void ModelInput::add_sequence(const int32_t* tokens, int start, int n, const std::vector<int32_t>& block_table,
                              int block_size, bool want_logits) {
    if (query_start_loc.empty()) query_start_loc.push_back(0);
    for (int i = 0; i < n; ++i) {
        const int pos = start + i;
        token_ids.push_back(tokens[pos]);
        positions.push_back(pos);
        slot_mapping.push_back(static_cast<int64_t>(block_table[pos / block_size]) * block_size + pos % block_size);
    }
    if (want_logits) logits_indices.push_back(num_tokens() - 1);
    query_start_loc.push_back(num_tokens());
    seq_lens.push_back(start + n);
    seq_block_tables.push_back(block_table);
}

void ModelInput::add_padding(int n, int context_len, const std::vector<int32_t>& block_table) {
    if (query_start_loc.empty()) query_start_loc.push_back(0);
    while (n > 0 && context_len > 0) {
        const int m = std::min(n, context_len);
        for (int i = 0; i < m; ++i) {
            token_ids.push_back(0);
            positions.push_back(context_len - m + i);
            slot_mapping.push_back(-1);
        }
        query_start_loc.push_back(num_tokens());
        seq_lens.push_back(context_len);
        seq_block_tables.push_back(block_table);
        n -= m;
    }
}

void ModelInput::finalize() {
    max_blocks_per_seq = 1;
    for (const auto& t : seq_block_tables) max_blocks_per_seq = std::max<int>(max_blocks_per_seq, t.size());
    block_tables.assign(seq_block_tables.size() * max_blocks_per_seq, 0);
    for (size_t s = 0; s < seq_block_tables.size(); ++s)
        std::copy(seq_block_tables[s].begin(), seq_block_tables[s].end(), block_tables.begin() + s * max_blocks_per_seq);
}

void ModelInput::pad_decode_to(int n, int width, ModelInput& out) const {
    const int real = num_seqs();
    if (num_tokens() != real || static_cast<int>(logits_indices.size()) != real || n < real || width < max_blocks_per_seq)
        throw std::logic_error("ModelInput::pad_decode_to: a decode step of " + std::to_string(real) +
                               " sequences cannot be padded to " + std::to_string(n) + " x " + std::to_string(width));
    out.token_ids = token_ids;
    out.token_ids.resize(n, 0);
    out.positions = positions;
    out.positions.resize(n, 0);
    out.slot_mapping = slot_mapping;
    out.slot_mapping.resize(n, -1);
    out.query_start_loc.resize(n + 1);
    std::iota(out.query_start_loc.begin(), out.query_start_loc.end(), 0);
    out.seq_lens = seq_lens;
    out.seq_lens.resize(n, 1);
    out.max_blocks_per_seq = width;
    out.block_tables.assign(static_cast<size_t>(n) * width, 0);
    for (int s = 0; s < real; ++s)
        std::copy_n(block_tables.begin() + static_cast<size_t>(s) * max_blocks_per_seq, max_blocks_per_seq,
                    out.block_tables.begin() + static_cast<size_t>(s) * width);
    out.seq_block_tables.clear();
    out.logits_indices.resize(n);
    std::iota(out.logits_indices.begin(), out.logits_indices.end(), 0);
    out.sampling_rows = sampling_rows;
    if (!sampling_rows.empty()) out.sampling_rows.resize(n, SamplingRow{});
    out.logits_to_host = logits_to_host;
}

}  // namespace kvscope
