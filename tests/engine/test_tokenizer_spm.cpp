// SentencePiece-style BPE on the real stories260K tokenizer (tok512): every case of
// tokenizer_cases.json and expected.json, through tokenizer.json (merges) AND through the GGUF
// vocab (scores only, llama.cpp's algorithm), read here with a minimal GGUF metadata reader so the
// check does not depend on the engine's GGUF loader. Plus round trips, special tokens, speed, threads.
#include "model/tokenizer.h"
#include "test_support.h"
#include "util/errors.h"
#include "util/utf8.h"

#include <QElapsedTimer>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

using kvscope::Tokenizer;
using kvscope::TokenizerVocab;

namespace {

using kvscope::test::read_all;

// Just enough of GGUF v3 to read the tokenizer keys: header, then key/value pairs in order.
class MiniGguf {
public:
    explicit MiniGguf(const std::string& path) : data_(read_all(path)) {
        if (take<uint32_t>() != 0x46554747u) qFatal("%s: not a GGUF file", path.c_str());
        const uint32_t version = take<uint32_t>();
        if (version != 3) qFatal("%s: GGUF version %u", path.c_str(), version);
        take<uint64_t>();  // n_tensors
        const uint64_t n_kv = take<uint64_t>();
        for (uint64_t i = 0; i < n_kv; ++i) {
            const std::string key = take_string();
            const uint32_t type = take<uint32_t>();
            read_value(key, type);
        }
    }
    std::vector<std::string> strings(const std::string& key) const { return strings_.at(key); }
    std::vector<float> floats(const std::string& key) const { return floats_.at(key); }
    std::vector<int64_t> ints(const std::string& key) const { return ints_.at(key); }
    bool has(const std::string& key) const { return ints_.count(key) || strings_.count(key) || floats_.count(key); }

private:
    template <class T>
    T take() {
        T v;
        std::memcpy(&v, data_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string take_string() {
        const auto n = take<uint64_t>();
        std::string s = data_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    void read_scalar(const std::string& key, uint32_t type) {
        switch (type) {
            case 0: ints_[key].push_back(take<uint8_t>()); break;
            case 1: ints_[key].push_back(take<int8_t>()); break;
            case 2: ints_[key].push_back(take<uint16_t>()); break;
            case 3: ints_[key].push_back(take<int16_t>()); break;
            case 4: ints_[key].push_back(take<uint32_t>()); break;
            case 5: ints_[key].push_back(take<int32_t>()); break;
            case 6: floats_[key].push_back(take<float>()); break;
            case 7: ints_[key].push_back(take<uint8_t>()); break;
            case 8: strings_[key].push_back(take_string()); break;
            case 10: ints_[key].push_back(static_cast<int64_t>(take<uint64_t>())); break;
            case 11: ints_[key].push_back(take<int64_t>()); break;
            case 12: floats_[key].push_back(static_cast<float>(take<double>())); break;
            default: qFatal("GGUF type %u", type);
        }
    }
    void read_value(const std::string& key, uint32_t type) {
        if (type != 9) return read_scalar(key, type);
        const uint32_t elem = take<uint32_t>();
        const uint64_t n = take<uint64_t>();
        strings_[key];  // arrays may be empty
        for (uint64_t i = 0; i < n; ++i) read_scalar(key, elem);
    }
    std::string data_;
    size_t pos_ = 0;
    std::map<std::string, std::vector<std::string>> strings_;
    std::map<std::string, std::vector<float>> floats_;
    std::map<std::string, std::vector<int64_t>> ints_;
};

QList<int> to_qlist(const std::vector<int32_t>& ids) { return QList<int>(ids.begin(), ids.end()); }

}  // namespace

class TestTokenizerSpm : public QObject {
    Q_OBJECT

    std::optional<Tokenizer> hf_;
    std::optional<Tokenizer> gguf_;

private slots:
    void initTestCase() {
        const std::string dir = kvscope::test::models_dir();
        hf_ = Tokenizer::from_hf_files(dir + "/stories260K-hf/tokenizer.json", dir + "/stories260K-hf/tokenizer_config.json");

        MiniGguf g(dir + "/stories260K-f32.gguf");
        QCOMPARE(g.strings("tokenizer.ggml.model").at(0), std::string("llama"));
        TokenizerVocab v;
        v.kind = kvscope::TokenizerKind::SentencePieceBpe;
        v.tokens = g.strings("tokenizer.ggml.tokens");
        v.scores = g.floats("tokenizer.ggml.scores");
        for (int64_t t : g.ints("tokenizer.ggml.token_type")) v.token_types.push_back(static_cast<int32_t>(t));
        v.bos_id = static_cast<int32_t>(g.ints("tokenizer.ggml.bos_token_id").at(0));
        v.eos_id = static_cast<int32_t>(g.ints("tokenizer.ggml.eos_token_id").at(0));
        if (g.has("tokenizer.ggml.unknown_token_id"))
            v.unk_id = static_cast<int32_t>(g.ints("tokenizer.ggml.unknown_token_id").at(0));
        if (g.has("tokenizer.ggml.add_space_prefix"))
            v.add_space_prefix = g.ints("tokenizer.ggml.add_space_prefix").at(0) != 0;
        gguf_ = Tokenizer::from_vocab(std::move(v), "stories260K-f32.gguf");

        QCOMPARE(hf_->vocab_size(), 512);
        QCOMPARE(gguf_->vocab_size(), 512);
        QCOMPARE(hf_->bos_id(), 1);
        QCOMPARE(gguf_->bos_id(), 1);
        QVERIFY(hf_->is_eos(2) && gguf_->is_eos(2));
        QCOMPARE(hf_->kind_name(), std::string_view("sentencepiece-bpe"));
    }

    void reference_ids_data() {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QList<int>>("ids");
        const std::string dir = kvscope::test::models_dir();
        const auto cases = nlohmann::json::parse(read_all(dir + "/tokenizer_cases.json"));
        int i = 0;
        for (const auto& c : cases["cases"])
            QTest::newRow(("case " + std::to_string(i++)).c_str())
                << QByteArray::fromStdString(c["text"].get<std::string>()) << to_qlist(c["ids"].get<std::vector<int32_t>>());
        const auto expected = nlohmann::json::parse(read_all(dir + "/expected.json"));
        i = 0;
        for (const auto& c : expected["cases"])
            QTest::newRow(("expected prompt " + std::to_string(i++)).c_str())
                << QByteArray::fromStdString(c["prompt"].get<std::string>())
                << to_qlist(c["prompt_ids"].get<std::vector<int32_t>>());
    }

    // Both construction paths give the reference ids, and decoding gives the text back.
    void reference_ids() {
        QFETCH(QByteArray, text);
        QFETCH(QList<int>, ids);
        const std::string s = text.toStdString();
        QCOMPARE(to_qlist(hf_->encode(s, true)), ids);
        QCOMPARE(to_qlist(gguf_->encode(s, true)), ids);
        const std::vector<int32_t> v(ids.begin(), ids.end());
        QCOMPARE(hf_->decode(v), s);
        QCOMPARE(gguf_->decode(v), s);
    }

    void continuation_text() {
        const std::string dir = kvscope::test::models_dir();
        const auto expected = nlohmann::json::parse(read_all(dir + "/expected.json"));
        for (const auto& c : expected["cases"]) {
            std::vector<int32_t> all = c["prompt_ids"].get<std::vector<int32_t>>();
            const auto cont = c["continuation_ids"].get<std::vector<int32_t>>();
            all.insert(all.end(), cont.begin(), cont.end());
            const std::string prompt = hf_->decode(c["prompt_ids"].get<std::vector<int32_t>>());
            QCOMPARE(hf_->decode(all).substr(prompt.size()), c["continuation_text"].get<std::string>());
        }
    }

    void round_trip_data() {
        QTest::addColumn<QByteArray>("text");
        QTest::newRow("emoji") << QByteArray("I like \xF0\x9F\x8D\x95 and \xF0\x9F\x90\xB6!");
        QTest::newRow("cjk") << QByteArray("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xA7\xE3\x81\x99");
        QTest::newRow("digits") << QByteArray("3.14159 and 2718281828 and 007");
        QTest::newRow("runs of spaces") << QByteArray("a    b \t c     ");
        QTest::newRow("leading spaces") << QByteArray("   x");
        QTest::newRow("newlines") << QByteArray("one\n\ntwo\r\nthree\n");
        QTest::newRow("near specials") << QByteArray("<s </s <unk <0x41> s>");
        QTest::newRow("single space") << QByteArray(" ");
    }

    void round_trip() {
        QFETCH(QByteArray, text);
        const std::string s = text.toStdString();
        for (const Tokenizer* t : {&*hf_, &*gguf_}) {
            const auto ids = t->encode(s, true);
            QCOMPARE(ids.front(), 1);
            QCOMPARE(t->decode(ids), s);
        }
        QCOMPARE(to_qlist(hf_->encode(s, false)), to_qlist(gguf_->encode(s, false)));
    }

    // Invalid UTF-8 is encoded byte by byte (byte fallback); decode shows each bad byte as U+FFFD.
    void invalid_utf8_data() {
        QTest::addColumn<QByteArray>("text");
        QTest::newRow("lone continuation") << QByteArray("a\x80" "b");
        QTest::newRow("truncated 3-byte") << QByteArray("x\xE6\x97");
        QTest::newRow("overlong") << QByteArray("\xC0\xAF");
        QTest::newRow("surrogate") << QByteArray("\xED\xA0\x80");
        QTest::newRow("0xFF") << QByteArray("\xFF\xFE hello");
    }

    void invalid_utf8() {
        QFETCH(QByteArray, text);
        const std::string s = text.toStdString();
        for (const Tokenizer* t : {&*hf_, &*gguf_}) {
            const auto ids = t->encode(s, false);
            std::string raw;
            for (int32_t id : ids) raw += t->token_to_bytes(id);
            QCOMPARE(raw, " " + s);  // the space prefix, then every byte
            QCOMPARE(t->decode(ids), kvscope::utf8_lossy(s));
        }
        QCOMPARE(to_qlist(hf_->encode(s, false)), to_qlist(gguf_->encode(s, false)));
    }

    // "<s>" written in the text is BOS (as vLLM's HF tokenizer and llama-server's parse_special read a
    // prompt; llama-server gives [1, 1, ...] for "<s>..." with add_special), and the text after it gets
    // its own space prefix (llama.cpp and the legacy HF tokenizer both do this).
    void special_tokens() {
        for (const Tokenizer* t : {&*hf_, &*gguf_}) {
            QCOMPARE(t->encode("<s>", true), (std::vector<int32_t>{1, 1}));
            QCOMPARE(t->encode("<unk>", false), std::vector<int32_t>{0});
            // llama-server's /tokenize (ngxson/llama.cpp 3f545be, add_special) on stories260K-f32.gguf:
            QCOMPARE(t->encode("<s> literal", true), (std::vector<int32_t>{1, 1, 410, 278, 275, 285, 412, 421}));
            QCOMPARE(t->encode("<s></s><unk> <0x41>", true), (std::vector<int32_t>{1, 1, 2, 0, 410, 410, 504, 477, 444, 484, 475, 505}));
            const auto chat = t->encode("<s> literal</s>", false);
            std::vector<int32_t> want{1};
            const auto rest = t->encode(" literal", false);
            want.insert(want.end(), rest.begin(), rest.end());
            want.push_back(2);
            QCOMPARE(to_qlist(chat), to_qlist(want));
            QCOMPARE(t->decode(chat), std::string(" literal"));  // <s> skipped, then one space stripped
            QCOMPARE(t->decode(chat, false), std::string("<s>  literal</s>"));
            QVERIFY(t->is_special(1) && t->is_special(2) && !t->is_special(403));
            QCOMPARE(t->encode("", true), std::vector<int32_t>{1});
            // A literal "▁" in the text is indistinguishable from a space once encoded (as in HF and llama.cpp).
            QCOMPARE(t->decode(t->encode("a\xE2\x96\x81" "b", true)), std::string("a b"));
        }
    }

    void out_of_range_ids() {
        const std::vector<int32_t> bad{1, 512};
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, hf_->decode(bad));
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, hf_->token_to_bytes(-1));
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, hf_->piece(512));
    }

    // 10k characters in one "word" (no pre-tokenizer splits SentencePiece text) and as prose.
    void long_text_round_trips() {
        std::string prose, word;
        while (prose.size() < 10000) prose += "Once upon a time, Lily saw a big red ball in the park. ";
        while (word.size() < 10000) word += "abcdefghij\xE6\x97\xA5";
        for (const Tokenizer* t : {&*hf_, &*gguf_}) {
            for (const std::string& s : {prose, word}) {
                QElapsedTimer timer;
                timer.start();
                const auto ids = t->encode(s, true);
                const qint64 ms = timer.elapsed();
                // A figure for the notes, not an assertion (shared machines, sanitizer builds).
                qInfo("%zu bytes -> %zu tokens in %lld ms", s.size(), ids.size(), static_cast<long long>(ms));
                QCOMPARE(t->decode(ids), s);
            }
        }
    }

    void concurrent_use() {
        std::string text;
        for (int i = 0; i < 50; ++i) text += "Tom and Lily went to the park " + std::to_string(i) + ". ";
        const auto want = hf_->encode(text, true);
        std::vector<std::thread> threads;
        std::atomic<int> mismatches{0};
        for (int k = 0; k < 4; ++k)
            threads.emplace_back([&] {
                for (int i = 0; i < 50; ++i)
                    if (hf_->encode(text, true) != want || gguf_->encode(text, true) != want) ++mismatches;
            });
        for (auto& th : threads) th.join();
        QCOMPARE(mismatches.load(), 0);
    }
};

QTEST_GUILESS_MAIN(TestTokenizerSpm)
#include "test_tokenizer_spm.moc"
