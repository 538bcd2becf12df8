// kvscope-model-bench: single-stream prefill and decode speed of a model, measured the way llama-bench
// measures it (pp N: one prompt of N random tokens in one forward pass; tg N: N single-token decode
// steps from an empty context), so the two can be run side by side on the same GGUF file.
//   kvscope-model-bench --model FILE [--threads T] [-p 512] [-n 128] [-r 5] [-ctk auto|f32|f16|bf16]
// -ctk (llama-bench's name; also --cache-type-k, --kv-cache-dtype) is the KV cache type: auto follows
// the weights; llama-bench's default is f16, so pass -ctk f16 for a like-for-like run.
// side_by_side.py (beside this file) runs it and llama-bench alternately and prints the ratios.
#include "bench/read_reference.h"
#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "cpu/cpu_kernel_sets.h"
#include "cpu/thread_pool.h"
#include "kv/kv_cache_dtype.h"
#include "model/model.h"
#include "runner/model_runner.h"
#include "util/errors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* what, const std::vector<double>& rates) {
    double mean = 0, var = 0;
    for (double r : rates) mean += r / rates.size();
    for (double r : rates) var += (r - mean) * (r - mean) / std::max<size_t>(1, rates.size() - 1);
    std::printf("| %-8s | %10.2f ± %7.2f t/s |\n", what, mean, std::sqrt(var));
}

}  // namespace

int main(int argc, char** argv) {
    // llama-bench spells the KV cache type -ctk, which CLI11 would read as -c -t -k: give it its long name.
    static char cache_type_k[] = "--cache-type-k";
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "-ctk") == 0) argv[i] = cache_type_k;
    std::string spec, kv_cache_dtype = "auto";
    int threads = cpu::default_num_threads(), pp = 512, tg = 128, reps = 5;
    using command_line::int_in;
    auto app = command_line::make_app("kvscope-model-bench",
                                      "Single-stream prefill (pp) and decode (tg) speed of a model, as llama-bench "
                                      "measures them.");
    app->add_option("-m,--model", spec, "a .gguf file, a Hugging Face directory, or dummy:PRESET")
        ->type_name("MODEL")->required();
    app->add_option("-t,--threads", threads, "CPU threads")->type_name("UINT")->check(int_in(1));
    app->add_option("-p", pp, "prompt tokens of the prefill test (one forward pass)")
        ->type_name("UINT")->check(int_in(1, 1 << 20));
    app->add_option("-n", tg, "tokens of the decode test (one step each)")->type_name("UINT")->check(int_in(1, 1 << 20));
    app->add_option("-r", reps, "repetitions of each test")->type_name("UINT")->check(int_in(1));
    app->add_option("--cache-type-k,--kv-cache-dtype", kv_cache_dtype,
                    "KV cache type, also -ctk (auto = as the weights; llama-bench's default is f16)")
        ->type_name("auto|f32|f16|bf16");
    bool no_read_reference = false;
    app->add_flag("--no-read-reference", no_read_reference,
                  "skip the read-bandwidth reference measured beside each tg run (256 MiB, about 0.3 s a run)");
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;
    try {
        auto model = load_model(spec);
        const std::unique_ptr<Backend> cpu_backend = cpu::make_cpu_backend(threads);
        Backend& backend = *cpu_backend;
        const int block_size = 16, max_len = pp + tg + 16;
        const int num_blocks = (max_len + block_size - 1) / block_size;
        const DType kv_dtype = resolve_kv_cache_dtype(kv_cache_dtype, model->config.weight_dtype, backend);
        ModelRunner runner(*model, backend, num_blocks, block_size, pp, 1, kv_dtype);
        std::vector<int32_t> table(num_blocks);
        for (int b = 0; b < num_blocks; ++b) table[b] = b;
        std::mt19937 rng(42);
        std::vector<int32_t> tokens(max_len);
        for (auto& t : tokens) t = static_cast<int32_t>(rng() % model->config.vocab_size);
        ModelInput in;
        auto run = [&](int start, int n) {
            in.clear();
            in.add_sequence(tokens.data(), start, n, table, block_size, true);
            in.finalize();
            runner.execute(in);
        };
        run(0, std::min(pp, 16));  // warm-up: page in the weights, grow scratch
        std::printf("model %s, %d threads, backend %s (kernels %s), KV cache %s\n", spec.c_str(), threads,
                    backend.name().c_str(), cpu::describe_cpu_kernel_set(backend.kernel_set()).c_str(),
                    kv_cache_dtype_name(kv_dtype).c_str());
        // The decode roofline: a tg step streams every matrix once (the lm head in full; the embedding
        // lookup reads one row) and the KV cache of its context; bytes per token x tokens/s is the read
        // rate achieved, set against the threads' read bandwidth measured just before and after each tg run
        // (bench/read_reference.h; kvscope-kernel-bench sets its GEMVs against the same).
        const ModelWeights& w = model->weights;
        double matrix_bytes = static_cast<double>(w.lm_head.rows) * dtype_row_bytes(w.lm_head.dtype, w.lm_head.cols);
        double kv_bytes = 0;
        for (const LayerWeights& L : w.layers) {
            for (const WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
                matrix_bytes += static_cast<double>(v->rows) * dtype_row_bytes(v->dtype, v->cols);
            // K and V of the context, averaged over the tg steps (step i attends to i + 1 positions)
            kv_bytes += 2.0 * dtype_row_bytes(kv_dtype, L.wk.rows) * (tg + 1) / 2.0;
        }
        std::unique_ptr<bench::ReadReference> reference;
        int streams = 1;
        std::string tried;
        if (!no_read_reference) {
            reference = std::make_unique<bench::ReadReference>(backend, threads, 0.1);
            reference->best(streams, tried);
        }
        std::vector<double> pp_rates, tg_rates, tg_shares;
        for (int r = 0; r < reps; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            run(0, pp);
            pp_rates.push_back(pp / seconds_since(t0));
            const double before = reference ? reference->read_at(streams) : 0;
            t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < tg; ++i) run(i, 1);
            tg_rates.push_back(tg / seconds_since(t0));
            if (reference) tg_shares.push_back((matrix_bytes + kv_bytes) * tg_rates.back() / 1e9 / ((before + reference->read_at(streams)) / 2));
        }
        report(("pp" + std::to_string(pp)).c_str(), pp_rates);
        report(("tg" + std::to_string(tg)).c_str(), tg_rates);
        double tg_mean = 0;
        for (double r : tg_rates) tg_mean += r / tg_rates.size();
        std::printf("tg bytes/token: %.1f MB (matrices %.1f MB + KV %.2f MB): %.1f GB/s read at %.2f t/s\n",
                    (matrix_bytes + kv_bytes) / 1e6, matrix_bytes / 1e6, kv_bytes / 1e6,
                    (matrix_bytes + kv_bytes) * tg_mean / 1e9, tg_mean);
        if (reference) {
            std::sort(tg_shares.begin(), tg_shares.end());
            std::printf("tg read bandwidth: %.0f%% of the threads' read (median of %d runs, %.0f-%.0f%%; each against the mean "
                        "of %d-stream reads just before and after it; streams per thread at the start %s GB/s)\n",
                        100 * tg_shares[tg_shares.size() / 2], reps, 100 * tg_shares.front(), 100 * tg_shares.back(), streams,
                        tried.c_str());
        }
    } catch (const BadInput& e) {
        std::fprintf(stderr, "kvscope-model-bench: error: %s\n", e.what());
        return 2;
    } catch (const std::invalid_argument& e) {  // KVSCOPE_CPU_VARIANT names a set this CPU cannot run
        std::fprintf(stderr, "kvscope-model-bench: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
