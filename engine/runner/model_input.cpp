#include "runner/model_input.h"

#include <algorithm>

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

}  // namespace kvscope
