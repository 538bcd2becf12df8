// IncrementalDetokenizer: for every tokenizer kind, streamed deltas are always whole UTF-8 and
// concatenate to Tokenizer::decode of all ids, including byte-by-byte multi-byte characters,
// invalid and unfinished sequences, skipped special tokens and SentencePiece's leading-space strip.
#include "model/incremental_detokenizer.h"
#include "model/tokenizer.h"
#include "model/tokenizer_byte_level.h"
#include "test_support.h"
#include "util/errors.h"
#include "util/utf8.h"

#include <QtTest>

#include <random>

using kvscope::IncrementalDetokenizer;
using kvscope::Tokenizer;

namespace {

Tokenizer byte_level_tokenizer() {
    kvscope::TokenizerVocab v;
    v.kind = kvscope::TokenizerKind::ByteLevelBpe;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(kvscope::byte_level_char(static_cast<uint8_t>(b)));
    v.tokens.push_back("\xC4\xA0t");  // Ġt
    v.merges.push_back("\xC4\xA0 t");
    v.tokens.push_back("<|endoftext|>");
    v.eos_id = 257;
    v.add_bos = false;
    v.pre_tokenizer = "gpt2";
    return Tokenizer::from_vocab(std::move(v));
}

// Streams ids; fails the test on a broken delta; returns the concatenation.
std::string stream(const Tokenizer& t, const std::vector<int32_t>& ids, std::vector<std::string>* deltas = nullptr) {
    IncrementalDetokenizer detok(t);
    std::string all;
    for (int32_t id : ids) {
        std::string d = detok.push(id);
        if (!kvscope::utf8_is_valid(d)) qFatal("broken UTF-8 delta after id %d", id);
        all += d;
        if (deltas) deltas->push_back(std::move(d));
    }
    const std::string tail = detok.flush();
    if (!kvscope::utf8_is_valid(tail)) qFatal("broken UTF-8 in flush");
    all += tail;
    if (deltas) deltas->push_back(tail);
    return all;
}

}  // namespace

class TestDetokenizer : public QObject {
    Q_OBJECT

    std::optional<Tokenizer> spm_;
    std::optional<Tokenizer> byte_level_;
    std::optional<Tokenizer> bytes_;

private slots:
    void initTestCase() {
        const std::string dir = kvscope::test::models_dir();
        spm_ = Tokenizer::from_hf_files(dir + "/stories260K-hf/tokenizer.json", dir + "/stories260K-hf/tokenizer_config.json");
        byte_level_ = byte_level_tokenizer();
        bytes_ = Tokenizer::bytes(300);
    }

    void matches_decode_data() {
        QTest::addColumn<QByteArray>("text");
        QTest::newRow("ascii") << QByteArray("Once upon a time, Lily saw a ball.");
        QTest::newRow("leading spaces") << QByteArray("  two  spaces ");
        QTest::newRow("latin") << QByteArray("na\xC3\xAFve caf\xC3\xA9");
        QTest::newRow("cjk") << QByteArray("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E");
        QTest::newRow("emoji") << QByteArray("tea \xE2\x98\x95 pizza \xF0\x9F\x8D\x95!");
        QTest::newRow("invalid") << QByteArray("a\xFF\xE6\x97 b\x80");
        QTest::newRow("unfinished at end") << QByteArray("ok \xF0\x9F\x8D");
    }

    void matches_decode() {
        QFETCH(QByteArray, text);
        const std::string s = text.toStdString();
        for (const Tokenizer* t : {&*spm_, &*byte_level_, &*bytes_}) {
            const auto ids = t->encode(s, true);
            QCOMPARE(stream(*t, ids), t->decode(ids));
        }
    }

    // One byte per token: a 4-byte character shows up whole, on its last byte, never before.
    void byte_by_byte() {
        const std::string s = "a\xF0\x9F\x8D\x95" "b";
        for (const Tokenizer* t : {&*byte_level_, &*bytes_}) {
            const auto ids = t->encode(s, false);
            QCOMPARE(ids.size(), size_t(6));
            std::vector<std::string> deltas;
            QCOMPARE(stream(*t, ids, &deltas), s);
            const std::vector<std::string> want{"a", "", "", "", "\xF0\x9F\x8D\x95", "b", ""};
            QCOMPARE(deltas, want);
        }
        // SentencePiece byte fallback: "☕" is three <0xXX> tokens.
        const auto ids = spm_->encode("\xE2\x98\x95", false);
        std::vector<std::string> deltas;
        QCOMPARE(stream(*spm_, ids, &deltas), std::string("\xE2\x98\x95"));
        QCOMPARE(deltas.back(), std::string());
    }

    // A byte that cannot continue the pending sequence turns it into U+FFFD at once.
    void invalid_sequences() {
        IncrementalDetokenizer d(*bytes_);
        QCOMPARE(d.push(0xE6), std::string());
        QCOMPARE(d.push('A'), std::string("\xEF\xBF\xBD" "A"));
        QCOMPARE(d.push(0xE6), std::string());
        QCOMPARE(d.push(0x97), std::string());
        QCOMPARE(d.flush(), std::string("\xEF\xBF\xBD"));
        QCOMPARE(d.push(0x80), std::string("\xEF\xBF\xBD"));
    }

    void specials_and_leading_space() {
        const std::vector<int32_t> ids{1, 403, 407, 2, 261};  // <s> ▁Once ▁upon </s> ▁a
        std::vector<std::string> deltas;
        QCOMPARE(stream(*spm_, ids, &deltas), spm_->decode(ids));
        QCOMPARE(deltas[0], std::string());
        QCOMPARE(deltas[1], std::string("Once"));
        QCOMPARE(deltas[3], std::string());
        IncrementalDetokenizer keep(*spm_, false);
        QCOMPARE(keep.push(1), std::string("<s>"));
        QCOMPARE(keep.push(403), std::string(" Once"));
        QCOMPARE(spm_->decode(std::vector<int32_t>{1, 403}, false), std::string("<s> Once"));
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, keep.push(512));
    }

    // Random id streams over whole vocabularies (specials, unused ids, lone bytes).
    void random_streams() {
        std::mt19937_64 rng(kvscope::test::test_seed(20240611));
        for (const Tokenizer* t : {&*spm_, &*byte_level_, &*bytes_}) {
            std::uniform_int_distribution<int32_t> id(0, t->vocab_size() - 1);
            for (int round = 0; round < 300; ++round) {
                std::vector<int32_t> ids(static_cast<size_t>(round % 40));
                for (auto& x : ids) x = id(rng);
                QCOMPARE(stream(*t, ids), t->decode(ids));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestDetokenizer)
#include "test_detokenizer.moc"
