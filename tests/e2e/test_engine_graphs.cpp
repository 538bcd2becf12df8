// The model runner's CUDA-graph logic without a GPU, through RecordingBackend (tests/support), which
// captures and replays ops the way a CUDA graph does. Greedy and seeded generations of dummy:tiny and
// stories260K with graphs give the same tokens as with --enforce-eager, at batch sizes on and between
// the capture sizes (padded rows must neither write KV nor touch the real rows); graphs survive nothing
// they point at: a KV cache rebuild, buffer growth, switching graphs off and on mid-run. With a stand-in
// device sampler: greedy tokens are unchanged, device-sampled requests do not depend on their batch, and
// requests that need the host sampler (penalties, min_tokens) still get it. Every engine checks the
// scheduler and pool invariants after every step.
#include "engine_fixtures.h"
#include "test_support.h"
#include "recording_backend.h"

#include "llm_engine.h"

#include <functional>
#include <random>

using namespace kvscope;
using test::greedy;

namespace {

std::shared_ptr<const Model> load(const QString& name) {
    if (name == "stories260K") {
        static std::shared_ptr<const Model> m = load_model(test::models_dir() + "/stories260K-hf");
        return m;
    }
    static std::shared_ptr<const Model> m = load_model("dummy:tiny");
    return m;
}

NewRequest request(const std::vector<int32_t>& prompt, const SamplingParams& params) {
    NewRequest r;
    r.prompt_token_ids = prompt;
    r.sampling_params = params;
    return r;
}

struct Run {
    std::vector<std::vector<int32_t>> tokens;  // per request, in submission order
    int64_t replays = 0;
};

// Generates for every prompt with its params (one for all, or one each); before step `at_step`, applies
// `change` (if any).
Run generate(const std::shared_ptr<const Model>& model, EngineConfig config, const std::vector<std::vector<int32_t>>& ps,
             const std::vector<SamplingParams>& params, int at_step = -1,
             const std::function<void(EngineConfig&)>& change = {}, bool device_sampler = false) {
    config.check_invariants = true;
    auto backend = std::make_unique<test::RecordingBackend>(2, device_sampler);
    LlmEngine engine(model, config, std::move(backend));
    std::vector<std::string> ids;
    for (size_t i = 0; i < ps.size(); ++i)
        ids.push_back(engine.add_request(request(ps[i], params[params.size() == 1 ? 0 : i])).front());
    int step = 0;
    while (engine.has_unfinished_requests()) {
        if (step++ == at_step && change) {
            EngineConfig next = engine.config();
            change(next);
            engine.reconfigure(next);
        }
        engine.step();
    }
    Run r;
    for (const auto& id : ids) r.tokens.push_back(engine.request_output_token_ids(id));
    r.replays = engine.model_runner().num_graph_replays();
    return r;
}

EngineConfig base_config() {
    EngineConfig c;
    c.scheduler.max_model_len = 256;
    c.scheduler.max_num_seqs = 16;
    c.num_threads = 2;
    return c;
}

EngineConfig eager(EngineConfig c) {
    c.enforce_eager = true;
    return c;
}

}  // namespace

class TestEngineGraphs : public QObject {
    Q_OBJECT
    uint64_t seed_ = 0;

private slots:
    void initTestCase() { seed_ = test::test_seed(20251202); }

    void capture_sizes() {
        auto model = load("dummy:tiny");
        test::RecordingBackend backend;
        ModelRunner runner(*model, backend, 64, 16, 2048, 6);
        QVERIFY(runner.capture_sizes().empty());  // off until asked for
        runner.set_cuda_graphs(true, 256);
        QCOMPARE(runner.capture_sizes(), (std::vector<int>{1, 2, 4, 6}));  // powers of two, then the buffers' rows
        runner.ensure_capacity(4096, 512);
        QCOMPARE(runner.capture_sizes(), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
        runner.set_cuda_graphs(false, 256);
        QVERIFY(runner.capture_sizes().empty());
        const std::unique_ptr<Backend> cpu_backend = cpu::make_cpu_backend(1);
        ModelRunner plain(*model, *cpu_backend, 64, 16, 2048, 6);
        plain.set_cuda_graphs(true, 256);
        QVERIFY(plain.capture_sizes().empty());  // a backend without graphs never captures
    }

    void greedy_matches_eager_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("batch");
        for (const QString& m : {QString("dummy:tiny"), QString("stories260K")})
            for (int batch : {1, 2, 3, 4, 5, 8, 13})  // on and between the capture sizes
                QTest::addRow("%s batch=%d", qPrintable(m), batch) << m << batch;
    }
    void greedy_matches_eager() {
        QFETCH(QString, model);
        QFETCH(int, batch);
        auto m = load(model);
        const auto ps = test::random_prompts(batch, m->config.vocab_size, seed_ + batch);
        const Run graphs = generate(m, base_config(), ps, {greedy(24)});
        const Run ops = generate(m, eager(base_config()), ps, {greedy(24)});
        QCOMPARE(graphs.tokens, ops.tokens);
        QVERIFY2(graphs.replays >= 20, "decode steps must replay graphs");
        QCOMPARE(ops.replays, int64_t(0));
    }

    // Host sampling from copied-back logits with per-request seeds: the graph's logits rows are the eager ones.
    void seeded_sampling_matches_eager() {
        auto m = load("stories260K");
        const auto ps = test::random_prompts(6, m->config.vocab_size, seed_);
        SamplingParams p = greedy(32);
        p.temperature = 0.9f;
        p.top_p = 0.9f;
        p.top_k = 40;
        p.seed = 7;
        const Run graphs = generate(m, base_config(), ps, {p});
        const Run ops = generate(m, eager(base_config()), ps, {p});
        QCOMPARE(graphs.tokens, ops.tokens);
        QVERIFY(graphs.replays > 0);
    }

    // The engine's use of a device sampler: only ids come back for rows it can sample; greedy is
    // unchanged; a request's draws depend on its seed and output index, not on its batch; rows with
    // penalties or an active min_tokens go to the host sampler (with its own generator).
    void device_sampling() {
        auto m = load("stories260K");
        const auto ps = test::random_prompts(5, m->config.vocab_size, seed_ + 5);
        const EngineConfig c = base_config();
        const Run host_greedy = generate(m, c, ps, {greedy(20)});
        QCOMPARE(generate(m, c, ps, {greedy(20)}, -1, {}, true).tokens, host_greedy.tokens);

        SamplingParams sampled = greedy(20);
        sampled.temperature = 0.9f;
        sampled.top_p = 0.9f;
        sampled.seed = 11;
        SamplingParams penalized = sampled;  // host only
        penalized.repetition_penalty = 1.3f;
        SamplingParams late = sampled;  // host for its first 6 tokens (EOS banned), then the device
        late.min_tokens = 6;
        late.ignore_eos = false;
        const std::vector<SamplingParams> mixed = {sampled, penalized, sampled, late, sampled};
        const Run batched = generate(m, c, ps, mixed, -1, {}, true);
        for (size_t i = 0; i < ps.size(); ++i) {
            const Run alone = generate(m, c, {ps[i]}, {mixed[i]}, -1, {}, true);
            QCOMPARE(alone.tokens[0], batched.tokens[i]);
        }
        // The penalized request never reaches the device sampler: its tokens are the host sampler's.
        QCOMPARE(batched.tokens[1], generate(m, c, {ps[1]}, {penalized}).tokens[0]);
        // The device draws differ from the host's generator (so the split above was real), and from greedy.
        QVERIFY(batched.tokens[0] != generate(m, c, {ps[0]}, {sampled}).tokens[0]);
        QVERIFY(batched.tokens != host_greedy.tokens);
        QVERIFY(batched.replays > 0);
    }

    // Mid-run changes that must drop the graphs (or stop using them); the tokens stay the eager ones.
    void invalidation_data() {
        QTest::addColumn<QString>("change");
        QTest::newRow("block_size 16 -> 8 (KV cache rebuilt)") << QString("block_size");
        QTest::newRow("max_num_batched_tokens grows (buffers reallocated)") << QString("buffers");
        QTest::newRow("enforce_eager on") << QString("eager_on");
        QTest::newRow("enforce_eager off") << QString("eager_off");
    }
    void invalidation() {
        QFETCH(QString, change);
        auto m = load("stories260K");
        const auto ps = test::random_prompts(5, m->config.vocab_size, seed_ + 99);
        EngineConfig start = base_config();
        if (change == "eager_off") start.enforce_eager = true;
        auto apply = [&](EngineConfig& c) {
            if (change == "block_size") c.block_size = 8;
            if (change == "buffers") c.scheduler.max_num_batched_tokens *= 4;
            if (change == "eager_on") c.enforce_eager = true;
            if (change == "eager_off") c.enforce_eager = false;
        };
        const Run changed = generate(m, start, ps, {greedy(40)}, 12, apply);
        const Run ops = generate(m, eager(base_config()), ps, {greedy(40)}, 12, [&](EngineConfig& c) {
            apply(c);
            c.enforce_eager = true;
        });
        QCOMPARE(changed.tokens, ops.tokens);
        if (change != "eager_on") QVERIFY(changed.replays > 0);
    }

    // Only decode-only steps run as graphs: a mixed prefill + decode step runs op by op, and the batch
    // can shrink and grow across capture sizes as requests finish and arrive.
    // A capture that fails costs one eager step: the tokens are the eager ones, the shape is never tried
    // again (old code rethrew out of step() and retried every decode), and the reason is kept.
    void failed_capture_runs_eagerly_data() {
        QTest::addColumn<int>("failure");
        QTest::addRow("op_throws") << int(test::RecordingBackend::CaptureFailure::op_throws);
        QTest::addRow("not_instantiable") << int(test::RecordingBackend::CaptureFailure::not_instantiable);
    }
    void failed_capture_runs_eagerly() {
        QFETCH(int, failure);
        auto m = load("stories260K");
        const auto ps = test::random_prompts(5, m->config.vocab_size, seed_ + 77);
        EngineConfig config = base_config();
        config.check_invariants = true;
        auto owned = std::make_unique<test::RecordingBackend>(2);
        test::RecordingBackend& backend = *owned;
        backend.fail_captures(static_cast<test::RecordingBackend::CaptureFailure>(failure));
        LlmEngine engine(m, config, std::move(owned));
        std::vector<std::string> ids;
        for (const auto& p : ps) ids.push_back(engine.add_request(request(p, greedy(24))).front());
        int decode_steps = 0;
        while (engine.has_unfinished_requests()) {
            engine.step();
            ++decode_steps;
        }
        std::vector<std::vector<int32_t>> tokens;
        for (const auto& id : ids) tokens.push_back(engine.request_output_token_ids(id));
        QCOMPARE(tokens, generate(m, eager(base_config()), ps, {greedy(24)}).tokens);
        const ModelRunner& runner = engine.model_runner();
        QCOMPARE(runner.num_graphs(), 0);
        QCOMPARE(runner.num_graph_replays(), int64_t(0));
        QVERIFY(decode_steps > 20);
        // One attempt per padded shape the run met (5 sequences pad to 8), not one per decode step.
        QVERIFY2(backend.num_capture_attempts() >= 1 && backend.num_capture_attempts() <= 2,
                 qPrintable(QString::number(backend.num_capture_attempts())));
        QVERIFY2(runner.graph_capture_error().find("cannot be") != std::string::npos, runner.graph_capture_error().c_str());
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), engine.num_blocks());  // nothing leaked
    }

    void mixed_steps_and_changing_batches() {
        auto m = load("dummy:tiny");
        const auto ps = test::random_prompts(11, m->config.vocab_size, seed_ + 7);
        EngineConfig c = base_config();
        c.scheduler.max_num_seqs = 5;             // requests join as others finish
        c.scheduler.max_num_batched_tokens = 48;  // long prompts prefill in chunks beside decodes
        auto run = [&](EngineConfig config) {
            config.check_invariants = true;
            LlmEngine engine(m, config, std::make_unique<test::RecordingBackend>(2));
            std::vector<std::string> ids;
            for (size_t i = 0; i < ps.size(); ++i) ids.push_back(engine.add_request(request(ps[i], greedy(8 + 3 * static_cast<int>(i)))).front());
            while (engine.has_unfinished_requests()) engine.step();
            Run r;
            for (const auto& id : ids) r.tokens.push_back(engine.request_output_token_ids(id));
            r.replays = engine.model_runner().num_graph_replays();
            return r;
        };
        const Run graphs = run(c), ops = run(eager(c));
        QCOMPARE(graphs.tokens, ops.tokens);
        QVERIFY(graphs.replays > 0);
    }
};

QTEST_GUILESS_MAIN(TestEngineGraphs)
#include "test_engine_graphs.moc"
