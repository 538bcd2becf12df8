// Logits of a model at chosen positions of one token sequence, run as a single prefill through the
// paged forward pass with a scattered (reversed) block table, or as a prefill and then one decode step
// per token (teacher-forced: the tokens are given, not sampled), as an engine generates.
#pragma once

#include "cpu/cpu_kernel_sets.h"
#include "model/model.h"
#include "runner/model_runner.h"

#include <algorithm>
#include <vector>

namespace kvscope::test {

// Rows for positions [first, tokens.size()), on `backend`, with a KV cache of kv_dtype, for a runner set
// up for max_model_len (0: the model's own context). [rows, vocab]
inline std::vector<float> prefill_logits(Backend& backend, const Model& model, const std::vector<int32_t>& tokens,
                                         int first, int block_size = 16, DType kv_dtype = DType::F32,
                                         int max_model_len = 0) {
    const int T = static_cast<int>(tokens.size());
    const int used = (T + block_size - 1) / block_size;
    ModelRunner runner(model, backend, used + 3, block_size, T, T, kv_dtype, max_model_len);
    std::vector<int32_t> table;
    for (int b = used - 1; b >= 0; --b) table.push_back(b + 3);
    ModelInput in;
    in.clear();
    in.add_sequence(tokens.data(), 0, T, table, block_size, false);
    for (int p = first; p < T; ++p) in.logits_indices.push_back(p);
    in.finalize();
    const float* l = runner.execute(in).logits;
    return {l, l + static_cast<size_t>(T - first) * model.config.vocab_size};
}

// Logits of every position of one sequence run in steps of `chunk` tokens (1: prefill of one token, then
// decode) over one runner and one scattered block table, so that later steps read what earlier ones
// cached: with sliding windows, the windows cross step and block boundaries. [tokens.size(), vocab]
inline std::vector<float> chunked_logits(Backend& backend, const Model& model, const std::vector<int32_t>& tokens,
                                         int chunk, int block_size) {
    const int T = static_cast<int>(tokens.size());
    const int used = (T + block_size - 1) / block_size;
    ModelRunner runner(model, backend, used + 3, block_size, chunk, chunk);
    std::vector<int32_t> table;
    for (int b = used - 1; b >= 0; --b) table.push_back(b + 3);
    std::vector<float> logits;
    for (int start = 0; start < T; start += chunk) {
        const int n = std::min(chunk, T - start);
        ModelInput in;
        in.clear();
        in.add_sequence(tokens.data(), start, n, table, block_size, false);
        for (int i = 0; i < n; ++i) in.logits_indices.push_back(i);
        in.finalize();
        const float* l = runner.execute(in).logits;
        logits.insert(logits.end(), l, l + static_cast<size_t>(n) * model.config.vocab_size);
    }
    return logits;
}

// The same rows from a prefill of tokens [0, first] and then single-token steps, each one a decode of
// the next given token (the single-row matmul paths). [rows, vocab]
inline std::vector<float> decode_logits(Backend& backend, const Model& model, const std::vector<int32_t>& tokens,
                                        int first, int block_size = 16, DType kv_dtype = DType::F32) {
    const int T = static_cast<int>(tokens.size());
    const int used = (T + block_size - 1) / block_size;
    ModelRunner runner(model, backend, used + 3, block_size, T, 1, kv_dtype);
    std::vector<int32_t> table;
    for (int b = used - 1; b >= 0; --b) table.push_back(b + 3);
    const size_t vocab = model.config.vocab_size;
    std::vector<float> rows;
    for (int p = first; p < T; ++p) {
        ModelInput in;
        in.clear();
        const int start = p == first ? 0 : p;
        in.add_sequence(tokens.data(), start, p + 1 - start, table, block_size, true);
        in.finalize();
        const float* l = runner.execute(in).logits;
        rows.insert(rows.end(), l, l + vocab);
    }
    return rows;
}

// The same on a 2-thread CPU backend.
inline std::vector<float> prefill_logits(const Model& model, const std::vector<int32_t>& tokens, int first,
                                         int block_size = 16) {
    return prefill_logits(*cpu::make_cpu_backend(2), model, tokens, first, block_size);
}

}  // namespace kvscope::test
