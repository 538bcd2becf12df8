// llama.cpp's own tokenizer test vectors through kvscope's GGUF tokenizer: llama.cpp's repository holds
// vocab-only GGUF files of many families (models/ggml-vocab-NAME.gguf) with texts (.inp) and the ids that
// the families' HF tokenizers give them (.out), which llama.cpp's test-tokenizer-0 checks. They are not
// copied here: the rows run where KVSCOPE_LLAMACPP_VOCABS names that models/ folder (a llama.cpp checkout),
// and skip elsewhere:
//     KVSCOPE_LLAMACPP_VOCABS=LLAMA_CPP/models build/tests/test_llamacpp_vocabs
#include "model/gguf_file.h"
#include "model/gguf_vocab.h"
#include "model/tokenizer.h"
#include "test_support.h"

#include <QtTest>

#include <filesystem>
#include <sstream>

using kvscope::Tokenizer;

class TestLlamacppVocabs : public QObject {
    Q_OBJECT

private slots:
    void matchesLlamacppVectors_data() {
        QTest::addColumn<QString>("name");
        // Every family kvscope's GGUF tokenizer reads (SentencePiece "llama", byte-level "gpt2" with these
        // pre-tokenizers); the BERT, Unigram and Gemma 4 vocabs are other tokenizer kinds.
        for (const char* n : {"llama-spm", "phi-3", "gpt-2", "mpt", "starcoder", "refact", "falcon", "deepseek-coder",
                              "llama-bpe", "qwen2", "qwen35", "command-r"})
            QTest::newRow(n) << QString(n);
    }
    void matchesLlamacppVectors() {
        QFETCH(QString, name);
        const char* dir = std::getenv("KVSCOPE_LLAMACPP_VOCABS");
        const std::string base = std::string(dir ? dir : "") + "/ggml-vocab-" + name.toStdString() + ".gguf";
        if (!dir || !std::filesystem::exists(base) || !std::filesystem::exists(base + ".out"))
            QSKIP("set KVSCOPE_LLAMACPP_VOCABS to llama.cpp's models/ folder (with this vocab's .gguf, .inp and .out)");
        const Tokenizer tok = Tokenizer::from_vocab(kvscope::vocab_from_gguf(kvscope::GgufFile::open(base)), base);
        // .inp: texts separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
        const std::string inp = kvscope::test::read_all(base + ".inp"), sep = "\n__ggml_vocab_test__\n";
        std::vector<std::string> texts;
        for (size_t pos = 0;;) {
            const size_t next = inp.find(sep, pos);
            if (next == std::string::npos) {
                if (pos < inp.size()) texts.push_back(inp.substr(pos));
                break;
            }
            texts.push_back(inp.substr(pos, next - pos));
            pos = next + sep.size();
        }
        std::istringstream out(kvscope::test::read_all(base + ".out"));
        std::vector<std::vector<int32_t>> want;
        for (std::string line; std::getline(out, line);) {
            std::istringstream ids(line);
            want.emplace_back();
            for (int32_t id; ids >> id;) want.back().push_back(id);
        }
        QCOMPARE(want.size(), texts.size());
        for (size_t i = 0; i < texts.size(); ++i)
            QVERIFY2(tok.encode(texts[i], false) == want[i], qPrintable(QString("text %1: '%2'").arg(i).arg(QString::fromStdString(texts[i]))));
    }
};

QTEST_GUILESS_MAIN(TestLlamacppVocabs)
#include "test_llamacpp_vocabs.moc"
