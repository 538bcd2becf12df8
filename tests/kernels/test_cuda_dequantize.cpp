// The CUDA backend's decoding of the ggml block types (kernels/cuda/dequantize.cuh), run here as host code:
// every value of every type, on blocks from quantize_row and on blocks of random bytes (every bit pattern
// of quants and scales, finite F16 scales), equals the CPU's dequantize_row bit for bit; and the
// activation quantization of the int8 paths (q8_activation) equals quantize_activations_q8, ties included.
// The same functions run in the CUDA embedding and matmul kernels (with __fmul_rn ... for the roundings),
// so their index arithmetic is proven on any machine; the kernels themselves run in the cuda rows of
// test_backend_ops on a GPU.
#include "op_checks.h"
#include "test_support.h"

#include "cpu/quant.h"
#include "cuda/dequantize.cuh"
#include "dtype.h"

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

using namespace kvscope;

namespace {

// Byte offsets of the F16 scale fields of one block of type t.
std::vector<size_t> f16_fields(DType t) {
    switch (t) {
    case DType::Q8_0: return {offsetof(BlockQ8_0, d)};
    case DType::Q4_0: return {offsetof(BlockQ4_0, d)};
    case DType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::Q5_0: return {offsetof(BlockQ5_0, d)};
    case DType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::IQ4_NL: return {offsetof(BlockIQ4_NL, d)};
    case DType::IQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    case DType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case DType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::Q6_K: return {offsetof(BlockQ6_K, d)};
    default: return {};
    }
}

}  // namespace

class TestCudaDequantize : public QObject {
    Q_OBJECT

    uint64_t seed_ = 0;

private slots:
    void initTestCase() { seed_ = test::test_seed(20251204); }

    void decode_equals_cpu_data() {
        QTest::addColumn<int>("dtype");
        for (DType t : kDTypes)
            if (dtype_is_quantized(t)) QTest::newRow(dtype_name(t).data()) << static_cast<int>(t);
    }
    void decode_equals_cpu() {
        QFETCH(int, dtype);
        const DType t = static_cast<DType>(dtype);
        std::mt19937_64 rng(test::case_seed(seed_));
        const int64_t E = dtype_block_elems(t), nb = 96, n = E * nb, bb = dtype_block_bytes(t);
        std::vector<float> src = test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
        std::vector<uint8_t> bytes(static_cast<size_t>(dtype_row_bytes(t, n)));
        cpu::quantize_row(t, src.data(), bytes.data(), n);
        // The second half: random bytes, F16 scales in [-2^-4, 2^-4] (some subnormal, some zero).
        std::uniform_real_distribution<float> scale(-0.0625f, 0.0625f);
        for (int64_t b = nb / 2; b < nb; ++b) {
            uint8_t* blk = bytes.data() + b * bb;
            for (int64_t i = 0; i < bb; ++i) blk[i] = static_cast<uint8_t>(rng());
            for (size_t off : f16_fields(t)) {
                const int pick = static_cast<int>(rng() % 8);
                const float v = pick == 0 ? 0.0f : pick == 1 ? scale(rng) * 1e-4f : scale(rng);
                const uint16_t h = f32_to_f16(v);
                std::memcpy(blk + off, &h, 2);
            }
        }
        QVERIFY2(!f16_fields(t).empty(), "every block type has an F16 scale");
        std::vector<float> ref(static_cast<size_t>(n));
        cpu::dequantize_row(t, bytes.data(), ref.data(), n);
        int64_t mismatches = 0;
        QString first;
        cuda::visit_quant_type(t, "test", [&](auto q) {
            using Q = decltype(q);
            static_assert(sizeof(typename Q::Block) > 0);
            QCOMPARE(static_cast<int64_t>(Q::kElems), E);
            QCOMPARE(static_cast<int64_t>(sizeof(typename Q::Block)), bb);
            const auto* blocks = reinterpret_cast<const typename Q::Block*>(bytes.data());
            for (int64_t i = 0; i < n; ++i) {
                const float v = Q::value(blocks[i / E], static_cast<int>(i % E));
                if (std::memcmp(&v, &ref[i], 4) != 0 && mismatches++ == 0)
                    first = QString("value %1 (block %2, index %3): %4, CPU %5")
                                .arg(i).arg(i / E).arg(i % E).arg(v, 0, 'g', 9).arg(ref[i], 0, 'g', 9);
            }
        });
        QVERIFY2(mismatches == 0, qPrintable(QString("%1 of %2 values differ; first: %3").arg(mismatches).arg(n).arg(first)));
    }

    void q8_activation_equals_cpu() {
        std::mt19937_64 rng(test::case_seed(seed_));
        const int n = 32 * 64;
        std::vector<float> x = test::random_floats(rng, n, -3.0f, 3.0f);
        // Block 0: max 127, so the scaled values are x itself: halves tie and round to even.
        const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -126.5f};
        std::copy(std::begin(ties), std::end(ties), x.begin());
        std::fill(x.begin() + 32, x.begin() + 64, 0.0f);        // block 1: all zero (d = 0)
        std::fill(x.begin() + 64, x.begin() + 96, -1e-30f);     // block 2: tiny, all equal
        std::vector<cpu::BlockQ8Act> blocks(n / 32);
        cpu::quantize_activations_q8(x.data(), blocks.data(), n);
        for (int b = 0; b < n / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            for (int j = 0; j < 32; ++j) {
                const float want = blocks[b].d * blocks[b].qs[j];
                const float got = cuda::q8_activation(x[b * 32 + j], amax);
                QVERIFY2(std::memcmp(&got, &want, 4) == 0,
                         qPrintable(QString("x[%1] = %2: %3, CPU %4").arg(b * 32 + j).arg(x[b * 32 + j], 0, 'g', 9)
                                        .arg(got, 0, 'g', 9).arg(want, 0, 'g', 9)));
            }
        }
    }

    // The K types' activations (one signed extreme per 256 values, llama.cpp's Q8_K) on the device equal
    // cpu::quantize_activations_q8_k bit for bit, ties of magnitude and of rounding included.
    void q8k_activation_equals_cpu() {
        std::mt19937_64 rng(test::case_seed(seed_));
        const int n = 256 * 16;
        std::vector<float> x = test::random_floats(rng, n, -3.0f, 3.0f);
        // Block 0: m = -127 (so iscale = 1) and halves that round to even; +127 later ties in magnitude.
        const float ties[] = {-127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -126.5f, 127.0f, -0.25f};
        std::copy(std::begin(ties), std::end(ties), x.begin());
        std::fill(x.begin() + 256, x.begin() + 512, 0.0f);     // block 1: all zero
        std::fill(x.begin() + 512, x.begin() + 768, -1e-30f);  // block 2: tiny, all equal
        x[768 + 5] = 2.0f, x[768 + 200] = -2.0f;                // block 3: the first of a +-tie wins
        std::vector<cpu::BlockQ8Act> blocks(n / 32);
        cpu::quantize_activations_q8_k(x.data(), blocks.data(), n);
        for (int b = 0; b < n / 256; ++b) {
            float m = 0;
            for (int j = 0; j < 256; ++j)
                if (std::fabs(x[b * 256 + j]) > std::fabs(m)) m = x[b * 256 + j];
            for (int j = 0; j < 256; ++j) {
                const cpu::BlockQ8Act& blk = blocks[(b * 256 + j) / 32];
                const float want = blk.d * blk.qs[j % 32];
                const float got = cuda::q8k_activation(x[b * 256 + j], m);
                QVERIFY2(std::memcmp(&got, &want, 4) == 0,
                         qPrintable(QString("x[%1] = %2: %3, CPU %4").arg(b * 256 + j).arg(x[b * 256 + j], 0, 'g', 9)
                                        .arg(got, 0, 'g', 9).arg(want, 0, 'g', 9)));
            }
        }
    }

    void plain_types_are_not_visited() {
        for (DType t : {DType::F32, DType::F16, DType::BF16}) {
            bool threw = false;
            try {
                cuda::visit_quant_type(t, "test", [](auto) {});
            } catch (const std::invalid_argument& e) {
                threw = QByteArray(e.what()).contains(dtype_name(t).data());
            }
            QVERIFY2(threw, dtype_name(t).data());
        }
    }
};

QTEST_GUILESS_MAIN(TestCudaDequantize)
#include "test_cuda_dequantize.moc"
