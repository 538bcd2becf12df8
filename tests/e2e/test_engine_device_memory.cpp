// The KV pool sized from device memory, as vLLM's gpu_memory_utilization does, without a GPU: the
// RecordingBackend (tests/support) acts as a device of a set size that counts weights and allocations as
// used. The engine uploads the weights, profiles one step of the largest shape, and gives the pool what
// the fraction leaves; an explicit kv_cache_memory wins but must fit; too little memory is BadInput at
// start-up; a backend without device memory (the CPU) ignores the fraction; the profile run changes no
// output and leaks no block.
#include "test_support.h"
#include "recording_backend.h"

#include "llm_engine.h"
#include "util/errors.h"

using namespace kvscope;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::shared_ptr<const Model> tiny() {
    static std::shared_ptr<const Model> m = load_model("dummy:tiny");
    return m;
}

EngineConfig base_config(double utilization) {
    EngineConfig c;
    c.scheduler.max_model_len = 256;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_num_batched_tokens = 512;
    c.num_threads = 2;
    c.gpu_memory_utilization = utilization;
    c.check_invariants = true;
    return c;
}

struct Device {
    test::RecordingBackend* backend = nullptr;
    std::unique_ptr<LlmEngine> engine;
};

Device on_device(const EngineConfig& c, int64_t total) {
    auto owned = std::make_unique<test::RecordingBackend>(2);
    owned->set_device_memory(total);
    Device d;
    d.backend = owned.get();
    d.engine = std::make_unique<LlmEngine>(tiny(), c, std::move(owned));
    return d;
}

int64_t bytes_per_block(const LlmEngine& e) {
    return static_cast<int64_t>(e.model_runner().kv_cache_bytes()) / e.num_blocks();
}

std::vector<std::vector<int32_t>> generate(LlmEngine& engine, const std::vector<std::vector<int32_t>>& prompts) {
    std::vector<std::string> ids;
    for (const auto& p : prompts) {
        NewRequest r;
        r.prompt_token_ids = p;
        r.sampling_params.temperature = 0;
        r.sampling_params.max_tokens = 16;
        r.sampling_params.ignore_eos = true;
        ids.push_back(engine.add_request(r).front());
    }
    while (engine.has_unfinished_requests()) engine.step();
    std::vector<std::vector<int32_t>> out;
    for (const auto& id : ids) out.push_back(engine.request_output_token_ids(id));
    return out;
}

}  // namespace

class TestEngineDeviceMemory : public QObject {
    Q_OBJECT

private slots:
    // The pool fills the fraction to within one block, after the profile run's peak (which is still
    // allocated: the activations stay), and a larger fraction buys exactly its bytes in blocks.
    void pool_fills_the_fraction() {
        const int64_t total = 256 * kMiB;
        int prev_blocks = 0;
        for (double u : {0.5, 0.75}) {
            const Device d = on_device(base_config(u), total);
            int64_t t = 0, used = 0;
            d.backend->device_memory(t, used);
            const int64_t limit = static_cast<int64_t>(u * total), bpb = bytes_per_block(*d.engine);
            QVERIFY2(used <= limit && used > limit - bpb,
                     qPrintable(QString("used %1 limit %2 block %3").arg(used).arg(limit).arg(bpb)));
            QVERIFY2(d.backend->peak_used() <= limit, "the profile run's peak must fit the fraction too");
            if (prev_blocks) {
                const int64_t expected = static_cast<int64_t>(0.25 * total) / bpb;
                QVERIFY(std::abs(d.engine->num_blocks() - prev_blocks - expected) <= 1);
            }
            prev_blocks = d.engine->num_blocks();
        }
    }

    void explicit_budget_wins_and_must_fit() {
        EngineConfig c = base_config(0.5);
        c.kv_cache_memory = 4 * kMiB;
        const Device d = on_device(c, 256 * kMiB);
        QCOMPARE(int64_t(d.engine->num_blocks()), 4 * kMiB / bytes_per_block(*d.engine));
        c.kv_cache_memory = 300 * kMiB;
        try {
            on_device(c, 256 * kMiB);
            QFAIL("a pool larger than the device must be refused at start-up");
        } catch (const BadInput& e) {
            QVERIFY2(std::string(e.what()).find("--kv-cache-memory") != std::string::npos, e.what());
        }
    }

    void too_little_memory_is_bad_input() {
        // dummy:tiny's weights and activations take a few MiB: 2% of 64 MiB leaves nothing for the pool.
        try {
            on_device(base_config(0.02), 64 * kMiB);
            QFAIL("a fraction that leaves no room for one request must be refused at start-up");
        } catch (const BadInput& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("--gpu-memory-utilization 0.02") != std::string::npos, e.what());
            QVERIFY2(what.find("max_model_len 256") != std::string::npos, e.what());
        }
    }

    // A backend without an attention kernel for the model's head size (the CUDA backend compiles a few)
    // refuses the model at start-up, naming the shape.
    void unsupported_head_size_is_bad_input() {
        auto owned = std::make_unique<test::RecordingBackend>(2);
        owned->set_device_memory(256 * kMiB);
        owned->set_attention_head_dims({64, 128});
        const int head_dim = tiny()->config.head_dim;
        QVERIFY(head_dim != 64 && head_dim != 128);
        try {
            LlmEngine engine(tiny(), base_config(0.5), std::move(owned));
            QFAIL("a model whose head size has no attention kernel must be refused at start-up");
        } catch (const BadInput& e) {
            QVERIFY2(std::string(e.what()).find("head_dim " + std::to_string(head_dim)) != std::string::npos, e.what());
        }
        // The same backend with the size: the engine starts and generates.
        auto ok = std::make_unique<test::RecordingBackend>(2);
        ok->set_device_memory(256 * kMiB);
        ok->set_attention_head_dims({head_dim});
        LlmEngine engine(tiny(), base_config(0.5), std::move(ok));
        QCOMPARE(int(generate(engine, {{1, 2, 3}}).front().size()), 16);
    }

    void cpu_ignores_the_fraction() {
        LlmEngine a(tiny(), base_config(0.1));
        LlmEngine b(tiny(), base_config(0.9));
        QCOMPARE(a.num_blocks(), b.num_blocks());
    }

    // The profile run writes the cache it had; the pool that replaces it starts clean, and the outputs
    // are those of an engine that never profiled.
    void profiled_engine_serves_the_same_tokens() {
        const auto prompts = test::random_prompts(5, tiny()->config.vocab_size, test::test_seed(20261203));
        Device d = on_device(base_config(0.5), 256 * kMiB);
        EngineConfig cpu = base_config(0.5);
        LlmEngine reference(tiny(), cpu);
        QCOMPARE(generate(*d.engine, prompts), generate(reference, prompts));
        QCOMPARE(d.engine->kv_cache_manager().num_free_blocks(), d.engine->num_blocks());
    }
};

QTEST_APPLESS_MAIN(TestEngineDeviceMemory)
#include "test_engine_device_memory.moc"
