// Bad tokenizer input: every malformed or unsupported tokenizer.json / tokenizer_config.json /
// TokenizerVocab is rejected with BadInput whose message names the file and the problem.
#include "model/tokenizer.h"
#include "test_support.h"
#include "util/errors.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using kvscope::Tokenizer;

namespace {

// A minimal valid SentencePiece-style tokenizer.json with one merge; rows below break one thing.
const char* kValid =
    R"({"model": {"type": "BPE", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "ab": 5},
        "merges": ["a b"], "unk_token": "<unk>"},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                       {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "decoder": {"type": "ByteFallback"}})";

std::string with(std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    if (at == std::string::npos) qFatal("test row: '%s' not in the base document", from.c_str());
    return text.replace(at, from.size(), to);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const kvscope::BadInput& e) {
        return e.what();
    }
    return "(no BadInput)";
}

}  // namespace

class TestTokenizerErrors : public QObject {
    Q_OBJECT

private slots:
    void valid_base() {
        const Tokenizer t = Tokenizer::from_hf_json(kValid, "", "bad/tokenizer.json");
        QCOMPARE(t.encode("ab", true), (std::vector<int32_t>{1, 0, 5}));  // "▁" is unknown here
    }

    // Valid variants of the base that real vocabs use: an NFKC normalizer (applied: fullwidth "ａｂ" is
    // "ab"), and Gemma 3's Split on " " after the Replace normalizer (no space is left to split on).
    void valid_variants() {
        const std::string v = kValid;
        const std::string fullwidth = "\xEF\xBD\x81\xEF\xBD\x82";  // U+FF41 U+FF42
        const Tokenizer plain = Tokenizer::from_hf_json(v, "", "t/tokenizer.json");
        QVERIFY(plain.encode(fullwidth, false) != (std::vector<int32_t>{0, 5}));
        const Tokenizer nfkc = Tokenizer::from_hf_json(
            with(v, "\"normalizers\": [", "\"normalizers\": [{\"type\": \"NFKC\"}, "), "", "t/tokenizer.json");
        QCOMPARE(nfkc.encode(fullwidth, false), (std::vector<int32_t>{0, 5}));
        QCOMPARE(nfkc.encode("a\xFF" "b", false), plain.encode("a\xFF" "b", false));  // invalid UTF-8: as given
        const Tokenizer gemma3 = Tokenizer::from_hf_json(
            with(v, "\"decoder\"", "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                                   "\"behavior\": \"MergedWithPrevious\", \"invert\": false}, \"decoder\""),
            "", "t/tokenizer.json");
        QCOMPARE(gemma3.encode("ab ab", true), plain.encode("ab ab", true));
    }

    void hf_json_data() {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QByteArray>("config");
        QTest::addColumn<QString>("message");
        const std::string v = kValid;
        const std::string no_normalizer = with(v, "\"normalizer\"", "\"unused\"");  // no longer SentencePiece-shaped
        auto row = [](const char* name, const std::string& json, const char* message, const char* config = "") {
            QTest::newRow(name) << QByteArray::fromStdString(json) << QByteArray(config) << QString(message);
        };
        row("malformed", "{\"model\": ", "bad/tokenizer.json: malformed JSON");
        row("not an object", "[1, 2]", "bad/tokenizer.json: the top level is not a JSON object");
        row("no model", "{}", "bad/tokenizer.json: no 'model' object");
        row("unigram", with(v, "\"type\": \"BPE\"", "\"type\": \"Unigram\""),
            "bad/tokenizer.json: model.type 'Unigram' is not supported");
        row("wordpiece", with(v, "\"type\": \"BPE\"", "\"type\": \"WordPiece\""), "model.type 'WordPiece' is not supported");
        row("model type not a string", with(v, "\"type\": \"BPE\"", "\"type\": 7"), "bad/tokenizer.json: unexpected JSON shape");
        row("no vocab", with(v, "\"vocab\"", "\"vocabulary\""), "bad/tokenizer.json: model.vocab is missing or empty");
        row("empty vocab", with(v, "\"vocab\": {", "\"vocab\": {}, \"x\": {"), "model.vocab is missing or empty");
        row("string id", with(v, "\"ab\": 5", "\"ab\": \"5\""), "model.vocab['ab'] is not an integer id");
        row("negative id", with(v, "\"ab\": 5", "\"ab\": -5"), "id -5 of 'ab' is out of range");
        row("huge id", with(v, "\"ab\": 5", "\"ab\": 99999999999"), "of 'ab' is out of range");
        row("duplicate id", with(v, "\"ab\": 5", "\"ab\": 4"), "id 4 is used by both");
        row("merge of unknown piece", with(v, "\"a b\"", "\"a c\""), "merge #0 'a c' references unknown piece 'c'");
        row("merge to unknown piece", with(v, "\"ab\": 5", "\"ba\": 5"), "merge #0 'a b' makes 'ab', which is not in the vocabulary");
        row("merge without space", with(v, "\"a b\"", "\"ab\""), "merge #0 'ab' is not two pieces");
        row("merge of wrong type", with(v, "\"a b\"", "17"), "model.merges entry 17");
        row("merges not an array", with(v, "[\"a b\"]", "\"a b\""), "model.merges is not an array");
        row("neither kind", with(no_normalizer, "\"ByteFallback\"", "\"Fuse\""), "neither a ByteLevel nor a SentencePiece");
        row("unsupported normalizer", with(v, "\"Prepend\", \"prepend\": \"\\u2581\"", "\"Lowercase\""),
            "normalizer type 'Lowercase' is not supported");
        row("unsupported pre-tokenizer", with(v, "\"decoder\"", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"decoder\""),
            "pre_tokenizer type 'Whitespace' is not supported");
        row("bad byte-level split", with(no_normalizer, "\"decoder\": {\"type\": \"ByteFallback\"}",
                                         "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\"}, \"decoder\": {\"type\": \"ByteLevel\"}"),
            "pre-tokenizer regex '(a' does not compile");
        row("spm split without replace", with(with(v, "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}", "{\"type\": \"NFC\"}"),
                                              "\"decoder\"", "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}}, \"decoder\""),
            "pre_tokenizer type 'Split' is not supported for a SentencePiece BPE");
        auto byte_level_with = [&](const std::string& pre_tokenizer) {
            return with(no_normalizer, "\"decoder\": {\"type\": \"ByteFallback\"}",
                        "\"pre_tokenizer\": " + pre_tokenizer + ", \"decoder\": {\"type\": \"ByteLevel\"}");
        };
        row("split behavior", byte_level_with(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})"),
            "pre_tokenizer Split behavior \"Sideways\" is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
        row("split behavior not a string", byte_level_with(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": 3})"),
            "pre_tokenizer Split behavior 3 is not Removed");
        row("punctuation behavior", byte_level_with(R"({"type": "Punctuation", "behavior": "removed"})"),
            "pre_tokenizer Punctuation behavior \"removed\" is not Removed");
        row("split pattern not a string", byte_level_with(R"({"type": "Split", "pattern": {"Regex": 5}, "behavior": "Isolated"})"),
            "pre_tokenizer Split has no Regex or String pattern");
        row("byte-level pre-tokenizer", byte_level_with(R"({"type": "BertPreTokenizer"})"),
            "pre_tokenizer type 'BertPreTokenizer' is not supported for a byte-level BPE");
        // HF prepends ByteLevel's space to each word the steps before made; kvscope only to the text.
        row("prefix space after a split",
            byte_level_with(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, )"
                            R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]})"),
            "ByteLevel with add_prefix_space after another pre-tokenizer is not supported");
        row("added token without id", with(v, "\"model\"", "\"added_tokens\": [{\"content\": \"<x>\"}], \"model\""),
            "an added_tokens entry lacks an integer id");
        row("added tokens not an array", with(v, "\"model\"", "\"added_tokens\": 3, \"model\""), "added_tokens is not an array");
        row("malformed config", v, "bad/tokenizer_config.json: malformed JSON", "{\"bos_token\": ");
        row("config not an object", v, "bad/tokenizer_config.json: the top level is not a JSON object", "\"x\"");
    }

    void hf_json() {
        QFETCH(QByteArray, json);
        QFETCH(QByteArray, config);
        QFETCH(QString, message);
        const std::string what = error_of([&] {
            Tokenizer::from_hf_json(json.toStdString(), config.toStdString(), "bad/tokenizer.json");
        });
        // from_hf_json names the config "tokenizer_config.json"; rows expect the "bad/" directory.
        const std::string got = config.isEmpty() ? what : "bad/" + what;
        QVERIFY2(QString::fromStdString(got).contains(message), got.c_str());
    }

    void files() {
        const std::string missing = error_of([] { Tokenizer::from_hf_files("/nonexistent/tokenizer.json", ""); });
        QVERIFY2(missing.find("/nonexistent/tokenizer.json: cannot open") != std::string::npos, missing.c_str());
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/tokenizer.json";
        std::ofstream(path) << with(kValid, "\"type\": \"BPE\"", "\"type\": \"Unigram\"");
        const std::string unigram = error_of([&] { Tokenizer::from_hf_files(path, ""); });
        QVERIFY2(unigram == path + ": model.type 'Unigram' is not supported (only BPE)", unigram.c_str());
        std::ofstream(path) << kValid;
        const std::string config_path = dir.path().toStdString() + "/tokenizer_config.json";
        std::ofstream(config_path) << "{";
        const std::string config = error_of([&] { Tokenizer::from_hf_files(path, config_path); });
        QVERIFY2(config.find(config_path + ": malformed JSON") == 0, config.c_str());
    }

    void vocab_data() {
        QTest::addColumn<int>("row");
        QTest::addColumn<QString>("message");
        QTest::newRow("no tokens") << 0 << "gguf: the vocabulary has no tokens";
        QTest::newRow("scores") << 1 << "gguf: 2 scores for 3 tokens";
        QTest::newRow("types") << 2 << "gguf: 1 token types for 3 tokens";
        QTest::newRow("bos") << 3 << "gguf: BOS id 3 is out of range (vocab size 3)";
        QTest::newRow("extra eos") << 4 << "gguf: extra EOS id -2 is out of range";
        QTest::newRow("no merges or scores") << 5 << "gguf: a SentencePiece vocabulary needs merges or scores";
        QTest::newRow("token type") << 6 << "gguf: token 1 has unknown type 9";
        QTest::newRow("pre") << 7 << "gguf: pre-tokenizer 'jais-2' is not supported";
    }

    void vocab() {
        QFETCH(int, row);
        QFETCH(QString, message);
        kvscope::TokenizerVocab v;
        v.tokens = {"<unk>", "a", "b"};
        v.scores = {0, -1, -2};
        switch (row) {
            case 0: v.tokens.clear(); v.scores.clear(); break;
            case 1: v.scores.pop_back(); break;
            case 2: v.token_types = {1}; break;
            case 3: v.bos_id = 3; break;
            case 4: v.extra_eos_ids = {-2}; break;
            case 5: v.scores.clear(); break;
            case 6: v.token_types = {2, 9, 1}; break;
            case 7: v.kind = kvscope::TokenizerKind::ByteLevelBpe; v.pre_tokenizer = "jais-2"; break;
        }
        const std::string what = error_of([&] { Tokenizer::from_vocab(v, "gguf"); });
        QVERIFY2(QString::fromStdString(what).contains(message), what.c_str());
    }

    void dummy_bytes() {
        QVERIFY(error_of([] { Tokenizer::bytes(100); }).find("vocab_size 100") != std::string::npos);
        const Tokenizer t = Tokenizer::bytes(512);
        QCOMPARE(t.vocab_size(), 512);
        QCOMPARE(t.encode("hi", true), (std::vector<int32_t>{256, 'h', 'i'}));
        QCOMPARE(t.encode("<s>hi</s>", false), (std::vector<int32_t>{256, 'h', 'i', 257}));
        QCOMPARE(t.decode(std::vector<int32_t>{256, 'h', 300, 'i', 257}), std::string("hi"));
        QVERIFY(t.is_eos(257) && !t.is_eos(256));
        QCOMPARE(t.eos_ids(), std::vector<int32_t>{257});
        QCOMPARE(t.kind_name(), std::string_view("bytes"));
    }
};

QTEST_GUILESS_MAIN(TestTokenizerErrors)
#include "test_tokenizer_errors.moc"
