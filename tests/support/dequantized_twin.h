// A model's matrices replaced by copies of the same values in another layout: F32 (dequantized), or Q8_0
// blocks (for the types unpacks_to_q8_0 names). Such a twin runs the same numbers through
// other kernels: the F32 twin of a quantized model is its exact computation, with no rounding of
// activations, against which the block-type paths (here or in another engine) are measured.
#pragma once

#include "cpu/quant.h"
#include "model/model_weights.h"

#include <memory>

namespace kvscope::test {

inline void convert_matrices(ModelWeights& w, DType to) {
    auto convert = [&](WeightView& v) {
        const size_t from_bytes = dtype_row_bytes(v.dtype, v.cols), to_bytes = dtype_row_bytes(to, v.cols);
        auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[to_bytes * v.rows]);
        for (int64_t r = 0; r < v.rows; ++r) {
            const uint8_t* src = static_cast<const uint8_t*>(v.data) + r * from_bytes;
            if (to == DType::F32)
                cpu::dequantize_row(v.dtype, src, reinterpret_cast<float*>(buf.get() + r * to_bytes), v.cols);
            else
                cpu::unpack_row_q8_0(v.dtype, src, reinterpret_cast<BlockQ8_0*>(buf.get() + r * to_bytes), v.cols);
        }
        w.storage.push_back(buf);
        v = WeightView{buf.get(), to, v.rows, v.cols};
    };
    convert(w.token_embedding);
    convert(w.lm_head);
    for (LayerWeights& L : w.layers)
        for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) convert(*v);
}

}  // namespace kvscope::test
