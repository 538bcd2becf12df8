// kvscope-cli as users and scripts call it: generate --json on the shared model (both formats, all
// expected.json prompts in one batch), info --json, --help of every command, and bad input of every
// kind (model files, flags, numbers out of range, stray arguments): exit code 2 and a message on
// stderr that names the file or flag and the problem, never a crash.
#include "random_model.h"

#include <QProcess>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>
#include <cmath>

using namespace kvscope;
using nlohmann::json;

namespace {

struct Run {
    int code = -1;
    QString out, err;
};

Run cli(const QStringList& args) {
    QProcess p;
    p.start(QString::fromStdString(test::cli_path()), args);
    if (!p.waitForFinished(300000)) qFatal("kvscope-cli did not finish");
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

std::vector<json> json_lines(const QString& out) {
    std::vector<json> lines;
    for (const QString& l : out.split('\n', Qt::SkipEmptyParts)) lines.push_back(json::parse(l.toStdString()));
    return lines;
}

QString models() { return QString::fromStdString(test::models_dir()); }

void write_file(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

QByteArray read_file(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
    return f.readAll();
}

}  // namespace

class TestCli : public QObject {
    Q_OBJECT
private slots:
    void generateMatchesReference_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("hf") << models() + "/stories260K-hf";
        QTest::newRow("gguf") << models() + "/stories260K-f32.gguf";
    }
    void generateMatchesReference() {
        QFETCH(QString, model);
        const json expected = json::parse(read_file(models() + "/expected.json").toStdString());
        QStringList args{"generate", "--model", model, "--temperature", "0", "--max-tokens", "100", "--json"};
        for (const auto& c : expected["cases"]) args << "--prompt" << QString::fromStdString(c["prompt"].get<std::string>());
        const Run r = cli(args);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto lines = json_lines(r.out);
        QCOMPARE(lines.size(), expected["cases"].size() + 1);
        for (size_t i = 0; i < expected["cases"].size(); ++i) {
            const auto& c = expected["cases"][i];
            QCOMPARE(lines[i]["index"].get<int>(), int(i));
            QCOMPARE(lines[i]["prompt_token_ids"], c["prompt_ids"]);
            QCOMPARE(lines[i]["output_token_ids"], c["continuation_ids"]);
            QCOMPARE(lines[i]["text"].get<std::string>(), c["continuation_text"].get<std::string>());
            QCOMPARE(lines[i]["finish_reason"].get<std::string>(), std::string("length"));
            QVERIFY(lines[i]["ttft_ms"].get<double>() > 0);
            QVERIFY(lines[i]["e2el_ms"].get<double>() >= lines[i]["ttft_ms"].get<double>());
        }
        const json& s = lines.back()["summary"];
        for (const char* key : {"num_blocks", "block_size", "num_free_blocks_at_end", "num_preemptions",
                                "prefix_cache_hit_tokens", "output_throughput"})
            QVERIFY2(s.contains(key), key);
        QCOMPARE(s["num_free_blocks_at_end"], s["num_blocks"]);
    }

    // --prompt-ids runs the same request as the text it encodes; --logprobs K adds, per generated token,
    // its K best [id, logprob] (best first: under greedy the first is the token itself) and its own.
    void generateLogprobsAndPromptIds() {
        const QString gguf = models() + "/stories260K-f32.gguf";
        const json expected = json::parse(read_file(models() + "/expected.json").toStdString());
        const auto& c = expected["cases"][0];
        QStringList ids;
        for (int32_t id : c["prompt_ids"].get<std::vector<int32_t>>()) ids << QString::number(id);
        const Run r = cli({"generate", "--model", gguf, "--temperature", "0", "--max-tokens", "20", "--json",
                           "--logprobs", "3", "--prompt", QString::fromStdString(c["prompt"].get<std::string>()),
                           "--prompt-ids", ids.join(',')});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto lines = json_lines(r.out);
        QCOMPARE(lines.size(), size_t(3));
        QCOMPARE(lines[1]["prompt_token_ids"], c["prompt_ids"]);
        for (const json& l : {lines[0], lines[1]}) {
            const auto out = l["output_token_ids"].get<std::vector<int32_t>>();
            QCOMPARE(out.size(), size_t(20));
            QCOMPARE(l["logprobs"].size(), out.size());
            QCOMPARE(l["token_logprobs"].size(), out.size());
            for (size_t t = 0; t < out.size(); ++t) {
                const json& row = l["logprobs"][t];
                QCOMPARE(row.size(), size_t(3));
                QCOMPARE(row[0][0].get<int32_t>(), out[t]);
                QCOMPARE(row[0][1].get<double>(), l["token_logprobs"][t].get<double>());
                QVERIFY(row[0][1].get<double>() <= 0);
                QVERIFY(row[1][1].get<double>() <= row[0][1].get<double>());
                QVERIFY(row[2][1].get<double>() <= row[1][1].get<double>());
            }
        }
        QCOMPARE(lines[0]["output_token_ids"], lines[1]["output_token_ids"]);
        QCOMPARE(lines[0]["logprobs"], lines[1]["logprobs"]);
        QCOMPARE(lines[0]["output_token_ids"].get<std::vector<int32_t>>(),
                 std::vector<int32_t>(c["continuation_ids"].begin(), c["continuation_ids"].begin() + 20));

        // llama-cli's short flags: -m model, -p prompt, -n tokens to predict, -t threads.
        const Run s = cli({"generate", "-m", gguf, "--temperature", "0", "-n", "5", "--json", "-t", "1", "-p",
                           QString::fromStdString(c["prompt"].get<std::string>())});
        QVERIFY2(s.code == 0, qPrintable(s.err));
        QCOMPARE(json_lines(s.out)[0]["output_token_ids"].get<std::vector<int32_t>>(),
                 std::vector<int32_t>(c["continuation_ids"].begin(), c["continuation_ids"].begin() + 5));
    }

    // --prompt-logprobs K: "prompt_logprobs" [null, [[id, logprob] x K], ...] and "prompt_token_logprobs"
    // [null, logprob, ...], one entry per prompt token; the same values when the prompt runs in 8-token
    // chunks with the prefix cache on and two equal prompts (it takes no hits).
    void generatePromptLogprobs() {
        const QString gguf = models() + "/stories260K-f32.gguf";
        const json expected = json::parse(read_file(models() + "/expected.json").toStdString());
        const auto& c = expected["cases"][1];
        std::vector<int32_t> prompt = c["prompt_ids"].get<std::vector<int32_t>>();
        prompt.insert(prompt.end(), c["continuation_ids"].begin(), c["continuation_ids"].begin() + 30);
        QStringList ids;
        for (int32_t id : prompt) ids << QString::number(id);
        const QStringList common = {"generate", "--model", gguf, "--temperature", "0", "--max-tokens", "2", "--json",
                                    "--prompt-logprobs", "3", "--prompt-ids", ids.join(',')};
        const Run whole = cli(common);
        QVERIFY2(whole.code == 0, qPrintable(whole.err));
        const Run chunked = cli(common + QStringList{"--prompt-ids", ids.join(','), "--max-num-batched-tokens", "8",
                                                    "--enable-prefix-caching", "--max-num-seqs", "1"});
        QVERIFY2(chunked.code == 0, qPrintable(chunked.err));
        const json w = json_lines(whole.out)[0];
        QCOMPARE(w["prompt_logprobs"].size(), prompt.size());
        QCOMPARE(w["prompt_token_logprobs"].size(), prompt.size());
        QVERIFY(w["prompt_logprobs"][0].is_null());
        QVERIFY(w["prompt_token_logprobs"][0].is_null());
        QVERIFY(!w.contains("logprobs"));  // only what was asked for
        // The continuation was greedy: from the case's prompt on, each token is its context's best.
        for (size_t j = c["prompt_ids"].size(); j < prompt.size(); ++j) {
            const json& row = w["prompt_logprobs"][j];
            QCOMPARE(row.size(), size_t(3));
            QCOMPARE(row[0][0].get<int32_t>(), prompt[j]);
            QCOMPARE(row[0][1].get<double>(), w["prompt_token_logprobs"][j].get<double>());
        }
        for (const json& l : json_lines(chunked.out)) {
            if (l.contains("summary")) continue;
            QCOMPARE(l["num_cached_tokens"].get<int>(), 0);
            for (size_t j = 1; j < prompt.size(); ++j)
                for (size_t k = 0; k < 3; ++k) {
                    QCOMPARE(l["prompt_logprobs"][j][k][0], w["prompt_logprobs"][j][k][0]);
                    QVERIFY(std::fabs(l["prompt_logprobs"][j][k][1].get<double>() - w["prompt_logprobs"][j][k][1].get<double>()) < 1e-5);
                }
        }
    }

    void info() {
        const Run r = cli({"info", "--model", models() + "/stories260K-f32.gguf", "--json", "--kv-cache-memory", "1M"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["architecture"].get<std::string>(), std::string("llama"));
        QCOMPARE(j["num_params"].get<int64_t>(), int64_t(292800));  // 512x64 embedding + 5 x 45440 + 64: "260K" rounds
        QCOMPARE(j["max_model_len"].get<int>(), 512);
        QCOMPARE(j["kv_bytes_per_token"].get<int>(), 2 * 5 * 4 * 8 * 4);
        QCOMPARE(j["num_blocks"].get<int>(), (1 << 20) / (2 * 5 * 4 * 8 * 4 * 16));
        QCOMPARE(j["kv_cache_dtype"].get<std::string>(), std::string("float32"));  // auto, for F32 weights
        QVERIFY(j["weight_bytes"].get<int64_t>() > 0);
        // -m, llama.cpp's name for it, is --model.
        const Run m = cli({"info", "-m", models() + "/stories260K-f32.gguf", "--json", "--kv-cache-memory", "1M"});
        QVERIFY2(m.code == 0, qPrintable(m.err));
        QCOMPARE(m.out, r.out);

        // A half cache: half the bytes per token, twice the blocks in the same budget.
        const Run h = cli({"info", "--model", models() + "/stories260K-f32.gguf", "--json", "--kv-cache-memory", "1M",
                           "--kv-cache-dtype", "float16"});
        QVERIFY2(h.code == 0, qPrintable(h.err));
        const json jh = json::parse(h.out.toStdString());
        QCOMPARE(jh["kv_cache_dtype"].get<std::string>(), std::string("float16"));
        QCOMPARE(jh["kv_bytes_per_token"].get<int>(), 2 * 5 * 4 * 8 * 2);
        QCOMPARE(jh["num_blocks"].get<int>(), 2 * j["num_blocks"].get<int>());
    }

    // The chat template a GGUF carries: a known family by its markers; an unknown one falls back to plain
    // with a warning in info (text and JSON).
    void infoNamesTheChatTemplate() {
        QTemporaryDir dir;
        test::RandomModelShape s;
        s.layers = 1;
        const QString gemma = dir.filePath("gemma.gguf"), unknown = dir.filePath("unknown.gguf");
        test::write_random_gguf(gemma.toStdString(), s, 3, DType::F32, [](GgufWriter& w) {
            w.set_string("tokenizer.chat_template", "{{ bos_token }}{{ '<start_of_turn>user\\n' }}");
        });
        test::write_random_gguf(unknown.toStdString(), s, 3, DType::F32, [](GgufWriter& w) {
            w.set_string("tokenizer.chat_template", "{% for m in messages %}### {{ m['content'] }}{% endfor %}");
        });
        const Run g = cli({"info", "--model", gemma, "--json"});
        QVERIFY2(g.code == 0, qPrintable(g.err));
        const json jg = json::parse(g.out.toStdString());
        QCOMPARE(jg["chat_template"].get<std::string>(), std::string("gemma"));
        QCOMPARE(jg["chat_template_recognized"].get<bool>(), true);
        const Run u = cli({"info", "--model", unknown, "--json"});
        QVERIFY2(u.code == 0, qPrintable(u.err));
        const json ju = json::parse(u.out.toStdString());
        QCOMPARE(ju["chat_template"].get<std::string>(), std::string("plain"));
        QCOMPARE(ju["chat_template_recognized"].get<bool>(), false);
        const Run t = cli({"info", "--model", unknown});
        QVERIFY2(t.out.contains("chat template plain (warning: the model's template is not one kvscope knows"), qPrintable(t.out));
    }

    void badInput_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("mention");  // what the message must name
        QTest::newRow("missing path") << "missing" << "nonexistent";
        QTest::newRow("truncated gguf") << "truncated" << "cut.gguf";
        QTest::newRow("corrupt gguf magic") << "magic" << "magic.gguf";
        QTest::newRow("gguf unknown architecture") << "gguf-arch" << "gpt2";
        QTest::newRow("gguf unsupported tensor type") << "gguf-iq2xxs" << "IQ2_XXS";
        QTest::newRow("hf unknown architecture") << "hf-arch" << "gpt_neox";
        QTest::newRow("hf missing tensor") << "hf-missing" << "model.layers.1.mlp.up_proj.weight";
        QTest::newRow("hf wrong shape") << "hf-shape" << "model.norm.weight";
        QTest::newRow("hf unknown dtype") << "hf-dtype" << "I64";
        // One NaN in a layer's weights: every logit NaN, and token 0 generated for ever with exit 0, before.
        QTest::newRow("hf NaN weight") << "hf-nan" << "logits for token 1 are not finite (NaN";
        QTest::newRow("hf bad tokenizer.json") << "hf-tokenizer" << "tokenizer.json";
        QTest::newRow("hf bad config.json") << "hf-config" << "config.json";
        QTest::newRow("unknown flag") << "flag" << "--frobnicate";
        QTest::newRow("bad block size") << "block-size" << "block_size";
        QTest::newRow("bad kv cache dtype") << "kv-dtype" << "kv_cache_dtype";
        QTest::newRow("bad number") << "number" << "--max-tokens";
        QTest::newRow("unknown dummy preset") << "dummy" << "dummy:gpt5";
        QTest::newRow("prompts file a directory") << "prompts-dir" << "a directory, not a file";  // read as empty, before
        // Naive batching reserves max_model_len per request: a smaller pool is refused at start (each request
        // was refused on its own, before).
        QTest::newRow("naive pool under max_model_len") << "naive-pool" << "naive mode reserves max_model_len 512 tokens (32 KV blocks of 16)";
        QTest::newRow("prompts file empty") << "prompts-empty" << "no prompt in the file";  // "give at least one --prompt", before
        // Activations for 2e9 tokens a step (2 TB): "out of memory", exit 1, naming nothing, before.
        QTest::newRow("batched tokens past memory") << "batched-tokens" << "lower max_num_batched_tokens";
    }
    void badInput() {
        QFETCH(QString, kind);
        QFETCH(QString, mention);
        QTemporaryDir dir;
        test::RandomModelShape s;
        QString model;
        QStringList extra;
        const QString gguf = models() + "/stories260K-f32.gguf";
        auto hf = [&](const std::function<void(const std::string&)>& damage) {
            const std::string d = dir.filePath("hf").toStdString();
            test::write_random_hf(d, s, 1);
            damage(d);
            model = QString::fromStdString(d);
        };
        auto write_tensors = [&](const std::string& d, const std::function<void(test::RandomTensor&)>& edit, bool drop) {
            std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>> ts;
            for (auto& t : test::random_tensors(s, 1)) {
                if (drop && t.hf_name == mention.toStdString()) continue;
                edit(t);
                ts.emplace_back(t.hf_name, t.hf_name == "model.embed_tokens.weight" && kind == "hf-dtype" ? "I64" : "F32",
                                t.shape, test::encode(t.values, t.shape.back(), DType::F32));
                if (std::get<1>(ts.back()) == "I64") {  // same byte size as 2 x F32 per value: halve the shape
                    std::get<2>(ts.back()).back() /= 2;
                }
            }
            write_safetensors(d + "/model.safetensors", ts);
        };
        if (kind == "missing") model = dir.filePath("nonexistent.gguf");
        else if (kind == "truncated") {
            model = dir.filePath("cut.gguf");
            write_file(model, read_file(gguf).left(5000));
        } else if (kind == "magic") {
            model = dir.filePath("magic.gguf");
            QByteArray b = read_file(gguf);
            b[0] = 'X';
            write_file(model, b);
        } else if (kind == "gguf-arch") {
            model = dir.filePath("arch.gguf");
            test::write_random_gguf(model.toStdString(), s, 1, DType::F32,
                                    [](GgufWriter& w) { w.set_string("general.architecture", "gpt2"); });
        } else if (kind == "gguf-iq2xxs") {
            // IQ2_XXS (256 values in 66 bytes), which kvscope does not compute with.
            model = dir.filePath("iq2xxs.gguf");
            test::write_random_gguf(model.toStdString(), s, 1, DType::F32, [&](GgufWriter& w) {
                w.add_tensor("token_embd.weight", {256, 512}, 16, std::vector<uint8_t>(512 * 66, 0));
            }, "token_embd.weight");
        } else if (kind == "hf-arch") {
            hf([](const std::string& d) {
                json c = json::parse(read_file(QString::fromStdString(d + "/config.json")).toStdString());
                c["model_type"] = "gpt_neox";
                std::ofstream(d + "/config.json") << c.dump();
            });
        } else if (kind == "hf-missing") {
            hf([&](const std::string& d) { write_tensors(d, [](test::RandomTensor&) {}, true); });
        } else if (kind == "hf-shape") {
            hf([&](const std::string& d) {
                write_tensors(d, [](test::RandomTensor& t) {
                    if (t.hf_name == "model.norm.weight") {
                        t.shape = {128};
                        t.values.resize(128);
                    }
                }, false);
            });
        } else if (kind == "hf-dtype") {
            hf([&](const std::string& d) { write_tensors(d, [](test::RandomTensor&) {}, false); });
        } else if (kind == "hf-nan") {
            hf([&](const std::string& d) {
                write_tensors(d, [](test::RandomTensor& t) {
                    if (t.hf_name == "model.layers.0.self_attn.q_proj.weight") t.values[5] = std::numeric_limits<float>::quiet_NaN();
                }, false);
            });
        } else if (kind == "hf-tokenizer") {
            hf([](const std::string& d) { std::ofstream(d + "/tokenizer.json") << "{\"model\": {\"type\": "; });
        } else if (kind == "hf-config") {
            hf([](const std::string& d) { std::ofstream(d + "/config.json") << "{ not json"; });
        } else if (kind == "flag") {
            model = gguf;
            extra << "--frobnicate";
        } else if (kind == "block-size") {
            model = gguf;
            extra << "--block-size" << "3";
        } else if (kind == "kv-dtype") {
            model = gguf;
            extra << "--kv-cache-dtype" << "fp8";
        } else if (kind == "number") {
            model = gguf;
            extra << "--max-tokens" << "many";
        } else if (kind == "dummy") {
            model = "dummy:gpt5";
        } else if (kind == "batched-tokens") {
            model = gguf;
            extra << "--max-num-batched-tokens" << "2000000000";
        } else if (kind == "prompts-dir") {
            model = gguf;
            extra << "--prompts-file" << dir.path();
        } else if (kind == "naive-pool") {
            model = gguf;
            extra << "--mode" << "naive" << "--num-blocks" << "8" << "--max-model-len" << "512" << "--block-size" << "16";
        } else if (kind == "prompts-empty") {
            model = gguf;
            write_file(dir.filePath("empty.txt"), "\r\n\n");
            extra << "--prompts-file" << dir.filePath("empty.txt");
        }
        const Run r = cli(QStringList{"generate", "--model", model, "--prompt", "hi", "--max-tokens", "4"} + extra);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(mention), qPrintable("stderr: " + r.err));
        QVERIFY2(r.err.contains("error"), qPrintable(r.err));
    }

    // Every command's --help (and -h) exits 0 and lists the engine knobs with their defaults.
    void help_data() {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("flag");
        for (const char* command : {"generate", "info", "bench", "serve"})
            for (const char* flag : {"--help", "-h"})
                QTest::addRow("%s %s", command, flag) << command << flag;
    }
    void help() {
        QFETCH(QString, command);
        QFETCH(QString, flag);
        const Run r = cli({command, flag});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(r.err.isEmpty());
        QStringList expected{"--model", "--block-size", "--max-num-seqs", "--kv-cache-memory", "--max-model-len",
                             "tokens per KV block", "[16]", "[256]", "at most 8192"};
        if (command == "serve") expected << "--port" << "[8000]" << "--host" << "127.0.0.1";
        if (command == "bench") expected << "--num-prompts" << "[100]" << "--goodput" << "--request-rate";
        if (command == "generate") expected << "--prompt" << "repeatable" << "--max-tokens" << "[128]";
        for (const QString& e : expected) QVERIFY2(r.out.contains(e), qPrintable(e + " missing from:\n" + r.out));
    }

    void topLevelHelp() {
        const Run r = cli({"--help"});
        QCOMPARE(r.code, 0);
        for (const char* command : {"generate", "info", "bench", "serve"}) QVERIFY(r.out.contains(command));
        QCOMPARE(cli({}).code, 2);
        const Run typo = cli({"genrate"});
        QCOMPARE(typo.code, 2);
        QVERIFY2(typo.err.contains("did you mean generate"), qPrintable(typo.err));
    }

    // Bad flags are refused before anything loads: exit 2, "kvscope-cli COMMAND: error:" and the flag named.
    void badFlags_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QStringList>("mentions");
        const QString gguf = models() + "/stories260K-f32.gguf";
        const QStringList generate{"generate", "--model", gguf, "--prompt", "hi"};
        QTest::newRow("misspelt flag") << generate + QStringList{"--blok-size", "32"}
                                       << QStringList{"unknown option --blok-size", "did you mean --block-size?"};
        QTest::newRow("misspelt flag=value") << QStringList{"info", "--model", gguf, "--max-num-seq=4"}
                                             << QStringList{"--max-num-seq ", "did you mean --max-num-seqs?"};
        QTest::newRow("misspelt serve flag") << QStringList{"serve", "--model", gguf, "--prot", "8080"}
                                             << QStringList{"--prot", "did you mean --port?"};
        QTest::newRow("misspelt required flag") << QStringList{"info", "--modle", gguf}
                                                << QStringList{"--modle", "did you mean --model?"};
        QTest::newRow("missing model") << QStringList{"info"} << QStringList{"--model is required"};
        QTest::newRow("block size 0") << generate + QStringList{"--block-size", "0"}
                                      << QStringList{"--block-size", "1..256"};
        QTest::newRow("max-num-seqs overflows int")
            << QStringList{"info", "--model", gguf, "--max-num-seqs", "99999999999"}
            << QStringList{"--max-num-seqs", "99999999999"};
        QTest::newRow("zero request bytes") << QStringList{"serve", "--model", gguf, "--max-request-bytes", "0"}
                                            << QStringList{"--max-request-bytes", ">= 1"};  // served 413 to every POST
        QTest::newRow("port out of range") << QStringList{"serve", "--model", gguf, "--port", "70000"}
                                           << QStringList{"--port", "0..65535"};
        QTest::newRow("negative seed") << generate + QStringList{"--seed", "-1"} << QStringList{"--seed"};
        QTest::newRow("nan temperature") << generate + QStringList{"--temperature", "nan"}
                                         << QStringList{"--temperature"};
        QTest::newRow("bad byte size") << QStringList{"info", "--model", gguf, "--kv-cache-memory", "12Q"}
                                       << QStringList{"--kv-cache-memory", "12Q"};
        QTest::newRow("missing value") << QStringList{"info", "--model", gguf, "--threads"} << QStringList{"--threads"};
        QTest::newRow("stray generate") << generate + QStringList{"stray"} << QStringList{"unexpected argument 'stray'"};
        QTest::newRow("stray info") << QStringList{"info", "--model", gguf, "--json", "stray"}
                                    << QStringList{"unexpected argument 'stray'"};
        QTest::newRow("stray serve") << QStringList{"serve", "stray", "--model", gguf} << QStringList{"'stray'"};
        QTest::newRow("bad prompt ids") << QStringList{"generate", "--model", gguf, "--prompt-ids", "1,2x"}
                                        << QStringList{"--prompt-ids", "'2x' is not a token id"};
        QTest::newRow("empty prompt id") << QStringList{"generate", "--model", gguf, "--prompt-ids", "1,,2"}
                                         << QStringList{"--prompt-ids", "'' is not a token id"};
        // Past an int option's cap the message says the cap ("must be >= 1, got 4294967296" did not).
        QTest::newRow("max tokens past int") << generate + QStringList{"--max-tokens", "4294967296"}
                                             << QStringList{"--max-tokens", "must be 1..2147483647, got 4294967296"};
        QTest::newRow("max tokens past int64") << generate + QStringList{"--max-tokens", "99999999999999999999"}
                                               << QStringList{"must be 1..2147483647, got 99999999999999999999"};
        QTest::newRow("logprobs out of range") << generate + QStringList{"--logprobs", "21"}
                                               << QStringList{"--logprobs", "-1..20"};
        QTest::newRow("prompt logprobs negative") << generate + QStringList{"--prompt-logprobs", "-2"}
                                                  << QStringList{"--prompt-logprobs", "-1..20"};
        QTest::newRow("prompt logprobs out of range") << generate + QStringList{"--prompt-logprobs", "21"}
                                                      << QStringList{"--prompt-logprobs", "-1..20"};
        QTest::newRow("logprobs without json") << QStringList{"generate", "--model", gguf, "--prompt", "a", "--logprobs", "2"}
                                               << QStringList{"--logprobs", "add --json"};
    }
    void badFlags() {
        QFETCH(QStringList, args);
        QFETCH(QStringList, mentions);
        const Run r = cli(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.startsWith("kvscope-cli " + args.front() + ": error: "), qPrintable(r.err));
        for (const QString& m : mentions) QVERIFY2(r.err.contains(m), qPrintable(m + " missing from: " + r.err));
        QVERIFY(r.out.isEmpty());
    }

    // Byte sizes: plain bytes or binary units (1K = 1024), fractions allowed.
    void kvCacheMemorySizes_data() {
        QTest::addColumn<QString>("size");
        QTest::addColumn<qint64>("bytes");
        QTest::newRow("bytes") << "1048576" << qint64(1048576);
        QTest::newRow("64M") << "64M" << (qint64(64) << 20);
        QTest::newRow("512k") << "512k" << qint64(512) * 1024;
        QTest::newRow("1.5GiB") << "1.5GiB" << (qint64(3) << 29);
        QTest::newRow("2GB") << "2GB" << (qint64(2) << 30);
    }
    void kvCacheMemorySizes() {
        QFETCH(QString, size);
        QFETCH(qint64, bytes);
        const Run r = cli({"info", "--model", models() + "/stories260K-f32.gguf", "--json", "--kv-cache-memory=" + size});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(json::parse(r.out.toStdString())["kv_cache_memory"].get<int64_t>(), int64_t(bytes));
    }

    // --no-free-outside-window on a model whose every layer is windowed: 20 + 200 tokens fit a pool of 12
    // blocks of 4 only while the blocks behind the window are freed; kept, the same pool refuses them.
    void noFreeOutsideWindow() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("mistral").toStdString();
        test::write_random_mistral(path, 16);
        QStringList ids{"1"};
        for (int i = 0; i < 19; ++i) ids << QString::number(10 + i);
        const QStringList args = {"generate", "--model", QString::fromStdString(path), "--prompt-ids", ids.join(','),
                                  "--max-tokens", "200", "--ignore-eos", "--temperature", "0", "--block-size", "4",
                                  "--num-blocks", "12", "--max-num-batched-tokens", "16", "--max-model-len", "512",
                                  "--check-invariants", "--json"};
        const Run freed = cli(args);
        QVERIFY2(freed.code == 0, qPrintable(freed.err));
        QCOMPARE(json_lines(freed.out)[0]["output_token_ids"].size(), size_t(200));
        const Run kept = cli(args + QStringList{"--no-free-outside-window"});
        QCOMPARE(kept.code, 2);
        QVERIFY2(kept.err.contains("needs 55 KV blocks of 4 tokens but the pool has 12"), qPrintable(kept.err));
    }

    // One prompt too long for max_model_len: reported with exit 2, the other prompt still completes.
    void badPromptDoesNotStopOthers() {
        const Run r = cli({"generate", "--model", models() + "/stories260K-f32.gguf", "--max-model-len", "32",
                           "--prompt", QString("Once upon a time ").repeated(20), "--prompt", "Hello", "--max-tokens",
                           "5", "--temperature", "0", "--json"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("max_model_len"));
        const auto lines = json_lines(r.out);
        QVERIFY(lines[0].contains("error"));
        QCOMPARE(lines[1]["output_token_ids"].size(), size_t(5));
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
