// kvscope-cli bench end to end on dummy:tiny: exit codes, vLLM key names in the result JSON, one
// percentile recomputed from the per-request JSONL, --compare naive sections and ratios, --sweep rows,
// the ShareGPT sample, the result reader, --help, and bad flags exiting 2 with the flag named.
#include "metrics/export.h"
#include "test_support.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

struct CliResult {
    int exit_code = -1;
    QString out, err;
};

CliResult run_cli(const QStringList& args) {
    QProcess p;
    p.start(QString::fromStdString(kvscope::test::cli_path()), QStringList{"bench"} + args);
    if (!p.waitForFinished(120000)) qFatal("kvscope-cli bench did not finish");
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(), p.readAllStandardError()};
}

// A small, fast workload on the tiny dummy model.
QStringList small_workload(int num_prompts) {
    return {"--model", "dummy:tiny", "--dataset", "random", "--num-prompts", QString::number(num_prompts),
            "--input-len", "48", "--output-len", "16", "--range-ratio", "0.5", "--seed", "3",
            "--threads", "2", "--max-model-len", "256"};
}


// numpy.percentile, written out independently of the engine's implementation.
double numpy_percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const double rank = p / 100.0 * double(v.size() - 1);
    const size_t lo = size_t(rank), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

}  // namespace

class TestBenchCli : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void singleRunWritesVllmKeysAndMatchesRequests() {
        const QString json = m_dir.filePath("single.json"), csv = m_dir.filePath("single.csv"),
                      jsonl = m_dir.filePath("single.jsonl");
        const CliResult r = run_cli(small_workload(16) + QStringList{"--output-json", json, "--output-csv", csv,
                                                                      "--output-requests", jsonl, "--goodput",
                                                                      "ttft:100000", "tpot:100000", "--save-timeline"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("Serving Benchmark Result"));
        const nlohmann::json j = kvscope::test::read_json(json);
        for (const char* k : {"date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "completed",
                              "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
                              "request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
                              "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
                              "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p90_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
                              "engine_config", "engine", "machine", "git_revision", "seed", "timeline"})
            QVERIFY2(j.contains(k), k);
        QCOMPARE(j["completed"].get<int>(), 16);
        QCOMPARE(j["request_rate"].get<std::string>(), std::string("inf"));
        QVERIFY(!j["machine"]["cpu_model"].get<std::string>().empty());
        QVERIFY(j["request_goodput"].get<double>() > 0);
        // What ran, not what was asked: auto resolves to a type.
        const std::string kv_dtype = j["engine_config"]["kv_cache_dtype"].get<std::string>();
        QVERIFY2(kv_dtype == "float32" || kv_dtype == "float16" || kv_dtype == "bfloat16", kv_dtype.c_str());

        const auto rows = kvscope::test::read_jsonl(jsonl);
        QCOMPARE(rows.size(), size_t(16));
        std::vector<double> e2el, ttft;
        int64_t output_tokens = 0;
        for (const auto& row : rows) {
            e2el.push_back((row["finish_time"].get<double>() - row["arrival_time"].get<double>()) * 1e3);
            ttft.push_back(row["ttft_ms"].get<double>());
            output_tokens += row["num_output_tokens"].get<int64_t>();
            QCOMPARE(row["token_times"].size(), row["num_output_tokens"].get<size_t>());
        }
        QCOMPARE(output_tokens, j["total_output_tokens"].get<int64_t>());
        QVERIFY(qAbs(numpy_percentile(e2el, 99) - j["p99_e2el_ms"].get<double>()) < 1e-6);
        QVERIFY(qAbs(numpy_percentile(ttft, 90) - j["p90_ttft_ms"].get<double>()) < 1e-6);

        std::ifstream in(csv.toStdString());
        std::string header, line, extra;
        QVERIFY(std::getline(in, header) && std::getline(in, line));
        QVERIFY(!std::getline(in, extra) || extra.empty());
        QVERIFY(header.find("output_throughput") != std::string::npos);

        const kvscope::ResultFile f = kvscope::read_result_file(json.toStdString());
        QCOMPARE(f.runs.size(), size_t(1));
        QCOMPARE(f.runs[0].summary.completed, 16);
        QCOMPARE(f.model_id, std::string("dummy:tiny"));
    }

    void compareNaiveWritesBothRunsAndRatios() {
        const QString json = m_dir.filePath("compare.json");
        const CliResult r = run_cli(small_workload(12) + QStringList{"--compare", "naive", "--max-num-seqs", "4",
                                                                      "--output-json", json});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(json);
        for (const char* mode : {"naive", "paged"}) {
            QVERIFY2(j.contains(mode), mode);
            QCOMPARE(j[mode]["completed"].get<int>(), 12);
            QCOMPARE(j[mode]["engine_config"]["mode"].get<std::string>(), std::string(mode));
            QVERIFY(j[mode].contains("mean_e2el_ms"));
        }
        for (const char* k : {"speedup_output_throughput", "ratio_mean_e2el", "ratio_p99_ttft", "ratio_mean_tpot",
                              "ratio_mean_ttft"})
            QVERIFY2(j.contains(k) && j[k].get<double>() > 0, k);
        QVERIFY(r.out.contains("speedup_output_throughput"));
        const kvscope::ResultFile f = kvscope::read_result_file(json.toStdString());
        QCOMPARE(f.runs.size(), size_t(2));
        QVERIFY(f.ratios.contains("speedup_output_throughput"));
    }

    void sweepWritesOneRowPerValue() {
        const QString json = m_dir.filePath("sweep.json"), csv = m_dir.filePath("sweep.csv");
        const CliResult r = run_cli(small_workload(8) + QStringList{"--sweep", "max-num-seqs=1,4", "--output-json", json,
                                                                     "--output-csv", csv});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(json);
        QCOMPARE(j["sweep"].size(), size_t(2));
        QCOMPARE(j["sweep"][0]["engine_config"]["max_num_seqs"].get<int>(), 1);
        QCOMPARE(j["sweep"][1]["engine_config"]["max_num_seqs"].get<int>(), 4);
        std::ifstream in(csv.toStdString());
        int lines = 0;
        for (std::string line; std::getline(in, line);) lines += !line.empty();
        QCOMPARE(lines, 3);
    }

    // The same KV bytes hold twice the blocks in float16; each row records the type it ran with.
    void sweepKvCacheDtype() {
        const QString json = m_dir.filePath("sweep_dtype.json");
        const CliResult r = run_cli(small_workload(8) + QStringList{"--kv-cache-memory", "4M", "--sweep",
                                                                     "kv-cache-dtype=float32,float16", "--output-json", json});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(json);
        QCOMPARE(j["sweep"].size(), size_t(2));
        QCOMPARE(j["sweep"][0]["engine_config"]["kv_cache_dtype"].get<std::string>(), std::string("float32"));
        QCOMPARE(j["sweep"][1]["engine_config"]["kv_cache_dtype"].get<std::string>(), std::string("float16"));
        const int blocks32 = j["sweep"][0]["engine"]["num_blocks"].get<int>();
        QVERIFY(blocks32 > 0);
        QVERIFY(std::abs(j["sweep"][1]["engine"]["num_blocks"].get<int>() - 2 * blocks32) <= 1);
        QCOMPARE(j["sweep"][1]["completed"].get<int>(), 8);
    }

    void sharegptSampleRuns() {
        const QString sample = QFINDTESTDATA("../../resources/workloads/sharegpt_sample.json");
        QVERIFY(!sample.isEmpty());
        const QString json = m_dir.filePath("sharegpt.json");
        const CliResult r = run_cli({"--model", "dummy:tiny", "--dataset", "sharegpt", "--dataset-path", sample,
                                     "--num-prompts", "6", "--output-len", "8", "--threads", "2", "--output-json", json});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(json);
        QCOMPARE(j["completed"].get<int>(), 6);
        QCOMPARE(j["total_output_tokens"].get<int>(), 48);
    }

    void badInputExitsTwo_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("named");
        QTest::newRow("unknown flag") << QStringList{"--bogus", "1"} << "--bogus";
        QTest::newRow("not an integer") << QStringList{"--num-prompts", "abc"} << "--num-prompts";
        QTest::newRow("compare paged") << QStringList{"--compare", "paged"} << "--compare";
        QTest::newRow("unknown sweep knob") << QStringList{"--sweep", "temperature=1,2"} << "--sweep";
        QTest::newRow("bad percentile") << QStringList{"--percentiles", "50,120"} << "--percentiles";
        QTest::newRow("bad goodput") << QStringList{"--goodput", "ttft"} << "--goodput";
        QTest::newRow("zero rate") << QStringList{"--request-rate", "0"} << "--request-rate";
        QTest::newRow("unknown dataset") << QStringList{"--dataset", "nope"} << "--dataset";
        QTest::newRow("range ratio") << QStringList{"--range-ratio", "1.5"} << "--range-ratio";
        QTest::newRow("misspelt flag") << QStringList{"--num-prompt", "3"} << "did you mean --num-prompts?";
        QTest::newRow("zero prompts") << QStringList{"--num-prompts", "0"} << "--num-prompts: must be >= 1";
        QTest::newRow("max-num-seqs overflows int") << QStringList{"--max-num-seqs", "99999999999"} << "--max-num-seqs";
        QTest::newRow("stray argument") << QStringList{"stray"} << "unexpected argument 'stray'";
        QTest::newRow("bad goodput metric") << QStringList{"--goodput", "ttft:5", "itl:5"} << "--goodput: unknown metric 'itl'";
        QTest::newRow("negative burstiness") << QStringList{"--burstiness", "-1"} << "--burstiness";
        QTest::newRow("missing sharegpt file") << QStringList{"--dataset", "sharegpt", "--dataset-path", "/nonexistent.json"}
                                               << "/nonexistent.json";
        QTest::newRow("sharegpt file a directory") << QStringList{"--dataset", "sharegpt", "--dataset-path", "/"}
                                                   << "--dataset-path /: not a regular file";
        // Prompts that max_model_len cannot hold: exit 2 before the workload is built (a mistyped --input-len of
        // 2e9 built 12 GB of prompts first), not a table of zeros (an internal error, exit 1, once).
        QTest::newRow("prompts past max_model_len") << QStringList{"--input-len", "300", "--max-model-len", "256"}
                                                    << "prompts of at least 300 tokens (--input-len 300) do not fit max_model_len 256";
        QTest::newRow("prefix past max_model_len")
            << QStringList{"--dataset", "shared-prefix", "--prefix-len", "250", "--input-len", "8", "--max-model-len", "256"}
            << "prompts of at least 258 tokens (--prefix-len 250 and --input-len 8) do not fit";
        QTest::newRow("empty base url") << QStringList{"--base-url", ""} << "--base-url: empty";  // ran the local engine, before
        // Bad input, not an unreachable server (exit 1 before).
        QTest::newRow("base url without host") << QStringList{"--base-url", "http://"} << "--base-url 'http://' is not a valid URL";
        QTest::newRow("base url port") << QStringList{"--base-url", "http://127.0.0.1:99999"} << "is not a valid URL: Port number";
        QTest::newRow("goodput without ms") << QStringList{"--goodput", "ttft:"} << "'ttft:' is not METRIC:MS";  // was 0 ms
        QTest::newRow("compare beside naive mode") << QStringList{"--compare", "naive", "--mode", "naive"}
                                                   << "--mode naive has no place beside it";  // ignored, before
        QTest::newRow("one file for two outputs") << QStringList{"--output-csv", "same.json", "--output-requests", "same.json"}
                                                  << "--output-csv and --output-requests name the same file";
        QTest::newRow("one file by two spellings") << QStringList{"--output-json", "same.json", "--output-csv", "./same.json"}
                                                   << "--output-json and --output-csv name the same file";
        QTest::newRow("csv on a full disk") << QStringList{"--input-len", "8", "--output-len", "2", "--output-csv", "/dev/full"}
                                            << "/dev/full: write failed";
    }
    void badInputExitsTwo() {
        QFETCH(QStringList, args);
        QFETCH(QString, named);
        const CliResult r = run_cli(QStringList{"--model", "dummy:tiny", "--num-prompts", "2"} + args);
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains(named), qPrintable(r.err));
    }

    // --help lists the workload, run and output options with their defaults, and exits 0 at once.
    void helpListsOptions() {
        const CliResult r = run_cli({"--help"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        for (const char* text : {"--num-prompts", "[100]", "--goodput", "METRIC:MS ...", "--request-rate", "[inf]",
                                 "--percentiles", "[50,90,99]", "--block-size", "--max-num-seqs", "--output-json"})
            QVERIFY2(r.out.contains(text), text);
    }

private:
    QTemporaryDir m_dir;
};

QTEST_GUILESS_MAIN(TestBenchCli)
#include "test_bench_cli.moc"
