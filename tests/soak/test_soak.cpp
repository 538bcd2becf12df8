// kvscope-soak as CTest runs it (label e2e), and the EngineLoop hooks it relies on. The soak runs
// stories260K and dummy:tiny for about half a minute each: random requests from four clients through the
// in-process OpenAI server while the engine is reconfigured every second. Each must exit 0 with a last
// line holding exactly the documented keys, no leaked block, no broken invariant, no error, and every
// request accounted for. Its command line: --help exits 0, bad input 2. The hooks: a step that throws is
// counted (a std::logic_error as a broken invariant) and ends its requests with reason error; a
// reconfiguration the engine refuses comes back as its message and changes nothing.
// KVSCOPE_SOAK_SECONDS changes the length of each run; KVSCOPE_TEST_SEED the seed.
#include "serve_engine_loop.h"
#include "serve_metrics.h"
#include "shared_models.h"
#include "test_support.h"

#include "backend_factory.h"
#include "llm_engine.h"

#include <QProcess>
#include <nlohmann/json.hpp>

#include <atomic>

using namespace kvscope;
using nlohmann::json;

namespace {

// The CPU backend, except that embedding() throws std::logic_error while `fail` is set: a step that
// breaks the way a failed invariant check does.
class FailingBackend final : public Backend {
public:
    std::atomic<bool> fail{false};

    std::string name() const override { return "failing-cpu"; }
    bool supports(DType t) const override { return cpu_->supports(t); }
    bool supports_kv_dtype(DType t) const override { return cpu_->supports_kv_dtype(t); }
    int num_threads() const override { return cpu_->num_threads(); }
    void* allocate(size_t bytes) override { return cpu_->allocate(bytes); }
    void deallocate(void* ptr) override { cpu_->deallocate(ptr); }
    void copy_to_device(void* dst, const void* src, size_t bytes) override { cpu_->copy_to_device(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, size_t bytes) override { cpu_->copy_to_host(dst, src, bytes); }
    WeightView upload_weight(const WeightView& w) override { return cpu_->upload_weight(w); }
    WeightView repack_matmul_weight(const WeightView& w) override { return cpu_->repack_matmul_weight(w); }
    const float* upload_vector(const float* data, size_t n) override { return cpu_->upload_vector(data, n); }
    void embedding(const WeightView& table, const int32_t* ids, int n, float* out) override {
        if (fail) throw std::logic_error("injected: invariant broken");
        cpu_->embedding(table, ids, n, out);
    }
    void rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
        cpu_->rms_norm(x, w, n, dim, eps, out);
    }
    void matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) override {
        cpu_->matmul(x, n, w, bias, out);
    }
    void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
              const RopeParams& p) override {
        cpu_->rope(q, k, positions, n, num_heads, num_kv_heads, p);
    }
    void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout, void* kv_cache,
                  int layer) override {
        cpu_->write_kv(k, v, slot_mapping, n, layout, kv_cache, layer);
    }
    void paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout, const void* kv_cache,
                         int layer, int num_heads, const AttentionParams& params, float* out) override {
        cpu_->paged_attention(q, meta, layout, kv_cache, layer, num_heads, params, out);
    }
    void silu_mul(const float* gate, const float* up, int64_t n, float* out) override { cpu_->silu_mul(gate, up, n, out); }
    void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) override {
        cpu_->gelu_tanh_mul(gate, up, n, out);
    }
    void scale(float* x, int64_t n, float s) override { cpu_->scale(x, n, s); }
    void softcap(float* x, int64_t n, float cap) override { cpu_->softcap(x, n, cap); }
    void add(float* x, const float* y, int64_t n) override { cpu_->add(x, y, n); }
    void argmax(const float* logits, int n, int vocab, int32_t* out) override { cpu_->argmax(logits, n, vocab, out); }
    void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) override {
        cpu_->gather_rows(x, rows, n, dim, out);
    }

private:
    std::unique_ptr<Backend> cpu_ = make_backend("cpu", 1);
};

// Waits for the final output of one request on `stream`.
std::optional<RequestOutput> wait_finished(cli::OutputStream& stream, const std::string& id) {
    for (int i = 0; i < 600; ++i)
        for (RequestOutput& o : stream.wait(std::chrono::milliseconds(50)))
            if (o.request_id == id && o.finished) return o;
    return std::nullopt;
}

NewRequest request(const std::string& id, int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return {id, {1, 403, 407, 261}, p, 0, ""};
}

EngineConfig small_config() {
    EngineConfig c;
    c.scheduler.max_model_len = 512;
    c.num_blocks = 64;
    c.num_threads = 1;
    return c;
}

struct Run {
    int exit_code = -1;
    QString out, err;
};

Run soak(const QStringList& args, int timeout_ms = 60000) {
    QProcess p;
    p.start(KVSCOPE_SOAK_PATH, args);
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        return {-1, QString::fromUtf8(p.readAllStandardOutput()), "timed out\n" + QString::fromUtf8(p.readAllStandardError())};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

QString stories() { return QString::fromStdString(test::models_dir() + "/stories260K-hf"); }

}  // namespace

class TestSoak : public QObject {
    Q_OBJECT

private slots:
    void commandLine_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exit_code");
        QTest::newRow("--help") << QStringList{"--help"} << 0;
        QTest::newRow("no --requests nor --duration-s") << QStringList{"--model", "dummy:tiny"} << 2;
        QTest::newRow("misspelt option") << QStringList{"--model", "dummy:tiny", "--request", "5"} << 2;
        QTest::newRow("no --model") << QStringList{"--requests", "5"} << 2;
        QTest::newRow("unknown model") << QStringList{"--model", "dummy:nope", "--requests", "5"} << 2;
        QTest::newRow("--concurrency 0") << QStringList{"--model", "dummy:tiny", "--requests", "5", "--concurrency", "0"} << 2;
        QTest::newRow("--max-model-len past the model's context")
            << QStringList{"--model", stories(), "--requests", "5", "--max-model-len", "4096"} << 2;
    }

    void commandLine() {
        QFETCH(QStringList, args);
        QFETCH(int, exit_code);
        const Run r = soak(args);
        QVERIFY2(r.exit_code == exit_code, qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
        if (exit_code == 0) QVERIFY(r.out.contains("--requests") && r.out.contains("--duration-s"));
        else QVERIFY2(r.err.contains("kvscope-soak: error:"), qPrintable(r.err));
    }

    // A step that throws: counted, its requests end with reason error, and the loop serves on.
    void engineLoopCountsStepFailures() {
        auto backend = std::make_unique<FailingBackend>();
        FailingBackend& failing = *backend;
        LlmEngine engine(test::load_stories("hf"), small_config(), std::move(backend));
        cli::ServeMetrics metrics("stories", "kvscope", 512, {16, engine.num_blocks(), "float32", false});
        cli::EngineLoop loop(engine, metrics);
        loop.start();
        auto stream = std::make_shared<cli::OutputStream>();

        failing.fail = true;
        loop.submit({request("broken", 4)}, stream);
        const auto broken = wait_finished(*stream, "broken");
        QVERIFY(broken);
        QCOMPARE(broken->finish_reason, FinishReason::ERROR);
        cli::StepFailures f = loop.step_failures();
        QCOMPARE(f.count, int64_t{1});
        QCOMPARE(f.logic_errors, int64_t{1});
        QVERIFY2(f.last_message.find("injected") != std::string::npos, f.last_message.c_str());

        failing.fail = false;
        loop.submit({request("fine", 4)}, stream);
        const auto fine = wait_finished(*stream, "fine");
        QVERIFY(fine);
        QCOMPARE(fine->finish_reason, FinishReason::LENGTH);
        QCOMPARE(loop.step_failures().count, int64_t{1});
        int free_blocks = -1;
        loop.inspect([&](const LlmEngine& e) { free_blocks = e.kv_cache_manager().num_free_blocks(); });
        QCOMPARE(free_blocks, 64);
        loop.stop();
    }

    // reconfigure(): a pool too small for the unfinished request is refused with the engine's message and
    // changes nothing; one that fits is applied; both between steps, while the request runs.
    void engineLoopReconfiguresBetweenSteps() {
        LlmEngine engine(test::load_stories("hf"), small_config());
        cli::ServeMetrics metrics("stories", "kvscope", 512, {16, engine.num_blocks(), "float32", false});
        cli::EngineLoop loop(engine, metrics);
        loop.start();
        auto stream = std::make_shared<cli::OutputStream>();
        loop.submit({request("long", 500)}, stream);  // 504 tokens: 32 blocks of 16

        bool unfinished = false;
        const std::string refusal = loop.reconfigure([&](const LlmEngine& e) {
            unfinished = e.has_unfinished_requests();
            EngineConfig c = e.config();
            c.num_blocks = 31;
            return c;
        });
        QVERIFY(unfinished);  // 500 decode steps take longer than posting a command
        QVERIFY2(refusal.find("long") != std::string::npos && refusal.find("32 KV blocks") != std::string::npos,
                 refusal.c_str());
        int num_blocks = 0, config_blocks = 0, block_size = 0;
        loop.inspect([&](const LlmEngine& e) {
            num_blocks = e.num_blocks();
            config_blocks = e.config().num_blocks;
        });
        QCOMPARE(num_blocks, 64);
        QCOMPARE(config_blocks, 64);

        EngineConfig bigger = small_config();
        bigger.block_size = 32;
        bigger.num_blocks = 40;
        QCOMPARE(loop.reconfigure(bigger), std::string());
        loop.inspect([&](const LlmEngine& e) {
            num_blocks = e.num_blocks();
            block_size = e.kv_cache_manager().block_size();
        });
        QCOMPARE(num_blocks, 40);
        QCOMPARE(block_size, 32);
        const auto done = wait_finished(*stream, "long");
        QVERIFY(done);
        QCOMPARE(done->finish_reason, FinishReason::LENGTH);  // the rebuild lost nothing
        loop.stop();
        QVERIFY_THROWS_EXCEPTION(cli::ServerStopping, loop.reconfigure(bigger));
    }

    void losesNothing_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("stories260K") << stories();
        QTest::newRow("dummy:tiny") << QString("dummy:tiny");
    }

    void losesNothing() {
        QFETCH(QString, model);
        const char* env = std::getenv("KVSCOPE_SOAK_SECONDS");
        const QString seconds = env && *env ? QString(env) : QString("30");
        const uint64_t seed = test::test_seed(1);
        const Run r = soak({"--model", model, "--duration-s", seconds, "--seed", QString::number(seed), "--concurrency", "4",
                            "--reconfigure-every-s", "1", "--json"},
                           (seconds.toInt() + 180) * 1000);
        const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
        QVERIFY2(r.exit_code == 0 && !lines.isEmpty(), qPrintable(QString("exit %1\n%2%3").arg(r.exit_code).arg(r.out, r.err)));
        qInfo("%s", qPrintable(lines.back()));
        const nlohmann::ordered_json s = nlohmann::ordered_json::parse(lines.back().toStdString());  // keeps the order
        std::vector<std::string> keys;
        for (const auto& [key, value] : s.items()) keys.push_back(key);
        const std::vector<std::string> expected = {"requests",         "completed",        "aborted",
                                                   "refused",          "errors",           "reconfigurations",
                                                   "reconfigurations_refused",             "leaked_blocks",
                                                   "invariant_violations", "rss_start_mb", "rss_end_mb",
                                                   "max_step_ms"};
        QCOMPARE(keys, expected);
        QVERIFY(s["requests"].get<int64_t>() > 0);
        QCOMPARE(s["leaked_blocks"].get<int64_t>(), int64_t{0});
        QCOMPARE(s["invariant_violations"].get<int64_t>(), int64_t{0});
        QCOMPARE(s["errors"].get<int64_t>(), int64_t{0});
        QCOMPARE(s["completed"].get<int64_t>() + s["aborted"].get<int64_t>() + s["refused"].get<int64_t>(),
                 s["requests"].get<int64_t>());
        // The workload does what it says: most requests complete, some clients leave, invalid ones are
        // refused, and the engine was reconfigured, some changes refused.
        QVERIFY(s["completed"].get<int64_t>() > s["requests"].get<int64_t>() / 2);
        QVERIFY(s["aborted"].get<int64_t>() > 0);
        QVERIFY(s["refused"].get<int64_t>() > 0);
        QVERIFY(s["reconfigurations"].get<int64_t>() > 0);
        QVERIFY(s["max_step_ms"].get<double>() > 0);
        QVERIFY(s["rss_start_mb"].get<double>() > 0 && s["rss_end_mb"].get<double>() > 0);
    }
};

QTEST_GUILESS_MAIN(TestSoak)
#include "test_soak.moc"
