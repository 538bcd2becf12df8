// kvscope-cuda-bench: kernel benchmarks of the CUDA backend (not tests; llm.c's dev/cuda habit: the
// op tests validate, this measures).
//  1. Paged-attention decode bandwidth: K/V bytes read per call / time, against the device's peak
//     (memory clock x bus width x 2), over scattered block tables.
//  2. Decode tokens/s of dummy:llama-1b (BF16 weights, F32 KV cache) at batch 1, 16, 64, 256 through the
//     model runner, op by op (eager) and replayed as CUDA graphs, and the per-step time against the
//     weight-streaming roofline (weight bytes / peak) and the roofline with the KV cache read added.
//   kvscope-cuda-bench [--model dummy:llama-1b:bf16] [--peak-gbps G] [--quick]
#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "cuda/cuda_backend.h"
#include "model/model.h"
#include "runner/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct AttentionCase {
    int batch, ctx, num_kv_heads, gqa, head_dim;
};

// One decode step of `batch` sequences of `ctx` tokens each; returns achieved GB/s of K/V reads.
double bench_attention(cuda::CudaBackend& gpu, const AttentionCase& c, int block_size, int iters) {
    const int blocks_per_seq = (c.ctx + block_size - 1) / block_size;
    const int num_blocks = c.batch * blocks_per_seq + 1;
    const KvCacheLayout layout{1, num_blocks, block_size, c.num_kv_heads, c.head_dim, DType::F32};
    const int H = c.num_kv_heads * c.gqa;
    std::mt19937 rng(7);
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // scattered, like a long-running pool
    std::vector<int32_t> tables(static_cast<size_t>(c.batch) * blocks_per_seq), qsl(c.batch + 1), lens(c.batch, c.ctx);
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = perm[i];
    for (int s = 0; s <= c.batch; ++s) qsl[s] = s;

    void* cache = gpu.allocate(layout.total_bytes());
    {  // finite contents: a 64 MiB random chunk, repeated
        std::vector<float> chunk(16u << 20);
        std::uniform_real_distribution<float> dist(-1, 1);
        for (float& x : chunk) x = dist(rng);
        const size_t total = layout.total_bytes(), step = chunk.size() * sizeof(float);
        for (size_t off = 0; off < total; off += step)
            gpu.copy_to_device(static_cast<char*>(cache) + off, chunk.data(), std::min(step, total - off));
    }
    std::vector<float> q_host(static_cast<size_t>(c.batch) * H * c.head_dim, 0.1f);
    auto upload = [&](const void* p, size_t bytes) {
        void* d = gpu.allocate(bytes);
        gpu.copy_to_device(d, p, bytes);
        return d;
    };
    void* q = upload(q_host.data(), q_host.size() * 4);
    void* out = gpu.allocate(q_host.size() * 4);
    void* d_tables = upload(tables.data(), tables.size() * 4);
    void* d_qsl = upload(qsl.data(), qsl.size() * 4);
    void* d_lens = upload(lens.data(), lens.size() * 4);
    AttentionMetadata meta;
    meta.num_tokens = c.batch;
    meta.num_seqs = c.batch;
    meta.query_start_loc = static_cast<const int32_t*>(d_qsl);
    meta.seq_lens = static_cast<const int32_t*>(d_lens);
    meta.block_tables = static_cast<const int32_t*>(d_tables);
    meta.max_blocks_per_seq = blocks_per_seq;
    meta.max_seq_len = c.ctx;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    auto run = [&] {
        gpu.paged_attention(static_cast<const float*>(q), meta, layout, cache, 0, H, {scale}, static_cast<float*>(out));
    };
    for (int i = 0; i < 3; ++i) run();
    gpu.synchronize();
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) run();
    gpu.synchronize();
    const double dt = (now_s() - t0) / iters;
    const double bytes = 2.0 * c.batch * c.ctx * c.num_kv_heads * c.head_dim * sizeof(float);
    for (void* p : {cache, q, out, d_tables, d_qsl, d_lens}) gpu.deallocate(p);
    std::printf("| %5d | %6d | %3d | %3d | %4d | %9.1f | %9.3f | %8.1f |", c.batch, c.ctx, c.num_kv_heads, c.gqa,
                c.head_dim, bytes / 1e6, dt * 1e3, bytes / dt / 1e9);
    return bytes / dt / 1e9;
}

int64_t weight_bytes(const WeightView& w) { return dtype_row_bytes(w.dtype, w.cols) * w.rows; }

}  // namespace

int main(int argc, char** argv) {
    std::string spec = "dummy:llama-1b:bf16";
    double peak_override = 0;
    bool quick = false;
    auto app = command_line::make_app("kvscope-cuda-bench",
                                      "Kernel benchmarks of the CUDA backend: paged-attention bandwidth, decode tokens/s.");
    app->add_option("--model", spec, "the model of the decode benchmark")->type_name("MODEL");
    app->add_option("--peak-gbps", peak_override, "the device's peak memory bandwidth (0 = memory clock x bus width)")
        ->type_name("GB/S")->check(command_line::real_in(0));
    app->add_flag("--quick", quick, "fewer cases and steps");
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;

    std::string why_not;
    auto backend = make_cuda_backend(0, &why_not);
    if (!backend) {
        std::fprintf(stderr, "kvscope-cuda-bench: %s; nothing to measure\n", why_not.c_str());
        return 1;
    }
    auto& gpu = static_cast<cuda::CudaBackend&>(*backend);
    const auto& info = gpu.device_info();
    const double peak = peak_override > 0 ? peak_override * 1e9 : info.peak_bandwidth;
    std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), peak memory bandwidth %.0f GB/s%s\n\n", info.name.c_str(),
                info.cc_major, info.cc_minor, info.num_sms, info.total_memory / 1073741824.0, peak / 1e9,
                peak_override > 0 ? " (given)" : " (memory clock x bus width)");

    try {
        // ---- 1. Paged attention, decode.
        std::printf("paged attention decode (F32 KV cache, block_size 16, scattered blocks)\n");
        std::printf("| batch |    ctx | Hkv | gqa |    D |   KV (MB) |  time (ms) |   GB/s   | of peak |\n");
        std::printf("|-------|--------|-----|-----|------|-----------|------------|----------|---------|\n");
        std::vector<AttentionCase> cases = {{1, 32768, 8, 4, 128}, {16, 8192, 8, 4, 128}, {64, 4096, 8, 4, 128},
                                            {256, 2048, 8, 4, 64}, {64, 4096, 8, 4, 64},  {256, 1024, 2, 7, 64}};
        if (quick) cases.resize(3);
        double best = 0;
        for (const auto& c : cases) {
            const double gbps = bench_attention(gpu, c, 16, quick ? 10 : 30);
            std::printf(" %6.1f%% |\n", 100.0 * gbps * 1e9 / peak);
            best = std::max(best, gbps);
        }
        std::printf("best: %.1f GB/s = %.1f%% of peak\n\n", best, 100.0 * best * 1e9 / peak);

        // ---- 2. Decode tokens/s of a model through the runner.
        std::printf("loading %s ...\n", spec.c_str());
        auto model = load_model(spec);
        const ModelConfig& mc = model->config;
        const ModelWeights& w = model->weights;
        int64_t streamed = weight_bytes(w.lm_head);  // every decode step reads every matrix once
        for (const auto& L : w.layers)
            for (const WeightView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
                streamed += weight_bytes(*m);
        const int ctx0 = 128, steps = quick ? 8 : 24, block_size = 16;
        const std::vector<int> batches = {1, 16, 64, 256};
        const int max_batch = batches.back();
        const int blocks_per_seq = (ctx0 + steps + 4 + block_size - 1) / block_size;  // positions < ctx0 + steps + 3
        ModelRunner runner(*model, gpu, max_batch * blocks_per_seq, block_size, max_batch, max_batch);
        std::printf("%s: %d layers, hidden %d, heads %d/%d, head_dim %d; %.2f GB of matrices streamed per step\n",
                    spec.c_str(), mc.num_layers, mc.hidden_size, mc.num_heads, mc.num_kv_heads, mc.head_dim,
                    streamed / 1e9);
        std::printf("decode steps at context %d..%d. step: the runner's whole step, ending with the logits of every\n"
                    "sequence copied to the host (batch x vocab x 4 bytes); forward: the same step with no logits\n"
                    "(no lm_head, no copy), against the roofline of the matrices it streams (+ its KV reads)\n",
                    ctx0, ctx0 + steps);
        std::printf("| batch | step (ms) | tokens/s | forward (ms) | weight roofline (ms) | +KV roofline (ms) | "
                    "forward of roofline |\n");
        std::printf("|-------|-----------|----------|--------------|----------------------|-------------------|"
                    "---------------------|\n");
        const int64_t streamed_no_head = streamed - weight_bytes(w.lm_head);
        std::vector<int32_t> tokens(ctx0 + 2 * steps + 8, 65);
        // A decode step of `batch` sequences at position pos: logits rows, device-sampled ids (top-p 0.95 at
        // temperature 1, only ids come back, as the engine runs CUDA requests), or neither.
        enum class Out { kLogits, kSampled, kNone };
        std::vector<std::vector<int32_t>> tables(max_batch, std::vector<int32_t>(blocks_per_seq));
        for (int s = 0; s < max_batch; ++s) std::iota(tables[s].begin(), tables[s].end(), s * blocks_per_seq);
        ModelInput in;
        auto step = [&](int batch, int pos, Out out) {
            in.clear();
            for (int s = 0; s < batch; ++s) in.add_sequence(tokens.data(), pos, 1, tables[s], block_size, out != Out::kNone);
            if (out == Out::kSampled) {
                SamplingRow row;
                row.temperature = 1.0f;
                row.top_p = 0.95f;
                row.offset = static_cast<uint64_t>(pos);
                in.sampling_rows.assign(batch, row);
                in.logits_to_host = false;
            }
            in.finalize();
            runner.execute(in);  // ends with the synchronous copy of logits or ids, if any
        };
        // Per-step time of `steps` decode steps after 3 warm-up steps (with graphs, the first one captures).
        auto time_steps = [&](int batch, Out out) {
            for (int i = 0; i < 3; ++i) step(batch, ctx0 + i, out);
            gpu.synchronize();
            const double t0 = now_s();
            for (int i = 0; i < steps; ++i) step(batch, ctx0 + i, out);
            gpu.synchronize();
            return (now_s() - t0) / steps;
        };
        struct GraphRow {
            int batch;
            double eager, graph, eager_sampled, graph_sampled;
            bool replayed;
        };
        std::vector<GraphRow> graph_rows;
        const int graph_context = blocks_per_seq * block_size;  // max_model_len of the captured steps
        for (int batch : batches) {
            runner.set_cuda_graphs(false, 0);
            const double dt = time_steps(batch, Out::kLogits);
            const double dt_fwd = time_steps(batch, Out::kNone);
            const double kv = static_cast<double>(batch) * (ctx0 + steps / 2) * mc.kv_bytes_per_token();
            const double roof_w = streamed_no_head / peak, roof_kv = (streamed_no_head + kv) / peak;
            std::printf("| %5d | %9.3f | %8.0f | %12.3f | %20.3f | %17.3f | %18.1f%% |\n", batch, dt * 1e3,
                        batch / dt, dt_fwd * 1e3, roof_w * 1e3, roof_kv * 1e3, 100.0 * roof_kv / dt_fwd);
            GraphRow g{batch, dt, 0, time_steps(batch, Out::kSampled), 0, false};
            runner.set_cuda_graphs(true, graph_context);
            const int64_t replays = runner.num_graph_replays();
            g.graph = time_steps(batch, Out::kLogits);
            g.graph_sampled = time_steps(batch, Out::kSampled);
            g.replayed = runner.num_graph_replays() >= replays + 2 * steps;
            runner.set_cuda_graphs(false, 0);
            graph_rows.push_back(g);
        }
        std::printf("\nCUDA graphs (--enforce-eager off): the same decode steps replayed as one graph per padded batch\n"
                    "size; with logits copied back, and with the device sampler (top-p 0.95) copying back only ids\n");
        std::printf("| batch | eager (ms) | graph (ms) | speedup | eager+sampler (ms) | graph+sampler (ms) | speedup | "
                    "graph+sampler tokens/s |\n");
        std::printf("|-------|------------|------------|---------|--------------------|--------------------|---------|"
                    "------------------------|\n");
        std::string summary;
        for (const GraphRow& g : graph_rows) {
            std::printf("| %5d | %10.3f | %10.3f | %6.2fx | %18.3f | %18.3f | %6.2fx | %22.0f |%s\n", g.batch,
                        g.eager * 1e3, g.graph * 1e3, g.eager / g.graph, g.eager_sampled * 1e3, g.graph_sampled * 1e3,
                        g.eager_sampled / g.graph_sampled, g.batch / g.graph_sampled, g.replayed ? "" : " NOT REPLAYED");
            char part[160];
            std::snprintf(part, sizeof part, " batch %d %.0f vs %.0f (%.2fx)%s;", g.batch, g.batch / g.graph_sampled,
                          g.batch / g.eager_sampled, g.eager_sampled / g.graph_sampled, g.replayed ? "" : " NOT REPLAYED");
            summary += part;
        }
        std::printf("graphs: decode tokens/s graph vs eager (device sampler):%s\n", summary.c_str());
        const auto acc = gpu.memory_account();
        std::printf("\ndevice memory: %.2f GB used of %.2f: weights %.2f, buffers (KV + activations) %.2f, "
                    "scratch %.2f, other %.2f\n",
                    acc.used / 1e9, acc.total / 1e9, acc.weights / 1e9, acc.buffers / 1e9, acc.scratch / 1e9,
                    acc.other / 1e9);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-cuda-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
