// Every Backend op against the slow references of cpu/reference.h, on every backend this build and machine
// have, in the manner of llama.cpp's test-backend-ops: each op's cases are written once, as table-driven
// rows with fresh seeded inputs per case, and run on each backend as a global data row: every CPU kernel
// set of the build that this CPU runs (cpu/cpu_kernel_sets.h: "matmul(avx2:F16 n=1 ...)" checks the avx2
// set), and "cuda" in builds with the CUDA library (skipped, saying why, where it cannot run). Inputs and
// outputs move through the Backend API (allocate, copy_to_device, copy_to_host), so one case body drives
// host and device memory alike; outputs are poisoned with NaN before each run (an output the kernel forgets
// to write fails), and errors are measured as normalized MSE and max abs error.
// A CPU row runs each case at 1, 2 and 3 threads: results must not depend on the thread count (every
// output element is computed by one thread in one order), so runs replay exactly, and a row's result must
// not depend on what else is in the batch. What only the CUDA device has (forced context splits, graphs,
// the memory account, the sampler's frequencies) is in tests/gpu/test_cuda_backend_ops.cpp.
#include "op_checks.h"
#include "paged_attention_case.h"
#include "sampling_reference.h"
#include "test_support.h"

#include "backend_factory.h"
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
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace kvscope;
using namespace kvscope::cpu;
using namespace kvscope::test;

namespace {

constexpr int kThreadCounts[] = {1, 2, 3};

// The backends of one global row: a CPU kernel set at each of kThreadCounts, or the CUDA backend. They
// share one memory (the host's, or the one device's), so a buffer allocated by the first serves them all.
struct Subject {
    bool cpu = false;
    std::vector<std::unique_ptr<Backend>> backends;
    std::string unavailable;  // why there are none
    // The attention cases' KV cache, grown on demand: one buffer for every case (allocating and faulting
    // in up to 256 MiB per case would dominate the test's time).
    std::unique_ptr<DeviceVector<float>> kv_cache;

    Backend& first() { return *backends.front(); }
    // Which run of a case: "threads=2" or "cuda".
    QByteArray who(const Backend& b) const {
        return cpu ? "threads=" + QByteArray::number(b.num_threads()) : QByteArray::fromStdString(b.name());
    }
};

}  // namespace

class TestBackendOps : public QObject {
    Q_OBJECT

    uint64_t seed_ = 0;
    int num_rows_ = 0;  // the global rows initTestCase_data kept
    std::map<std::string, Subject> subjects_;  // by global row, made on first use
    std::vector<float> host_cache_;            // the host side of Subject::kv_cache

    // The global row of the running case: a CPU kernel set's name, or "cuda".
    std::string row() const {
        QFETCH_GLOBAL(QString, backend);
        return backend.toStdString();
    }
    Subject& subject() {
        const std::string name = row();
        Subject& s = subjects_[name];
        if (!s.backends.empty() || !s.unavailable.empty()) return s;
        if (name == "cuda") {
            try {
                std::string note;
                s.backends.push_back(make_backend("cuda", 0, &note));
                qInfo("%s", note.c_str());
            } catch (const std::exception& e) {
                s.unavailable = std::string(e.what()) + " (the cuda rows need an NVIDIA GPU)";
            }
            return s;
        }
        s.cpu = true;
        for (int threads : kThreadCounts) {
            s.backends.push_back(make_cpu_backend(threads, name));
            if (s.backends.back()->num_threads() != threads || s.backends.back()->kernel_set() != name)
                qFatal("backend of kernel set %s at %d threads: got %s at %d", name.c_str(), threads,
                       s.backends.back()->kernel_set().c_str(), s.backends.back()->num_threads());
        }
        return s;
    }
    // The runs of a case: every thread count, or only the most threads for the rows whose reference alone
    // takes most of a second (the thread counts are covered by the smaller rows of the same op).
    std::vector<Backend*> runs(Subject& s, bool every_thread_count = true) {
        std::vector<Backend*> r;
        for (auto& b : s.backends) r.push_back(b.get());
        if (!every_thread_count) r.erase(r.begin(), r.end() - 1);
        return r;
    }

    // The int8 matmul cases' steps: an [N, K] weight of random bytes whose F16 scales (d, and dmin where there
    // is one) are set to plausible sizes, n random x rows through the most-threads backend, compared with
    // the reference within 1e-5 of its largest output; then with F32 activations, where each product's x is
    // off by at most d_x / 2 = max|x| / 254 (|x| <= 1), whether d_x covers 32 or 256 values.
    void check_int8_matmul(DType dt, int n, int K, int N, bool panels) {
        Subject& s = subject();
        if (!s.first().supports(dt)) QSKIP(qPrintable(QString("no %1 weights here").arg(dtype_name(dt).data())));
        std::mt19937_64 rng(case_seed(seed_));
        const size_t row_bytes = dtype_row_bytes(dt, K), block_bytes = static_cast<size_t>(dtype_block_bytes(dt));
        std::vector<uint8_t> bytes(row_bytes * N);
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
        const bool two_f16 = dt == DType::Q4_K || dt == DType::Q5_K || dt == DType::Q4_1 || dt == DType::Q5_1;  // d, dmin / m
        const std::vector<size_t> f16_at = dt == DType::Q6_K || dt == DType::Q3_K ? std::vector<size_t>{block_bytes - 2}  // d last
                                           : dt == DType::Q2_K ? std::vector<size_t>{block_bytes - 4, block_bytes - 2}  // d, dmin last
                                           : two_f16         ? std::vector<size_t>{0, 2}
                                                             : std::vector<size_t>{0};  // d first
        const int exponent = dtype_block_elems(dt) == 256 ? -12 : -9;
        for (size_t off = 0; off < bytes.size(); off += block_bytes)
            for (size_t at : f16_at) {
                const uint16_t h = f32_to_f16(std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000, exponent));
                std::memcpy(bytes.data() + off + at, &h, 2);
            }
        if (dt == DType::Q8_0) bytes[3 * block_bytes + 2] = 0x80;  // a -128 (BlockQ8_0::qs[0] of block 3 of row 0)
        const WeightView stored{bytes.data(), dt, N, K};
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * K);
        std::vector<float> ref(static_cast<size_t>(n) * N);
        matmul_ref(x.data(), n, stored, nullptr, ref.data(), /*q8_1_sums=*/s.cpu);
        Backend& b = *s.backends.back();
        // panels: repacked as the engine loads it, by a CPU backend of its own (as matmul does).
        std::unique_ptr<Backend> packer = panels && s.cpu ? make_cpu_backend(2, row()) : nullptr;
        WeightView w = (packer ? *packer : b).upload_weight(stored);
        if (panels) {
            w = (packer ? *packer : b).repack_matmul_weight(w);
            if (w.layout == WeightLayout::row_major) QSKIP("this backend runs matmul on row-major weights: the row without 'panels'");
        }
        const DeviceVector<float> x_d(s.first(), x), out_d(s.first(), std::vector<float>(ref.size(), kNaN));
        b.matmul(x_d.data(), n, w, nullptr, out_d.data());
        const std::vector<float> out = out_d.download();
        double ref_max = 0;
        for (float r : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(r)));
        const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
        QVERIFY2(d.within(1e-5 * ref_max, 1e-11), describe(d, out, ref, s.who(b)));
        std::vector<float> w_f32(static_cast<size_t>(N) * K);
        for (int r = 0; r < N; ++r) dequantize_row(dt, bytes.data() + r * row_bytes, w_f32.data() + static_cast<size_t>(r) * K, K);
        for (int t = 0; t < n; ++t)
            for (int r = 0; r < N; ++r) {
                double sum = 0, bound = 0;
                for (int k = 0; k < K; ++k) {
                    sum += static_cast<double>(x[t * K + k]) * w_f32[static_cast<size_t>(r) * K + k];
                    bound += std::fabs(w_f32[static_cast<size_t>(r) * K + k]) / 254.0;  // |x| <= 1
                }
                QVERIFY2(std::fabs(out[t * N + r] - sum) <= bound * 1.01 + 1e-6,
                         qPrintable(QString("row %1 col %2: %3 vs %4, bound %5").arg(t).arg(r).arg(out[t * N + r]).arg(sum).arg(bound)));
            }
    }

private slots:
    // KVSCOPE_TEST_BACKENDS=cuda,avx2 (a comma list) keeps only those rows: the device checks run the cuda
    // row alone under compute-sanitizer, where every CPU row would only cost time, and the packaging label
    // runs one CPU set per CTest entry, so that they run side by side.
    void initTestCase_data() {
        QTest::addColumn<QString>("backend");
        const QStringList only = qEnvironmentVariable("KVSCOPE_TEST_BACKENDS").split(',', Qt::SkipEmptyParts);
        auto add = [&](const QString& name) {
            if (only.isEmpty() || only.contains(name)) {
                QTest::newRow(qPrintable(name)) << name;
                ++num_rows_;
            }
        };
        for (const CpuKernelSet& set : cpu_kernel_sets()) {
            if (cpu_runs(set))
                add(QString::fromUtf8(set.name.data(), set.name.size()));
            else
                qInfo("CPU kernel set %.*s not checked: this CPU cannot run it", int(set.name.size()), set.name.data());
        }
        if (cuda_backend_built()) add(QStringLiteral("cuda"));
    }
    void initTestCase() {
        // With no row, QTest would run every case once on no backend.
        if (num_rows_ == 0) QSKIP("none of the backends KVSCOPE_TEST_BACKENDS names can run here");
        seed_ = test::test_seed(20250601);
    }
    void init() {
        const Subject& s = subject();
        if (!s.unavailable.empty()) QSKIP(s.unavailable.c_str());
    }

    // ---- Weights a backend cannot hold are refused at upload, naming the type; F32, F16, BF16 everywhere.
    void unsupported_weights_rejected() {
        Backend& b = subject().first();
        for (DType dt : {DType::F32, DType::F16, DType::BF16}) QVERIFY2(b.supports(dt), dtype_name(dt).data());
        for (DType dt : kDTypes) {
            if (b.supports(dt)) continue;
            std::vector<uint8_t> bytes(dtype_row_bytes(dt, 256) * 4);
            bool threw = false;
            try {
                b.upload_weight(WeightView{bytes.data(), dt, 4, 256});
            } catch (const std::invalid_argument& e) {
                threw = QByteArray(e.what()).contains(dtype_name(dt).data());
            }
            QVERIFY2(threw, "upload_weight must reject unsupported weights naming the type");
        }
    }

    // ---- matmul: every dtype, decode-sized and prefill-sized row counts, odd shapes, with/without bias,
    // row-major and as the backend repacks it for matmul ("panels": what the engine runs on; F32 / F16 / BF16
    // panels, every block type's rows interleaved by 8 on AVX2 sets, N = 40 an odd number of such groups).
    void matmul_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("K");
        QTest::addColumn<int>("N");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("panels");
        const int shapes[][2] = {{64, 172}, {172, 64}, {75, 40}, {256, 96}, {256, 40}, {576, 1536}, {1024, 33}, {2048, 64}, {2048, 8192}};
        for (DType dt : kDTypes)
            for (bool panels : {false, true}) {  // every type repacks (where the set does not, the row skips)
                // 130: x chunks of 64, 64, 2 (row-major tiles); 6 x-row tiles with every tail (CPU panels);
                // 16 and 257: GEMMs on the GPU
                for (int n : {1, 2, 3, 4, 5, 12, 13, 16, 31, 64, 130, 257})
                    for (auto [K, N] : shapes) {
                        if (K % dtype_block_elems(dt) != 0) continue;  // rows hold whole blocks only
                        // The double reference's time (and the CPU's): a big weight only as a GPU runs
                        // it (row-major, n = 16, no bias), 257 rows on the small weights only.
                        const bool big = K * N > (1 << 22);
                        if (big && (n != 16 || panels || dtype_is_quantized(dt))) continue;
                        if (!big && (n == 16 || (n == 257 && K * N > (1 << 17)))) continue;
                        for (bool bias : {false, true}) {
                            if (big && bias) continue;
                            QTest::addRow("%s%s n=%d K=%d N=%d%s", dtype_name(dt).data(), panels ? " panels" : "", n, K,
                                          N, bias ? " bias" : "")
                                << static_cast<int>(dt) << n << K << N << bias << panels;
                        }
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
        Subject& s = subject();
        const DType dt = static_cast<DType>(dtype);
        if (!s.first().supports(dt)) QSKIP(qPrintable(QString("no %1 weights here").arg(dtype_name(dt).data())));
        std::mt19937_64 rng(case_seed(seed_));
        const StoredWeights stored = store(random_floats(rng, static_cast<size_t>(N) * K), dt, N, K);
        // The weight as the engine loads it: uploaded, then (panels) repacked. A CPU backend of its own owns
        // the panels until the case ends; a device's copies live as long as its backend.
        std::unique_ptr<Backend> loader_cpu = s.cpu ? make_cpu_backend(2, row()) : nullptr;
        Backend& loader = loader_cpu ? *loader_cpu : s.first();
        WeightView w = loader.upload_weight(stored.view);
        if (panels) {
            w = loader.repack_matmul_weight(w);
            if (w.layout == WeightLayout::row_major) QSKIP("this backend runs matmul on row-major weights: the row without 'panels'");
        }
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * K);
        const std::vector<float> b = bias ? random_floats(rng, N) : std::vector<float>();

        std::vector<float> ref(static_cast<size_t>(n) * N);
        matmul_ref(x.data(), n, stored.view, bias ? b.data() : nullptr, ref.data(), /*q8_1_sums=*/s.cpu);
        double ref_max = 1.0;
        for (float r : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(r)));
        // CPU: F32 accumulation over K terms of size <= 1 against a double reference: the error grows like
        // sqrt(K) * 2^-24 * |terms|; 1e-5 relative to the largest output leaves a wide margin. CUDA (cuBLAS,
        // TF32 off): F32 the same with 2x for its summation order; F16 / BF16 round x to the weight type
        // (unit roundoff u = 2^-11 / 2^-8) before the GEMM: nmse ~ u^2 / 3 and the worst element
        // ~ u * ref_max; the bounds leave 10x or more. Block-quantized weights on CUDA: decoded to the CPU's
        // floats (and activations quantized as the CPU does for the int8 types), F32 sums: as F32.
        double tol_abs = 1e-5 * ref_max, tol_nmse = 1e-11;
        if (!s.cpu) {
            tol_abs = 2e-5 * ref_max, tol_nmse = 1e-10;
            if (dt == DType::F16) tol_abs = 2e-3 * ref_max, tol_nmse = 1e-6;
            if (dt == DType::BF16) tol_abs = 1e-2 * ref_max, tol_nmse = 1e-4;
        }

        const DeviceVector<float> x_d(s.first(), x), b_d(s.first(), b);
        const float* bias_d = bias ? b_d.data() : nullptr;
        std::vector<float> first;
        for (Backend* be : runs(s, int64_t{n} * K * N <= (int64_t{1} << 24))) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(ref.size(), kNaN));
            be->matmul(x_d.data(), n, w, bias_d, out_d.data());
            const std::vector<float> out = out_d.download();
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(tol_abs, tol_nmse), describe(d, out, ref, s.who(*be)));
            if (first.empty())
                first = out;
            else
                QVERIFY2(bitwise_equal(out, first), "result depends on the thread count");
        }
        // Batch invariance: a row's result is bit for bit the same whether it runs alone or among n rows (the
        // engine's outputs must not depend on what else is in the batch). CPU: every type. CUDA: the
        // block-quantized types, whose one kernel serves every n; cuBLAS picks its F32/F16/BF16 GEMM by n.
        if (!s.cpu && !dtype_is_quantized(dt)) return;
        Backend& alone = s.cpu ? *s.backends[1] : s.first();
        const DeviceVector<float> alone_d(s.first(), N);
        for (int t = 0; t < n; ++t) {
            alone.matmul(x_d.data() + static_cast<size_t>(t) * K, 1, w, bias_d, alone_d.data());
            QVERIFY2(std::memcmp(alone_d.download().data(), first.data() + static_cast<size_t>(t) * N, N * sizeof(float)) == 0,
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
        Subject& s = subject();
        if (!s.cpu) QSKIP("the CPU kernel sets' F16 widening (host pointers)");
        QFETCH(bool, panels);
        QFETCH(int, n);
        const int K = 64, N = 65536 / K;  // w[r][k] = F16 bits r * K + k
        std::vector<uint16_t> bits(static_cast<size_t>(N) * K);
        for (size_t i = 0; i < bits.size(); ++i)  // Inf and NaN (exponent all ones) become 0
            bits[i] = static_cast<uint16_t>((i & 0x7c00) == 0x7c00 ? 0 : i);
        WeightView w{bits.data(), DType::F16, N, K};
        std::unique_ptr<Backend> packer;
        if (panels) {
            packer = make_cpu_backend(2, row());
            w = packer->repack_matmul_weight(w);
            QCOMPARE(w.layout, WeightLayout::panels16);
        }
        // x rows: one-hot at k = k0 + t (n = 1: every k0 in turn; n = 64: all at once).
        for (int k0 = 0; k0 + n <= K; k0 += n) {
            std::vector<float> x(static_cast<size_t>(n) * K, 0.0f), out(static_cast<size_t>(n) * N, kNaN);
            for (int t = 0; t < n; ++t) x[static_cast<size_t>(t) * K + k0 + t] = 1.0f;
            s.first().matmul(x.data(), n, w, nullptr, out.data());
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

    // ---- The int8 matmul paths against the reference, on weights of random bytes (every stored value, and
    // what quantize_row never writes: Q8_0's -128, every 6-bit scale and min, Q6_K's int8 scales -128..127)
    // with F16 scales of a plausible size; and the activation quantization's own error against F32
    // activations.
    // Blocks of 32 (Q8_0, and the types that unpack to it): an odd block count (the AVX-512 kernel's unpaired
    // last block), N = 37 (single-row decode's tiles of 8 and a short last one); one x row (blocks read in
    // place) and several (rows unpacked once per tile). Q4_K / Q5_K / Q6_K (the int8 dots straight from their
    // blocks): one x row (weights decoded in registers) and several (decoded once per tile), N = 11 (a decode
    // tiling's short last tile). The types a CPU set interleaves by 8 rows (panels): N = 32 and 48 (decode's
    // tiles of four groups and of two) for one x row, N = 40 (an odd number of groups) for several.
    void matmul_int8_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("K");
        QTest::addColumn<int>("N");
        QTest::addColumn<bool>("panels");
        auto add = [](DType dt, int n, int K, int N, bool panels = false) {
            QTest::addRow("%s%s n=%d N=%d", dtype_name(dt).data(), panels ? " panels" : "", n, N) << static_cast<int>(dt) << n << K << N
                                                                                                   << panels;
        };
        for (DType dt : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL, DType::Q4_1, DType::Q5_1})
            for (int n : {1, 7}) add(dt, n, 32 * 19, 37);
        for (DType dt : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::Q2_K, DType::IQ4_XS})
            for (int n : {1, 6}) add(dt, n, 256 * 3, 11);
        for (DType dt : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::IQ4_NL, DType::Q4_K, DType::Q5_K,
                          DType::Q6_K, DType::Q3_K, DType::Q2_K, DType::IQ4_XS}) {
            const int K = dtype_block_elems(dt) == 256 ? 256 * 3 : 32 * 19;
            for (int N : {32, 48}) add(dt, 1, K, N, true);
            add(dt, 6, K, 40, true);
        }
    }
    void matmul_int8() {
        QFETCH(int, dtype);
        QFETCH(int, n);
        QFETCH(int, K);
        QFETCH(int, N);
        QFETCH(bool, panels);
        check_int8_matmul(static_cast<DType>(dtype), n, K, N, panels);
    }

    // ---- paged attention + write_kv: random block tables over thousands of blocks, GQA, decode, chunked
    // prefill and long contexts, F32 and half-precision caches.
    void paged_attention_data() {
        QTest::addColumn<int>("head_dim");
        QTest::addColumn<int>("gqa");
        QTest::addColumn<int>("block_size");
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("kv_dtype");
        QTest::addColumn<int>("window");
        QTest::addColumn<float>("softcap");
        QTest::addColumn<int>("kv_heads");
        auto add = [](DType dt, int D, int gqa, int B, AttentionKind kind, const char* note = "", int window = 0,
                      float softcap = 0.0f, int kv_heads = 2) {
            const char* k = kind == AttentionKind::decode          ? "decode"
                            : kind == AttentionKind::prefill       ? "prefill"
                            : kind == AttentionKind::single_stream ? "single-stream"
                                                                   : "long";
            const QByteArray extra = (window ? " window=" + QByteArray::number(window) : QByteArray()) +
                                     (softcap > 0 ? " softcap=" + QByteArray::number(softcap) : QByteArray()) +
                                     (kv_heads != 2 ? " kv_heads=" + QByteArray::number(kv_heads) : QByteArray());
            QTest::addRow("%s%sD=%d gqa=%d B=%d %s%s%s", dt == DType::F32 ? "" : dtype_name(dt).data(),
                          dt == DType::F32 ? "" : " ", D, gqa, B, k, extra.constData(), note)
                << D << gqa << B << static_cast<int>(kind) << static_cast<int>(dt) << window << softcap << kv_heads;
        };
        for (int D : {8, 32, 64, 128})
            for (int gqa : {1, 3, 4, 7})  // 3 and 7: V passes in uneven chunks of heads (CPU)
                for (int B : {1, 2, 16, 64, 256})
                    for (AttentionKind kind : {AttentionKind::decode, AttentionKind::prefill}) add(DType::F32, D, gqa, B, kind);
        // Block sizes of the GPU's tiles, a group of 8, and one query row per token (a group of 16).
        for (int D : {8, 64, 128})
            for (int B : {8, 32})
                for (AttentionKind kind : {AttentionKind::decode, AttentionKind::prefill}) add(DType::F32, D, 8, B, kind);
        add(DType::F32, 64, 16, 16, AttentionKind::prefill, " (one row per token)");
        // Long contexts: the GPU's context splits and their merge, by its heuristic (two rows: their
        // reference is slow; test_cuda_backend_ops forces splits on every shape).
        add(DType::F32, 32, 8, 16, AttentionKind::long_context);
        add(DType::F32, 128, 1, 16, AttentionKind::long_context);
        // Half-precision caches: the same kernels with a different element loader.
        for (DType dt : {DType::F16, DType::BF16})
            for (int D : {8, 32, 64, 80, 96, 128})  // every vector instance, and the generic path
                for (int gqa : {1, 3})
                    for (int B : {1, 16})
                        for (AttentionKind kind : {AttentionKind::decode, AttentionKind::prefill}) add(dt, D, gqa, B, kind);
        // Sliding windows (Gemma's local layers, Mistral) and soft-capped scores (Gemma 2). Windows of one
        // token (only itself), 37 (shorter than most contexts, not a block multiple), B (exactly the context
        // of the decode sequence with B - 1 cached tokens, and of the {B - 1, chunk} prefill's first
        // query), 300 (shorter than some contexts, longer than others) and 1 << 20 (longer than every one).
        // Tokens no window reaches are NaN in the cache, so reading them fails. D = 256 is Gemma's head size.
        for (int D : {64, 256})
            for (int B : {1, 16})
                for (AttentionKind kind : {AttentionKind::decode, AttentionKind::prefill})
                    for (int window : {1, 37, B, 300, 1 << 20})
                        for (float softcap : {0.0f, 2.0f}) add(DType::F32, D, 2, B, kind, "", window, softcap);
        for (DType dt : {DType::F16, DType::BF16})
            for (int D : {8, 128, 256})
                add(dt, D, 3, 16, AttentionKind::prefill, "", 37, 2.0f);
        add(DType::F32, 128, 1, 16, AttentionKind::long_context, "", 3000, 30.0f);
        add(DType::F32, 32, 8, 16, AttentionKind::long_context, "", 700);
        // Single-stream decode with 1 or 3 kv heads (Gemma 3 1B, SmolLM2-135M): fewer kv heads than threads,
        // or a count the threads do not divide.
        for (int kv_heads : {1, 3})
            for (int gqa : {3, 4})
                for (DType dt : {DType::F32, DType::F16})
                    add(dt, 64, gqa, 16, AttentionKind::single_stream, "", 0, 0.0f, kv_heads);
        add(DType::F32, 256, 4, 16, AttentionKind::single_stream, "", 512, 0.0f, 1);  // Gemma 3 1B's local layers
    }
    void paged_attention() {
        QFETCH(int, head_dim);
        QFETCH(int, gqa);
        QFETCH(int, block_size);
        QFETCH(int, kind);
        QFETCH(int, kv_dtype);
        QFETCH(int, window);
        QFETCH(float, softcap);
        QFETCH(int, kv_heads);
        Subject& s = subject();
        const DType kv = static_cast<DType>(kv_dtype);
        if (!s.first().supports_kv_dtype(kv)) QSKIP(qPrintable(QString("no %1 KV cache here").arg(dtype_name(kv).data())));
        std::mt19937_64 rng(case_seed(seed_));
        const PagedAttentionCase c = make_paged_attention_case(head_dim, gqa, block_size, kv, static_cast<AttentionKind>(kind),
                                                               rng, window, softcap, kv_heads);
        const KvCacheLayout& layout = c.layout;
        const int Hkv = layout.num_kv_heads, D = head_dim, B = block_size;

        // The cache: NaN everywhere, cached tokens scattered by the reference helper, then on the backend,
        // where write_kv adds the new tokens through slot_mapping.
        const size_t cache_floats = (layout.total_bytes() + sizeof(float) - 1) / sizeof(float);
        if (host_cache_.size() < cache_floats) host_cache_.resize(cache_floats);
        if (!s.kv_cache || s.kv_cache->size() < cache_floats) {
            s.kv_cache.reset();
            s.kv_cache = std::make_unique<DeviceVector<float>>(s.first(), cache_floats);
        }
        float* cache_d = s.kv_cache->data();
        KvCacheView cache(host_cache_.data(), layout);
        cache.fill_nan();
        c.scatter_cached(cache.data());
        s.first().copy_to_device(cache_d, cache.data(), layout.total_bytes());
        const DeviceVector<float> k_d(s.first(), c.k_new), v_d(s.first(), c.v_new);
        const DeviceVector<int64_t> slots_d(s.first(), c.slot_mapping);
        s.backends.back()->write_kv(k_d.data(), v_d.data(), slots_d.data(), c.num_tokens(), layout, cache_d, c.layer);

        // write_kv: each new token's slot holds exactly its values (rounded to the cache's type), and nothing
        // else was written (the cache holds exactly as many non-NaN values as tokens were placed).
        s.first().copy_to_host(cache.data(), cache_d, layout.total_bytes());
        for (int t = 0; t < c.num_tokens(); ++t) {
            const int block = static_cast<int>(c.slot_mapping[t] / B), off = static_cast<int>(c.slot_mapping[t] % B);
            for (int h = 0; h < Hkv; ++h)
                for (int d = 0; d < D; ++d) {
                    const size_t src = (static_cast<size_t>(t) * Hkv + h) * D + d;
                    QVERIFY2(cache.stored_equals(layout.offset(c.layer, 0, block, h, off) + d, c.k_new[src]),
                             qPrintable(QString("write_kv: K of token %1 head %2 dim %3 wrong").arg(t).arg(h).arg(d)));
                    QVERIFY2(cache.stored_equals(layout.offset(c.layer, 1, block, h, off) + d, c.v_new[src]),
                             qPrintable(QString("write_kv: V of token %1 head %2 dim %3 wrong").arg(t).arg(h).arg(d)));
                }
        }
        QCOMPARE(cache.count_written(), c.placed_tokens() * Hkv * D * 2);

        const std::vector<float> ref = c.reference();
        const DeviceVector<float> q_d(s.first(), c.q);
        const DeviceVector<int32_t> qsl_d(s.first(), c.query_start_loc), lens_d(s.first(), c.seq_lens),
            tables_d(s.first(), c.block_tables);
        const AttentionMetadata meta = c.metadata(qsl_d.data(), lens_d.data(), tables_d.data(), slots_d.data());
        // CPU: 1e-5 (F32 with a different summation order than the double reference, |out| <= 1). CUDA: F32
        // throughout with expf and FMA, errors ~1e-6; 1e-4 abs leaves two orders of magnitude.
        const double tol_abs = s.cpu ? 1e-5 : 1e-4, tol_nmse = s.cpu ? 1e-10 : 1e-8;
        std::vector<float> first;
        for (Backend* be : runs(s, static_cast<AttentionKind>(kind) != AttentionKind::long_context)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(ref.size(), kNaN));
            be->paged_attention(q_d.data(), meta, layout, cache_d, c.layer, c.num_heads, c.params, out_d.data());
            const std::vector<float> out = out_d.download();
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(tol_abs, tol_nmse), describe(d, out, ref, s.who(*be)));
            if (first.empty())
                first = out;
            else
                QVERIFY2(bitwise_equal(out, first), "result depends on the thread count");
        }
    }

    // A padding token (slot -1) owns no slot: write_kv skips it and writes the others.
    void write_kv_skips_padding() {
        Subject& s = subject();
        const KvCacheLayout layout{1, 8, 4, 2, 8, DType::F32};
        std::mt19937_64 rng(case_seed(seed_));
        const std::vector<float> k = random_floats(rng, 3 * 2 * 8), v = random_floats(rng, 3 * 2 * 8);
        const DeviceVector<float> k_d(s.first(), k), v_d(s.first(), v);
        const DeviceVector<int64_t> slots_d(s.first(), std::vector<int64_t>{13, -1, 6});
        const DeviceVector<float> cache_d(s.first(), std::vector<float>(layout.total_elems(), kNaN));
        s.first().write_kv(k_d.data(), v_d.data(), slots_d.data(), 3, layout, cache_d.data(), 0);
        const std::vector<float> cache = cache_d.download();
        const auto written = std::count_if(cache.begin(), cache.end(), [](float x) { return !std::isnan(x); });
        QCOMPARE(static_cast<int64_t>(written), int64_t(2 * 2 * 8 * 2));
        QCOMPARE(cache[layout.offset(0, 1, 3, 1, 1) + 7], v[(2 * 0 + 1) * 8 + 7]);  // token 0 -> slot 13
        QCOMPARE(cache[layout.offset(0, 0, 1, 0, 2)], k[(2 * 2 + 0) * 8 + 0]);      // token 2 -> slot 6
    }

    // Half-precision caches round as f32_to_f16 / f32_to_bf16 do, bit for bit, on the values where rounding
    // is hard: halfway cases (to even, both ways), F16 subnormals and the smallest values that round to
    // zero, overflow to infinity at 65520, infinities and signed zeros. head_dim 64 stores a vector at a
    // time; 72 adds a tail of 8 (scalar where a vector is 16 lanes).
    void write_kv_rounds_half_caches_data() {
        QTest::addColumn<int>("kv_dtype");
        QTest::addColumn<int>("head_dim");
        for (DType dt : {DType::F16, DType::BF16})
            for (int D : {64, 72}) QTest::addRow("%s D=%d", dtype_name(dt).data(), D) << static_cast<int>(dt) << D;
    }
    void write_kv_rounds_half_caches() {
        QFETCH(int, kv_dtype);
        QFETCH(int, head_dim);
        Subject& s = subject();
        const DType kv = static_cast<DType>(kv_dtype);
        if (!s.first().supports_kv_dtype(kv)) QSKIP(qPrintable(QString("no %1 KV cache here").arg(dtype_name(kv).data())));
        const float inf = std::numeric_limits<float>::infinity();
        const std::vector<float> hard = {
            1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,  // F16 / BF16 halfway cases
            1.0f + 0x1p-11f + 0x1p-20f, 0x1p-14f, 0x1p-15f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 3 * 0x1p-26f,
            0x1p-26f, -0x1.ffcp-15f, 65504.0f, 65519.0f, 65520.0f, -1e6f, inf, -inf, 0.0f, -0.0f, 1e-40f,
            3.0e38f, -2.5f, 0.1f};
        const KvCacheLayout layout{1, 2, 4, 2, head_dim, kv};  // 2 tokens x 2 heads x head_dim, K and V
        std::vector<float> k(static_cast<size_t>(2 * 2 * head_dim)), v(k.size());
        for (size_t i = 0; i < k.size(); ++i) {
            k[i] = hard[i % hard.size()];
            v[i] = -hard[(i * 7 + 3) % hard.size()];
        }
        const DeviceVector<float> k_d(s.first(), k), v_d(s.first(), v);
        const DeviceVector<int64_t> slots_d(s.first(), std::vector<int64_t>{5, 2});
        const size_t cache_floats = (layout.total_bytes() + sizeof(float) - 1) / sizeof(float);
        DeviceVector<float> cache_d(s.first(), std::vector<float>(cache_floats, 0.0f));
        s.first().write_kv(k_d.data(), v_d.data(), slots_d.data(), 2, layout, cache_d.data(), 0);
        std::vector<float> host(cache_floats);
        s.first().copy_to_host(host.data(), cache_d.data(), layout.total_bytes());
        const auto* halves = reinterpret_cast<const uint16_t*>(host.data());
        const auto expected = [&](float x) { return kv == DType::F16 ? f32_to_f16(x) : f32_to_bf16(x); };
        for (int t = 0; t < 2; ++t) {
            const int slot = t == 0 ? 5 : 2;
            for (int h = 0; h < 2; ++h)
                for (int d = 0; d < head_dim; ++d) {
                    const size_t src = (static_cast<size_t>(t) * 2 + h) * head_dim + d;
                    for (int which = 0; which < 2; ++which) {
                        const float x = which == 0 ? k[src] : v[src];
                        const uint16_t got = halves[layout.offset(0, which, slot / 4, h, slot % 4) + d];
                        QVERIFY2(got == expected(x), qPrintable(QString("%1 of %2 (token %3 head %4 dim %5) stored as 0x%6, not 0x%7")
                                                                   .arg(which == 0 ? "K" : "V")
                                                                   .arg(static_cast<double>(x), 0, 'g', 9)
                                                                   .arg(t)
                                                                   .arg(h)
                                                                   .arg(d)
                                                                   .arg(got, 4, 16, QChar('0'))
                                                                   .arg(expected(x), 4, 16, QChar('0'))));
                    }
                }
        }
    }

    // ---- rms_norm
    void rms_norm_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("dim");
        QTest::addColumn<float>("eps");
        QTest::addRow("1x8") << 1 << 8 << 1e-5f;
        QTest::addRow("1x576") << 1 << 576 << 1e-5f;
        QTest::addRow("3x576") << 3 << 576 << 1e-6f;
        QTest::addRow("2x100 (vector tails)") << 2 << 100 << 1e-5f;
        QTest::addRow("7x4096") << 7 << 4096 << 1e-5f;
        QTest::addRow("64x576 (parallel)") << 64 << 576 << 1e-5f;
        QTest::addRow("300x2048") << 300 << 2048 << 1e-6f;
        QTest::addRow("13x2048 tiny x") << 13 << 2048 << 1e-5f;
    }
    void rms_norm() {
        QFETCH(int, n);
        QFETCH(int, dim);
        QFETCH(float, eps);
        Subject& s = subject();
        std::mt19937_64 rng(case_seed(seed_));
        const float amp = QByteArray(QTest::currentDataTag()).contains("tiny") ? 1e-3f : 4.0f;  // eps matters
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n) * dim, -amp, amp);
        const std::vector<float> w = random_floats(rng, dim, 0.5f, 1.5f);
        std::vector<float> ref(x.size());
        rms_norm_ref(x.data(), w.data(), n, dim, eps, ref.data());
        const DeviceVector<float> x_d(s.first(), x), w_d(s.first(), w);
        // Values are O(1..10): CPU 1e-5 abs; CUDA's block reduction 2e-5.
        const double tol = s.cpu ? 1e-5 : 2e-5;
        for (Backend* be : runs(s)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(x.size(), kNaN));
            be->rms_norm(x_d.data(), w_d.data(), n, dim, eps, out_d.data());
            const std::vector<float> out = out_d.download();
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(d.within(tol, 1e-11), describe(d, out, ref, s.who(*be)));
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
            QTest::addRow("%s D=64 n=300", l) << neox << 64 << 64 << 300 << 32 << 8;
            QTest::addRow("%s D=128 n=7", l) << neox << 128 << 128 << 7 << 32 << 8;
            QTest::addRow("%s D=8 n=33", l) << neox << 8 << 8 << 33 << 4 << 4;
            QTest::addRow("%s D=8 n=33 gqa=2", l) << neox << 8 << 8 << 33 << 8 << 4;
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
        Subject& s = subject();
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
        const DeviceVector<float> inv_freq_d(s.first(), inv_freq);
        const DeviceVector<int32_t> positions_d(s.first(), positions);
        const RopeParams p{inv_freq_d.data(), head_dim, rotary_dim, neox};
        for (Backend* be : runs(s)) {
            const DeviceVector<float> q_d(s.first(), q0), k_d(s.first(), k0);
            be->rope(q_d.data(), k_d.data(), positions_d.data(), n, num_heads, num_kv_heads, p);
            const std::vector<float> q = q_d.download(), k = k_d.download();
            const Diff dq = diff(q.data(), q_ref.data(), static_cast<int64_t>(q.size()));
            QVERIFY2(dq.within(1e-5, 1e-11), "q: " + describe(dq, q, q_ref, s.who(*be)));
            const Diff dk = diff(k.data(), k_ref.data(), static_cast<int64_t>(k.size()));
            QVERIFY2(dk.within(1e-5, 1e-11), "k: " + describe(dk, k, k_ref, s.who(*be)));
            // Dimensions past rotary_dim pass through untouched.
            for (size_t h = 0; h < q.size() / head_dim; ++h)
                for (int d = rotary_dim; d < head_dim; ++d) QCOMPARE(q[h * head_dim + d], q0[h * head_dim + d]);
        }
    }

    // ---- silu_mul and add, across the CPU's serial / parallel chunk threshold and a GPU-sized n.
    void elementwise_data() {
        QTest::addColumn<qlonglong>("n");
        for (qlonglong n : {1LL, 15LL, 1000LL, 32767LL, 32768LL, 100003LL, 1000003LL}) QTest::addRow("n=%lld", n) << n;
    }
    void elementwise() {
        QFETCH(qlonglong, n);
        Subject& s = subject();
        std::mt19937_64 rng(case_seed(seed_));
        std::vector<float> gate = random_floats(rng, n, -20.0f, 20.0f);
        const std::vector<float> up = random_floats(rng, n, -3.0f, 3.0f);
        const float extremes[] = {0.0f, -100.0f, 100.0f, -88.0f, 1e-20f};
        for (size_t i = 0; i < std::size(extremes) && static_cast<qlonglong>(i) < n; ++i) gate[i] = extremes[i];
        std::vector<float> ref(n);
        silu_mul_ref(gate.data(), up.data(), n, ref.data());
        std::vector<float> x_ref = up;
        add_ref(x_ref.data(), gate.data(), n);
        const DeviceVector<float> gate_d(s.first(), gate), up_d(s.first(), up);
        // CPU: each value alone (n = 1 calls) is what every thread count and chunking must reproduce bit
        // for bit.
        std::vector<float> alone;
        if (s.cpu) {
            const DeviceVector<float> alone_d(s.first(), n);
            for (qlonglong j = 0; j < n; ++j) s.first().silu_mul(gate_d.data() + j, up_d.data() + j, 1, alone_d.data() + j);
            alone = alone_d.download();
        }
        // A few float roundings (exp, +, /, *): relative error well under 1e-6 on the CPU; CUDA's expf and
        // division a few ulp, 2e-6.
        const double tol = s.cpu ? 1e-6 : 2e-6;
        for (Backend* be : runs(s)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(n, kNaN));
            be->silu_mul(gate_d.data(), up_d.data(), n, out_d.data());
            const std::vector<float> out = out_d.download();
            for (qlonglong j = 0; j < static_cast<qlonglong>(alone.size()); ++j)
                if (std::memcmp(&out[j], &alone[j], sizeof(float)) != 0)
                    QFAIL(qPrintable(QString("silu_mul %1 [%2]: %3 in a batch, %4 alone")
                                         .arg(s.who(*be)).arg(j).arg(out[j], 0, 'g', 9).arg(alone[j], 0, 'g', 9)));
            for (qlonglong j = 0; j < n; ++j)
                if (!(std::fabs(out[j] - ref[j]) <= tol * std::fabs(ref[j]) + 1e-30))
                    QFAIL(qPrintable(QString("silu_mul %1 [%2]: gate=%3 up=%4 out=%5 ref=%6")
                                         .arg(s.who(*be)).arg(j).arg(gate[j]).arg(up[j]).arg(out[j], 0, 'g', 9)
                                         .arg(ref[j], 0, 'g', 9)));
            const DeviceVector<float> x_d(s.first(), up);
            be->add(x_d.data(), gate_d.data(), n);
            QVERIFY2(bitwise_equal(x_d.download(), x_ref), "add " + s.who(*be) + " differs from x + y");
        }
    }

    // ---- Gemma's elementwise ops: the GELU-tanh gate, soft-capping and scaling, on the same sizes.
    void gemma_elementwise_data() { elementwise_data(); }
    void gemma_elementwise() {
        QFETCH(qlonglong, n);
        Subject& s = subject();
        std::mt19937_64 rng(case_seed(seed_));
        std::vector<float> gate = random_floats(rng, n, -12.0f, 12.0f);
        const std::vector<float> up = random_floats(rng, n, -3.0f, 3.0f);
        std::vector<float> x = random_floats(rng, n, -200.0f, 200.0f);
        const float extremes[] = {0.0f, -100.0f, 100.0f, -10.0f, 1e-20f, -3.0f};
        for (size_t i = 0; i < std::size(extremes) && static_cast<qlonglong>(i) < n; ++i) gate[i] = x[i] = extremes[i];
        std::vector<float> gelu_ref(n), capped_ref = x, scaled_ref = x;
        gelu_tanh_mul_ref(gate.data(), up.data(), n, gelu_ref.data());
        softcap_ref(capped_ref.data(), n, 30.0f);
        for (float& v : scaled_ref) v *= 48.0f;
        const DeviceVector<float> gate_d(s.first(), gate), up_d(s.first(), up);
        // GELU-tanh: u = sqrt(2/pi) (x + 0.044715 x^3) rounds to float, and exp(-2u) carries that rounding times
        // |2u| (up to ~40 where the result is not yet 0): 1e-5 relative, plus 1e-7 absolute where the value is
        // tiny. Soft-cap: float tanh, a few ulp. Scale: one float multiply, bitwise.
        for (Backend* be : runs(s)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(n, kNaN));
            be->gelu_tanh_mul(gate_d.data(), up_d.data(), n, out_d.data());
            const std::vector<float> out = out_d.download();
            for (qlonglong j = 0; j < n; ++j)
                if (!(std::fabs(out[j] - gelu_ref[j]) <= 1e-5 * std::fabs(gelu_ref[j]) + 1e-7))
                    QFAIL(qPrintable(QString("gelu_tanh_mul %1 [%2]: gate=%3 up=%4 out=%5 ref=%6")
                                         .arg(s.who(*be)).arg(j).arg(gate[j]).arg(up[j]).arg(out[j], 0, 'g', 9)
                                         .arg(gelu_ref[j], 0, 'g', 9)));
            const DeviceVector<float> capped_d(s.first(), x), scaled_d(s.first(), x);
            be->softcap(capped_d.data(), n, 30.0f);
            be->scale(scaled_d.data(), n, 48.0f);
            const std::vector<float> capped = capped_d.download();
            for (qlonglong j = 0; j < n; ++j)
                if (!(std::fabs(capped[j] - capped_ref[j]) <= 1e-6 * std::fabs(capped_ref[j]) + 1e-30))
                    QFAIL(qPrintable(QString("softcap %1 [%2]: x=%3 out=%4 ref=%5")
                                         .arg(s.who(*be)).arg(j).arg(x[j]).arg(capped[j], 0, 'g', 9).arg(capped_ref[j], 0, 'g', 9)));
            QVERIFY2(bitwise_equal(scaled_d.download(), scaled_ref), "scale " + s.who(*be) + " differs from x * s");
        }
    }

    // ---- embedding: every dtype, exact (a widening conversion); ids at both ends of the table and repeated.
    void embedding_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("n");
        for (DType dt : kDTypes) {
            QTest::addRow("%s 1000x768 n=33", dtype_name(dt).data()) << static_cast<int>(dt) << 1000 << 768 << 33;
            QTest::addRow("%s 50x256 n=1", dtype_name(dt).data()) << static_cast<int>(dt) << 50 << 256 << 1;
            if (dtype_block_elems(dt) <= 32) {  // rows of 96 and 64 values
                QTest::addRow("%s 100x96 n=7", dtype_name(dt).data()) << static_cast<int>(dt) << 100 << 96 << 7;
                QTest::addRow("%s 512x64 n=300", dtype_name(dt).data()) << static_cast<int>(dt) << 512 << 64 << 300;
            }
        }
    }
    void embedding() {
        QFETCH(int, dtype);
        QFETCH(int, vocab);
        QFETCH(int, cols);
        QFETCH(int, n);
        Subject& s = subject();
        const DType dt = static_cast<DType>(dtype);
        if (!s.first().supports(dt)) QSKIP(qPrintable(QString("no %1 weights here").arg(dtype_name(dt).data())));
        std::mt19937_64 rng(case_seed(seed_));
        const std::vector<float> table_f = random_floats(rng, static_cast<size_t>(vocab) * cols);
        const StoredWeights table = store(table_f, dt, vocab, cols);
        std::vector<int32_t> ids(n);
        for (int t = 0; t < n; ++t) ids[t] = t == 0 ? vocab - 1 : t == 1 ? 0 : t == 2 ? ids[0] : random_int(rng, 0, vocab - 1);
        std::vector<float> ref(static_cast<size_t>(n) * cols);
        embedding_ref(table.view, ids.data(), n, ref.data());
        if (dt == DType::F32)
            for (int t = 0; t < n; ++t)
                QVERIFY(std::memcmp(ref.data() + static_cast<size_t>(t) * cols,
                                    table_f.data() + static_cast<size_t>(ids[t]) * cols, cols * 4) == 0);
        const WeightView table_d = s.first().upload_weight(table.view);
        const DeviceVector<int32_t> ids_d(s.first(), ids);
        for (Backend* be : runs(s)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(ref.size(), kNaN));
            be->embedding(table_d, ids_d.data(), n, out_d.data());
            const std::vector<float> out = out_d.download();
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            QVERIFY2(bitwise_equal(out, ref), describe(d, out, ref, s.who(*be)));
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
        Subject& s = subject();
        int32_t ref = -1;
        argmax_ref(row.data(), 1, static_cast<int>(row.size()), &ref);
        QCOMPARE(ref, expected);
        const DeviceVector<float> row_d(s.first(), std::vector<float>(row.begin(), row.end()));
        for (Backend* be : runs(s)) {
            const DeviceVector<int32_t> out_d(s.first(), std::vector<int32_t>{-1});
            be->argmax(row_d.data(), 1, static_cast<int>(row.size()), out_d.data());
            QCOMPARE(out_d.download()[0], expected);
        }
    }
    void argmax_batch() {
        // Vocab-sized rows with a planted, duplicated maximum.
        Subject& s = subject();
        std::mt19937_64 rng(case_seed(seed_));
        for (int vocab : {512, 49152, 128256}) {
            const int n = 37;
            std::vector<float> logits = random_floats(rng, static_cast<size_t>(n) * vocab, -10.0f, 10.0f);
            for (int r = 0; r < n; ++r) {
                const int a = random_int(rng, 0, vocab - 1), b = random_int(rng, 0, vocab - 1);
                logits[static_cast<size_t>(r) * vocab + a] = logits[static_cast<size_t>(r) * vocab + b] = 11.0f;
            }
            std::vector<int32_t> ref(n);
            argmax_ref(logits.data(), n, vocab, ref.data());
            const DeviceVector<float> logits_d(s.first(), logits);
            for (Backend* be : runs(s)) {
                const DeviceVector<int32_t> out_d(s.first(), std::vector<int32_t>(n, -1));
                be->argmax(logits_d.data(), n, vocab, out_d.data());
                QCOMPARE(out_d.download(), ref);
            }
        }
    }

    // ---- gather_rows: exact.
    void gather_rows_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("dim");
        QTest::addRow("n=1 dim=1") << 1 << 1;
        QTest::addRow("n=5 dim=576") << 5 << 576;
        QTest::addRow("n=64 dim=49") << 64 << 49;
        QTest::addRow("n=256 dim=2048") << 256 << 2048;
    }
    void gather_rows() {
        QFETCH(int, n);
        QFETCH(int, dim);
        Subject& s = subject();
        std::mt19937_64 rng(case_seed(seed_));
        const int total = 300;
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(total) * dim);
        std::vector<int32_t> rows(n);
        for (int i = 0; i < n; ++i) rows[i] = i == 0 ? total - 1 : random_int(rng, 0, total - 1);
        std::vector<float> ref(static_cast<size_t>(n) * dim);
        gather_rows_ref(x.data(), rows.data(), n, dim, ref.data());
        const DeviceVector<float> x_d(s.first(), x);
        const DeviceVector<int32_t> rows_d(s.first(), rows);
        for (Backend* be : runs(s)) {
            const DeviceVector<float> out_d(s.first(), std::vector<float>(ref.size(), kNaN));
            be->gather_rows(x_d.data(), rows_d.data(), n, dim, out_d.data());
            QVERIFY(bitwise_equal(out_d.download(), ref));
        }
    }

    // ---- sample (backends with a device sampler): rows of three shapes (peaked, ordinary, flat), a row of
    // ties, a row mostly -inf; every token inside the host sampler's filtered set, greedy and top_k 1 equal
    // to argmax, the same ids again and in any batch order.
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
        Subject& s = subject();
        Backend& b = s.first();
        if (!b.supports_sampling()) QSKIP("no device sampler here (supports_sampling()): the engine samples on the host");
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
        auto run = [&](const std::vector<SamplingRow>& r, const std::vector<float>& l) {
            const DeviceVector<float> l_d(b, l);
            const DeviceVector<SamplingRow> r_d(b, r);
            const DeviceVector<int32_t> out_d(b, std::vector<int32_t>(n, -1));
            b.sample(l_d.data(), n, vocab, r_d.data(), out_d.data());
            return out_d.download();
        };
        const std::vector<int32_t> ids = run(rows, logits);
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
        QCOMPARE(run(rows, logits), ids);
        std::vector<float> reversed(logits.size());
        for (int r = 0; r < n; ++r)
            std::copy_n(logits.data() + static_cast<size_t>(r) * vocab, vocab, reversed.data() + static_cast<size_t>(n - 1 - r) * vocab);
        const std::vector<int32_t> rev = run(std::vector<SamplingRow>(rows.rbegin(), rows.rend()), reversed);
        for (int r = 0; r < n; ++r) QCOMPARE(rev[n - 1 - r], ids[r]);
        // Different offsets draw different tokens where there is a choice (a flat row, no tight filter).
        if (temperature > 0 && top_k != 1 && (top_k == 0 || top_k >= 50) && top_p >= 0.5f && min_p == 0) {
            std::vector<SamplingRow> same_row(n, rows[2]);
            for (int r = 0; r < n; ++r) same_row[r].offset = r;
            std::vector<float> flat(logits.size());
            for (int r = 0; r < n; ++r)
                std::copy_n(logits.data() + 2 * static_cast<size_t>(vocab), vocab, flat.data() + static_cast<size_t>(r) * vocab);
            const std::vector<int32_t> draws = run(same_row, flat);
            const std::set<int32_t> distinct(draws.begin(), draws.end());
            QVERIFY2(distinct.size() >= 10, qPrintable(QString("%1 distinct tokens in %2 draws").arg(distinct.size()).arg(n)));
        }
    }
};

QTEST_GUILESS_MAIN(TestBackendOps)
#include "test_backend_ops.moc"
