// What only the CUDA device has, beyond the op cases that tests/kernels/test_backend_ops.cpp runs on every
// backend (its "cuda" rows): paged attention with forced context splits (every shape through the split-K
// merge, which the heuristic picks only for long contexts) over F32, F16 and BF16 caches, the attention
// shapes the device refuses, CUDA
// graphs (a replay after inputs are refilled in place equals the op-by-op run bit for bit), the device
// memory account, and the sampler's frequencies (16384 draws within 5 sigma of the host's filtered softmax);
// head size 256 (Gemma: 81 KB of shared memory, above the default limit) and a quantized matmul inside a
// captured graph.
// Skips, with the reason, when built without CUDA or when no device is present.
#include "test_support.h"

#include "op_checks.h"
#include "paged_attention_case.h"
#include "sampling_reference.h"

#include "cpu/reference.h"
#if KVSCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace kvscope;
using namespace kvscope::test;

class TestCudaBackendOps : public QObject {
    Q_OBJECT

#if KVSCOPE_HAVE_CUDA
    uint64_t seed_ = 0;
    std::unique_ptr<cuda::CudaBackend> gpu_;
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
    // ---- paged attention with the context split in 1 (no merge), 3 and 16 parts, whatever the heuristic
    // would pick; decode, chunked prefill and long contexts.
    void paged_attention_splits_data() {
        QTest::addColumn<int>("head_dim");
        QTest::addColumn<int>("gqa");
        QTest::addColumn<int>("block_size");
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("window");
        QTest::addColumn<int>("kv_dtype");
        QTest::addColumn<float>("softcap");
        constexpr int f32 = static_cast<int>(DType::F32);
        const std::pair<AttentionKind, const char*> kinds[] = {
            {AttentionKind::decode, "decode"}, {AttentionKind::prefill, "prefill"}, {AttentionKind::long_context, "long"}};
        for (int D : {8, 32, 64, 128})
            for (int gqa : {1, 4, 8})
                for (int B : {8, 16, 32})
                    for (auto [kind, name] : kinds)
                        QTest::addRow("D=%d gqa=%d B=%d %s", D, gqa, B, name) << D << gqa << B << static_cast<int>(kind) << 0 << f32 << 0.0f;
        QTest::addRow("D=64 gqa=4 B=1 decode") << 64 << 4 << 1 << static_cast<int>(AttentionKind::decode) << 0 << f32 << 0.0f;
        QTest::addRow("D=64 gqa=4 B=256 prefill") << 64 << 4 << 256 << static_cast<int>(AttentionKind::prefill) << 0 << f32 << 0.0f;
        QTest::addRow("D=64 gqa=16 B=16 prefill (one row per token)")
            << 64 << 16 << 16 << static_cast<int>(AttentionKind::prefill) << 0 << f32 << 0.0f;
        // Gemma's head size: the kernel whose shared memory needs the raised limit.
        for (auto [kind, name] : kinds) QTest::addRow("D=256 gqa=2 B=16 %s", name) << 256 << 2 << 16 << static_cast<int>(kind) << 0 << f32 << 0.0f;
        QTest::addRow("D=256 gqa=8 B=16 long window=300")
            << 256 << 8 << 16 << static_cast<int>(AttentionKind::long_context) << 300 << f32 << 0.0f;
        // Phi-2's and Phi-3's head sizes: not a multiple of the warp, so lanes hold 3 (or 2 and 3) dimensions.
        for (int D : {80, 96})
            for (auto [kind, name] : kinds) QTest::addRow("D=%d gqa=4 B=16 %s", D, name) << D << 4 << 16 << static_cast<int>(kind) << 0 << f32 << 0.0f;
        // Sliding windows: splits wholly before a row's window are skipped by the kernel and the merge.
        for (int window : {1, 37, 300, 3000})
            QTest::addRow("D=128 gqa=4 B=16 long window=%d", window)
                << 128 << 4 << 16 << static_cast<int>(AttentionKind::long_context) << window << f32 << 0.0f;
        // Half caches: K/V tiles staged as halves (8 per 16-byte copy) and widened as read. Every head size
        // (D = 8 is one chunk per row; 256 at 49 KB still needs the raised limit), GQA groups, windows.
        for (DType kv : {DType::F16, DType::BF16})
            for (int D : {8, 64, 80, 96, 128, 256})
                for (auto [kind, name] : kinds)
                    QTest::addRow("%s D=%d gqa=4 B=16 %s", dtype_name(kv).data(), D, name)
                        << D << 4 << 16 << static_cast<int>(kind) << 0 << static_cast<int>(kv) << 0.0f;
        for (DType kv : {DType::F16, DType::BF16}) {
            QTest::addRow("%s D=64 gqa=1 B=8 prefill", dtype_name(kv).data())
                << 64 << 1 << 8 << static_cast<int>(AttentionKind::prefill) << 0 << static_cast<int>(kv) << 0.0f;
            QTest::addRow("%s D=128 gqa=8 B=32 long window=300", dtype_name(kv).data())
                << 128 << 8 << 32 << static_cast<int>(AttentionKind::long_context) << 300 << static_cast<int>(kv) << 0.0f;
            QTest::addRow("%s D=32 gqa=8 B=16 decode", dtype_name(kv).data())
                << 32 << 8 << 16 << static_cast<int>(AttentionKind::decode) << 0 << static_cast<int>(kv) << 0.0f;
            for (int window : {1, 37, 3000})
                QTest::addRow("%s D=256 gqa=2 B=16 long window=%d", dtype_name(kv).data(), window)
                    << 256 << 2 << 16 << static_cast<int>(AttentionKind::long_context) << window << static_cast<int>(kv) << 0.0f;
        }
        // Gemma 2's soft-capped scores (cap * tanh(score / cap)), alone and with a window, on each cache type. The
        // scores here are about N(0, 1): Gemma's cap of 50 would change them by under 1e-2, so the caps are small
        // enough to bend every score.
        for (DType kv : {DType::F32, DType::F16, DType::BF16})
            for (auto [kind, name] : kinds)
                QTest::addRow("%s D=256 gqa=2 B=16 %s softcap=2", dtype_name(kv).data(), name)
                    << 256 << 2 << 16 << static_cast<int>(kind) << (kind == AttentionKind::long_context ? 300 : 0)
                    << static_cast<int>(kv) << 2.0f;
        QTest::addRow("F32 D=64 gqa=4 B=16 prefill softcap=5")
            << 64 << 4 << 16 << static_cast<int>(AttentionKind::prefill) << 0 << f32 << 5.0f;
    }
    void paged_attention_splits() {
        QFETCH(int, head_dim);
        QFETCH(int, gqa);
        QFETCH(int, block_size);
        QFETCH(int, kind);
        QFETCH(int, window);
        QFETCH(int, kv_dtype);
        QFETCH(float, softcap);
        std::mt19937_64 rng(case_seed(seed_));
        const PagedAttentionCase c = make_paged_attention_case(head_dim, gqa, block_size, static_cast<DType>(kv_dtype),
                                                               static_cast<AttentionKind>(kind), rng, window, softcap);
        // The cache: the cached tokens scattered on the host, the new ones written by write_kv (checked by
        // test_backend_ops). A float vector large enough for any element type.
        std::vector<float> cache(c.layout.total_elems());
        KvCacheView(cache.data(), c.layout).fill_nan();
        c.scatter_cached(cache.data());
        const DeviceVector<float> cache_d(*gpu_, cache);
        const DeviceVector<float> k_d(*gpu_, c.k_new), v_d(*gpu_, c.v_new);
        const DeviceVector<int64_t> slots_d(*gpu_, c.slot_mapping);
        gpu_->write_kv(k_d.data(), v_d.data(), slots_d.data(), c.num_tokens(), c.layout, cache_d.data(), c.layer);

        const std::vector<float> ref = c.reference();
        const DeviceVector<float> q_d(*gpu_, c.q);
        const DeviceVector<int32_t> qsl_d(*gpu_, c.query_start_loc), lens_d(*gpu_, c.seq_lens), tables_d(*gpu_, c.block_tables);
        const AttentionMetadata meta = c.metadata(qsl_d.data(), lens_d.data(), tables_d.data(), slots_d.data());
        struct Unforce {
            cuda::CudaBackend& b;
            ~Unforce() { b.force_attention_splits(0); }
        } unforce{*gpu_};
        for (int splits : {1, 3, 16}) {
            gpu_->force_attention_splits(splits);
            const DeviceVector<float> out_d(*gpu_, std::vector<float>(ref.size(), kNaN));
            gpu_->paged_attention(q_d.data(), meta, c.layout, cache_d.data(), c.layer, c.num_heads, c.params, out_d.data());
            const std::vector<float> out = out_d.download();
            const Diff d = diff(out.data(), ref.data(), static_cast<int64_t>(out.size()));
            // As test_backend_ops holds CUDA: F32 arithmetic with expf and FMA (a half cache's values are
            // widened exactly, and the reference uses the same rounded values), errors ~1e-6; 1e-4 abs.
            QVERIFY2(d.within(1e-4, 1e-8), describe(d, out, ref, "splits=" + QByteArray::number(splits)));
        }
    }

    // The shapes the device's attention kernels do not have are refused, not run.
    void unsupported_attention_shapes_throw() {
        AttentionMetadata meta;
        meta.num_tokens = 1;
        meta.num_seqs = 1;
        meta.max_seq_len = 1;
        auto expect_throw = [&](const KvCacheLayout& l, int num_heads, const char* what) {
            bool threw = false;
            try {
                gpu_->paged_attention(nullptr, meta, l, nullptr, 0, num_heads, {1.0f}, nullptr);
            } catch (const std::invalid_argument& e) {
                threw = true;
                qInfo("%s: %s", what, e.what());
            }
            QVERIFY2(threw, what);
        };
        expect_throw(KvCacheLayout{1, 4, 16, 2, 72, DType::F32}, 4, "head_dim 72");
        expect_throw(KvCacheLayout{1, 4, 16, 2, 64, DType::F32}, 64, "GQA group of 32");
        expect_throw(KvCacheLayout{1, 4, 16, 3, 64, DType::F32}, 8, "num_heads not a multiple of num_kv_heads");
        expect_throw(KvCacheLayout{1, 4, 16, 2, 64, DType::Q8_0}, 4, "Q8_0 cache");
        // What the engine asks at start-up (LlmEngine refuses such a model) agrees with what the kernel takes.
        QVERIFY(gpu_->supports_attention(96, 32, 32));
        QVERIFY(gpu_->supports_attention(256, 8, 4));
        QVERIFY(!gpu_->supports_attention(72, 4, 2));
        QVERIFY(!gpu_->supports_attention(64, 64, 2));
        QVERIFY(!gpu_->supports_attention(64, 8, 3));
    }

    // Rows that are not whole blocks of a quantized type are refused at upload, naming the type (every type
    // is supported; test_backend_ops runs them all).
    void partial_block_rows_throw() {
        for (DType t : kDTypes) {
            QVERIFY(gpu_->supports(t));
            if (!dtype_is_quantized(t)) continue;
            const int64_t cols = dtype_block_elems(t) + 16;
            std::vector<uint8_t> bytes(static_cast<size_t>(dtype_row_bytes(t, cols) + dtype_block_bytes(t)) * 2);
            bool threw = false;
            try {
                gpu_->upload_weight(WeightView{bytes.data(), t, 2, cols});
            } catch (const std::invalid_argument& e) {
                threw = QByteArray(e.what()).contains(dtype_name(t).data());
            }
            QVERIFY2(threw, dtype_name(t).data());
        }
    }

    // ---- Graphs: a step recorded once and replayed runs on what its buffers hold at replay, so inputs
    // refilled in place give the op-by-op results bit for bit (what the runner's decode graphs rely on).
    void graph_replay() {
        std::mt19937_64 rng(case_seed(seed_));
        const int n = 4, dim = 256, N = 512;
        const StoredWeights w_host = store(random_floats(rng, static_cast<size_t>(N) * dim), DType::F16, N, dim);
        const WeightView w = gpu_->upload_weight(w_host.view);
        const DeviceVector<float> x_d(*gpu_, static_cast<size_t>(n) * dim), norm_d(*gpu_, random_floats(rng, dim, 0.5f, 1.5f));
        const DeviceVector<float> h_d(*gpu_, static_cast<size_t>(n) * dim), out_d(*gpu_, static_cast<size_t>(n) * N);
        const DeviceVector<int32_t> ids_d(*gpu_, n);
        auto step = [&] {
            gpu_->rms_norm(x_d.data(), norm_d.data(), n, dim, 1e-5f, h_d.data());
            gpu_->matmul(h_d.data(), n, w, nullptr, out_d.data());
            gpu_->argmax(out_d.data(), n, N, ids_d.data());
        };
        // Op by op first: that also grows the scratch the capture needs (it cannot grow while capturing).
        const std::vector<std::vector<float>> inputs = {random_floats(rng, static_cast<size_t>(n) * dim),
                                                        random_floats(rng, static_cast<size_t>(n) * dim, -4.0f, 4.0f)};
        std::vector<std::vector<float>> eager;
        std::vector<std::vector<int32_t>> eager_ids;
        for (const auto& in : inputs) {
            x_d.upload(in);
            step();
            eager.push_back(out_d.download());
            eager_ids.push_back(ids_d.download());
        }
        QVERIFY2(!bitwise_equal(eager[0], eager[1]), "test setup: the two inputs must differ in their outputs");

        gpu_->begin_capture();
        step();
        const int graph = gpu_->end_capture();
        QVERIFY2(graph >= 0, gpu_->last_capture_error().c_str());
        QCOMPARE(gpu_->num_graphs(), 1);
        for (int round = 0; round < 2; ++round)
            for (size_t i = 0; i < inputs.size(); ++i) {
                x_d.upload(inputs[i]);
                out_d.upload(std::vector<float>(out_d.size(), kNaN));
                ids_d.upload(std::vector<int32_t>(n, -1));
                gpu_->replay(graph);
                QVERIFY2(bitwise_equal(out_d.download(), eager[i]), qPrintable(QString("replay %1 of input %2").arg(round).arg(i)));
                QCOMPARE(ids_d.download(), eager_ids[i]);
            }
        gpu_->destroy_graph(graph);
        QCOMPARE(gpu_->num_graphs(), 0);
        // After the capture the ops run as called again.
        x_d.upload(inputs[1]);
        step();
        QVERIFY(bitwise_equal(out_d.download(), eager[1]));
    }

    // ---- A Gemma-shaped step in a graph: attention at head size 256 (its launch raises the kernel's shared
    // memory limit, also while capturing) and a Q4_K matmul (the quantized kernel) replay the op-by-op
    // results bit for bit, and the attention matches the reference.
    void graph_replay_head_256_quantized() {
        std::mt19937_64 rng(case_seed(seed_));
        const PagedAttentionCase c = make_paged_attention_case(256, 2, 16, DType::F32, AttentionKind::decode, rng);
        std::vector<float> cache(c.layout.total_elems(), kNaN);
        c.scatter_cached(cache.data());
        const DeviceVector<float> cache_d(*gpu_, cache);
        const DeviceVector<float> k_d(*gpu_, c.k_new), v_d(*gpu_, c.v_new);
        const DeviceVector<int64_t> slots_d(*gpu_, c.slot_mapping);
        gpu_->write_kv(k_d.data(), v_d.data(), slots_d.data(), c.num_tokens(), c.layout, cache_d.data(), c.layer);
        const DeviceVector<float> q_d(*gpu_, c.q);
        const DeviceVector<int32_t> qsl_d(*gpu_, c.query_start_loc), lens_d(*gpu_, c.seq_lens), tables_d(*gpu_, c.block_tables);
        const AttentionMetadata meta = c.metadata(qsl_d.data(), lens_d.data(), tables_d.data(), slots_d.data());
        const int n = c.num_tokens(), dim = c.num_heads * 256, N = 320;
        const StoredWeights w_host = store(random_floats(rng, static_cast<size_t>(N) * dim), DType::Q4_K, N, dim);
        const WeightView w = gpu_->upload_weight(w_host.view);
        const DeviceVector<float> attn_d(*gpu_, static_cast<size_t>(n) * dim), out_d(*gpu_, static_cast<size_t>(n) * N);
        auto step = [&] {
            gpu_->paged_attention(q_d.data(), meta, c.layout, cache_d.data(), c.layer, c.num_heads, c.params, attn_d.data());
            gpu_->matmul(attn_d.data(), n, w, nullptr, out_d.data());
        };
        step();
        const std::vector<float> attn = attn_d.download(), ref = c.reference();
        const Diff d = diff(attn.data(), ref.data(), static_cast<int64_t>(ref.size()));
        QVERIFY2(d.within(1e-4, 1e-8), describe(d, attn, ref, "eager"));
        const std::vector<float> eager = out_d.download();
        gpu_->begin_capture();
        step();
        const int graph = gpu_->end_capture();
        QVERIFY2(graph >= 0, gpu_->last_capture_error().c_str());
        attn_d.upload(std::vector<float>(attn_d.size(), kNaN));
        out_d.upload(std::vector<float>(out_d.size(), kNaN));
        gpu_->replay(graph);
        QVERIFY2(bitwise_equal(out_d.download(), eager), "replay differs from the op-by-op run");
        gpu_->destroy_graph(graph);
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
        const DeviceVector<float> logits_d(*gpu_, logits);
        const DeviceVector<SamplingRow> rows_d(*gpu_, rows);
        const DeviceVector<int32_t> out_d(*gpu_, std::vector<int32_t>(n, -1));
        gpu_->sample(logits_d.data(), n, vocab, rows_d.data(), out_d.data());
        std::vector<int> counts(vocab, 0);
        for (int32_t id : out_d.download()) {
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

    // ---- The memory account follows what the backend holds.
    void memory_account() {
        const auto before = gpu_->memory_account();
        QVERIFY(before.total > 0 && before.used > 0 && before.used <= before.total);
        {
            const DeviceVector<uint8_t> big(*gpu_, 64u << 20);
            const auto during = gpu_->memory_account();
            QCOMPARE(during.buffers - before.buffers, int64_t(64) << 20);
            QVERIFY(during.used >= before.used + (int64_t(60) << 20));
        }
        QCOMPARE(gpu_->memory_account().buffers, before.buffers);
        QVERIFY(gpu_->kv_cache_budget(0.9) >= 0);
    }
#endif
};

QTEST_GUILESS_MAIN(TestCudaBackendOps)
#include "test_cuda_backend_ops.moc"
