// GPT-2 byte-level BPE on small tokenizer.json files built here (256 byte characters + a few hand
// merges + Llama-3-style special tokens), with the Llama 3 Split regex and with GPT-2's ByteLevel
// regex; expected ids are worked out by hand. Also the pre-splitter's words for both patterns, the
// GGUF pre-tokenizer names through from_vocab, and added tokens.
#include "model/tokenizer.h"
#include "model/tokenizer_byte_level.h"
#include "model/tokenizer_pre_splitter.h"
#include "test_support.h"
#include "util/errors.h"
#include "util/utf8.h"

#include <QElapsedTimer>
#include <QtTest>

#include <nlohmann/json.hpp>

using kvscope::Tokenizer;
using nlohmann::json;

namespace {

// ids 0..255: the byte-level character of that byte (so id == byte); merged pieces from 256.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"Ġ", "t"},   // 256 Ġt
    {"h", "e"},   // 257 he
    {"Ġt", "he"}, // 258 Ġthe
    {"Ġ", "a"},   // 259 Ġa
    {"1", "2"},   // 260 12
    {"12", "3"},  // 261 123
    {"'", "s"},   // 262 's
    {"'", "r"},   // 263 'r
    {"'r", "e"},  // 264 're
    {"i", "s"},   // 265 is
    {"Ċ", "Ċ"},   // 266 ĊĊ
};
constexpr int kBegin = 267, kEot = 268, kUserTag = 269;

json byte_level_vocab() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[kvscope::byte_level_char(static_cast<uint8_t>(b))] = b;
    int id = 256;
    for (const auto& [l, r] : kMerges) vocab[l + r] = id++;
    return vocab;
}

// A Llama 3 shaped tokenizer.json (Split regex + ByteLevel without regex, BOS post-processor) or a
// GPT-2 / Qwen2 shaped one (ByteLevel with its regex, no BOS).
std::string tokenizer_json(bool llama3) {
    json merges = json::array();
    for (const auto& [l, r] : kMerges) merges.push_back(l + " " + r);
    json doc;
    doc["version"] = "1.0";
    doc["added_tokens"] = json::array({
        {{"id", kBegin}, {"content", "<|begin_of_text|>"}, {"special", true}},
        {{"id", kEot}, {"content", "<|eot_id|>"}, {"special", true}},
        {{"id", kUserTag}, {"content", "<|user_tag|>"}, {"special", false}},
    });
    doc["normalizer"] = nullptr;
    if (llama3) {
        doc["pre_tokenizer"] = {{"type", "Sequence"},
                                {"pretokenizers",
                                 json::array({{{"type", "Split"},
                                               {"pattern", {{"Regex", std::string(kvscope::kLlama3SplitPattern)}}},
                                               {"behavior", "Isolated"},
                                               {"invert", false}},
                                              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
        doc["post_processor"] = {{"type", "TemplateProcessing"},
                                 {"single", json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                                         {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
    } else {
        doc["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
        doc["post_processor"] = {{"type", "ByteLevel"}};
    }
    doc["decoder"] = {{"type", "ByteLevel"}};
    doc["model"] = {{"type", "BPE"}, {"vocab", byte_level_vocab()}, {"merges", merges}};
    return doc.dump();
}

QList<int> ids_of(std::initializer_list<int> ids) { return QList<int>(ids); }
QList<int> to_qlist(const std::vector<int32_t>& ids) { return QList<int>(ids.begin(), ids.end()); }
QStringList words_of(const std::vector<std::string_view>& words) {
    QStringList out;
    for (auto w : words) out << QString::fromUtf8(w.data(), static_cast<qsizetype>(w.size()));
    return out;
}

}  // namespace

class TestTokenizerByteLevel : public QObject {
    Q_OBJECT

    std::optional<Tokenizer> llama3_;
    std::optional<Tokenizer> gpt2_;

private slots:
    void initTestCase() {
        const std::string config = R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})";
        llama3_ = Tokenizer::from_hf_json(tokenizer_json(true), config, "llama3/tokenizer.json");
        gpt2_ = Tokenizer::from_hf_json(tokenizer_json(false), "", "gpt2/tokenizer.json");
        QCOMPARE(llama3_->kind_name(), std::string_view("byte-level-bpe"));
        QCOMPARE(llama3_->vocab_size(), 270);
        QCOMPARE(llama3_->bos_id(), kBegin);
        QVERIFY(llama3_->adds_bos());
        QVERIFY(!gpt2_->adds_bos());
        QVERIFY(llama3_->is_eos(kEot));
        QVERIFY(gpt2_->is_eos(kEot));  // an end-of-turn special token stops generation too
    }

    void byte_map() {
        QCOMPARE(kvscope::byte_level_char(' '), std::string("\xC4\xA0"));   // Ġ
        QCOMPARE(kvscope::byte_level_char('\n'), std::string("\xC4\x8A"));  // Ċ
        QCOMPARE(kvscope::byte_level_char('a'), std::string("a"));
        for (int b = 0; b < 256; ++b)
            QCOMPARE(kvscope::byte_level_decode(kvscope::byte_level_char(static_cast<uint8_t>(b))).value(),
                     std::string(1, static_cast<char>(b)));
        QVERIFY(!kvscope::byte_level_decode("<|x|>\xE2\x96\x81").has_value());
    }

    void split_words_data() {
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QStringList>("words");
        const QString l3 = QString::fromStdString(std::string(kvscope::kLlama3SplitPattern));
        const QString g2 = QString::fromStdString(std::string(kvscope::kGpt2SplitPattern));
        QTest::newRow("llama3 words") << l3 << QByteArray("Hello world") << QStringList{"Hello", " world"};
        QTest::newRow("llama3 digits 1-3") << l3 << QByteArray("1234567") << QStringList{"123", "456", "7"};
        QTest::newRow("gpt2 digits") << g2 << QByteArray("1234567") << QStringList{"1234567"};
        QTest::newRow("llama3 contractions") << l3 << QByteArray("he's THEY'RE") << QStringList{"he", "'s", " THEY", "'RE"};
        QTest::newRow("gpt2 contractions") << g2 << QByteArray("he's THEY'RE") << QStringList{"he", "'s", " THEY", "'", "RE"};
        QTest::newRow("llama3 newlines") << l3 << QByteArray("a\n\nb") << QStringList{"a", "\n\n", "b"};
        QTest::newRow("gpt2 newlines") << g2 << QByteArray("a\n\nb") << QStringList{"a", "\n", "\n", "b"};
        QTest::newRow("llama3 spaces") << l3 << QByteArray("a   b  ") << QStringList{"a", "  ", " b", "  "};
        QTest::newRow("llama3 punct") << l3 << QByteArray("x!?\ny") << QStringList{"x", "!?\n", "y"};
        QTest::newRow("llama3 cjk") << l3 << QByteArray("\xE6\x97\xA5\xE6\x9C\xAC" "1") << QStringList{"\u65E5\u672C", "1"};
        QTest::newRow("empty") << l3 << QByteArray("") << QStringList{};
    }

    void split_words() {
        QFETCH(QString, pattern);
        QFETCH(QByteArray, text);
        QFETCH(QStringList, words);
        const kvscope::TokenizerPreSplitter splitter({pattern.toStdString()}, "test");
        const std::string s = text.toStdString();
        QCOMPARE(words_of(splitter.split(s)), words);
    }

    void encode_ids_data() {
        QTest::addColumn<bool>("llama3");
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QList<int>>("ids");
        for (bool l3 : {true, false}) {
            const std::string tag = l3 ? "llama3 " : "gpt2 ";
            QTest::newRow((tag + "the").c_str()) << l3 << QByteArray("the") << ids_of({'t', 257});
            QTest::newRow((tag + "leading space").c_str()) << l3 << QByteArray(" the") << ids_of({258});
            QTest::newRow((tag + "two leading spaces").c_str()) << l3 << QByteArray("  the") << ids_of({' ', 258});
            QTest::newRow((tag + "is").c_str()) << l3 << QByteArray(" is a") << ids_of({' ', 265, 259});
            QTest::newRow((tag + "contraction").c_str()) << l3 << QByteArray("he's") << ids_of({257, 262});
            QTest::newRow((tag + "emoji").c_str()) << l3 << QByteArray("\xF0\x9F\x8D\x95") << ids_of({0xF0, 0x9F, 0x8D, 0x95});
            QTest::newRow((tag + "cjk").c_str()) << l3 << QByteArray("\xE6\x97\xA5") << ids_of({0xE6, 0x97, 0xA5});
            QTest::newRow((tag + "invalid utf8").c_str()) << l3 << QByteArray("\xFF" "a") << ids_of({0xFF, 'a'});
        }
        // Llama 3 splits digits in groups of 1-3 ("212" "3"); GPT-2 keeps the run ("2123").
        QTest::newRow("llama3 digits") << true << QByteArray("2123") << ids_of({'2', 260, '3'});
        QTest::newRow("gpt2 digits") << false << QByteArray("2123") << ids_of({'2', 261});
        QTest::newRow("llama3 they're") << true << QByteArray("they're") << ids_of({'t', 257, 'y', 264});
        // Llama 3 keeps "\n\n" together; GPT-2 splits the newlines when a word follows.
        QTest::newRow("llama3 newlines") << true << QByteArray("a\n\nb") << ids_of({'a', 266, 'b'});
        QTest::newRow("gpt2 newlines") << false << QByteArray("a\n\nb") << ids_of({'a', '\n', '\n', 'b'});
    }

    void encode_ids() {
        QFETCH(bool, llama3);
        QFETCH(QByteArray, text);
        QFETCH(QList<int>, ids);
        const Tokenizer& t = llama3 ? *llama3_ : *gpt2_;
        const std::string s = text.toStdString();
        QCOMPARE(to_qlist(t.encode(s, false)), ids);
        QCOMPARE(t.decode(t.encode(s, true)), kvscope::utf8_lossy(s));
        std::string raw;
        for (int32_t id : t.encode(s, false)) raw += t.token_to_bytes(id);
        QCOMPARE(raw, s);
    }

    void bos_only_when_model_adds_it() {
        QCOMPARE(to_qlist(llama3_->encode(" the", true)), ids_of({kBegin, 258}));
        QCOMPARE(to_qlist(gpt2_->encode(" the", true)), ids_of({258}));
    }

    void special_tokens() {
        const std::string text = "<|begin_of_text|>the<|eot_id|><|user_tag|> is";
        const auto chat = llama3_->encode(text, false);
        QCOMPARE(to_qlist(chat), ids_of({kBegin, 't', 257, kEot, kUserTag, ' ', 265}));
        // Special tokens are skipped by default, user-defined ones are text.
        QCOMPARE(llama3_->decode(chat), std::string("the<|user_tag|> is"));
        QCOMPARE(llama3_->decode(chat, false), text);
        QVERIFY(llama3_->is_special(kEot));
        QVERIFY(!llama3_->is_special(kUserTag));
        // With add_bos the chat encoding starts with exactly one BOS when the text has none.
        QCOMPARE(llama3_->encode("x", true).front(), kBegin);
    }

    // Added tokens that share a first byte and nest: the longest written at a position wins, special or not.
    void nested_added_tokens() {
        json doc = json::parse(tokenizer_json(false));
        doc["added_tokens"] = json::array({{{"id", 270}, {"content", "<a>"}, {"special", false}},
                                           {{"id", 271}, {"content", "<a>b"}, {"special", false}},
                                           {{"id", 272}, {"content", "<a>bc"}, {"special", true}}});
        const Tokenizer t = Tokenizer::from_hf_json(doc.dump(), "", "nested/tokenizer.json");
        QCOMPARE(to_qlist(t.encode("<a>bc<a>b<a>x", false)), ids_of({272, 271, 270, 'x'}));
        QCOMPARE(to_qlist(t.encode("<a", false)), ids_of({'<', 'a'}));
    }

    // Qwen2 / Qwen3's NFC normalizer: "e" + U+0301 is the composed "é" (bytes C3 A9, ids 0xC3 0xA9 here),
    // as HF tokenizers encode it; without the normalizer the three bytes stay.
    void nfc_normalizer() {
        json doc = json::parse(tokenizer_json(false));
        doc["normalizer"] = {{"type", "NFC"}};
        const Tokenizer qwen = Tokenizer::from_hf_json(doc.dump(), "", "qwen/tokenizer.json");
        const std::string decomposed = "e\xCC\x81", composed = "\xC3\xA9";
        QCOMPARE(to_qlist(qwen.encode(decomposed, false)), ids_of({0xC3, 0xA9}));
        QCOMPARE(to_qlist(qwen.encode("<|eot_id|>" + decomposed, false)), ids_of({kEot, 0xC3, 0xA9}));
        QCOMPARE(to_qlist(gpt2_->encode(decomposed, false)), ids_of({'e', 0xCC, 0x81}));
        QCOMPARE(qwen.decode(qwen.encode(decomposed, false)), composed);
    }

    // GGUF tokenizer.ggml.pre names of current families: the words their rules make (the rules were also
    // checked whole against transformers.js on each family's real vocab, as test_real_tokenizers does).
    void gguf_pre_rules_data() {
        QTest::addColumn<QString>("pre");
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("tekken: case runs, single digits") << "tekken" << QByteArray("HelloWorld 2123")
                                                         << QStringList{"Hello", "World", " ", "2", "1", "2", "3"};
        QTest::newRow("gpt-4o: case runs, contractions, digits 1-3") << "gpt-4o" << QByteArray("HelloWorld's 12345")
                                                                    << QStringList{"Hello", "World's", " ", "123", "45"};
        QTest::newRow("llama4 as gpt-4o") << "llama4" << QByteArray("THEY'RE") << QStringList{"THEY'RE"};
        QTest::newRow("deepseek-v3: digits, CJK, words") << "deepseek-v3" << QByteArray("abc\xE4\xB8\xAD\xE6\x96\x87" "12345")
                                                        << QStringList{"abc", "\u4E2D\u6587", "123", "45"};
        QTest::newRow("deepseek-coder: newlines alone") << "deepseek-coder" << QByteArray("a\n\nb 12")
                                                       << QStringList{"a", "\n", "\n", "b", " ", "1", "2"};
        QTest::newRow("qwen35: marks with letters") << "qwen35" << QByteArray("e\xCC\x81x 12")
                                                   << QStringList{"e\u0301x", " ", "1", "2"};
        QTest::newRow("glm4 as llama3") << "glm4" << QByteArray("1234567") << QStringList{"123", "456", "7"};
        QTest::newRow("exaone: digits alone") << "exaone" << QByteArray("x 123") << QStringList{"x", " ", "1", "2", "3"};
    }
    void gguf_pre_rules() {
        QFETCH(QString, pre);
        QFETCH(QByteArray, text);
        QFETCH(QStringList, words);
        const auto rule = kvscope::TokenizerPreSplitter::rule_for_pre(pre.toStdString());
        QVERIFY(rule.has_value());
        const kvscope::TokenizerPreSplitter splitter(rule->patterns, pre.toStdString());
        QCOMPARE(words_of(splitter.split(text.toStdString())), words);
        QCOMPARE(rule->ignore_merges, pre == "tekken");
    }

    // The same vocab described the way GGUF does (pre-tokenizer by name) gives the same ids.
    void gguf_pre_names() {
        kvscope::TokenizerVocab v;
        v.kind = kvscope::TokenizerKind::ByteLevelBpe;
        for (int b = 0; b < 256; ++b) v.tokens.push_back(kvscope::byte_level_char(static_cast<uint8_t>(b)));
        for (const auto& [l, r] : kMerges) {
            v.tokens.push_back(l + r);
            v.merges.push_back(l + " " + r);
        }
        v.tokens.push_back("<|begin_of_text|>");
        v.tokens.push_back("<|eot_id|>");
        v.bos_id = kBegin;
        v.eos_id = kEot;
        const std::string text = "he's 2123 a\n\nb  the 'RE";
        v.pre_tokenizer = "llama-bpe";
        const Tokenizer l3 = Tokenizer::from_vocab(v);
        QCOMPARE(to_qlist(l3.encode(text, true)), to_qlist(llama3_->encode(text, true)));
        QCOMPARE(to_qlist(l3.encode("<|eot_id|>x", false)), ids_of({kEot, 'x'}));
        v.pre_tokenizer = "gpt2";
        v.add_bos = false;
        QCOMPARE(to_qlist(Tokenizer::from_vocab(v).encode(text, true)), to_qlist(gpt2_->encode(text, true)));
        v.pre_tokenizer = "smollm";  // digits one by one
        QCOMPARE(to_qlist(Tokenizer::from_vocab(v).encode("2123", false)), ids_of({'2', '1', '2', '3'}));
        v.pre_tokenizer = "qwen2";
        QCOMPARE(to_qlist(Tokenizer::from_vocab(v).encode("2123", false)), ids_of({'2', '1', '2', '3'}));
        v.pre_tokenizer = "no-such-pre";
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, Tokenizer::from_vocab(v));
    }

    void long_text_round_trips() {
        std::string text;
        while (text.size() < 10000) text += "the cat's 12345 hats\n\n are   on \xF0\x9F\x8D\x95 it. ";
        QElapsedTimer timer;
        timer.start();
        const auto ids = llama3_->encode(text, true);
        const qint64 ms = timer.elapsed();
        // The time is a figure for the notes, not an assertion: the machines are shared and CI runs
        // sanitizer builds. A quadratic merge loop would show as seconds here.
        qInfo("%zu bytes -> %zu tokens in %lld ms", text.size(), ids.size(), static_cast<long long>(ms));
        QCOMPARE(llama3_->decode(ids), text);
        // One 10k-byte word: the merge loop must not be quadratic.
        std::string word;
        for (int i = 0; i < 5000; ++i) word += "he";
        timer.restart();
        const auto word_ids = gpt2_->encode(word, false);
        QCOMPARE(word_ids.size(), size_t(5000));
        QCOMPARE(word_ids.back(), 257);
        qInfo("one 10k-byte word in %lld ms", static_cast<long long>(timer.elapsed()));
    }
};

QTEST_GUILESS_MAIN(TestTokenizerByteLevel)
#include "test_tokenizer_byte_level.moc"
