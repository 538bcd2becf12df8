// kvscope-kernel-bench: times the CPU backend's matmul for every weight dtype at SmolLM2-135M's shapes
// (decode n=1: GB/s of weight bytes; prefill n=512: GFLOP/s), the decode roofline (single-row GEMV GB/s
// over weights streamed from memory, beside the read bandwidth measured in the same run), one layer's
// matmuls by batch size (cached, and streamed from memory over 30 layers), and paged attention decode at
// SmolLM2-135M's and Gemma 3 1B's heads (GB/s of K/V read).
// A benchmark, not a test: correctness is test_backend_ops' job. Median of repeats.
//   kvscope-kernel-bench [--threads N] [--min-time SECONDS]
#include "bench/read_reference.h"
#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "cpu/cpu_kernel_sets.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace kvscope;
using namespace kvscope::cpu;
using kvscope::bench::median_seconds;

namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = default_num_threads();
    double min_time = 0.3;
    auto app = command_line::make_app("kvscope-kernel-bench",
                                      "Times the CPU backend's matmul and paged attention at SmolLM2-135M's shapes.");
    app->add_option("--threads", threads, "CPU threads")->type_name("UINT")->check(command_line::int_in(1));
    app->add_option("--min-time", min_time, "seconds of repeats per measurement, at least")
        ->type_name("SECONDS")->check(command_line::real_in(0));
    int rounds = 3;
    app->add_option("--rounds", rounds, "decode roofline: rounds of (read bandwidth, every type's GEMV), alternated")
        ->type_name("UINT")->check(command_line::int_in(1));
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;

    std::unique_ptr<Backend> cpu_backend;
    try {
        cpu_backend = make_cpu_backend(threads);
    } catch (const std::invalid_argument& e) {  // KVSCOPE_CPU_VARIANT names a set this CPU cannot run
        std::fprintf(stderr, "kvscope-kernel-bench: error: %s\n", e.what());
        return 2;
    }
    Backend& backend = *cpu_backend;
    std::mt19937 rng(1234);
    std::printf("kvscope kernel bench: cpu backend (kernels %s), %d threads, median of repeats (>= %.2f s each)\n\n",
                describe_cpu_kernel_set(backend.kernel_set()).c_str(), threads, min_time);

    // ---- the decode roofline: single-row GEMV (n = 1) over weights that stream from memory, as a decode
    // step's matmuls do, beside the read bandwidth of the same threads measured in the same run. A decode
    // step cannot beat bytes of weights / bandwidth; "% bw" says how near each type's GEMV comes.
    {
        constexpr size_t kStreamBytes = bench::ReadReference::kBytes;
        bench::ReadReference reference(backend, threads, min_time);
        auto read_at = [&](int streams) { return reference.read_at(streams); };
        // Every type's weights, prepared once: the rounds below alternate the reference and the GEMVs.
        const int K = 2048, N = 2048;
        const std::vector<float> wf = random_floats(rng, static_cast<size_t>(N) * K);
        const std::vector<float> x = random_floats(rng, K);
        std::vector<float> out(N);
        struct Streamed {
            DType dt;
            size_t bytes;
            std::vector<uint8_t> w;
            std::vector<WeightView> views;
            std::vector<double> gbs, share;  // per round: GB/s, and its share of that round's reference
            std::vector<uint8_t> cached_w;  // a matrix that stays in one core's cache, and its repacked view
            WeightView cached;
            size_t cached_bytes = 0;
            double cached_gbs = 0;  // one thread over it, the best of the rounds
        };
        std::vector<Streamed> types;
        for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                         DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
            Streamed& st = types.emplace_back();
            st.dt = dt;
            const size_t row_bytes = dtype_row_bytes(dt, K), bytes = row_bytes * N;
            const size_t copies = (kStreamBytes + bytes - 1) / bytes;
            st.bytes = bytes * copies;
            st.w.resize(bytes * copies);
            for (int r = 0; r < N; ++r) quantize_row(dt, wf.data() + static_cast<size_t>(r) * K, st.w.data() + r * row_bytes, K);
            for (size_t c = 1; c < copies; ++c) std::memcpy(st.w.data() + c * bytes, st.w.data(), bytes);
            for (size_t c = 0; c < copies; ++c) st.views.push_back(backend.repack_matmul_weight({st.w.data() + c * bytes, dt, N, K}));
        }
        // The decode path's own rate: one thread's GEMV over a matrix of at most 512 KiB that stays in its
        // cache, in GB/s of weights, the best of the rounds (a busy neighbour or a slow clock only lowers it).
        // Its rows are as long as the streamed ones, so that the decode's per-call prefetch burst
        // (matmul_x8.cpp) is the same share of the work: with rows of 512 the burst ran past each call's
        // rows and took about 40% of a cached Q4_K GEMV. A type whose threads together compute at little
        // more than the read bandwidth cannot stream near it: each thread then spends most of its time on
        // arithmetic, with too few reads in flight. "x threads / bw" puts that rate, times the threads,
        // against the median read.
        const std::unique_ptr<Backend> one_thread = make_cpu_backend(1);
        for (Streamed& st : types) {
            const size_t row_bytes = dtype_row_bytes(st.dt, K);
            const int Nc = static_cast<int>(std::clamp<size_t>((size_t{512} << 10) / row_bytes / 16 * 16, 16, 1024));
            st.cached_w.resize(row_bytes * Nc);
            for (int r = 0; r < Nc; ++r)
                quantize_row(st.dt, wf.data() + static_cast<size_t>(r) * K, st.cached_w.data() + r * row_bytes, K);
            st.cached = one_thread->repack_matmul_weight({st.cached_w.data(), st.dt, Nc, K});
            st.cached_bytes = row_bytes * Nc;
        }
        // Rounds of (reference, every GEMV): on a shared machine the bus a neighbour takes changes from one
        // measurement to the next (by half, within seconds), so each GEMV is set against the mean of the
        // reads just before and just after it, at the round's best stream count, and the table gives the
        // median over rounds.
        std::vector<double> references;
        double fastest_gemv = 0;
        for (int round = 0; round < rounds; ++round) {
            std::string tried;
            int best_streams = 1;
            const double bandwidth = reference.best(best_streams, tried);
            references.push_back(bandwidth);
            std::printf("round %d: read bandwidth (%d threads, %zu MiB) %.1f GB/s, the best of streams per thread %s\n", round + 1,
                        threads, kStreamBytes >> 20, bandwidth, tried.c_str());
            double before = read_at(best_streams);
            for (Streamed& st : types) {
                const double t = median_seconds([&] {
                    for (const WeightView& v : st.views) backend.matmul(x.data(), 1, v, nullptr, out.data());
                }, min_time);
                const double after = read_at(best_streams);
                references.push_back(std::max(before, after));
                st.gbs.push_back(static_cast<double>(st.bytes) / t / 1e9);
                st.share.push_back(st.gbs.back() / ((before + after) / 2));
                fastest_gemv = std::max(fastest_gemv, st.gbs.back());
                before = after;
            }
            for (Streamed& st : types) {
                const double t = median_seconds([&] { one_thread->matmul(x.data(), 1, st.cached, nullptr, out.data()); }, min_time / 4);
                st.cached_gbs = std::max(st.cached_gbs, static_cast<double>(st.cached_bytes) / t / 1e9);
            }
        }
        auto median = [](std::vector<double> v) {
            std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
            return v[v.size() / 2];
        };
        const double bandwidth = median(references);
        std::printf("decode roofline  single-row GEMV x[1, K] @ w[N, K]^T, K = N = 2048, copies of w streamed (%zu MiB of each "
                    "type), medians of %d rounds; %% bw: of the mean of the reads just before and after it; 1 core cached: "
                    "one thread, the same K, at most 512 KiB of weights (GB/s, the best of the rounds)\n",
                    kStreamBytes >> 20, rounds);
        std::printf("%-8s | %10s %8s %13s | %14s %16s\n", "weights", "GB/s", "% bw", "% bw, rounds", "1 core cached",
                    "x threads / bw");
        for (const Streamed& st : types) {
            const auto [lo, hi] = std::minmax_element(st.share.begin(), st.share.end());
            std::printf("%-8s | %10.1f %7.0f%% %5.0f - %3.0f%% | %14.1f %16.2f\n", dtype_name(st.dt).data(), median(st.gbs),
                        100.0 * median(st.share), 100.0 * *lo, 100.0 * *hi, st.cached_gbs, st.cached_gbs * threads / bandwidth);
        }
        // A GEMV that reads faster than the reference means the reference is not the best read (or the
        // machine was busier while it ran): say so rather than print "% bw" past 100 without comment.
        if (fastest_gemv > *std::max_element(references.begin(), references.end()))
            std::printf("note: a GEMV read %.1f GB/s, more than the read bandwidth: the reference is low in this run\n",
                        fastest_gemv);
        std::printf("\n");
    }

    // ---- matmul at SmolLM2-135M's shapes: hidden 576, 9 q heads / 3 kv heads of 64, MLP 1536, vocab 49152.
    struct Shape {
        const char* what;
        int K, N;
    };
    const Shape shapes[] = {{"q/o proj", 576, 576}, {"k/v proj", 576, 192}, {"gate/up", 576, 1536},
                            {"down", 1536, 576},    {"lm head", 576, 49152}};
    const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q4_0, DType::Q5_K, DType::Q6_K};
    std::printf("matmul  x[n, K] @ w[N, K]^T   decode n=1: GB/s of weights   prefill n=512: GFLOP/s\n");
    std::printf("%-9s %5s %6s |", "", "K", "N");
    for (DType dt : dtypes) std::printf(" %8s n=1 %8s", std::string(dtype_name(dt)).c_str(), "n=512");
    std::printf("\n");
    for (const Shape& s : shapes) {
        std::printf("%-9s %5d %6d |", s.what, s.K, s.N);
        const std::vector<float> wf = random_floats(rng, static_cast<size_t>(s.N) * s.K);
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(512) * s.K);
        std::vector<float> out(static_cast<size_t>(512) * s.N);
        for (DType dt : dtypes) {
            if (s.K % dtype_block_elems(dt) != 0) {  // Q4_K needs rows of 256-value blocks
                std::printf(" %12s %8s", "n/a", "n/a");
                continue;
            }
            const size_t row_bytes = dtype_row_bytes(dt, s.K);
            std::vector<uint8_t> w(row_bytes * s.N);
            for (int r = 0; r < s.N; ++r)
                quantize_row(dt, wf.data() + static_cast<size_t>(r) * s.K, w.data() + r * row_bytes, s.K);
            // As the engine holds it: F32/F16/BF16 repacked into panels (the backend owns the copy).
            const WeightView view = backend.repack_matmul_weight({w.data(), dt, s.N, s.K});
            const double t1 = median_seconds([&] { backend.matmul(x.data(), 1, view, nullptr, out.data()); }, min_time);
            const double tp = median_seconds([&] { backend.matmul(x.data(), 512, view, nullptr, out.data()); }, min_time);
            std::printf(" %8.1f GB/s %8.1f", static_cast<double>(w.size()) / t1 / 1e9,
                        2.0 * 512 * s.K * s.N / tp / 1e9);
        }
        std::printf("\n");
    }

    // ---- one decoder layer's matmuls (q, k, v, o, gate, up, down) by batch size: where naive batching
    // (a few rows) and continuous batching (tens of rows) sit between weight streaming and compute.
    const int batches[] = {1, 8, 16, 32, 64, 128, 512};
    std::printf("\nmatmul  one SmolLM2-135M layer (q k v o gate up down), GFLOP/s by batch rows n\n%-8s |", "");
    for (int n : batches) std::printf(" %7d", n);
    std::printf("\n");
    // "x30": the model's 30 layers, each with its own weights (F32: 400 MiB), so they stream from memory
    // as in a real step instead of staying in the caches.
    struct LayerRow {
        DType dt;
        int copies;
    };
    const Shape layer[] = {{"q", 576, 576},     {"k", 576, 192}, {"v", 576, 192},   {"o", 576, 576},
                           {"gate", 576, 1536}, {"up", 576, 1536}, {"down", 1536, 576}};
    for (LayerRow row : {LayerRow{DType::F32, 1}, LayerRow{DType::F32, 30}, LayerRow{DType::F16, 1}, LayerRow{DType::F16, 30},
                         LayerRow{DType::BF16, 1}, LayerRow{DType::BF16, 30}, LayerRow{DType::Q8_0, 1}, LayerRow{DType::Q8_0, 30}}) {
        const DType dt = row.dt;
        std::vector<std::vector<uint8_t>> ws;
        std::vector<WeightView> views;
        double flops_per_row = 0;
        for (int c = 0; c < row.copies; ++c)
            for (const Shape& s : layer) {
                const std::vector<float> wf = random_floats(rng, static_cast<size_t>(s.N) * s.K);
                const size_t row_bytes = dtype_row_bytes(dt, s.K);
                ws.emplace_back(row_bytes * s.N);
                for (int r = 0; r < s.N; ++r)
                    quantize_row(dt, wf.data() + static_cast<size_t>(r) * s.K, ws.back().data() + r * row_bytes, s.K);
                flops_per_row += 2.0 * s.K * s.N;
            }
        for (size_t i = 0; i < ws.size(); ++i) {
            const Shape& s = layer[i % std::size(layer)];
            views.push_back(backend.repack_matmul_weight({ws[i].data(), dt, s.N, s.K}));
        }
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(512) * 1536);
        std::vector<float> out(static_cast<size_t>(512) * 1536);
        std::printf("%-8s |", (std::string(dtype_name(dt)) + (row.copies > 1 ? " x30" : "")).c_str());
        for (int n : batches) {
            const double t = median_seconds([&] {
                for (const WeightView& v : views) backend.matmul(x.data(), n, v, nullptr, out.data());
            }, min_time);
            std::printf(" %7.1f", flops_per_row * n / t / 1e9);
        }
        std::printf("\n");
    }

    // ---- paged attention decode: one query token per sequence, blocks of 16 scattered over the pool.
    // SmolLM2's heads, and Gemma 3 1B's (one kv head: a single sequence's long context is split over the
    // threads in partitions).
    struct AttentionShape {
        const char* model;
        int H, Hkv, D;
        std::vector<int> seqs, contexts;
    };
    const AttentionShape attention_shapes[] = {{"SmolLM2-135M", 9, 3, 64, {1, 16, 64}, {512, 2048}},
                                               {"Gemma 3 1B", 4, 1, 256, {1, 4}, {512, 2048, 8192}}};
    // One row: num_seqs sequences of ctx tokens each decode one query token.
    auto time_attention = [&](const AttentionShape& shape, DType kv_dtype, int num_seqs, int ctx) {
        const int H = shape.H, Hkv = shape.Hkv, D = shape.D, B = 16;
        const int blocks_per_seq = (ctx + B - 1) / B;
        const int num_blocks = num_seqs * blocks_per_seq + 1;
        const KvCacheLayout layout{1, num_blocks, B, Hkv, D, kv_dtype};
        // The pool comes from the backend, as the engine's does (it may ask for huge pages).
        const std::vector<float> init = random_floats(rng, layout.total_elems());
        void* cache = backend.allocate(layout.total_bytes());
        if (kv_dtype == DType::F32)
            std::copy(init.begin(), init.end(), static_cast<float*>(cache));
        else
            std::transform(init.begin(), init.end(), static_cast<uint16_t*>(cache), f32_to_f16);
        std::vector<int32_t> perm(num_blocks);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<int32_t> block_tables(perm.begin(), perm.begin() + num_seqs * blocks_per_seq);
        std::vector<int32_t> query_start_loc(num_seqs + 1), seq_lens(num_seqs, ctx);
        std::iota(query_start_loc.begin(), query_start_loc.end(), 0);
        std::vector<int64_t> slot_mapping(num_seqs);
        for (int s = 0; s < num_seqs; ++s)
            slot_mapping[s] = static_cast<int64_t>(block_tables[s * blocks_per_seq + (ctx - 1) / B]) * B + (ctx - 1) % B;
        AttentionMetadata meta;
        meta.num_tokens = num_seqs;
        meta.num_seqs = num_seqs;
        meta.query_start_loc = query_start_loc.data();
        meta.seq_lens = seq_lens.data();
        meta.block_tables = block_tables.data();
        meta.max_blocks_per_seq = blocks_per_seq;
        meta.slot_mapping = slot_mapping.data();
        meta.max_seq_len = ctx;
        const std::vector<float> q = random_floats(rng, static_cast<size_t>(num_seqs) * H * D);
        std::vector<float> out(q.size());
        const double t = median_seconds(
            [&] { backend.paged_attention(q.data(), meta, layout, cache, 0, H, {0.125f}, out.data()); }, min_time);
        const double kv_bytes = 2.0 * num_seqs * ctx * Hkv * D * layout.elem_bytes();
        std::printf("%6s %8d %8d | %10.1f %10.1f\n", dtype_name(kv_dtype).data(), num_seqs, ctx, t * 1e6,
                    kv_bytes / t / 1e9);
        backend.deallocate(cache);
    };
    for (const AttentionShape& shape : attention_shapes) {
        std::printf("\npaged attention decode, %s  (%d q heads, %d kv heads, head_dim %d, block 16)\n", shape.model,
                    shape.H, shape.Hkv, shape.D);
        std::printf("%6s %8s %8s | %10s %10s\n", "K/V", "seqs", "context", "us/call", "GB/s K/V");
        for (DType kv_dtype : {DType::F32, DType::F16})
            for (int num_seqs : shape.seqs)
                for (int ctx : shape.contexts) time_attention(shape, kv_dtype, num_seqs, ctx);
    }
    return 0;
}
