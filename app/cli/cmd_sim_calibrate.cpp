// kvscope-cli sim-calibrate: fits the sim backend's step-time constants to the steps a real run
// measured (a `bench --save-timeline` result) on the device described by --gpu (or by its peak figures)
// and writes the calibration file `--sim-calibration` reads (docs/DESIGN.md section 9).
#include "commands.h"

#include "command_line/command_line.h"
#include "command_line/option_checks.h"

#include "kv/kv_cache_dtype.h"
#include "metrics/export.h"
#include "model/model.h"
#include "sim/calibration_fit.h"
#include "sim/gpu_specs.h"
#include "util/errors.h"
#include "util/json_file.h"

#include <cstdio>
#include <fstream>

namespace kvscope::cli {

namespace {

struct CalibrateArgs {
    std::string timeline, model, gpu, device_name = "custom", initial, output;
    double peak_tflops = 0, bandwidth_gbs = 0;
    int tensor_parallel_size = 1;
};

struct TimelineRun {
    std::string label, kv_cache_dtype;
    const nlohmann::json* steps = nullptr;
};

// Every run of a result file that carries a timeline: the top level, naive/paged, or sweep rows.
std::vector<TimelineRun> timeline_runs(const nlohmann::json& j) {
    std::vector<TimelineRun> runs;
    const auto add = [&](const nlohmann::json& run, const std::string& label) {
        if (!run.is_object() || !run.contains("timeline")) return;
        if (!run["timeline"].is_array()) throw BadInput("timeline of run '" + label + "' is not an array");
        const nlohmann::json& ec = run.contains("engine_config") ? run["engine_config"] : nlohmann::json::object();
        runs.push_back({label, ec.value("kv_cache_dtype", "auto"), &run["timeline"]});
    };
    add(j, j.value("label", "run"));
    for (const char* mode : {"naive", "paged"})
        if (j.contains(mode)) add(j[mode], mode);
    if (j.contains("sweep") && j["sweep"].is_array())
        for (const auto& row : j["sweep"]) add(row, row.value("label", "sweep"));
    return runs;
}

GpuSpec device_spec(const CalibrateArgs& a) {
    if (!a.gpu.empty()) {
        if (a.peak_tflops > 0 || a.bandwidth_gbs > 0)
            throw BadInput("--gpu takes its figures from the table: give either --gpu or --peak-tflops with "
                           "--memory-bandwidth-gbs");
        return find_gpu_spec(a.gpu);
    }
    if (!(a.peak_tflops > 0) || !(a.bandwidth_gbs > 0))
        throw BadInput("no device: give --gpu (" + gpu_spec_names() +
                       ") or, for another device (a CPU), both --peak-tflops and --memory-bandwidth-gbs");
    GpuSpec s;
    s.name = a.device_name;
    s.display_name = a.device_name + " (" + std::to_string(a.peak_tflops) + " TFLOP/s, " +
                     std::to_string(a.bandwidth_gbs) + " GB/s, given)";
    s.bf16_flops = a.peak_tflops * 1e12;
    s.memory_bandwidth = a.bandwidth_gbs * 1e9;
    s.interconnect_bandwidth = 1e12;  // unused at tensor_parallel_size 1
    return s;
}

}  // namespace

int run_sim_calibrate(int argc, char** argv) {
    auto app = command_line::make_app(
        "kvscope-cli sim-calibrate",
        "Fits the sim backend's step-time constants (efficiencies, overheads) to the steps a real run measured "
        "(`bench --save-timeline`) and writes the calibration file that --sim-calibration reads.");
    CalibrateArgs a;
    using namespace command_line;
    app->add_option("--timeline", a.timeline, "a bench result JSON written with --save-timeline")
        ->type_name("FILE")->required();
    app->add_option("--model", a.model, "the model that ran (default: the result's model_id); only its shapes are read")
        ->type_name("MODEL");
    app->add_option("--gpu", a.gpu, "the device it ran on, from the sim table (" + gpu_spec_names() + ")")
        ->type_name("GPU");
    app->add_option("--peak-tflops", a.peak_tflops, "another device's peak dense FLOP/s, in TFLOP/s (with --memory-bandwidth-gbs)")
        ->type_name("X")->check(real_above(0));
    app->add_option("--memory-bandwidth-gbs", a.bandwidth_gbs, "another device's peak memory bandwidth, in GB/s")
        ->type_name("X")->check(real_above(0));
    app->add_option("--device-name", a.device_name, "the calibration file's gpu for another device")
        ->type_name("NAME")->capture_default_str();
    app->add_option("--tensor-parallel-size", a.tensor_parallel_size, "GPUs the run used")
        ->type_name("UINT")->check(int_in(1, 64))->capture_default_str();
    app->add_option("--initial", a.initial, "a calibration file whose constants start the fit (default: sim-v1's)")
        ->type_name("FILE");
    app->add_option("--output", a.output, "the calibration file to write")->type_name("FILE")->required();
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;

    const GpuSpec gpu = device_spec(a);
    {
        std::ofstream probe(a.output, std::ios::app);
        if (!probe) throw BadInput("--output: cannot write " + a.output);
    }
    const nlohmann::json result = read_json_file(a.timeline, "--timeline");
    if (!result.is_object()) throw BadInput("--timeline " + a.timeline + ": not a bench result (expected an object)");
    const std::string backend = result.value("backend", "");
    if (backend.starts_with("kvscope-sim"))
        throw BadInput("--timeline " + a.timeline + ": a simulated run (" + backend +
                       "): calibrate from measured steps (--backend cpu or cuda)");
    const std::vector<TimelineRun> runs = timeline_runs(result);
    if (runs.empty())
        throw BadInput("--timeline " + a.timeline + ": no timeline in the result (run bench with --save-timeline)");
    if (a.model.empty()) a.model = result.value("model_id", "");
    if (a.model.empty()) throw BadInput("--timeline " + a.timeline + ": no model_id; give --model");

    const std::unique_ptr<Model> model = load_model(a.model, /*with_weights=*/false);
    const ModelConfig& c = model->config;
    const double weight_bytes =
        static_cast<double>(dtype_block_bytes(c.weight_dtype)) / static_cast<double>(dtype_block_elems(c.weight_dtype));
    StepTimeConstants start = a.initial.empty() ? StepTimeConstants{} : read_calibration(a.initial, gpu.name);

    // One fit over every run's steps (naive and paged, or a sweep's rows), all with one KV element type.
    const auto any_type = [](DType) { return true; };
    const DType kv = resolve_kv_cache_dtype(runs[0].kv_cache_dtype, c.weight_dtype, "timeline", any_type);
    std::vector<MeasuredStep> steps;
    for (const TimelineRun& r : runs) {
        if (resolve_kv_cache_dtype(r.kv_cache_dtype, c.weight_dtype, "timeline", any_type) != kv)
            throw BadInput("--timeline " + a.timeline + ": runs with different KV cache types (" + runs[0].kv_cache_dtype +
                           ", " + r.kv_cache_dtype + "): calibrate from one");
        for (const auto& s : *r.steps) {
            if (!s.is_object() || !s.contains("work"))
                throw BadInput("--timeline " + a.timeline + ": run '" + r.label +
                               "' has steps without \"work\" (written by an older kvscope): run the benchmark again");
            try {
                steps.push_back({step_work_from_json(s["work"]), s.at("duration").get<double>()});
            } catch (const nlohmann::json::exception& e) {
                throw BadInput("--timeline " + a.timeline + ": run '" + r.label + "', step " +
                               std::to_string(s.value("step", -1)) + ": " + e.what());
            }
        }
    }
    const StepTimeModel step_model(c, gpu, a.tensor_parallel_size, start, weight_bytes,
                                   static_cast<double>(dtype_block_bytes(kv)));
    const CalibrationFit fit = fit_calibration(step_model, steps);

    const std::string source = "sim-calibrate " + result_date() + ": " + std::to_string(fit.num_steps) + " steps of " +
                               a.model + " on " + (backend.empty() ? "an unnamed backend" : backend) + " (" +
                               gpu.display_name + ")";
    write_json(a.output, calibration_to_json(fit, gpu.name, source));
    std::printf("calibrated %s from %d measured steps (%s, %s)\n", gpu.name.c_str(), fit.num_steps, a.model.c_str(),
                backend.c_str());
    std::printf("  |error| per step, median (mean): %.1f%% (%.1f%%) with the starting constants, %.1f%% (%.1f%%) fitted\n",
                fit.median_abs_rel_error_before * 100, fit.mean_abs_rel_error_before * 100,
                fit.median_abs_rel_error_after * 100, fit.mean_abs_rel_error_after * 100);
    std::printf("  total: measured %.3f s, predicted %.3f s before, %.3f s fitted\n", fit.measured_seconds,
                fit.predicted_seconds_before, fit.predicted_seconds_after);
    const StepTimeConstants& k = fit.constants;
    std::printf("  mfu_linear %.3g  bw_efficiency_linear %.3g  mfu_attention %.3g  bw_efficiency_attention %.3g\n"
                "  step_overhead %.1f us  per_seq_overhead %.2f us\n",
                k.mfu_linear, k.bw_efficiency_linear, k.mfu_attention, k.bw_efficiency_attention, k.step_overhead * 1e6,
                k.per_seq_overhead * 1e6);
    for (const std::string& why : fit.kept) std::printf("  kept %s\n", why.c_str());
    std::printf("wrote %s\n", a.output.c_str());
    return 0;
}

}  // namespace kvscope::cli
