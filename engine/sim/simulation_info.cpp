#include "sim/simulation_info.h"

#include "llm_engine.h"
#include "sim/sim_model_runner.h"

namespace kvscope {

nlohmann::json simulation_to_json(const LlmEngine& engine) {
    const SimModelRunner* sim = engine.sim_model_runner();
    if (!sim) return nullptr;
    const StepTimeModel& m = sim->step_time_model();
    const StepTimeConstants& k = m.constants();
    const MemoryStats mem = engine.memory_stats();
    return {{"simulated", true},
            {"label", engine.simulation_label()},
            {"gpu", m.gpu().name},
            {"gpu_name", m.gpu().display_name},
            {"tensor_parallel_size", m.tensor_parallel_size()},
            {"model", engine.model().name},
            {"step_time_model", m.version()},
            {"constants",
             {{"mfu_linear", k.mfu_linear},
              {"bw_efficiency_linear", k.bw_efficiency_linear},
              {"mfu_attention", k.mfu_attention},
              {"bw_efficiency_attention", k.bw_efficiency_attention},
              {"step_overhead_us", k.step_overhead * 1e6},
              {"per_seq_overhead_us", k.per_seq_overhead * 1e6},
              {"allreduce_latency_us", (k.allreduce_latency >= 0 ? k.allreduce_latency : m.gpu().allreduce_latency) * 1e6},
              {"non_torch_mib", static_cast<double>(k.non_torch_bytes) / 1048576.0}}},
            {"constants_source", k.source},
            {"num_blocks", engine.num_blocks()},
            {"device_memory_bytes", mem.device_total_bytes},
            {"weight_bytes", mem.weights_bytes},
            {"simulated_busy_seconds", sim->busy_seconds()}};
}

}  // namespace kvscope
