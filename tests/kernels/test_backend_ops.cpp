// Every Backend op of the CPU backend against the slow references of cpu/reference.h, in the manner of
// llama.cpp's test-backend-ops: table-driven cases, fresh seeded inputs per case, outputs poisoned with
// NaN before each run (an output the kernel forgets to write fails), errors measured as normalized MSE
// and max abs error. Each case runs the backend at 1, 2 and 3 threads; results must not depend on the
// thread count (every output element is computed by one thread in one order), so runs replay exactly.
// Every case runs on each CPU kernel set of the build that this CPU runs (cpu/cpu_kernel_sets.h: avx512,
// avx2 and baseline in a portable build), as global data: "matmul(avx2:F16 n=1 ...)" checks the avx2 set.
#include "test_support.h"

#include "cpu/cpu_kernel_sets.h"
#include "cpu/quant.h"
#include "cpu/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace kvscope;
using namespace kvscope::cpu;

namespace {

constexpr int kThreadCounts[] = {1, 2, 3};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The attention cases' KV cache in a float buffer, holding layout.kv_dtype elements: F32, or F16/BF16 in
// the first half of the bytes. Unwritten elements are NaN in the cache's own type.
struct KvCacheView {
    float* buffer;
    KvCacheLayout layout;
    KvCacheView(float* b, const KvCacheLayout& l) : buffer(b), layout(l) {}
    void* data() const { return buffer; }
    uint16_t* halves() const { return reinterpret_cast<uint16_t*>(buffer); }
    void fill_nan() const {
        if (layout.kv_dtype == DType::F32)
            std::fill_n(buffer, layout.total_elems(), kNaN);
        else
            std::fill_n(halves(), layout.total_elems(), layout.kv_dtype == DType::F16 ? uint16_t{0x7e00} : uint16_t{0x7fc0});
    }
    float at(size_t e) const {
        switch (layout.kv_dtype) {
        case DType::F16: return f16_to_f32(halves()[e]);
        case DType::BF16: return bf16_to_f32(halves()[e]);
        default: return buffer[e];
        }
    }
    float round(float x) const {
        switch (layout.kv_dtype) {
        case DType::F16: return f16_to_f32(f32_to_f16(x));
        case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
        default: return x;
        }
    }
    bool stored_equals(size_t e, float x) const {
        const float a = at(e), b = round(x);
        return std::memcmp(&a, &b, sizeof a) == 0;
    }
    std::vector<float> rounded(const std::vector<float>& v) const {
        std::vector<float> r(v.size());
        std::transform(v.begin(), v.end(), r.begin(), [&](float x) { return round(x); });
        return r;
    }
    int64_t count_written() const {
        int64_t n = 0;
        for (size_t e = 0; e < layout.total_elems(); ++e) n += !std::isnan(at(e));
        return n;
    }
};

std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

int random_int(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// FNV-1a: a stable per-case seed from the run's seed and the case's name.
uint64_t case_seed(uint64_t base) {
    std::string name = std::string(QTest::currentTestFunction()) + "/" +
                       (QTest::currentDataTag() ? QTest::currentDataTag() : "");
    uint64_t h = 1469598103934665603ull ^ base;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

// How far out is from ref: normalized MSE (sum (out-ref)^2 / sum ref^2, as test-backend-ops) and max abs
// error. A non-finite output where the reference is finite (an unwritten, NaN-poisoned element) fails.
struct Diff {
    double nmse = 0;
    double max_abs = 0;
    int64_t worst = -1;       // index of the max abs error or of the first non-finite output
    int64_t non_finite = 0;   // outputs that are NaN/inf
    bool within(double max_abs_tol, double nmse_tol) const {
        return non_finite == 0 && max_abs <= max_abs_tol && nmse <= nmse_tol;
    }
};

Diff diff(const float* out, const float* ref, int64_t n) {
    Diff d;
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            if (d.non_finite++ == 0) d.worst = i;
            continue;
        }
        const double e = std::fabs(static_cast<double>(out[i]) - ref[i]);
        se += e * e;
        sr += static_cast<double>(ref[i]) * ref[i];
        if (e > d.max_abs && d.non_finite == 0) d.worst = i;
        d.max_abs = std::max(d.max_abs, e);
    }
    d.nmse = sr > 0 ? se / sr : se;
    return d;
}

QByteArray describe(const Diff& d, const float* out, const float* ref, int threads) {
    QByteArray s = QByteArray("threads=") + QByteArray::number(threads) + " nmse=" + QByteArray::number(d.nmse, 'g', 3) +
                   " max_abs=" + QByteArray::number(d.max_abs, 'g', 3) +
                   " non_finite=" + QByteArray::number(static_cast<qlonglong>(d.non_finite));
    if (d.worst >= 0)
        s += " at [" + QByteArray::number(static_cast<qlonglong>(d.worst)) + "]: out=" +
             QByteArray::number(out[d.worst], 'g', 9) + " ref=" + QByteArray::number(ref[d.worst], 'g', 9);
    return s;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Weights stored in dtype: each row quantized from F32 with quantize_row.
struct StoredWeights {
    std::vector<uint8_t> bytes;
    WeightView view;
};
StoredWeights store(const std::vector<float>& w, DType dtype, int64_t rows, int64_t cols) {
    StoredWeights s;
    const size_t row_bytes = dtype_row_bytes(dtype, cols);
    s.bytes.resize(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(dtype, w.data() + r * cols, s.bytes.data() + r * row_bytes, cols);
    s.view = WeightView{s.bytes.data(), dtype, rows, cols};
    return s;
}

constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K};
// The types the CPU backend repacks into panels for its matmul (cpu/panel_matmul.h).
bool panel_packable(DType dt) { return dt == DType::F32 || dt == DType::F16 || dt == DType::BF16; }

}  // namespace

class TestBackendOps : public QObject {
    Q_OBJECT

    uint64_t seed_ = 0;
    // Per kernel set, a backend at each of kThreadCounts, made on first use.
    std::map<std::string, std::array<std::unique_ptr<Backend>, std::size(kThreadCounts)>> backends_;
    std::vector<float> cache_;  // the paged KV cache of the attention cases

    // The kernel set of the running case (the global data row).
    std::string kernel_set() const {
        QFETCH_GLOBAL(QString, kernel_set);
        return kernel_set.toStdString();
    }
    // The running case's kernel set at kThreadCounts[i] threads.
    Backend& backend(size_t i) {
        const std::string set = kernel_set();
        auto& made = backends_[set];
        if (!made[0])
            for (size_t t = 0; t < std::size(kThreadCounts); ++t) {
                made[t] = make_cpu_backend(kThreadCounts[t], set);
                if (made[t]->num_threads() != kThreadCounts[t] || made[t]->kernel_set() != set)
                    qFatal("backend of kernel set %s at %d threads: got %s at %d", set.c_str(), kThreadCounts[t],
                           made[t]->kernel_set().c_str(), made[t]->num_threads());
            }
        return *made[i];
    }

private slots:
    void initTestCase_data() {
        QTest::addColumn<QString>("kernel_set");
        for (const CpuKernelSet& set : cpu_kernel_sets()) {
            const std::string name(set.name);
            if (cpu_runs(set))
                QTest::newRow(name.c_str()) << QString::fromStdString(name);
            else
                qInfo("CPU kernel set %s not checked: this CPU cannot run it", name.c_str());
        }
    }
    void initTestCase() { seed_ = test::test_seed(20250601); }

    // ---- matmul: every dtype, decode-sized and prefill-sized row counts, odd shapes, with/without bias.
    void matmul_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("K");
        QTest::addColumn<int>("N");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("panels");
        const int shapes[][2] = {{64, 172}, {172, 64}, {75, 40}, {256, 96}, {576, 1536}, {1024, 33}, {2048, 64}};
        for (DType dt : kAllDTypes)
            for (bool panels : {false, true}) {
                if (panels && !panel_packable(dt)) continue;
                // 130: x chunks of 64, 64, 2 (row-major tiles); 6 x-row tiles with every tail (panels)
                for (int n : {1, 2, 3, 4, 5, 12, 13, 31, 64, 130})
                    for (auto [K, N] : shapes) {
                        if (K % dtype_block_elems(dt) != 0) continue;  // rows hold whole blocks only
                        for (bool bias : {false, true})
                            QTest::addRow("%s%s n=%d K=%d N=%d%s", dtype_name(dt).data(), panels ? " panels" : "", n, K,
                                          N, bias ? " bias" : "")
                                << static_cast<int>(dt) << n << K << N << bias << panels;
                    }
            }
    }
    void matmul() {
        QFETCH(int, dtype);
        QFETCH(int, n);
        QFETCH(int, K);
        QFETCH(int, N);
        QFETCH(bool, bias);
        QFETCH(bool, panels);
        std::mt19937_64 rng(case_seed(seed_));
        StoredWeights w = store(random_floats(rng, static_cast<size_t>(N) * K), static_cast<DType>(dtype), N, K);
        const WeightView row_major = w.view;
        std::unique_ptr<Backend> packer;  // owns the panels until the case ends
        if (panels) {  // what the engine runs on: the weight repacked by the backend at load
            packer = make_cpu_backend(2, kernel_set());
            w.view = packer->repack_matmul_weight(w.view);
            QCOMPARE(w.view.layout, WeightLayout::panels16);
        }
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * K);
        const std::vector<float> b = bias ? random_floats(rng, N) : std::vector<float>();
        const float* bias_ptr = bias ? b.data() : nullptr;

        std::vector<float> ref(static_cast<size_t>(n) * N);
        matmul_ref(x.data(), n, row_major, bias_ptr, ref.data());
        // F32 accumulation over K terms of size <= 1 against a double reference: the error grows like
        // sqrt(K) * 2^-24 * |terms|; 1e-5 relative to the largest output leaves a wide margin.
        double ref_max = 1.0;
        for (float r : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(r)));

        std::vector<float> first;
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(ref.size(), kNaN);
            backend(i).matmul(x.data(), n, w.view, bias_ptr, out.data());
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(1e-5 * ref_max, 1e-11), describe(d, out.data(), ref.data(), kThreadCounts[i]));
            if (i == 0)
                first = out;
            else
                QVERIFY2(bitwise_equal(out, first), "result depends on the thread count");
        }
        // Batch invariance: a row's result is bit for bit the same whether it runs alone or among n rows
        // (the engine's outputs must not depend on what else is in the batch).
        std::vector<float> alone(N);
        for (int t = 0; t < n; ++t) {
            backend(1).matmul(x.data() + static_cast<size_t>(t) * K, 1, w.view, bias_ptr, alone.data());
            QVERIFY2(std::memcmp(alone.data(), first.data() + static_cast<size_t>(t) * N, N * sizeof(float)) == 0,
                     qPrintable(QString("row %1 of %2 differs from the row run alone").arg(t).arg(n)));
        }
    }

    // ---- F16 weights widen exactly: every finite F16 value (subnormals and both zeros included) as a
    // weight, picked out by one-hot x rows, comes out as f16_to_f32 gives it, through each of the set's F16
    // paths (row-major and panels; one x row widens in the tile, 64 rows through the paths that reuse a
    // widened copy). Sets without F16C widen in integer lanes (cpu/simd.h loadv_f16).
    void matmul_f16_every_value_data() {
        QTest::addColumn<bool>("panels");
        QTest::addColumn<int>("n");
        for (bool panels : {false, true})
            for (int n : {1, 64}) QTest::addRow("%s n=%d", panels ? "panels" : "row-major", n) << panels << n;
    }
    void matmul_f16_every_value() {
        QFETCH(bool, panels);
        QFETCH(int, n);
        const int K = 64, N = 65536 / K;  // w[r][k] = F16 bits r * K + k
        std::vector<uint16_t> bits(static_cast<size_t>(N) * K);
        for (size_t i = 0; i < bits.size(); ++i)  // Inf and NaN (exponent all ones) become 0
            bits[i] = static_cast<uint16_t>((i & 0x7c00) == 0x7c00 ? 0 : i);
        WeightView w{bits.data(), DType::F16, N, K};
        std::unique_ptr<Backend> packer;
        if (panels) {
            packer = make_cpu_backend(2, kernel_set());
            w = packer->repack_matmul_weight(w);
            QCOMPARE(w.layout, WeightLayout::panels16);
        }
        // x rows: one-hot at k = k0 + t (n = 1: every k0 in turn; n = 64: all at once).
        for (int k0 = 0; k0 + n <= K; k0 += n) {
            std::vector<float> x(static_cast<size_t>(n) * K, 0.0f), out(static_cast<size_t>(n) * N, kNaN);
            for (int t = 0; t < n; ++t) x[static_cast<size_t>(t) * K + k0 + t] = 1.0f;
            backend(1).matmul(x.data(), n, w, nullptr, out.data());
            for (int t = 0; t < n; ++t)
                for (int r = 0; r < N; ++r) {
                    const uint16_t h = bits[static_cast<size_t>(r) * K + k0 + t];
                    const float got = out[static_cast<size_t>(t) * N + r];
                    QVERIFY2(got == f16_to_f32(h), qPrintable(QString("F16 0x%1 widened to %2, not %3")
                                                                  .arg(h, 4, 16, QChar('0')).arg(got, 0, 'g', 9)
                                                                  .arg(f16_to_f32(h), 0, 'g', 9)));
                }
        }
    }

    // ---- Q8_0 x int8 activations: the whole int8 range of stored weights (-128 included, which files may
    // hold though quantize_row never writes it) against the reference, and the activation quantization's
    // own error against F32 activations.
    void matmul_q8_0_int8() {
        std::mt19937_64 rng(case_seed(seed_));
        const int n = 7, K = 32 * 19, N = 37;  // an odd block count: the kernel's unpaired last block
        std::vector<BlockQ8_0> blocks(static_cast<size_t>(N) * K / 32);
        for (BlockQ8_0& b : blocks) {
            b.d = f32_to_f16(std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000, -9));
            for (int8_t& q : b.qs) q = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
        }
        blocks[3].qs[0] = -128;
        const WeightView w{blocks.data(), DType::Q8_0, N, K};
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * K);
        std::vector<float> ref(static_cast<size_t>(n) * N), out(ref.size(), kNaN);
        matmul_ref(x.data(), n, w, nullptr, ref.data());
        backend(1).matmul(x.data(), n, w, nullptr, out.data());
        double ref_max = 0;
        for (float r : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(r)));
        const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
        QVERIFY2(d.within(1e-5 * ref_max, 1e-11), describe(d, out.data(), ref.data(), 2));
        // Against F32 activations: each product's x is off by at most d_x / 2 = max|x| / 254 per block.
        std::vector<float> w_f32(static_cast<size_t>(N) * K), exact(ref.size());
        dequantize_row(DType::Q8_0, blocks.data(), w_f32.data(), static_cast<int64_t>(N) * K);
        for (int t = 0; t < n; ++t)
            for (int r = 0; r < N; ++r) {
                double s = 0, bound = 0;
                for (int k = 0; k < K; ++k) {
                    s += static_cast<double>(x[t * K + k]) * w_f32[static_cast<size_t>(r) * K + k];
                    bound += std::fabs(w_f32[static_cast<size_t>(r) * K + k]) / 254.0;  // |x| <= 1
                }
                QVERIFY2(std::fabs(out[t * N + r] - s) <= bound * 1.01 + 1e-6,
                         qPrintable(QString("row %1 col %2: %3 vs %4, bound %5").arg(t).arg(r).arg(out[t * N + r]).arg(s).arg(bound)));
            }
    }

    // ---- paged attention: random block tables over thousands of blocks, GQA, decode and chunked prefill.
    void paged_attention_data() {
        QTest::addColumn<int>("head_dim");
        QTest::addColumn<int>("gqa");
        QTest::addColumn<int>("block_size");
        QTest::addColumn<bool>("prefill");
        QTest::addColumn<int>("kv_dtype");
        for (int D : {8, 64, 128})
            for (int gqa : {1, 3, 4, 7})  // 3 and 7: V passes in uneven chunks of heads
                for (int B : {1, 2, 16, 64, 256})
                    for (bool prefill : {false, true})
                        QTest::addRow("D=%d gqa=%d B=%d %s", D, gqa, B, prefill ? "prefill" : "decode")
                            << D << gqa << B << prefill << int(DType::F32);
        // Half-precision caches: the same kernels with a different element loader.
        for (DType dt : {DType::F16, DType::BF16})
            for (int D : {8, 32, 64, 80, 96, 128})  // every vector instance, and the generic path
                for (int gqa : {1, 3})
                    for (int B : {1, 16})
                        for (bool prefill : {false, true})
                            QTest::addRow("%s D=%d gqa=%d B=%d %s", dtype_name(dt).data(), D, gqa, B,
                                          prefill ? "prefill" : "decode")
                                << D << gqa << B << prefill << int(dt);
    }
    void paged_attention() {
        QFETCH(int, head_dim);
        QFETCH(int, gqa);
        QFETCH(int, block_size);
        QFETCH(bool, prefill);
        QFETCH(int, kv_dtype);
        std::mt19937_64 rng(case_seed(seed_));
        const int D = head_dim, B = block_size, Hkv = 2, H = Hkv * gqa;
        // 4096 blocks, fewer for big blocks so the cache stays at most 65536 slots (256 MiB at D=128).
        const int num_blocks = std::min(4096, 65536 / B);
        const KvCacheLayout layout{/*num_layers=*/2, num_blocks, B, Hkv, D, static_cast<DType>(kv_dtype)};
        const int layer = 1;

        // Sequences: (cached tokens, new tokens). Decode: one new token each; prefill: chunks on top of
        // cached tokens, including a fresh prompt and chunks that straddle block boundaries.
        std::vector<std::pair<int, int>> seqs;
        if (!prefill) {
            for (int cached : {0, B - 1, B, random_int(rng, 1, 700), random_int(rng, 1, 1500), random_int(rng, 1, 64)})
                seqs.push_back({cached, 1});
        } else {
            seqs = {{0, random_int(rng, 1, 40)},
                    {random_int(rng, 1, 300), 1},
                    {random_int(rng, 1, 300), random_int(rng, 2, 64)},
                    {B, 17},
                    {B - 1, random_int(rng, 2, 33)}};
        }
        const int num_seqs = static_cast<int>(seqs.size());

        // Block tables: a shuffled permutation of every block. Block perm[0] is never written (it stays
        // NaN) and pads every table, so a kernel that reads past a sequence's blocks produces NaN.
        std::vector<int32_t> perm(num_blocks);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        const int32_t pad_block = perm[0];
        int max_blocks_per_seq = 0, max_seq_len = 0;
        for (auto [cached, chunk] : seqs) {
            max_blocks_per_seq = std::max(max_blocks_per_seq, (cached + chunk + B - 1) / B + 1);
            max_seq_len = std::max(max_seq_len, cached + chunk);
        }
        std::vector<int32_t> block_tables(static_cast<size_t>(num_seqs) * max_blocks_per_seq, pad_block);
        int next_block = 1;
        for (int s = 0; s < num_seqs; ++s)
            for (int b = 0; b < (seqs[s].first + seqs[s].second + B - 1) / B; ++b) {
                QVERIFY2(next_block < num_blocks, "test setup: not enough blocks");
                block_tables[static_cast<size_t>(s) * max_blocks_per_seq + b] = perm[next_block++];
            }

        // Dense K/V per sequence [seq_len, Hkv, D]; queries [num_tokens, H, D], sharper than K so that the
        // softmax is not flat.
        std::vector<std::vector<float>> k_dense(num_seqs), v_dense(num_seqs);
        std::vector<int32_t> query_start_loc{0}, seq_lens;
        for (int s = 0; s < num_seqs; ++s) {
            const int len = seqs[s].first + seqs[s].second;
            k_dense[s] = random_floats(rng, static_cast<size_t>(len) * Hkv * D);
            v_dense[s] = random_floats(rng, static_cast<size_t>(len) * Hkv * D);
            seq_lens.push_back(len);
            query_start_loc.push_back(query_start_loc.back() + seqs[s].second);
        }
        const int num_tokens = query_start_loc.back();
        const std::vector<float> q = random_floats(rng, static_cast<size_t>(num_tokens) * H * D, -3.0f, 3.0f);

        // The cache: NaN everywhere, cached tokens scattered by the reference helper, new tokens written by
        // the backend's write_kv through slot_mapping.
        // One buffer for every case (page faults on 256 MiB per case would dominate the test's time).
        if (cache_.size() < layout.total_elems()) cache_.resize(layout.total_elems());
        KvCacheView cache(cache_.data(), layout);
        cache.fill_nan();
        std::vector<float> k_new(static_cast<size_t>(num_tokens) * Hkv * D), v_new(k_new.size());
        std::vector<int64_t> slot_mapping;
        for (int s = 0; s < num_seqs; ++s) {
            const auto [cached, chunk] = seqs[s];
            const int32_t* table = block_tables.data() + static_cast<size_t>(s) * max_blocks_per_seq;
            scatter_kv_ref(k_dense[s].data(), v_dense[s].data(), 0, cached, table, layout, cache.data(), layer);
            for (int p = cached; p < cached + chunk; ++p) {
                const size_t src = static_cast<size_t>(p) * Hkv * D, dst = slot_mapping.size() * Hkv * D;
                std::copy_n(k_dense[s].data() + src, Hkv * D, k_new.data() + dst);
                std::copy_n(v_dense[s].data() + src, Hkv * D, v_new.data() + dst);
                slot_mapping.push_back(static_cast<int64_t>(table[p / B]) * B + p % B);
            }
        }
        backend(std::size(kThreadCounts) - 1).write_kv(k_new.data(), v_new.data(), slot_mapping.data(), num_tokens,
                                                       layout, cache.data(), layer);

        // write_kv: each new token's slot holds exactly its values (rounded to the cache's type), and nothing
        // else was written (the cache holds exactly as many non-NaN values as tokens were placed).
        for (int t = 0; t < num_tokens; ++t) {
            const int block = static_cast<int>(slot_mapping[t] / B), off = static_cast<int>(slot_mapping[t] % B);
            for (int h = 0; h < Hkv; ++h)
                for (int d = 0; d < D; ++d) {
                    const size_t src = (static_cast<size_t>(t) * Hkv + h) * D + d;
                    QVERIFY2(cache.stored_equals(layout.offset(layer, 0, block, h, off) + d, k_new[src]),
                             qPrintable(QString("write_kv: K of token %1 head %2 dim %3 wrong").arg(t).arg(h).arg(d)));
                    QVERIFY2(cache.stored_equals(layout.offset(layer, 1, block, h, off) + d, v_new[src]),
                             qPrintable(QString("write_kv: V of token %1 head %2 dim %3 wrong").arg(t).arg(h).arg(d)));
                }
        }
        int64_t total_tokens = 0;
        for (int len : seq_lens) total_tokens += len;
        QCOMPARE(cache.count_written(), total_tokens * Hkv * D * 2);

        // Reference: per sequence over its dense K/V, as the cache holds them (rounded to its type).
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        std::vector<float> ref(static_cast<size_t>(num_tokens) * H * D);
        for (int s = 0; s < num_seqs; ++s) {
            const size_t q0 = static_cast<size_t>(query_start_loc[s]) * H * D;
            const std::vector<float> k_held = cache.rounded(k_dense[s]), v_held = cache.rounded(v_dense[s]);
            attention_ref(q.data() + q0, seqs[s].second, k_held.data(), v_held.data(), seq_lens[s], H, Hkv, D, scale,
                          ref.data() + q0);
        }

        AttentionMetadata meta;
        meta.num_tokens = num_tokens;
        meta.num_seqs = num_seqs;
        meta.query_start_loc = query_start_loc.data();
        meta.seq_lens = seq_lens.data();
        meta.block_tables = block_tables.data();
        meta.max_blocks_per_seq = max_blocks_per_seq;
        meta.slot_mapping = slot_mapping.data();
        meta.max_seq_len = max_seq_len;
        std::vector<float> first;
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(ref.size(), kNaN);
            backend(i).paged_attention(q.data(), meta, layout, cache.data(), layer, H, scale, out.data());
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(1e-5, 1e-10), describe(d, out.data(), ref.data(), kThreadCounts[i]));
            if (i == 0)
                first = out;
            else
                QVERIFY2(bitwise_equal(out, first), "result depends on the thread count");
        }
    }

    // A padding token (slot -1) owns no slot: write_kv skips it and writes the others.
    void write_kv_skips_padding() {
        const KvCacheLayout layout{1, 8, 4, 2, 8, DType::F32};
        std::mt19937_64 rng(case_seed(seed_));
        const std::vector<float> k = random_floats(rng, 3 * 2 * 8), v = random_floats(rng, 3 * 2 * 8);
        const int64_t slot_ids[] = {13, -1, 6};
        // One buffer for every case (page faults on 256 MiB per case would dominate the test's time).
        if (cache_.size() < layout.total_elems()) cache_.resize(layout.total_elems());
        const std::span<float> cache(cache_.data(), layout.total_elems());
        std::fill(cache.begin(), cache.end(), kNaN);
        backend(0).write_kv(k.data(), v.data(), slot_ids, 3, layout, cache.data(), 0);
        const auto written = std::count_if(cache.begin(), cache.end(), [](float x) { return !std::isnan(x); });
        QCOMPARE(static_cast<int64_t>(written), int64_t(2 * 2 * 8 * 2));
        QCOMPARE(cache[layout.offset(0, 1, 3, 1, 1) + 7], v[(2 * 0 + 1) * 8 + 7]);  // token 0 -> slot 13
        QCOMPARE(cache[layout.offset(0, 0, 1, 0, 2)], k[(2 * 2 + 0) * 8 + 0]);      // token 2 -> slot 6
    }

    // ---- rms_norm
    void rms_norm_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("dim");
        QTest::addColumn<float>("eps");
        QTest::addRow("1x8") << 1 << 8 << 1e-5f;
        QTest::addRow("1x576") << 1 << 576 << 1e-5f;
        QTest::addRow("3x576") << 3 << 576 << 1e-6f;
        QTest::addRow("7x4096") << 7 << 4096 << 1e-5f;
        QTest::addRow("64x576 (parallel)") << 64 << 576 << 1e-5f;
        QTest::addRow("13x2048 tiny x") << 13 << 2048 << 1e-5f;
    }
    void rms_norm() {
        QFETCH(int, n);
        QFETCH(int, dim);
        QFETCH(float, eps);
        std::mt19937_64 rng(case_seed(seed_));
        const float amp = QByteArray(QTest::currentDataTag()).contains("tiny") ? 1e-3f : 4.0f;  // eps matters
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * dim, -amp, amp);
        const std::vector<float> w = random_floats(rng, dim, 0.5f, 1.5f);
        std::vector<float> ref(x.size());
        rms_norm_ref(x.data(), w.data(), n, dim, eps, ref.data());
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(x.size(), kNaN);
            backend(i).rms_norm(x.data(), w.data(), n, dim, eps, out.data());
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(1e-5, 1e-11), describe(d, out.data(), ref.data(), kThreadCounts[i]));
        }
    }

    // ---- rope: both pair layouts, positions up to 4096, partial rotary dims.
    void rope_data() {
        QTest::addColumn<bool>("neox");
        QTest::addColumn<int>("head_dim");
        QTest::addColumn<int>("rotary_dim");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("num_heads");
        QTest::addColumn<int>("num_kv_heads");
        for (bool neox : {true, false}) {
            const char* l = neox ? "neox" : "interleaved";
            QTest::addRow("%s D=64 n=1", l) << neox << 64 << 64 << 1 << 9 << 3;
            QTest::addRow("%s D=64 n=64 (parallel)", l) << neox << 64 << 64 << 64 << 9 << 3;
            QTest::addRow("%s D=128 n=7", l) << neox << 128 << 128 << 7 << 32 << 8;
            QTest::addRow("%s D=8 n=33", l) << neox << 8 << 8 << 33 << 4 << 4;
            QTest::addRow("%s D=64 rotary=32 n=9", l) << neox << 64 << 32 << 9 << 6 << 2;
        }
    }
    void rope() {
        QFETCH(bool, neox);
        QFETCH(int, head_dim);
        QFETCH(int, rotary_dim);
        QFETCH(int, n);
        QFETCH(int, num_heads);
        QFETCH(int, num_kv_heads);
        std::mt19937_64 rng(case_seed(seed_));
        std::vector<float> inv_freq(rotary_dim / 2);
        for (int i = 0; i < rotary_dim / 2; ++i)
            inv_freq[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / rotary_dim));
        const RopeParams p{inv_freq.data(), head_dim, rotary_dim, neox};
        std::vector<int32_t> positions(n);
        for (int t = 0; t < n; ++t) positions[t] = t == 0 ? 0 : t == 1 ? 4096 : random_int(rng, 0, 4096);
        const std::vector<float> q0 = random_floats(rng, static_cast<size_t>(n) * num_heads * head_dim);
        const std::vector<float> k0 = random_floats(rng, static_cast<size_t>(n) * num_kv_heads * head_dim);
        std::vector<float> q_ref = q0, k_ref = k0;
        rope_ref(q_ref.data(), k_ref.data(), positions.data(), n, num_heads, num_kv_heads, p);
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> q = q0, k = k0;
            backend(i).rope(q.data(), k.data(), positions.data(), n, num_heads, num_kv_heads, p);
            const Diff dq = diff(q.data(), q_ref.data(), static_cast<int64_t>(q.size()));
            QVERIFY2(dq.within(1e-5, 1e-11), "q: " + describe(dq, q.data(), q_ref.data(), kThreadCounts[i]));
            const Diff dk = diff(k.data(), k_ref.data(), static_cast<int64_t>(k.size()));
            QVERIFY2(dk.within(1e-5, 1e-11), "k: " + describe(dk, k.data(), k_ref.data(), kThreadCounts[i]));
            // Dimensions past rotary_dim pass through untouched.
            for (size_t h = 0; h < q.size() / head_dim; ++h)
                for (int d = rotary_dim; d < head_dim; ++d)
                    QCOMPARE(q[h * head_dim + d], q0[h * head_dim + d]);
        }
    }

    // ---- silu_mul and add, across the serial / parallel chunk threshold.
    void elementwise_data() {
        QTest::addColumn<qlonglong>("n");
        for (qlonglong n : {1LL, 15LL, 1000LL, 32767LL, 32768LL, 100003LL}) QTest::addRow("n=%lld", n) << n;
    }
    void elementwise() {
        QFETCH(qlonglong, n);
        std::mt19937_64 rng(case_seed(seed_));
        std::vector<float> gate = random_floats(rng, n, -20.0f, 20.0f);
        const std::vector<float> up = random_floats(rng, n, -3.0f, 3.0f);
        const float extremes[] = {0.0f, -100.0f, 100.0f, -88.0f, 1e-20f};
        for (size_t i = 0; i < std::size(extremes) && static_cast<qlonglong>(i) < n; ++i) gate[i] = extremes[i];
        std::vector<float> ref(n);
        silu_mul_ref(gate.data(), up.data(), n, ref.data());
        std::vector<float> x_ref = up;
        add_ref(x_ref.data(), gate.data(), n);
        // Each value alone (n = 1 calls): what every thread count and chunking must reproduce bit for bit.
        std::vector<float> alone(n);
        for (qlonglong j = 0; j < n; ++j) backend(0).silu_mul(&gate[j], &up[j], 1, &alone[j]);
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(n, kNaN);
            backend(i).silu_mul(gate.data(), up.data(), n, out.data());
            for (qlonglong j = 0; j < n; ++j)
                QVERIFY2(std::memcmp(&out[j], &alone[j], sizeof(float)) == 0,
                         qPrintable(QString("silu_mul threads=%1 [%2]: %3 in a batch, %4 alone")
                                        .arg(kThreadCounts[i]).arg(j).arg(out[j], 0, 'g', 9).arg(alone[j], 0, 'g', 9)));
            // A few float roundings (exp, +, /, *): relative error well under 1e-6.
            for (qlonglong j = 0; j < n; ++j)
                QVERIFY2(std::fabs(out[j] - ref[j]) <= 1e-6 * std::fabs(ref[j]) + 1e-30,
                         qPrintable(QString("silu_mul threads=%1 [%2]: gate=%3 up=%4 out=%5 ref=%6")
                                        .arg(kThreadCounts[i]).arg(j).arg(gate[j]).arg(up[j]).arg(out[j], 0, 'g', 9)
                                        .arg(ref[j], 0, 'g', 9)));
            std::vector<float> x = up;
            backend(i).add(x.data(), gate.data(), n);
            QVERIFY2(bitwise_equal(x, x_ref), qPrintable(QString("add threads=%1 differs").arg(kThreadCounts[i])));
        }
    }

    // ---- embedding: every dtype; ids at both ends of the table and repeated.
    void embedding_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("n");
        for (DType dt : kAllDTypes) {
            QTest::addRow("%s 1000x768 n=33", dtype_name(dt).data()) << static_cast<int>(dt) << 1000 << 768 << 33;
            QTest::addRow("%s 50x256 n=1", dtype_name(dt).data()) << static_cast<int>(dt) << 50 << 256 << 1;
            if (dt != DType::Q4_K)
                QTest::addRow("%s 100x96 n=7", dtype_name(dt).data()) << static_cast<int>(dt) << 100 << 96 << 7;
        }
    }
    void embedding() {
        QFETCH(int, dtype);
        QFETCH(int, vocab);
        QFETCH(int, cols);
        QFETCH(int, n);
        std::mt19937_64 rng(case_seed(seed_));
        const std::vector<float> table_f = random_floats(rng, static_cast<size_t>(vocab) * cols);
        const StoredWeights table = store(table_f, static_cast<DType>(dtype), vocab, cols);
        std::vector<int32_t> ids(n);
        for (int t = 0; t < n; ++t) ids[t] = t == 0 ? vocab - 1 : t == 1 ? 0 : t == 2 ? ids[0] : random_int(rng, 0, vocab - 1);
        std::vector<float> ref(static_cast<size_t>(n) * cols);
        embedding_ref(table.view, ids.data(), n, ref.data());
        if (table.view.dtype == DType::F32)
            for (int t = 0; t < n; ++t)
                QVERIFY(std::memcmp(ref.data() + static_cast<size_t>(t) * cols,
                                    table_f.data() + static_cast<size_t>(ids[t]) * cols, cols * 4) == 0);
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(ref.size(), kNaN);
            backend(i).embedding(table.view, ids.data(), n, out.data());
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(bitwise_equal(out, ref), describe(d, out.data(), ref.data(), kThreadCounts[i]));
        }
    }

    // ---- argmax: ties go to the lowest index.
    void argmax_data() {
        QTest::addColumn<QList<float>>("row");
        QTest::addColumn<int>("expected");
        const float inf = std::numeric_limits<float>::infinity();
        QTest::addRow("single") << QList<float>{-5.0f} << 0;
        QTest::addRow("all equal") << QList<float>{2.0f, 2.0f, 2.0f, 2.0f} << 0;
        QTest::addRow("max last") << QList<float>{-1.0f, 0.0f, 1.0f, 3.5f} << 3;
        QTest::addRow("tie in the middle") << QList<float>{0.0f, 1.0f, 7.0f, 3.0f, 7.0f, 7.0f} << 2;
        QTest::addRow("negative") << QList<float>{-3.0f, -1.5f, -2.0f, -1.5f} << 1;
        QTest::addRow("all -inf") << QList<float>{-inf, -inf, -inf} << 0;
        QTest::addRow("+inf tie") << QList<float>{1.0f, inf, 0.0f, inf} << 1;
        QTest::addRow("-0 and +0") << QList<float>{-1.0f, -0.0f, 0.0f} << 1;
    }
    void argmax() {
        QFETCH(QList<float>, row);
        QFETCH(int, expected);
        int32_t ref = -1;
        argmax_ref(row.data(), 1, static_cast<int>(row.size()), &ref);
        QCOMPARE(ref, expected);
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            int32_t out = -1;
            backend(i).argmax(row.data(), 1, static_cast<int>(row.size()), &out);
            QCOMPARE(out, expected);
        }
    }
    void argmax_batch() {
        // Several vocab-sized rows with a planted, duplicated maximum.
        std::mt19937_64 rng(case_seed(seed_));
        const int n = 5, vocab = 49152;
        std::vector<float> logits = random_floats(rng, static_cast<size_t>(n) * vocab, -10.0f, 10.0f);
        for (int r = 0; r < n; ++r) {
            const int a = random_int(rng, 0, vocab - 1), b = random_int(rng, 0, vocab - 1);
            logits[static_cast<size_t>(r) * vocab + a] = logits[static_cast<size_t>(r) * vocab + b] = 11.0f;
        }
        std::vector<int32_t> ref(n);
        argmax_ref(logits.data(), n, vocab, ref.data());
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<int32_t> out(n, -1);
            backend(i).argmax(logits.data(), n, vocab, out.data());
            QCOMPARE(out, ref);
        }
    }

    // ---- gather_rows
    void gather_rows_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("dim");
        QTest::addRow("n=1 dim=1") << 1 << 1;
        QTest::addRow("n=5 dim=576") << 5 << 576;
        QTest::addRow("n=64 dim=49") << 64 << 49;
    }
    void gather_rows() {
        QFETCH(int, n);
        QFETCH(int, dim);
        std::mt19937_64 rng(case_seed(seed_));
        const int total = 100;
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(total) * dim);
        std::vector<int32_t> rows(n);
        for (int i = 0; i < n; ++i) rows[i] = i == 0 ? total - 1 : random_int(rng, 0, total - 1);
        std::vector<float> ref(static_cast<size_t>(n) * dim);
        gather_rows_ref(x.data(), rows.data(), n, dim, ref.data());
        for (size_t i = 0; i < std::size(kThreadCounts); ++i) {
            std::vector<float> out(ref.size(), kNaN);
            backend(i).gather_rows(x.data(), rows.data(), n, dim, out.data());
            QVERIFY(bitwise_equal(out, ref));
        }
    }
};

QTEST_GUILESS_MAIN(TestBackendOps)
#include "test_backend_ops.moc"
