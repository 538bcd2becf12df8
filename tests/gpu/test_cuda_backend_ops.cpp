// Every Backend op of the CUDA backend against the slow references of cpu/reference.h (and the CPU
// backend's semantics), in the manner of llama.cpp's test-backend-ops: table-driven cases, seeded inputs,
// device outputs poisoned with NaN before each run (an output the kernel forgets to write fails), errors
// as normalized MSE and max abs error. Paged attention runs over block tables scattered at random over
// thousands of blocks, head_dim 8/32/64/128, GQA 1/4/8, block sizes 8/16/32 (and 1, 256), decode, chunked
// prefill and long contexts, each with the split heuristic and with forced context splits.
// Tolerances (stated per op): F32 paths ~1e-5..1e-4 relative (TF32 off); F16/BF16 GEMMs round x to the
// weight type first, so they are held to bounds derived from that rounding (see matmul()). The sampler
// is checked structurally against the host sampler's filters (every token inside the host's top-k /
// min-p / top-p set, greedy and top_k 1 equal to argmax, ties to the lowest index, the same ids twice and
// in any batch order) and statistically (frequencies over 16384 draws within 5 sigma of the filtered
// softmax).
// Skips, with the reason, when built without CUDA or when no device is present.
#include "test_support.h"

#include "cpu/quant.h"
#include "cpu/reference.h"
#if KVSCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace kvscope;
using namespace kvscope::cpu;

#if KVSCOPE_HAVE_CUDA
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

int random_int(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

uint64_t case_seed(uint64_t base) {
    std::string name = std::string(QTest::currentTestFunction()) + "/" +
                       (QTest::currentDataTag() ? QTest::currentDataTag() : "");
    uint64_t h = 1469598103934665603ull ^ base;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

struct Diff {
    double nmse = 0;
    double max_abs = 0;
    int64_t worst = -1;
    int64_t non_finite = 0;
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

QByteArray describe(const Diff& d, const float* out, const float* ref) {
    QByteArray s = "nmse=" + QByteArray::number(d.nmse, 'g', 3) + " max_abs=" + QByteArray::number(d.max_abs, 'g', 3) +
                   " non_finite=" + QByteArray::number(static_cast<qlonglong>(d.non_finite));
    if (d.worst >= 0)
        s += " at [" + QByteArray::number(static_cast<qlonglong>(d.worst)) + "]: out=" +
             QByteArray::number(out[d.worst], 'g', 9) + " ref=" + QByteArray::number(ref[d.worst], 'g', 9);
    return s;
}

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

constexpr DType kGpuDTypes[] = {DType::F32, DType::F16, DType::BF16};

// The host sampler's filters (runner/sampler.cpp) over one row: each token's probability after
// temperature, top-k, min-p and top-p, renormalized over the survivors (0 = filtered out). `slack`
// widens the min-p and top-p boundaries, so the set is a superset of the device's (float sums).
std::vector<double> filtered_probs(const float* logits, int vocab, const SamplingRow& p, double slack = 0) {
    std::vector<double> probs(vocab, 0.0);
    if (p.temperature == 0) {
        int32_t best = 0;
        argmax_ref(logits, 1, vocab, &best);
        probs[best] = 1;
        return probs;
    }
    std::vector<std::pair<float, int>> c;
    for (int t = 0; t < vocab; ++t) c.emplace_back(logits[t] / p.temperature, t);
    std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    if (p.top_k > 0 && p.top_k < vocab) c.resize(p.top_k);
    std::vector<double> w(c.size());
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += (w[i] = std::exp(static_cast<double>(c[i].first) - c[0].first));
    for (double& x : w) x /= sum;
    size_t keep = c.size();
    if (p.min_p > 0)
        while (keep > 1 && w[keep - 1] < p.min_p * w[0] * (1 - slack)) --keep;
    if (p.top_p < 1) {
        double mass = 0;
        size_t n = 0;
        while (n < keep) {
            mass += w[n++];
            if (mass >= p.top_p + slack) break;
        }
        keep = std::max<size_t>(n, 1);
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += w[i];
    for (size_t i = 0; i < keep; ++i) probs[c[i].second] = w[i] / total;
    return probs;
}

SamplingRow sampling_row(float temperature, int top_k, float top_p, float min_p, uint64_t seed, uint64_t offset) {
    SamplingRow r;
    r.temperature = temperature;
    r.top_k = top_k;
    r.top_p = top_p;
    r.min_p = min_p;
    r.seed = seed;
    r.offset = offset;
    return r;
}

}  // namespace
#endif

class TestCudaBackendOps : public QObject {
    Q_OBJECT

#if KVSCOPE_HAVE_CUDA
    uint64_t seed_ = 0;
    std::unique_ptr<cuda::CudaBackend> gpu_;

    // A device buffer of the backend, freed on scope exit.
    struct DeviceBuffer {
        Backend* b = nullptr;
        void* p = nullptr;
        size_t bytes = 0;
        DeviceBuffer(Backend& backend, size_t n) : b(&backend), p(backend.allocate(n)), bytes(n) {}
        ~DeviceBuffer() {
            if (p) b->deallocate(p);
        }
        DeviceBuffer(const DeviceBuffer&) = delete;
        DeviceBuffer& operator=(const DeviceBuffer&) = delete;
        template <class T>
        T* as() const {
            return static_cast<T*>(p);
        }
    };
    template <class T>
    std::unique_ptr<DeviceBuffer> upload(const std::vector<T>& host) {
        auto d = std::make_unique<DeviceBuffer>(*gpu_, std::max<size_t>(1, host.size()) * sizeof(T));
        if (!host.empty()) gpu_->copy_to_device(d->p, host.data(), host.size() * sizeof(T));
        return d;
    }
    // A device buffer of n floats, every one NaN.
    std::unique_ptr<DeviceBuffer> poisoned(size_t n) { return upload(std::vector<float>(n, kNaN)); }
    template <class T>
    std::vector<T> download(const DeviceBuffer& d, size_t n) {
        std::vector<T> host(n);
        gpu_->copy_to_host(host.data(), d.p, n * sizeof(T));
        return host;
    }

    // The attention case shared by the decode / prefill / long tables.
    void run_paged_attention(int D, int gqa, int B, const std::vector<std::pair<int, int>>& seqs,
                             std::mt19937_64& rng);
#endif

private slots:
    void initTestCase() {
#if KVSCOPE_HAVE_CUDA
        std::string why_not;
        auto b = make_cuda_backend(0, &why_not);
        if (!b) QSKIP((why_not + " (the gpu tests need an NVIDIA GPU)").c_str());
        gpu_.reset(static_cast<cuda::CudaBackend*>(b.release()));
        const auto& info = gpu_->device_info();
        qInfo("device %d: %s, sm_%d%d, %d SMs, %.1f GiB, peak %.0f GB/s", info.device, info.name.c_str(),
              info.cc_major, info.cc_minor, info.num_sms, info.total_memory / 1073741824.0, info.peak_bandwidth / 1e9);
        seed_ = test::test_seed(20250717);
#else
        QSKIP("no CUDA device: this build has no CUDA backend (KVSCOPE_CUDA=OFF or no toolkit)");
#endif
    }

#if KVSCOPE_HAVE_CUDA
    // ---- matmul through cuBLAS: F32 (TF32 off), F16, BF16; decode and prefill row counts; with and
    // without bias.
    void matmul_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("K");
        QTest::addColumn<int>("N");
        QTest::addColumn<bool>("bias");
        const int shapes[][2] = {{64, 172}, {172, 64}, {576, 1536}, {1024, 33}, {2048, 64}, {2048, 8192}};
        for (DType dt : kGpuDTypes)
            for (int n : {1, 3, 16, 64, 257})
                for (auto [K, N] : shapes) {
                    if (static_cast<int64_t>(K) * N > (1 << 22) && n > 16) continue;  // the double reference's time
                    for (bool bias : {false, true})
                        QTest::addRow("%s n=%d K=%d N=%d%s", dtype_name(dt).data(), n, K, N, bias ? " bias" : "")
                            << static_cast<int>(dt) << n << K << N << bias;
                }
    }
    void matmul() {
        QFETCH(int, dtype);
        QFETCH(int, n);
        QFETCH(int, K);
        QFETCH(int, N);
        QFETCH(bool, bias);
        const DType dt = static_cast<DType>(dtype);
        std::mt19937_64 rng(case_seed(seed_));
        const StoredWeights w = store(random_floats(rng, static_cast<size_t>(N) * K), dt, N, K);
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * K);
        const std::vector<float> b = bias ? random_floats(rng, N) : std::vector<float>();
        std::vector<float> ref(static_cast<size_t>(n) * N);
        matmul_ref(x.data(), n, w.view, bias ? b.data() : nullptr, ref.data());
        double ref_max = 1.0;
        for (float r : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(r)));

        const WeightView wd = gpu_->upload_weight(w.view);
        QCOMPARE(wd.dtype, dt);
        const float* bias_d = bias ? gpu_->upload_vector(b.data(), b.size()) : nullptr;
        auto xd = upload(x);
        auto out = poisoned(ref.size());
        gpu_->matmul(xd->as<float>(), n, wd, bias_d, out->as<float>());
        const std::vector<float> got = download<float>(*out, ref.size());
        const Diff d = diff(got.data(), ref.data(), static_cast<int64_t>(ref.size()));
        // F32: cuBLAS's summation order against a double reference, ~sqrt(K) * 2^-24 per unit term.
        // F16 / BF16: x is rounded to the weight type (unit roundoff u = 2^-11 / 2^-8) before the GEMM:
        // nmse ~ u^2 / 3 and the worst element ~ u * ref_max; the bounds leave 10x or more.
        double tol_abs = 2e-5 * ref_max, tol_nmse = 1e-10;
        if (dt == DType::F16) tol_abs = 2e-3 * ref_max, tol_nmse = 1e-6;
        if (dt == DType::BF16) tol_abs = 1e-2 * ref_max, tol_nmse = 1e-4;
        QVERIFY2(d.within(tol_abs, tol_nmse), describe(d, got.data(), ref.data()));
    }

    void quantized_weights_rejected() {
        for (DType dt : {DType::Q8_0, DType::Q4_K}) {
            QVERIFY(!gpu_->supports(dt));
            std::vector<uint8_t> bytes(dtype_row_bytes(dt, 256) * 4);
            const WeightView w{bytes.data(), dt, 4, 256};
            bool threw = false;
            try {
                gpu_->upload_weight(w);
            } catch (const std::invalid_argument& e) {
                threw = QByteArray(e.what()).contains(dtype_name(dt).data());
            }
            QVERIFY2(threw, "upload_weight must reject quantized weights naming the type");
        }
        for (DType dt : kGpuDTypes) QVERIFY(gpu_->supports(dt));
    }

    // ---- paged attention + write_kv.
    void paged_attention_data() {
        QTest::addColumn<int>("head_dim");
        QTest::addColumn<int>("gqa");
        QTest::addColumn<int>("block_size");
        QTest::addColumn<QString>("kind");
        for (int D : {8, 32, 64, 128})
            for (int gqa : {1, 4, 8})
                for (int B : {8, 16, 32})
                    for (const char* kind : {"decode", "prefill", "long"})
                        QTest::addRow("D=%d gqa=%d B=%d %s", D, gqa, B, kind) << D << gqa << B << QString(kind);
        for (int B : {1, 256})
            for (const char* kind : {"decode", "prefill"})
                QTest::addRow("D=64 gqa=4 B=%d %s", B, kind) << 64 << 4 << B << QString(kind);
        QTest::addRow("D=64 gqa=7 B=16 decode (qwen2-0.5b)") << 64 << 7 << 16 << QString("decode");
        QTest::addRow("D=64 gqa=16 B=16 prefill (one row per token)") << 64 << 16 << 16 << QString("prefill");
    }
    void paged_attention() {
        QFETCH(int, head_dim);
        QFETCH(int, gqa);
        QFETCH(int, block_size);
        QFETCH(QString, kind);
        std::mt19937_64 rng(case_seed(seed_));
        const int B = block_size;
        // Sequences: (cached tokens, new tokens).
        std::vector<std::pair<int, int>> seqs;
        if (kind == "decode") {
            for (int cached : {0, B - 1, B, random_int(rng, 1, 700), random_int(rng, 1, 1500), random_int(rng, 1, 64)})
                seqs.push_back({cached, 1});
        } else if (kind == "prefill") {
            seqs = {{0, random_int(rng, 1, 40)},
                    {random_int(rng, 1, 300), 1},
                    {random_int(rng, 1, 300), random_int(rng, 2, 64)},
                    {B, 17},
                    {B - 1, random_int(rng, 2, 33)}};
        } else {  // long contexts: split-K decode next to a long prefill chunk over a long prefix
            seqs = {{random_int(rng, 10000, 15000), 1}, {random_int(rng, 2000, 4000), 1}, {31, 1},
                    {random_int(rng, 6000, 9000), random_int(rng, 20, 70)}};
        }
        run_paged_attention(head_dim, gqa, B, seqs, rng);
    }

    void unsupported_attention_shapes_throw() {
        const KvCacheLayout layout{1, 4, 16, 2, 96, DType::F32};
        AttentionMetadata meta;
        meta.num_tokens = 1;
        meta.num_seqs = 1;
        meta.max_seq_len = 1;
        auto expect_throw = [&](const KvCacheLayout& l, int num_heads, const char* what) {
            bool threw = false;
            try {
                gpu_->paged_attention(nullptr, meta, l, nullptr, 0, num_heads, 1.0f, nullptr);
            } catch (const std::invalid_argument& e) {
                threw = true;
                qInfo("%s: %s", what, e.what());
            }
            QVERIFY2(threw, what);
        };
        expect_throw(layout, 4, "head_dim 96");
        expect_throw(KvCacheLayout{1, 4, 16, 2, 64, DType::F32}, 64, "GQA group of 32");
        expect_throw(KvCacheLayout{1, 4, 16, 3, 64, DType::F32}, 8, "num_heads not a multiple of num_kv_heads");
        expect_throw(KvCacheLayout{1, 4, 16, 2, 64, DType::F16}, 4, "F16 cache");
    }

    // A padding token (slot -1) owns no slot: write_kv skips it and writes the others.
    void write_kv_skips_padding() {
        const KvCacheLayout layout{1, 8, 4, 2, 8, DType::F32};
        std::mt19937_64 rng(case_seed(seed_));
        const std::vector<float> k = random_floats(rng, 3 * 2 * 8), v = random_floats(rng, 3 * 2 * 8);
        const std::vector<int64_t> slot_ids = {13, -1, 6};
        auto kd = upload(k), vd = upload(v);
        auto sd = upload(slot_ids);
        auto cache_d = poisoned(layout.total_elems());
        gpu_->write_kv(kd->as<float>(), vd->as<float>(), sd->as<int64_t>(), 3, layout, cache_d->p, 0);
        const std::vector<float> cache = download<float>(*cache_d, layout.total_elems());
        const auto written = std::count_if(cache.begin(), cache.end(), [](float x) { return !std::isnan(x); });
        QCOMPARE(static_cast<int64_t>(written), int64_t(2 * 2 * 8 * 2));
        QCOMPARE(cache[layout.offset(0, 1, 3, 1, 1) + 7], v[(2 * 0 + 1) * 8 + 7]);  // token 0 -> slot 13
        QCOMPARE(cache[layout.offset(0, 0, 1, 0, 2)], k[(2 * 2 + 0) * 8 + 0]);      // token 2 -> slot 6
    }

    // ---- rms_norm: F32 block reduction vs double; 1e-5 abs (values are O(1..10)).
    void rms_norm_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("dim");
        QTest::addColumn<float>("eps");
        QTest::addRow("1x8") << 1 << 8 << 1e-5f;
        QTest::addRow("1x576") << 1 << 576 << 1e-5f;
        QTest::addRow("7x4096") << 7 << 4096 << 1e-5f;
        QTest::addRow("300x2048") << 300 << 2048 << 1e-6f;
        QTest::addRow("13x2048 tiny x") << 13 << 2048 << 1e-5f;
    }
    void rms_norm() {
        QFETCH(int, n);
        QFETCH(int, dim);
        QFETCH(float, eps);
        std::mt19937_64 rng(case_seed(seed_));
        const float amp = QByteArray(QTest::currentDataTag()).contains("tiny") ? 1e-3f : 4.0f;
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * dim, -amp, amp);
        const std::vector<float> w = random_floats(rng, dim, 0.5f, 1.5f);
        std::vector<float> ref(x.size());
        rms_norm_ref(x.data(), w.data(), n, dim, eps, ref.data());
        auto xd = upload(x), wd = upload(w);
        auto out = poisoned(x.size());
        gpu_->rms_norm(xd->as<float>(), wd->as<float>(), n, dim, eps, out->as<float>());
        const std::vector<float> got = download<float>(*out, x.size());
        const Diff d = diff(got.data(), ref.data(), static_cast<int64_t>(got.size()));
        QVERIFY2(d.within(2e-5, 1e-11), describe(d, got.data(), ref.data()));
    }

    // ---- rope: both pair layouts, positions up to 4096, partial rotary dims; 1e-5 abs.
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
            QTest::addRow("%s D=64 n=300", l) << neox << 64 << 64 << 300 << 32 << 8;
            QTest::addRow("%s D=128 n=7", l) << neox << 128 << 128 << 7 << 32 << 8;
            QTest::addRow("%s D=8 n=33", l) << neox << 8 << 8 << 33 << 8 << 4;
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
        std::vector<int32_t> positions(n);
        for (int t = 0; t < n; ++t) positions[t] = t == 0 ? 0 : t == 1 ? 4096 : random_int(rng, 0, 4096);
        const std::vector<float> q0 = random_floats(rng, static_cast<size_t>(n) * num_heads * head_dim);
        const std::vector<float> k0 = random_floats(rng, static_cast<size_t>(n) * num_kv_heads * head_dim);
        std::vector<float> q_ref = q0, k_ref = k0;
        rope_ref(q_ref.data(), k_ref.data(), positions.data(), n, num_heads, num_kv_heads,
                 RopeParams{inv_freq.data(), head_dim, rotary_dim, neox});
        auto fd = upload(inv_freq);
        auto pd = upload(positions);
        auto qd = upload(q0), kd = upload(k0);
        gpu_->rope(qd->as<float>(), kd->as<float>(), pd->as<int32_t>(), n, num_heads, num_kv_heads,
                   RopeParams{fd->as<float>(), head_dim, rotary_dim, neox});
        const std::vector<float> q = download<float>(*qd, q0.size()), k = download<float>(*kd, k0.size());
        const Diff dq = diff(q.data(), q_ref.data(), static_cast<int64_t>(q.size()));
        QVERIFY2(dq.within(1e-5, 1e-11), "q: " + describe(dq, q.data(), q_ref.data()));
        const Diff dk = diff(k.data(), k_ref.data(), static_cast<int64_t>(k.size()));
        QVERIFY2(dk.within(1e-5, 1e-11), "k: " + describe(dk, k.data(), k_ref.data()));
        for (size_t h = 0; h < q.size() / head_dim; ++h)
            for (int d = rotary_dim; d < head_dim; ++d) QCOMPARE(q[h * head_dim + d], q0[h * head_dim + d]);
    }

    // ---- silu_mul (2e-6 relative: expf and a division, a few ulp) and add (bitwise).
    void elementwise_data() {
        QTest::addColumn<qlonglong>("n");
        for (qlonglong n : {1LL, 1000LL, 32768LL, 1000003LL}) QTest::addRow("n=%lld", n) << n;
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
        auto gd = upload(gate), ud = upload(up);
        auto out = poisoned(n);
        gpu_->silu_mul(gd->as<float>(), ud->as<float>(), n, out->as<float>());
        const std::vector<float> got = download<float>(*out, n);
        qlonglong bad = -1;
        for (qlonglong j = 0; j < n && bad < 0; ++j)
            if (!(std::fabs(got[j] - ref[j]) <= 2e-6 * std::fabs(ref[j]) + 1e-30)) bad = j;
        if (bad >= 0)
            QFAIL(qPrintable(QString("silu_mul [%1]: gate=%2 up=%3 out=%4 ref=%5")
                                 .arg(bad).arg(gate[bad]).arg(up[bad]).arg(got[bad], 0, 'g', 9).arg(ref[bad], 0, 'g', 9)));
        gpu_->add(ud->as<float>(), gd->as<float>(), n);
        const std::vector<float> x = download<float>(*ud, n);
        QVERIFY2(std::memcmp(x.data(), x_ref.data(), n * sizeof(float)) == 0, "add differs from x + y");
    }

    // ---- embedding: every GPU dtype, exact (a widening conversion).
    void embedding_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("n");
        for (DType dt : kGpuDTypes) {
            QTest::addRow("%s 1000x768 n=33", dtype_name(dt).data()) << static_cast<int>(dt) << 1000 << 768 << 33;
            QTest::addRow("%s 50x256 n=1", dtype_name(dt).data()) << static_cast<int>(dt) << 50 << 256 << 1;
            QTest::addRow("%s 512x64 n=300", dtype_name(dt).data()) << static_cast<int>(dt) << 512 << 64 << 300;
        }
    }
    void embedding() {
        QFETCH(int, dtype);
        QFETCH(int, vocab);
        QFETCH(int, cols);
        QFETCH(int, n);
        std::mt19937_64 rng(case_seed(seed_));
        const StoredWeights table =
            store(random_floats(rng, static_cast<size_t>(vocab) * cols), static_cast<DType>(dtype), vocab, cols);
        std::vector<int32_t> ids(n);
        for (int t = 0; t < n; ++t) ids[t] = t == 0 ? vocab - 1 : t == 1 ? 0 : t == 2 ? ids[0] : random_int(rng, 0, vocab - 1);
        std::vector<float> ref(static_cast<size_t>(n) * cols);
        embedding_ref(table.view, ids.data(), n, ref.data());
        const WeightView td = gpu_->upload_weight(table.view);
        auto idd = upload(ids);
        auto out = poisoned(ref.size());
        gpu_->embedding(td, idd->as<int32_t>(), n, out->as<float>());
        const std::vector<float> got = download<float>(*out, ref.size());
        QVERIFY2(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0, "embedding differs");
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
        QTest::addRow("all -inf") << QList<float>{-inf, -inf, -inf} << 0;
        QTest::addRow("+inf tie") << QList<float>{1.0f, inf, 0.0f, inf} << 1;
        QTest::addRow("-0 and +0") << QList<float>{-1.0f, -0.0f, 0.0f} << 1;
    }
    void argmax() {
        QFETCH(QList<float>, row);
        QFETCH(int, expected);
        auto ld = upload(std::vector<float>(row.begin(), row.end()));
        auto out = upload(std::vector<int32_t>{-1});
        gpu_->argmax(ld->as<float>(), 1, static_cast<int>(row.size()), out->as<int32_t>());
        QCOMPARE(download<int32_t>(*out, 1)[0], expected);
    }
    void argmax_batch() {
        std::mt19937_64 rng(case_seed(seed_));
        for (int vocab : {512, 49152, 128256}) {
            const int n = 37;
            std::vector<float> logits = random_floats(rng, static_cast<size_t>(n) * vocab, -10.0f, 10.0f);
            for (int r = 0; r < n; ++r) {  // a planted, duplicated maximum
                const int a = random_int(rng, 0, vocab - 1), b = random_int(rng, 0, vocab - 1);
                logits[static_cast<size_t>(r) * vocab + a] = logits[static_cast<size_t>(r) * vocab + b] = 11.0f;
            }
            std::vector<int32_t> ref(n);
            argmax_ref(logits.data(), n, vocab, ref.data());
            auto ld = upload(logits);
            auto out = upload(std::vector<int32_t>(n, -1));
            gpu_->argmax(ld->as<float>(), n, vocab, out->as<int32_t>());
            QCOMPARE(download<int32_t>(*out, n), ref);
        }
    }

    // ---- sample: rows of three shapes (peaked, ordinary, flat), a row of ties, a row mostly -inf.
    void sample_data() {
        QTest::addColumn<int>("vocab");
        QTest::addColumn<float>("temperature");
        QTest::addColumn<int>("top_k");
        QTest::addColumn<float>("top_p");
        QTest::addColumn<float>("min_p");
        for (int vocab : {1000, 32000, 128256}) {
            QTest::addRow("V=%d greedy", vocab) << vocab << 0.0f << 0 << 1.0f << 0.0f;
            QTest::addRow("V=%d greedy with filters", vocab) << vocab << 0.0f << 40 << 0.5f << 0.1f;
            QTest::addRow("V=%d top_k=1", vocab) << vocab << 0.8f << 1 << 1.0f << 0.0f;
            QTest::addRow("V=%d temperature only", vocab) << vocab << 1.0f << 0 << 1.0f << 0.0f;
            QTest::addRow("V=%d top_k=5", vocab) << vocab << 1.0f << 5 << 1.0f << 0.0f;
            QTest::addRow("V=%d top_p=0.5", vocab) << vocab << 1.0f << 0 << 0.5f << 0.0f;
            QTest::addRow("V=%d top_p=0.05", vocab) << vocab << 2.0f << 0 << 0.05f << 0.0f;
            QTest::addRow("V=%d top_k=50 top_p=0.9 T=0.7", vocab) << vocab << 0.7f << 50 << 0.9f << 0.0f;
            QTest::addRow("V=%d min_p=0.1 T=1.5", vocab) << vocab << 1.5f << 0 << 1.0f << 0.1f;
            QTest::addRow("V=%d top_k=100 top_p=0.8 min_p=0.05 T=1.2", vocab) << vocab << 1.2f << 100 << 0.8f << 0.05f;
        }
    }
    void sample() {
        QFETCH(int, vocab);
        QFETCH(float, temperature);
        QFETCH(int, top_k);
        QFETCH(float, top_p);
        QFETCH(float, min_p);
        std::mt19937_64 rng(case_seed(seed_));
        const int n = 48;
        std::vector<float> logits(static_cast<size_t>(n) * vocab);
        std::vector<SamplingRow> rows;
        for (int r = 0; r < n; ++r) {
            float* row = logits.data() + static_cast<size_t>(r) * vocab;
            const float scale = r % 3 == 0 ? 12.0f : r % 3 == 1 ? 3.0f : 0.05f;  // peaked, ordinary, flat
            const std::vector<float> x = random_floats(rng, vocab, -scale, scale);
            std::copy(x.begin(), x.end(), row);
            if (r == 4) std::fill(row, row + vocab, 0.5f);  // every logit tied: the host's sets are the lowest indices
            if (r == 5) {                                  // only a handful of finite logits
                std::fill(row, row + vocab, -std::numeric_limits<float>::infinity());
                for (int j = 0; j < 7; ++j) row[random_int(rng, 0, vocab - 1)] = static_cast<float>(j);
            }
            rows.push_back(sampling_row(temperature, top_k, top_p, min_p, 1000 + r, 7 * r));
        }
        auto ld = upload(logits);
        auto run = [&](const std::vector<SamplingRow>& r, const DeviceBuffer& l) {
            auto rd = upload(r);
            auto out = upload(std::vector<int32_t>(n, -1));
            gpu_->sample(l.as<float>(), n, vocab, rd->as<SamplingRow>(), out->as<int32_t>());
            return download<int32_t>(*out, n);
        };
        const std::vector<int32_t> ids = run(rows, *ld);
        std::vector<int32_t> greedy(n);
        argmax_ref(logits.data(), n, vocab, greedy.data());
        for (int r = 0; r < n; ++r) {
            const float* row = logits.data() + static_cast<size_t>(r) * vocab;
            QVERIFY2(ids[r] >= 0 && ids[r] < vocab, qPrintable(QString("row %1: id %2").arg(r).arg(ids[r])));
            if (temperature == 0 || top_k == 1) {
                QCOMPARE(ids[r], greedy[r]);
                continue;
            }
            const std::vector<double> allowed = filtered_probs(row, vocab, rows[r], 1e-4);
            QVERIFY2(allowed[ids[r]] > 0, qPrintable(QString("row %1: token %2 (logit %3) is outside the host's set")
                                                         .arg(r).arg(ids[r]).arg(row[ids[r]])));
        }
        // Deterministic, and a function of (seed, offset, logits) only: the same ids again, and in reverse
        // batch order.
        QCOMPARE(run(rows, *ld), ids);
        std::vector<float> reversed(logits.size());
        for (int r = 0; r < n; ++r)
            std::copy_n(logits.data() + static_cast<size_t>(r) * vocab, vocab, reversed.data() + static_cast<size_t>(n - 1 - r) * vocab);
        auto rev_d = upload(reversed);
        const std::vector<int32_t> rev = run(std::vector<SamplingRow>(rows.rbegin(), rows.rend()), *rev_d);
        for (int r = 0; r < n; ++r) QCOMPARE(rev[n - 1 - r], ids[r]);
        // Different offsets draw different tokens where there is a choice (a flat row, no tight filter).
        if (temperature > 0 && top_k != 1 && (top_k == 0 || top_k >= 50) && top_p >= 0.5f && min_p == 0) {
            std::vector<SamplingRow> same_row(n, rows[2]);
            for (int r = 0; r < n; ++r) same_row[r].offset = r;
            std::vector<float> flat(logits.size());
            for (int r = 0; r < n; ++r) std::copy_n(logits.data() + 2 * static_cast<size_t>(vocab), vocab, flat.data() + static_cast<size_t>(r) * vocab);
            auto flat_d = upload(flat);
            const std::vector<int32_t> draws = run(same_row, *flat_d);
            const std::set<int32_t> distinct(draws.begin(), draws.end());
            QVERIFY2(distinct.size() >= 10, qPrintable(QString("%1 distinct tokens in %2 draws").arg(distinct.size()).arg(n)));
        }
    }

    // ---- sample: the frequencies of 16384 draws (one per offset) from a 7-token distribution.
    void sample_distribution_data() {
        QTest::addColumn<float>("temperature");
        QTest::addColumn<int>("top_k");
        QTest::addColumn<float>("top_p");
        QTest::addColumn<float>("min_p");
        QTest::newRow("T=1") << 1.0f << 0 << 1.0f << 0.0f;
        QTest::newRow("T=0.5") << 0.5f << 0 << 1.0f << 0.0f;
        QTest::newRow("T=2") << 2.0f << 0 << 1.0f << 0.0f;
        QTest::newRow("top_k=2") << 1.0f << 2 << 1.0f << 0.0f;
        QTest::newRow("top_p=0.75") << 1.0f << 0 << 0.75f << 0.0f;
        QTest::newRow("min_p=0.3") << 1.0f << 0 << 1.0f << 0.3f;
        QTest::newRow("top_k=5 top_p=0.9 min_p=0.1 T=1.3") << 1.3f << 5 << 0.9f << 0.1f;
    }
    void sample_distribution() {
        QFETCH(float, temperature);
        QFETCH(int, top_k);
        QFETCH(float, top_p);
        QFETCH(float, min_p);
        const std::vector<double> p0 = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02};
        const int vocab = static_cast<int>(p0.size()), n = 16384;
        std::vector<float> row(vocab);
        for (int t = 0; t < vocab; ++t) row[(t * 3) % vocab] = static_cast<float>(std::log(p0[t]));  // shuffled
        std::vector<float> logits;
        for (int r = 0; r < n; ++r) logits.insert(logits.end(), row.begin(), row.end());
        std::vector<SamplingRow> rows;
        for (int r = 0; r < n; ++r) rows.push_back(sampling_row(temperature, top_k, top_p, min_p, 42, r));
        auto ld = upload(logits);
        auto rd = upload(rows);
        auto out = upload(std::vector<int32_t>(n, -1));
        gpu_->sample(ld->as<float>(), n, vocab, rd->as<SamplingRow>(), out->as<int32_t>());
        std::vector<int> counts(vocab, 0);
        for (int32_t id : download<int32_t>(*out, n)) {
            QVERIFY(id >= 0 && id < vocab);
            ++counts[id];
        }
        const std::vector<double> want = filtered_probs(row.data(), vocab, rows[0]);
        for (int t = 0; t < vocab; ++t) {
            const double f = static_cast<double>(counts[t]) / n, sigma = std::sqrt(want[t] * (1 - want[t]) / n);
            qInfo("token %d: %.4f (expected %.4f)", t, f, want[t]);
            if (want[t] == 0) QCOMPARE(counts[t], 0);
            else QVERIFY2(std::fabs(f - want[t]) <= 5 * sigma + 1e-3,
                          qPrintable(QString("token %1: frequency %2, expected %3").arg(t).arg(f).arg(want[t])));
        }
    }

    // ---- gather_rows: exact.
    void gather_rows() {
        std::mt19937_64 rng(case_seed(seed_));
        for (auto [n, dim] : {std::pair{1, 1}, std::pair{5, 576}, std::pair{64, 49}, std::pair{256, 2048}}) {
            const int total = 300;
            const std::vector<float> x = random_floats(rng, static_cast<size_t>(total) * dim);
            std::vector<int32_t> rows(n);
            for (int i = 0; i < n; ++i) rows[i] = i == 0 ? total - 1 : random_int(rng, 0, total - 1);
            std::vector<float> ref(static_cast<size_t>(n) * dim);
            gather_rows_ref(x.data(), rows.data(), n, dim, ref.data());
            auto xd = upload(x);
            auto rd = upload(rows);
            auto out = poisoned(ref.size());
            gpu_->gather_rows(xd->as<float>(), rd->as<int32_t>(), n, dim, out->as<float>());
            const std::vector<float> got = download<float>(*out, ref.size());
            QVERIFY(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0);
        }
    }

    // ---- The memory account follows what the backend holds.
    void memory_account() {
        const auto before = gpu_->memory_account();
        QVERIFY(before.total > 0 && before.used > 0 && before.used <= before.total);
        {
            DeviceBuffer big(*gpu_, 64u << 20);
            const auto during = gpu_->memory_account();
            QCOMPARE(during.buffers - before.buffers, int64_t(64) << 20);
            QVERIFY(during.used >= before.used + (int64_t(60) << 20));
        }
        QCOMPARE(gpu_->memory_account().buffers, before.buffers);
        QVERIFY(gpu_->kv_cache_budget(0.9) >= 0);
    }
#endif
};

#if KVSCOPE_HAVE_CUDA
void TestCudaBackendOps::run_paged_attention(int D, int gqa, int B, const std::vector<std::pair<int, int>>& seqs,
                                             std::mt19937_64& rng) {
    const int Hkv = 2, H = Hkv * gqa;
    const int num_blocks = std::min(4096, 65536 / B);
    const KvCacheLayout layout{/*num_layers=*/2, num_blocks, B, Hkv, D, DType::F32};
    const int layer = 1;
    const int num_seqs = static_cast<int>(seqs.size());

    // Block tables: a shuffled permutation of every block; perm[0] is never written (NaN) and pads
    // every table, so a kernel that reads past a sequence's blocks produces NaN.
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

    // Host cache: NaN, plus the cached tokens (scattered by the reference helper). The expected cache
    // after write_kv adds the new tokens, scattered the same way.
    std::vector<float> cache(layout.total_elems(), kNaN);
    std::vector<float> k_new(static_cast<size_t>(num_tokens) * Hkv * D), v_new(k_new.size());
    std::vector<int64_t> slot_mapping;
    for (int s = 0; s < num_seqs; ++s) {
        const auto [cached, chunk] = seqs[s];
        const int32_t* table = block_tables.data() + static_cast<size_t>(s) * max_blocks_per_seq;
        scatter_kv_ref(k_dense[s].data(), v_dense[s].data(), 0, cached, table, layout, cache.data(), layer);
        for (int i = 0; i < chunk; ++i) {
            const int pos = cached + i, t = query_start_loc[s] + i;
            std::memcpy(k_new.data() + static_cast<size_t>(t) * Hkv * D,
                        k_dense[s].data() + static_cast<size_t>(pos) * Hkv * D, Hkv * D * sizeof(float));
            std::memcpy(v_new.data() + static_cast<size_t>(t) * Hkv * D,
                        v_dense[s].data() + static_cast<size_t>(pos) * Hkv * D, Hkv * D * sizeof(float));
            slot_mapping.push_back(static_cast<int64_t>(table[pos / B]) * B + pos % B);
        }
    }
    auto cache_d = upload(cache);
    std::vector<float> expected_cache = cache;
    for (int s = 0; s < num_seqs; ++s)
        scatter_kv_ref(k_dense[s].data(), v_dense[s].data(), seqs[s].first, seqs[s].second,
                       block_tables.data() + static_cast<size_t>(s) * max_blocks_per_seq, layout,
                       expected_cache.data(), layer);

    auto k_d = upload(k_new), v_d = upload(v_new);
    auto slots_d = upload(slot_mapping);
    gpu_->write_kv(k_d->as<float>(), v_d->as<float>(), slots_d->as<int64_t>(), num_tokens, layout, cache_d->p, layer);
    {
        const std::vector<float> got = download<float>(*cache_d, cache.size());
        size_t first_bad = got.size();
        for (size_t i = 0; i < got.size() && first_bad == got.size(); ++i)
            if (std::memcmp(&got[i], &expected_cache[i], sizeof(float)) != 0) first_bad = i;
        QVERIFY2(first_bad == got.size(),
                 qPrintable(QString("write_kv: cache element %1 differs (got %2, want %3)")
                                .arg(first_bad).arg(got[std::min(first_bad, got.size() - 1)])
                                .arg(expected_cache[std::min(first_bad, got.size() - 1)])));
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    std::vector<float> ref(static_cast<size_t>(num_tokens) * H * D);
    for (int s = 0; s < num_seqs; ++s) {
        const size_t q0 = static_cast<size_t>(query_start_loc[s]) * H * D;
        attention_ref(q.data() + q0, seqs[s].second, k_dense[s].data(), v_dense[s].data(), seq_lens[s], H, Hkv, D,
                      scale, ref.data() + q0);
    }

    auto q_d = upload(q);
    auto qsl_d = upload(query_start_loc);
    auto lens_d = upload(seq_lens);
    auto tables_d = upload(block_tables);
    AttentionMetadata meta;
    meta.num_tokens = num_tokens;
    meta.num_seqs = num_seqs;
    meta.query_start_loc = qsl_d->as<int32_t>();
    meta.seq_lens = lens_d->as<int32_t>();
    meta.block_tables = tables_d->as<int32_t>();
    meta.max_blocks_per_seq = max_blocks_per_seq;
    meta.slot_mapping = slots_d->as<int64_t>();
    meta.max_seq_len = max_seq_len;
    // The split heuristic, one split (no merge), and forced splits (every shape through the merge).
    for (int splits : {0, 1, 3, 16}) {
        gpu_->force_attention_splits(splits);
        auto out = poisoned(ref.size());
        gpu_->paged_attention(q_d->as<float>(), meta, layout, cache_d->p, layer, H, scale, out->as<float>());
        const std::vector<float> got = download<float>(*out, ref.size());
        const Diff d = diff(got.data(), ref.data(), static_cast<int64_t>(got.size()));
        // F32 throughout (expf, FMA, a different summation order than the double reference): |out| <= 1,
        // errors ~1e-6; 1e-4 abs leaves two orders of magnitude.
        QVERIFY2(d.within(1e-4, 1e-8), "splits=" + QByteArray::number(splits) + " " +
                                            describe(d, got.data(), ref.data()));
    }
    gpu_->force_attention_splits(0);
}
#endif

QTEST_GUILESS_MAIN(TestCudaBackendOps)
#include "test_cuda_backend_ops.moc"
