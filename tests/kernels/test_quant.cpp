// quantize_row / dequantize_row (cpu/quant.h) and the scalar conversions of dtype.h: F16 and BF16 exact
// on every representable value and round-to-nearest-even elsewhere, Q8_0 and Q4_K within stated error
// bounds, and the GGUF block layouts checked on hand-made blocks with an independent decoder. Every other
// block type (Q4_0 ... IQ4_XS) on blocks written byte by byte, against values worked out by hand from
// ggml's definitions, and on random data within a bound per type.
#include "test_support.h"

#include "cpu/quant.h"
#include "dtype.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

using namespace kvscope;
using namespace kvscope::cpu;

namespace {

// The value of an IEEE binary16 bit pattern, decoded from the definition (not from dtype.h).
double f16_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = std::ldexp(m, -24);  // subnormal: m x 2^-24
    else if (e == 31)
        v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else
        v = std::ldexp(1024 + m, e - 25);  // (1 + m/1024) x 2^(e-15)
    return (h & 0x8000) ? -v : v;
}

double bf16_value(uint16_t h) {
    const int e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 0)
        v = std::ldexp(m, -133);
    else if (e == 255)
        v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else
        v = std::ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

float bits_to_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

uint16_t to_f16(float x) {
    uint16_t h;
    quantize_row(DType::F16, &x, &h, 1);
    return h;
}
uint16_t to_bf16(float x) {
    uint16_t h;
    quantize_row(DType::BF16, &x, &h, 1);
    return h;
}

// Checks that h is a nearest representable value of x (by magnitude neighbours), ties to an even
// mantissa. value() decodes a pattern; max_finite is the largest finite magnitude pattern.
template <class Value>
bool is_nearest_even(float x, uint16_t h, Value value, uint16_t max_finite, QByteArray* why) {
    const uint16_t mag = h & 0x7fff;
    const double ax = std::fabs(static_cast<double>(x));
    if ((h & 0x8000) != (std::signbit(x) ? 0x8000 : 0)) {
        *why = "sign";
        return false;
    }
    if (mag > max_finite) {  // rounded to infinity: x must be at least halfway past the largest finite
        const double top = value(max_finite), next = top + (top - value(max_finite - 1));
        if (ax < (top + next) / 2) {
            *why = "overflowed to inf";
            return false;
        }
        return true;
    }
    const double err = std::fabs(ax - value(mag));
    for (int nb : {mag - 1, mag + 1}) {
        if (nb < 0 || nb > max_finite) continue;
        const double e = std::fabs(ax - value(static_cast<uint16_t>(nb)));
        if (e < err || (e == err && (mag & 1))) {
            *why = "neighbour " + QByteArray::number(nb, 16) + " is nearer (or an even tie)";
            return false;
        }
    }
    return true;
}

// Q4_K sub-block j's 6-bit scale and min, decoded from the GGUF layout (ggml's get_scale_min_k4):
// bytes 0-3: scales of j=0..3 in the low 6 bits; bytes 4-7: mins of j=0..3 in the low 6 bits;
// bytes 8-11: j=4..7, scale in the low nibble and min in the high nibble, their top 2 bits in the top
// 2 bits of bytes j-4 (scale) and j (min).
void q4k_decode_scale_min(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// One Q4_K block decoded from the definition: element 64c + l is the low nibble of qs[32c + l] in
// sub-block 2c, element 64c + 32 + l its high nibble in sub-block 2c + 1; value = d*sc*q - dmin*m.
void q4k_decode_block(const BlockQ4_K& b, double* y) {
    const double d = f16_value(b.d), dmin = f16_value(b.dmin);
    for (int c = 0; c < 4; ++c)
        for (int half = 0; half < 2; ++half) {
            int sc, m;
            q4k_decode_scale_min(b.scales, 2 * c + half, sc, m);
            for (int l = 0; l < 32; ++l) {
                const int q = half == 0 ? (b.qs[32 * c + l] & 0x0f) : (b.qs[32 * c + l] >> 4);
                y[64 * c + 32 * half + l] = d * sc * q - dmin * m;
            }
        }
}

}  // namespace

class TestQuant : public QObject {
    Q_OBJECT

    uint64_t seed_ = 0;

private slots:
    void initTestCase() { seed_ = test::test_seed(20250602); }

    void layout_sizes() {
        QCOMPARE(dtype_row_bytes(DType::F32, 96), int64_t(384));
        QCOMPARE(dtype_row_bytes(DType::F16, 96), int64_t(192));
        QCOMPARE(dtype_row_bytes(DType::BF16, 96), int64_t(192));
        QCOMPARE(dtype_row_bytes(DType::Q8_0, 96), int64_t(3 * 34));
        QCOMPARE(dtype_row_bytes(DType::Q4_K, 512), int64_t(2 * 144));
        // ggml's block sizes (ggml-common.h's static_asserts): 32 or 256 values in this many bytes.
        const struct { DType t; int64_t elems, bytes; } sizes[] = {
            {DType::Q4_0, 32, 18},  {DType::Q4_1, 32, 20},  {DType::Q5_0, 32, 22},   {DType::Q5_1, 32, 24},
            {DType::Q2_K, 256, 84}, {DType::Q3_K, 256, 110}, {DType::Q5_K, 256, 176}, {DType::Q6_K, 256, 210},
            {DType::IQ4_NL, 32, 18}, {DType::IQ4_XS, 256, 136}};
        for (const auto& z : sizes) {
            QCOMPARE(dtype_block_elems(z.t), z.elems);
            QCOMPARE(dtype_block_bytes(z.t), z.bytes);
            QVERIFY(dtype_is_quantized(z.t));
        }
        for (DType t : kDTypes) QCOMPARE(dtype_from_name(dtype_name(t)), std::optional<DType>(t));
        QCOMPARE(dtype_from_name("q6_k"), std::optional<DType>(DType::Q6_K));
        QCOMPARE(dtype_from_name("iq4_xs"), std::optional<DType>(DType::IQ4_XS));
        QCOMPARE(dtype_from_name("q6"), std::optional<DType>());
    }

    // Every one of the 65536 f16 patterns: dequantized to its exact value (subnormals, +-0, +-inf
    // included), and quantized back to the same bits; NaN stays NaN.
    void f16_every_pattern_round_trips() {
        std::vector<uint16_t> all(65536);
        for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
        std::vector<float> f(65536);
        dequantize_row(DType::F16, all.data(), f.data(), 65536);
        std::vector<uint16_t> back(65536);
        quantize_row(DType::F16, f.data(), back.data(), 65536);
        for (int i = 0; i < 65536; ++i) {
            const double want = f16_value(static_cast<uint16_t>(i));
            if (std::isnan(want)) {
                QVERIFY2(std::isnan(f[i]), qPrintable(QString("f16 %1 should decode to NaN").arg(i, 4, 16)));
                QVERIFY2((back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff) != 0,
                         qPrintable(QString("NaN from f16 %1 re-encoded as %2").arg(i, 4, 16).arg(back[i], 4, 16)));
                continue;
            }
            QVERIFY2(f[i] == want && std::signbit(f[i]) == std::signbit(want),
                     qPrintable(QString("f16 %1 decoded to %2, want %3").arg(i, 4, 16).arg(f[i]).arg(want)));
            QVERIFY2(back[i] == i, qPrintable(QString("f16 %1 re-encoded as %2").arg(i, 4, 16).arg(back[i], 4, 16)));
        }
        // The scalar converters of dtype.h agree with the row functions.
        for (int i = 0; i < 65536; i += 7) QCOMPARE(to_f16(f16_to_f32(static_cast<uint16_t>(i))), back[i]);
    }

    void f16_rounding_data() {
        QTest::addColumn<float>("x");
        QTest::addColumn<int>("bits");
        const float inf = std::numeric_limits<float>::infinity();
        QTest::addRow("1") << 1.0f << 0x3c00;
        QTest::addRow("1+2^-11 tie -> even 1") << 1.0f + std::ldexp(1.0f, -11) << 0x3c00;
        QTest::addRow("1+3*2^-11 tie -> even up") << 1.0f + 3 * std::ldexp(1.0f, -11) << 0x3c02;
        QTest::addRow("just above a tie") << 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23) << 0x3c01;
        QTest::addRow("2049 tie -> 2048") << 2049.0f << 0x6800;
        QTest::addRow("2051 tie -> 2052") << 2051.0f << 0x6802;
        QTest::addRow("0.1") << 0.1f << 0x2e66;
        QTest::addRow("65504 max") << 65504.0f << 0x7bff;
        QTest::addRow("below 65520 -> max") << std::nextafter(65520.0f, 0.0f) << 0x7bff;
        QTest::addRow("65520 -> inf") << 65520.0f << 0x7c00;
        QTest::addRow("-1e6 -> -inf") << -1e6f << 0xfc00;
        QTest::addRow("inf") << inf << 0x7c00;
        QTest::addRow("-inf") << -inf << 0xfc00;
        QTest::addRow("-0") << -0.0f << 0x8000;
        QTest::addRow("2^-14 min normal") << std::ldexp(1.0f, -14) << 0x0400;
        QTest::addRow("2^-24 min subnormal") << std::ldexp(1.0f, -24) << 0x0001;
        QTest::addRow("-2^-24") << -std::ldexp(1.0f, -24) << 0x8001;
        QTest::addRow("2^-25 tie -> 0") << std::ldexp(1.0f, -25) << 0x0000;
        QTest::addRow("above 2^-25 -> 2^-24") << std::ldexp(1.0f, -25) + std::ldexp(1.0f, -40) << 0x0001;
        QTest::addRow("3*2^-25 tie -> 2*2^-24") << 3 * std::ldexp(1.0f, -25) << 0x0002;
        QTest::addRow("1022.5*2^-24 tie -> 0x3fe") << 1022.5f * std::ldexp(1.0f, -24) << 0x03fe;
        QTest::addRow("1023.5*2^-24 tie -> min normal") << 1023.5f * std::ldexp(1.0f, -24) << 0x0400;
        QTest::addRow("f32 subnormal -> 0") << bits_to_float(1) << 0x0000;
    }
    void f16_rounding() {
        QFETCH(float, x);
        QFETCH(int, bits);
        QCOMPARE(int(to_f16(x)), bits);
        QCOMPARE(int(f32_to_f16(x)), bits);
        if ((bits & 0x7c00) != 0x7c00 || (bits & 0x3ff) == 0) {  // and back to the exact value
            float back;
            const uint16_t h = static_cast<uint16_t>(bits);
            dequantize_row(DType::F16, &h, &back, 1);
            QCOMPARE(static_cast<double>(back), f16_value(h));
        }
    }

    void f16_nan_stays_nan() {
        for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0x7f802000u}) {
            const uint16_t h = to_f16(bits_to_float(b));
            QVERIFY2((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0, qPrintable(QString::number(b, 16)));
        }
    }

    // Random values over the whole f16 range, subnormals included: the result is a nearest value.
    void f16_random_round_to_nearest() {
        std::mt19937_64 rng(seed_);
        std::uniform_real_distribution<float> mant(1.0f, 2.0f);
        for (int i = 0; i < 200000; ++i) {
            const int e = static_cast<int>(rng() % 44) - 27;  // 2^-27 .. 2^16
            float x = std::ldexp(mant(rng), e);
            if (rng() & 1) x = -x;
            QByteArray why;
            const uint16_t h = to_f16(x);
            QVERIFY2(is_nearest_even(x, h, f16_value, 0x7bff, &why),
                     qPrintable(QString("x=%1 -> %2: %3").arg(x, 0, 'g', 9).arg(h, 4, 16).arg(why.constData())));
        }
    }

    void bf16_every_pattern_round_trips() {
        std::vector<uint16_t> all(65536);
        for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
        std::vector<float> f(65536);
        dequantize_row(DType::BF16, all.data(), f.data(), 65536);
        std::vector<uint16_t> back(65536);
        quantize_row(DType::BF16, f.data(), back.data(), 65536);
        for (int i = 0; i < 65536; ++i) {
            const double want = bf16_value(static_cast<uint16_t>(i));
            if (std::isnan(want)) {
                QVERIFY(std::isnan(f[i]));
                QVERIFY((back[i] & 0x7f80) == 0x7f80 && (back[i] & 0x7f) != 0);
                continue;
            }
            QVERIFY2(f[i] == want && std::signbit(f[i]) == std::signbit(want), qPrintable(QString::number(i, 16)));
            QVERIFY2(back[i] == i, qPrintable(QString("bf16 %1 re-encoded as %2").arg(i, 4, 16).arg(back[i], 4, 16)));
        }
    }

    void bf16_rounding_data() {
        QTest::addColumn<float>("x");
        QTest::addColumn<int>("bits");
        QTest::addRow("1") << 1.0f << 0x3f80;
        QTest::addRow("1+2^-8 tie -> 1") << 1.0f + std::ldexp(1.0f, -8) << 0x3f80;
        QTest::addRow("1+3*2^-8 tie -> even up") << 1.0f + 3 * std::ldexp(1.0f, -8) << 0x3f82;
        QTest::addRow("just above a tie") << 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -23) << 0x3f81;
        QTest::addRow("FLT_MAX -> inf") << FLT_MAX << 0x7f80;
        QTest::addRow("-FLT_MAX -> -inf") << -FLT_MAX << 0xff80;
        QTest::addRow("-0") << -0.0f << 0x8000;
        QTest::addRow("f32 min subnormal -> 0") << bits_to_float(1) << 0x0000;
        QTest::addRow("f32 subnormal tie -> even") << bits_to_float(0x00018000) << 0x0002;
    }
    void bf16_rounding() {
        QFETCH(float, x);
        QFETCH(int, bits);
        QCOMPARE(int(to_bf16(x)), bits);
    }

    void bf16_nan_stays_nan() {
        // 0x7f800001 has its payload only in the bits that bf16 drops: truncation would make it inf.
        for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff80ffffu}) {
            const uint16_t h = to_bf16(bits_to_float(b));
            QVERIFY2((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0, qPrintable(QString::number(b, 16)));
        }
    }

    void bf16_random_round_to_nearest() {
        std::mt19937_64 rng(seed_ + 1);
        std::uniform_real_distribution<float> mant(1.0f, 2.0f);
        for (int i = 0; i < 200000; ++i) {
            const int e = static_cast<int>(rng() % 200) - 100;
            float x = std::ldexp(mant(rng), e);
            if (rng() & 1) x = -x;
            QByteArray why;
            const uint16_t h = to_bf16(x);
            QVERIFY2(is_nearest_even(x, h, bf16_value, 0x7f7f, &why),
                     qPrintable(QString("x=%1 -> %2: %3").arg(x, 0, 'g', 9).arg(h, 4, 16).arg(why.constData())));
        }
    }

    // Q8_0: q = round(x / d) with d = amax / 127, stored scale d' = fp16(d). Per element
    //   |x - d' q| <= d/2 + 127 |d - d'| <= amax/254 + max(amax 2^-11, 127 * 2^-25)
    // (the second term is the fp16 rounding of the scale: relative 2^-11, or absolute 2^-25 when d is
    // an fp16 subnormal, i.e. amax < 127 * 2^-14). Plus a little float slack.
    void q8_0_error_bound_data() {
        QTest::addColumn<float>("amp");
        for (float amp : {1e-4f, 1e-2f, 1.0f, 37.0f, 1000.0f}) QTest::addRow("amp=%g", amp) << amp;
    }
    void q8_0_error_bound() {
        QFETCH(float, amp);
        std::mt19937_64 rng(seed_ + static_cast<uint64_t>(amp * 1e4));
        const int n = 32 * 64;
        std::uniform_real_distribution<float> dist(-amp, amp);
        std::vector<float> x(n);
        for (float& v : x) v = dist(rng);
        for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;                    // block 1: all zero
        for (int j = 0; j < 32; ++j) x[64 + j] = j == 5 ? -amp : 0.0f;    // block 2: one value
        std::vector<BlockQ8_0> blocks(n / 32);
        quantize_row(DType::Q8_0, x.data(), blocks.data(), n);
        std::vector<float> y(n);
        dequantize_row(DType::Q8_0, blocks.data(), y.data(), n);
        for (int b = 0; b < n / 32; ++b) {
            double amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
            const double bound = amax / 254 + std::max(amax * std::ldexp(1.0, -11), 127 * std::ldexp(1.0, -25));
            for (int j = 0; j < 32; ++j) {
                QVERIFY(blocks[b].qs[j] >= -127 && blocks[b].qs[j] <= 127);
                // The definition: value = d * q.
                QCOMPARE(static_cast<double>(y[b * 32 + j]), static_cast<double>(static_cast<float>(f16_value(blocks[b].d) * blocks[b].qs[j])));
                const double err = std::fabs(static_cast<double>(x[b * 32 + j]) - y[b * 32 + j]);
                QVERIFY2(err <= bound * (1 + 1e-6) + 1e-30,
                         qPrintable(QString("block %1 [%2]: x=%3 y=%4 err=%5 bound=%6")
                                        .arg(b).arg(j).arg(x[b * 32 + j]).arg(y[b * 32 + j]).arg(err).arg(bound)));
            }
        }
        for (int j = 0; j < 32; ++j) QCOMPARE(y[32 + j], 0.0f);
        QVERIFY(std::fabs(y[64 + 5] + amp) <= amp * std::ldexp(1.0, -11) + 127 * std::ldexp(1.0, -25));
    }

    // Activations for the int8 Q8_0 path: d = max|x| / 127 rounded to F16 as llama.cpp's Q8_0 block holds it
    // (an F32 d fails here), q = x * 127 / max|x| rounded to nearest, the largest value on +-127, every value
    // within d / 2 plus d's F16 rounding (127 q-steps of 2^-11 relative) of d * q, zero blocks all zero.
    // Amplitudes inside F16's normal range, where d keeps 11 bits.
    void activations_q8_error_bound() {
        std::mt19937_64 rng(seed_ + 99);
        const int n = 32 * 256;
        std::vector<float> x(n);
        for (int b = 0; b < n / 32; ++b) {
            const float amp = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 6);
            std::uniform_real_distribution<float> dist(-amp, amp);
            for (int j = 0; j < 32; ++j) x[b * 32 + j] = b == 1 ? 0.0f : dist(rng);
        }
        std::vector<BlockQ8Act> q(n / 32);
        quantize_activations_q8(x.data(), q.data(), n);
        for (int b = 0; b < n / 32; ++b) {
            double amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
            QCOMPARE(static_cast<double>(q[b].d),
                     static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(amax) / 127.0f))));
            int qmax = 0;
            for (int j = 0; j < 32; ++j) {
                QVERIFY(q[b].qs[j] >= -127 && q[b].qs[j] <= 127);
                qmax = std::max(qmax, std::abs(int{q[b].qs[j]}));
                const double err = std::fabs(x[b * 32 + j] - static_cast<double>(q[b].d) * q[b].qs[j]);
                QVERIFY2(err <= q[b].d * (0.5 + 127 * std::ldexp(1.0, -11) + 1e-5),
                         qPrintable(QString("block %1 [%2]: err %3, d %4").arg(b).arg(j).arg(err).arg(q[b].d)));
            }
            QCOMPARE(qmax, b == 1 ? 0 : 127);
        }
    }

    // Both activation quantizers equal their definitions byte for byte (the AVX2 versions are vector code):
    // Q8_0's d = max|x| / 127 through F16, q = x * 127 / max|x| by fma and the 1.5 * 2^23 rounding; Q8_K's
    // m = the first value of largest magnitude, d = 1 / (-127 / m), q = nearest-even(x * (-127 / m)). With
    // ties: +a and -a both largest (the first one's sign wins), products that land on k + 1/2 (a scale of
    // 1: max|x| = 127), zero blocks, and amplitudes from 2^-20 to 2^10.
    void activations_match_definitions() {
        std::mt19937_64 rng(seed_ + 7);
        const int n = 256 * 24;
        std::vector<float> x(n);
        for (int b = 0; b < n / 256; ++b) {
            float* v = x.data() + b * 256;
            const float amp = std::ldexp(1.0f, static_cast<int>(rng() % 31) - 20);
            std::uniform_real_distribution<float> dist(-amp, amp);
            for (int j = 0; j < 256; ++j) v[j] = dist(rng);
            switch (b % 6) {
            case 1: {  // the largest magnitude twice, with both signs, in either order
                const int i = static_cast<int>(rng() % 128), k = 128 + static_cast<int>(rng() % 128);
                v[i] = (b % 12 == 1 ? -1.5f : 1.5f) * amp;
                v[k] = -v[i];
                break;
            }
            case 2:  // halves: q = x exactly where max|x| = 127 in a block of 32 / of 256
                for (int j = 0; j < 256; ++j) v[j] = static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
                for (int g = 0; g < 8; ++g) v[32 * g + static_cast<int>(rng() % 32)] = g % 2 ? 127.0f : -127.0f;
                break;
            case 3:  // a zero block of 32 and one of 256
                for (int j = 0; j < (b % 12 == 3 ? 256 : 32); ++j) v[j] = 0.0f;
                break;
            default: break;
            }
        }
        std::vector<BlockQ8Act> got(n / 32);
        quantize_activations_q8(x.data(), got.data(), n);
        for (int b = 0; b < n / 32; ++b) {
            const float* v = x.data() + 32 * b;
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
            const float id = amax > 0 ? 127.0f / amax : 0.0f;
            QCOMPARE(got[b].d, f16_to_f32(f32_to_f16(amax / 127.0f)));
            for (int j = 0; j < 32; ++j) {
                const float r = std::fma(v[j], id, 12582912.0f) - 12582912.0f;
                QCOMPARE(int{got[b].qs[j]}, static_cast<int>(std::clamp(r, -127.0f, 127.0f)));
            }
        }
        quantize_activations_q8_k(x.data(), got.data(), n);
        for (int b = 0; b < n / 256; ++b) {
            const float* v = x.data() + 256 * b;
            float m = 0;
            for (int j = 0; j < 256; ++j)
                if (std::fabs(v[j]) > std::fabs(m)) m = v[j];
            const float iscale = m != 0 ? -127.0f / m : 0.0f;
            for (int g = 0; g < 8; ++g) {
                QCOMPARE(got[8 * b + g].d, m != 0 ? 1.0f / iscale : 0.0f);
                for (int j = 0; j < 32; ++j)
                    QCOMPARE(int{got[8 * b + g].qs[j]}, static_cast<int>(std::min(127.0f, std::nearbyint(v[32 * g + j] * iscale))));
            }
        }
    }

    // Values on the Q8_0 grid with a power-of-two scale survive exactly.
    void q8_0_exact_on_grid() {
        std::vector<float> x(64);
        for (int j = 0; j < 64; ++j) x[j] = 0.5f * static_cast<float>((j * 37) % 255 - 127);
        x[3] = 63.5f;  // amax = 127 * 0.5 in both blocks
        x[40] = -63.5f;
        std::vector<BlockQ8_0> blocks(2);
        quantize_row(DType::Q8_0, x.data(), blocks.data(), 64);
        std::vector<float> y(64);
        dequantize_row(DType::Q8_0, blocks.data(), y.data(), 64);
        for (int j = 0; j < 64; ++j) QCOMPARE(y[j], x[j]);
    }

    // The Q8_0 layout on hand-made blocks: f16 d, then 32 int8 (the full int8 range, -128 included).
    void q8_0_layout() {
        BlockQ8_0 blocks[2];
        blocks[0].d = 0x3800;  // 0.5
        blocks[1].d = 0xc400;  // -4
        for (int j = 0; j < 32; ++j) {
            blocks[0].qs[j] = static_cast<int8_t>(j * 8 - 128);
            blocks[1].qs[j] = static_cast<int8_t>(127 - j);
        }
        float y[64];
        dequantize_row(DType::Q8_0, blocks, y, 64);
        for (int j = 0; j < 32; ++j) {
            QCOMPARE(y[j], 0.5f * (j * 8 - 128));
            QCOMPARE(y[32 + j], -4.0f * (127 - j));
        }
    }

    // The GGUF Q4_K layout on a hand-made block: 6-bit scales and mins of sub-blocks 0..3 and, split
    // over the nibbles of bytes 8..11 and the top bits of bytes 0..7, of sub-blocks 4..7.
    void q4_k_layout() {
        const int sc[8] = {1, 2, 3, 4, 33, 45, 50, 63};
        const int mn[8] = {5, 6, 7, 8, 40, 17, 60, 31};
        // Packed by hand: bytes 0-3 = sc[j] | (sc[j+4] >> 4) << 6; bytes 4-7 = mn[j] | (mn[j+4] >> 4) << 6;
        // bytes 8-11 = (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
        const uint8_t scales[12] = {0x81, 0x82, 0xc3, 0xc4, 0x85, 0x46, 0xc7, 0x48, 0x81, 0x1d, 0xc2, 0xff};
        BlockQ4_K blocks[2];
        for (int b = 0; b < 2; ++b) {
            std::memcpy(blocks[b].scales, scales, 12);
            for (int i = 0; i < 128; ++i) blocks[b].qs[i] = static_cast<uint8_t>(i * 7 + 3 + b * 11);
        }
        blocks[0].d = 0x3400;     // 0.25
        blocks[0].dmin = 0x3000;  // 0.125
        blocks[1].d = 0x4000;     // 2
        blocks[1].dmin = 0xbc00;  // -1 (a negative dmin is legal in the format)
        for (int j = 0; j < 8; ++j) {  // the independent decoder reads the hand-packed bytes as intended
            int s, m;
            q4k_decode_scale_min(scales, j, s, m);
            QCOMPARE(s, sc[j]);
            QCOMPARE(m, mn[j]);
        }
        float y[512];
        dequantize_row(DType::Q4_K, blocks, y, 512);
        for (int b = 0; b < 2; ++b) {
            const double d = f16_value(blocks[b].d), dmin = f16_value(blocks[b].dmin);
            for (int c = 0; c < 4; ++c)
                for (int l = 0; l < 32; ++l) {
                    const uint8_t byte = blocks[b].qs[32 * c + l];
                    const int lo = 256 * b + 64 * c + l, hi = lo + 32;
                    QCOMPARE(static_cast<double>(y[lo]), d * sc[2 * c] * (byte & 15) - dmin * mn[2 * c]);
                    QCOMPARE(static_cast<double>(y[hi]), d * sc[2 * c + 1] * (byte >> 4) - dmin * mn[2 * c + 1]);
                }
        }
    }

    // ---- The other block types, one hand-made block each: the bytes below are written out by hand and
    // every expected value worked out from the format's definition (dtype.h's table, ggml-common.h).
    // Everything not set is zero; values of sub-blocks left at zero scale are checked to be 0 (or -m).
    void q4_0_layout() {
        BlockQ4_0 b{};
        b.d = 0x3800;  // 0.5; value = d * (q - 8)
        std::memset(b.qs, 0x88, 16);
        b.qs[0] = 0x1f;  // value 0: q 15 -> 3.5; value 16: q 1 -> -3.5
        b.qs[5] = 0x80;  // value 5: q 0 -> -4;  value 21: q 8 -> 0
        float y[32];
        dequantize_row(DType::Q4_0, &b, y, 32);
        QCOMPARE(y[0], 3.5f);
        QCOMPARE(y[16], -3.5f);
        QCOMPARE(y[5], -4.0f);
        QCOMPARE(y[21], 0.0f);
        QCOMPARE(y[1], 0.0f);
    }
    void q4_1_layout() {
        BlockQ4_1 b{};
        b.d = 0x3c00;  // 1; value = d * q + m
        b.m = 0xc000;  // -2
        b.qs[0] = 0x1f;   // value 0: 15 - 2 = 13; value 16: 1 - 2 = -1
        b.qs[15] = 0xa0;  // value 15: 0 - 2 = -2;  value 31: 10 - 2 = 8
        float y[32];
        dequantize_row(DType::Q4_1, &b, y, 32);
        QCOMPARE(y[0], 13.0f);
        QCOMPARE(y[16], -1.0f);
        QCOMPARE(y[15], -2.0f);
        QCOMPARE(y[31], 8.0f);
        QCOMPARE(y[1], -2.0f);
    }
    void q5_0_layout() {
        BlockQ5_0 b{};
        b.d = 0x3400;  // 0.25; value = d * (q - 16), bit j of qh (little-endian u32) is value j's 5th bit
        const uint8_t qh[4] = {0x01, 0x00, 0x01, 0x80};  // bits 0, 16, 31
        std::memcpy(b.qh, qh, 4);
        b.qs[0] = 0x2f;   // value 0: 15 | 16 = 31 -> 15 * 0.25 = 3.75; value 16: 2 | 16 = 18 -> 0.5
        b.qs[15] = 0x70;  // value 15: 0 -> -4;                         value 31: 7 | 16 = 23 -> 1.75
        float y[32];
        dequantize_row(DType::Q5_0, &b, y, 32);
        QCOMPARE(y[0], 3.75f);
        QCOMPARE(y[16], 0.5f);
        QCOMPARE(y[15], -4.0f);
        QCOMPARE(y[31], 1.75f);
        QCOMPARE(y[1], -4.0f);
    }
    void q5_1_layout() {
        BlockQ5_1 b{};
        b.d = 0x3800;  // 0.5; value = d * q + m
        b.m = 0x3c00;  // 1
        b.qh[0] = 0x02;  // bit 1
        b.qs[1] = 0x3e;  // value 1: 14 | 16 = 30 -> 16; value 17: 3 -> 2.5
        float y[32];
        dequantize_row(DType::Q5_1, &b, y, 32);
        QCOMPARE(y[1], 16.0f);
        QCOMPARE(y[17], 2.5f);
        QCOMPARE(y[0], 1.0f);
    }
    void q2_k_layout() {
        BlockQ2_K b{};
        b.d = 0x3c00;     // 1;   value = d * sc * q - dmin * m, sub-block s = i / 16
        b.dmin = 0x3800;  // 0.5
        b.scales[0] = 0x21;   // sc 1, m 2
        b.scales[1] = 0x13;   // sc 3, m 1
        b.scales[2] = 0x05;   // sc 5, m 0
        b.scales[4] = 0x17;   // sc 7, m 1
        b.scales[6] = 0x41;   // sc 1, m 4
        b.scales[11] = 0x34;  // sc 4, m 3
        // Value i: byte 32 * (i / 128) + i % 32, bits 2 * ((i % 128) / 32).
        b.qs[0] = 0xe4;   // values 0, 32, 64, 96: q 0, 1, 2, 3
        b.qs[16] = 0x03;  // value 16: q 3
        b.qs[49] = 0x0c;  // value 128 + 32 + 17 = 177: q 3
        float y[256];
        dequantize_row(DType::Q2_K, &b, y, 256);
        QCOMPARE(y[0], -1.0f);    // 1 * 0 - 0.5 * 2
        QCOMPARE(y[32], 5.0f);    // 5 * 1 - 0
        QCOMPARE(y[64], 13.5f);   // 7 * 2 - 0.5
        QCOMPARE(y[96], 1.0f);    // 1 * 3 - 0.5 * 4
        QCOMPARE(y[16], 8.5f);    // 3 * 3 - 0.5
        QCOMPARE(y[177], 10.5f);  // 4 * 3 - 0.5 * 3
        QCOMPARE(y[1], -1.0f);
        QCOMPARE(y[160], 0.0f);
    }
    void q3_k_layout() {
        BlockQ3_K b{};
        b.d = 0x3800;  // 0.5; value = d * (u - 32) * q, q = low 2 bits - (high bit clear ? 4 : 0)
        // 6-bit u of sub-block j: low 4 bits in nibble j / 8 of byte j % 8, top 2 in bits 2 * (j / 4) of
        // byte 8 + j % 4. u0 = 33 (+1), u5 = 0 (-32), u9 = 63 (+31), u15 = 40 (+8), all others 32 (0).
        const uint8_t scales[12] = {0x01, 0xf0, 0, 0, 0, 0, 0, 0x80, 0xaa, 0xb2, 0xaa, 0xaa};
        std::memcpy(b.scales, scales, 12);
        // Value i: low bits as Q2_K, high bit = bit i / 32 of hmask[i % 32].
        b.qs[0] = 0x02, b.hmask[0] = 0x01;    // value 0: 2 - 0 = 2
        b.qs[16] = 0x30, b.hmask[16] = 0x04;  // value 80: byte 16 bits 4-5 = 3, high bit 2 set: 3
        b.qs[48] = 0x01;                      // value 144: 1, hmask[16] bit 4 clear: 1 - 4 = -3
        b.qs[63] = 0xc0, b.hmask[31] = 0x80;  // value 255: 3, high bit 7 set: 3
        float y[256];
        dequantize_row(DType::Q3_K, &b, y, 256);
        QCOMPARE(y[0], 1.0f);      // 0.5 * 1 * 2
        QCOMPARE(y[1], -2.0f);     // 0.5 * 1 * (0 - 4)
        QCOMPARE(y[80], -48.0f);   // 0.5 * -32 * 3
        QCOMPARE(y[144], -46.5f);  // 0.5 * 31 * -3
        QCOMPARE(y[255], 12.0f);   // 0.5 * 8 * 3
        QCOMPARE(y[20], 0.0f);     // scale 0
    }
    void q5_k_layout() {
        BlockQ5_K b{};
        b.d = 0x3c00;     // 1;   value = d * sc * q - dmin * m, sub-block j = i / 32
        b.dmin = 0x3800;  // 0.5
        // Q4_K's 6-bit packing: sc0 = 2 (top bits of byte 0 = 1: sc4's top), m0 = 4, sc1 = 3, m1 = 0,
        // sc4 = 3 | 1 << 4 = 19, m4 = 0, sc5 = 1, m5 = 2.
        const uint8_t scales[12] = {0x42, 3, 0, 0, 4, 0, 0, 0, 0x03, 0x21, 0, 0};
        std::memcpy(b.scales, scales, 12);
        // Value 64c + l: low nibble of qs[32c + l]; 64c + 32 + l: its high nibble; 5th bit: bit i / 32 of qh[l].
        b.qs[0] = 0x57, b.qh[0] = 0x13;  // value 0: 7 | 16 = 23; value 32: 5 | 16 = 21
        b.qs[64] = 0x0a;                 // value 128: 10 | 16 (qh[0] bit 4) = 26
        b.qs[69] = 0xf0;                 // value 165: 15, qh[5] bit 5 clear
        float y[256];
        dequantize_row(DType::Q5_K, &b, y, 256);
        QCOMPARE(y[0], 44.0f);     // 2 * 23 - 0.5 * 4
        QCOMPARE(y[32], 63.0f);    // 3 * 21 - 0
        QCOMPARE(y[128], 494.0f);  // 19 * 26
        QCOMPARE(y[165], 14.0f);   // 1 * 15 - 0.5 * 2
        QCOMPARE(y[1], -2.0f);     // 0 - 0.5 * 4
    }
    void q6_k_layout() {
        BlockQ6_K b{};
        b.d = 0x3800;  // 0.5; value = d * scales[i / 16] * (q - 32)
        b.scales[0] = 2, b.scales[1] = -1, b.scales[2] = 3, b.scales[4] = 1, b.scales[6] = -2;
        b.scales[9] = -4, b.scales[15] = 5;
        // In half h (128 values), value r: low 4 bits in ql[64h + r % 64] (high nibble from r = 64), top 2
        // bits at bit 2 * (r / 32) of qh[32h + r % 32].
        b.ql[0] = 0x3f;   // value 0: 15; value 64: 3
        b.ql[32] = 0x05;  // value 32: 5;  value 96: 0
        b.qh[0] = 0x1e;   // value 0: 2, value 32: 3, value 64: 1, value 96: 0
        b.ql[82] = 0x09, b.qh[50] = 0x01;   // value 128 + 18 = 146: 9 | 1 << 4 = 25
        b.ql[127] = 0xa0, b.qh[63] = 0xc0;  // value 255: 10 | 3 << 4 = 58
        float y[256];
        dequantize_row(DType::Q6_K, &b, y, 256);
        QCOMPARE(y[0], 15.0f);     // 0.5 * 2 * (47 - 32)
        QCOMPARE(y[16], 16.0f);    // 0.5 * -1 * (0 - 32)
        QCOMPARE(y[32], 31.5f);    // 0.5 * 3 * (53 - 32)
        QCOMPARE(y[64], -6.5f);    // 0.5 * 1 * (19 - 32)
        QCOMPARE(y[96], 32.0f);    // 0.5 * -2 * (0 - 32)
        QCOMPARE(y[146], 14.0f);   // 0.5 * -4 * (25 - 32)
        QCOMPARE(y[255], 65.0f);   // 0.5 * 5 * (58 - 32)
        QCOMPARE(y[48], 0.0f);     // scale 0
    }
    void iq4_nl_layout() {
        BlockIQ4_NL b{};
        b.d = 0x4000;  // 2; value = d * levels[q], levels -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113
        b.qs[0] = 0xf0;  // value 0: level 0; value 16: level 15
        b.qs[3] = 0x78;  // value 3: level 8; value 19: level 7
        float y[32];
        dequantize_row(DType::IQ4_NL, &b, y, 32);
        QCOMPARE(y[0], -254.0f);
        QCOMPARE(y[16], 226.0f);
        QCOMPARE(y[3], 2.0f);
        QCOMPARE(y[19], -20.0f);
        QCOMPARE(y[1], -254.0f);
    }
    void iq4_xs_layout() {
        BlockIQ4_XS b{};
        b.d = 0x3800;  // 0.5; value = d * (u - 32) * levels[q], sub-block j = i / 32
        // 6-bit u of sub-block j: low 4 bits in nibble j % 2 of scales_l[j / 2], top 2 in bits 2j of
        // scales_h. u0 = 33 (+1), u3 = 20 (-12), u7 = 63 (+31), the others 32 (0).
        const uint8_t scales_l[4] = {0x01, 0x40, 0x00, 0xf0};
        std::memcpy(b.scales_l, scales_l, 4);
        b.scales_h = 0xea6a;  // top bits 2, 2, 2, 1, 2, 2, 2, 3
        b.qs[0] = 0x0f;        // value 0: level 15 (113); value 16: level 0 (-127)
        b.qs[16 * 3 + 5] = 0x0a;  // value 96 + 5: level 10 (25)
        b.qs[16 * 7 + 2] = 0x90;  // value 224 + 16 + 2: level 9 (13)
        float y[256];
        dequantize_row(DType::IQ4_XS, &b, y, 256);
        QCOMPARE(y[0], 56.5f);     // 0.5 * 1 * 113
        QCOMPARE(y[16], -63.5f);   // 0.5 * 1 * -127
        QCOMPARE(y[101], -150.0f); // 0.5 * -12 * 25
        QCOMPARE(y[242], 201.5f);  // 0.5 * 31 * 13
        QCOMPARE(y[40], 0.0f);     // scale 0
    }

    // Round trips on random data, each type within a bound on |x - x'| relative to the largest |x| of
    // its block (32 values, or the 256 of a K super-block), worked out for the plain round-to-nearest
    // quantizers: half a grid step; for the symmetric grids, whose signed largest value m is put on the
    // negative end (-8 of -8..7), a whole step where values of the other sign reach |m| and clip at the
    // positive end; plus the rounding of sub-block scales to 4, 6 or 8 bits (times the largest q), and
    // 2^-11 for the F16 scales. Data at scale 1 and 50 (tiny blocks would have F16-subnormal scales).
    //   Q4_0: step 1/8;  Q5_0: 1/16;  Q8_0: half of 1/127 (no clipping)
    //   Q4_1: half of range / 15 (range <= 2 amax);  Q5_1: half of range / 31
    //   Q2_K: half of range / 3, 4-bit scales (3 * 2/3 / 30) and mins (1 / 30)
    //   Q3_K: step 1/4, 6-bit scales (4 * 1/4 / 62);  Q6_K: 1/32 + 32 * 1/32 / 254
    //   IQ4_NL: levels -127..113: 14/127 clipped (half the widest gap, 12/127, is less); IQ4_XS: + 6-bit scales
    void round_trip_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<double>("bound");
        QTest::addColumn<float>("scale");
        const double f16 = std::ldexp(1.0, -11);
        const struct { DType t; double bound; } rows[] = {
            {DType::Q4_0, 1.0 / 8},  {DType::Q4_1, 1.0 / 15}, {DType::Q5_0, 1.0 / 16}, {DType::Q5_1, 1.0 / 31},
            {DType::Q2_K, 1.0 / 3 + 1.0 / 15 + 1.0 / 30}, {DType::Q3_K, 1.0 / 4 + 1.0 / 62},
            {DType::Q5_K, 0.06}, {DType::Q6_K, 1.0 / 32 + 1.0 / 254}, {DType::IQ4_NL, 14.0 / 127},
            {DType::IQ4_XS, 14.0 / 127 + 1.0 / 62}, {DType::Q4_K, 0.1}, {DType::Q8_0, 1.0 / 254}};
        for (const auto& r : rows)
            for (float scale : {1.0f, 50.0f})
                QTest::addRow("%s scale=%g", dtype_name(r.t).data(), scale) << static_cast<int>(r.t)
                                                                            << r.bound + 2 * f16 << scale;
    }
    void round_trip() {
        QFETCH(int, dtype);
        QFETCH(double, bound);  // times the block's largest |x|
        QFETCH(float, scale);
        const DType t = static_cast<DType>(dtype);
        const int n = 256 * 8;
        std::mt19937_64 rng(seed_ + 7 * static_cast<uint64_t>(dtype));
        std::vector<float> x(n);
        // Mixed signs; one super-block all positive, one all zero, one small with a single outlier.
        std::uniform_real_distribution<float> dist(-scale, scale);
        for (float& v : x) v = dist(rng);
        for (int i = 256; i < 512; ++i) x[i] = std::fabs(x[i]) + 0.5f * scale;
        for (int i = 512; i < 768; ++i) x[i] = 0.0f;
        for (int i = 768; i < 1024; ++i) x[i] *= 0.01f;
        x[800] = 3.0f * scale;
        const int64_t be = dtype_block_elems(t);
        std::vector<uint8_t> q(dtype_row_bytes(t, n));
        quantize_row(t, x.data(), q.data(), n);
        std::vector<float> y(n);
        dequantize_row(t, q.data(), y.data(), n);
        double worst = 0;
        for (int64_t b = 0; b < n / be; ++b) {
            double amax = 0;
            for (int64_t i = 0; i < be; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b * be + i])));
            for (int64_t i = 0; i < be; ++i) {
                const double err = std::fabs(static_cast<double>(x[b * be + i]) - y[b * be + i]);
                if (amax == 0) {
                    QCOMPARE(y[b * be + i], 0.0f);
                    continue;
                }
                worst = std::max(worst, err / amax);
            }
        }
        QVERIFY2(worst <= bound, qPrintable(QString("worst error %1 of the block's largest value, bound %2").arg(worst).arg(bound)));
    }

    // Q4_K on random data. The quantizer (a min/max one: sub-block j gets scale s = (hi - lo) / 15 and
    // min m = -min(lo, 0), both rounded to 6 bits against the block's fp16 d and dmin) satisfies per element
    //   |x - x'| <= max(sc_j d / 2, 7.5 d + dmin / 2)
    // (rounding to the sub-block grid, or at the grid's ends the 6-bit rounding of s and m), with sc_j,
    // d, dmin as stored. Dequantization must also match an independent decoder of the layout exactly.
    void q4_k_error_bound_data() {
        QTest::addColumn<float>("lo");
        QTest::addColumn<float>("hi");
        QTest::addRow("symmetric") << -1.0f << 1.0f;
        QTest::addRow("positive") << 0.5f << 2.0f;
        QTest::addRow("negative") << -3.0f << -0.25f;
        QTest::addRow("large") << -300.0f << 200.0f;
        QTest::addRow("small") << -0.05f << 0.02f;
    }
    void q4_k_error_bound() {
        QFETCH(float, lo);
        QFETCH(float, hi);
        std::mt19937_64 rng(seed_ + static_cast<uint64_t>(std::fabs(lo) * 1000));
        const int n = 256 * 16;
        std::uniform_real_distribution<float> dist(lo, hi);
        std::vector<float> x(n);
        for (float& v : x) v = dist(rng);
        // Sub-blocks with a much smaller spread than their neighbours (6-bit scale rounds to 0 or 1).
        for (int l = 0; l < 32; ++l) x[256 + 32 * 3 + l] = lo + (hi - lo) * 1e-3f * (l % 5);
        std::vector<BlockQ4_K> blocks(n / 256);
        quantize_row(DType::Q4_K, x.data(), blocks.data(), n);
        std::vector<float> y(n);
        dequantize_row(DType::Q4_K, blocks.data(), y.data(), n);
        double decoded[256];
        double worst = 0;
        for (int b = 0; b < n / 256; ++b) {
            q4k_decode_block(blocks[b], decoded);
            const double d = f16_value(blocks[b].d), dmin = f16_value(blocks[b].dmin);
            double amax = 0;
            for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b * 256 + i])));
            for (int i = 0; i < 256; ++i) {
                QVERIFY2(std::fabs(y[b * 256 + i] - decoded[i]) <= 1e-6 * (d * 63 * 15 + std::fabs(dmin) * 63),
                         qPrintable(QString("block %1 [%2]: dequantize_row %3, layout says %4")
                                        .arg(b).arg(i).arg(y[b * 256 + i]).arg(decoded[i])));
                int sc, m;
                q4k_decode_scale_min(blocks[b].scales, i / 32, sc, m);
                const double bound = std::max(sc * d / 2, 7.5 * d + dmin / 2) + 1e-5 * amax;
                const double err = std::fabs(static_cast<double>(x[b * 256 + i]) - y[b * 256 + i]);
                worst = std::max(worst, err / amax);
                QVERIFY2(err <= bound, qPrintable(QString("block %1 [%2]: x=%3 y=%4 err=%5 bound=%6")
                                                      .arg(b).arg(i).arg(x[b * 256 + i]).arg(y[b * 256 + i])
                                                      .arg(err).arg(bound)));
            }
        }
        // And overall it is a 4-bit code: errors stay below a tenth of the block's largest value.
        QVERIFY2(worst < 0.1, qPrintable(QString("worst relative error %1").arg(worst)));
    }
};

QTEST_GUILESS_MAIN(TestQuant)
#include "test_quant.moc"
