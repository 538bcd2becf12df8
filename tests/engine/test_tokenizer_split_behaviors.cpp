// tokenizer.json pre-tokenizers other than Isolated splits: Split with each HF split behavior and with
// invert, Punctuation, Whitespace, WhitespaceSplit, empty regex matches, and steps after ByteLevel
// (Falcon's Digits), against the words and ids that HF tokenizers itself computes
// (tests/data/pre_tokenizer_cases.json, README.md says how they were made) on a byte-level vocab of
// 256 byte characters and a few merges built here.
#include "model/tokenizer.h"
#include "model/tokenizer_byte_level.h"
#include "model/tokenizer_hf_json.h"
#include "model/tokenizer_pre_splitter.h"
#include "test_support.h"

#include <QtTest>

using kvscope::Tokenizer;
using nlohmann::json;

namespace {

// ids 0..255: the byte-level character of that byte; the merges' pieces from 256 in order.
std::string tokenizer_json(const json& merges, const json& pre_tokenizer) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[kvscope::byte_level_char(static_cast<uint8_t>(b))] = b;
    int id = 256;
    for (const json& m : merges) {
        std::string piece = m.get<std::string>();
        piece.erase(piece.find(' '), 1);
        vocab[piece] = id++;
    }
    json doc;
    doc["added_tokens"] = json::array();
    doc["pre_tokenizer"] = pre_tokenizer;
    doc["decoder"] = {{"type", "ByteLevel"}};
    doc["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
    return doc.dump();
}

// Words as HF shows them after ByteLevel: each byte as its byte-level character.
QStringList byte_level_words(const std::vector<std::string_view>& words) {
    QStringList out;
    for (std::string_view w : words) {
        std::string mapped;
        for (char c : w) mapped += kvscope::byte_level_char(static_cast<uint8_t>(c));
        out << QString::fromStdString(mapped);
    }
    return out;
}

QStringList strings_of(const json& words) {
    QStringList out;
    for (const json& w : words) out << QString::fromStdString(w.get<std::string>());
    return out;
}

}  // namespace

class TestTokenizerSplitBehaviors : public QObject {
    Q_OBJECT

    json cases_;

private slots:
    void initTestCase() { cases_ = kvscope::test::read_json(kvscope::test::models_dir() + "/pre_tokenizer_cases.json"); }

    void matches_hf_tokenizers_data() {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < cases_["cases"].size(); ++i)
            QTest::newRow(cases_["cases"][i]["name"].get<std::string>().c_str()) << static_cast<int>(i);
    }
    void matches_hf_tokenizers() {
        QFETCH(int, index);
        const json& c = cases_["cases"][static_cast<size_t>(index)];
        const std::string name = c["name"].get<std::string>();
        const std::string doc = tokenizer_json(cases_["merges"], c["pre_tokenizer"]);
        const kvscope::TokenizerVocab vocab = kvscope::parse_hf_tokenizer(doc, "", name, "").vocab;
        const kvscope::TokenizerPreSplitter splitter(vocab.split_rules, name);
        const Tokenizer tok = Tokenizer::from_hf_json(doc, "", name);
        const json& texts = cases_["texts"];
        for (size_t i = 0; i < texts.size(); ++i) {
            std::string text = texts[i].get<std::string>();
            const auto want_ids = c["ids"][i].get<std::vector<int32_t>>();
            QCOMPARE(tok.encode(text, false), want_ids);
            // The encoder prepends ByteLevel's space to a text that is not empty, then splits.
            if (vocab.byte_level_add_prefix_space && !text.empty() && text.front() != ' ') text.insert(0, " ");
            QCOMPARE(byte_level_words(splitter.split(text)), strings_of(c["words"][i]));
        }
    }
};

QTEST_GUILESS_MAIN(TestTokenizerSplitBehaviors)
#include "test_tokenizer_split_behaviors.moc"
