// A portable build (KVSCOPE_PORTABLE) on CPUs it was not built on, emulated by qemu-user: kvscope-cli picks
// its avx2 kernel set on a Haswell (AVX2, no AVX-512) and its baseline set on a Nehalem (x86-64-v2, no AVX),
// never traps on an instruction those CPUs lack, and generates the same greedy tokens as the native build
// and as run.c (tests/data/expected.json). The portable kvscope-cli is this build's when it is portable,
// else that of the label's portable build (<build>/portable, made by the portable_build fixture:
// tests/packaging/portable_build.cmake). Needs qemu-x86_64 (Debian's qemu-user, installed by
// packaging/debian-deps.sh): fails, never skips, without it. qemu runs about 50x slower than the host,
// so the generate is tiny: 20 tokens of stories260K on one thread.
#include "process_run.h"
#include "test_support.h"

#include <QStandardPaths>
#include <nlohmann/json.hpp>

using namespace kvscope;
using nlohmann::json;

namespace {

using Run = test::ProcessResult;
const auto run = test::run_process;

// The environment of the runs: KVSCOPE_CPU_VARIANT as given (unset when empty).
QProcessEnvironment environment(const QString& variant = {}) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("KVSCOPE_CPU_VARIANT");
    if (!variant.isEmpty()) env.insert("KVSCOPE_CPU_VARIANT", variant);
    return env;
}

const QString kPrompt = "Once upon a time";
constexpr int kTokens = 20;

QStringList generate_args() {
    return {"generate", "--model", QString::fromStdString(test::models_dir()) + "/stories260K-hf", "--prompt", kPrompt,
            "--temperature", "0", "--max-tokens", QString::number(kTokens), "--json", "--threads", "1"};
}
QStringList info_args(bool json_output) {
    QStringList a{"info", "--model", QString::fromStdString(test::models_dir()) + "/stories260K-hf", "--backend", "cpu"};
    if (json_output) a << "--json";
    return a;
}

// output_token_ids of generate --json's first line.
std::vector<int> output_ids(const Run& r) {
    const QString first = r.out.section('\n', 0, 0);
    return json::parse(first.toStdString())["output_token_ids"].get<std::vector<int>>();
}

}  // namespace

class TestPortableCpuKernels : public QObject {
    Q_OBJECT

    QString qemu_;
    QString portable_cli_;
    std::vector<int> native_ids_;

    // portable_cli_ on the emulated cpu ("" = on the host, not emulated).
    Run portable(const QString& cpu, const QStringList& args, const QString& variant = {}) {
        if (cpu.isEmpty()) return run(portable_cli_, args, environment(variant), 300);
        return run(qemu_, QStringList{"-cpu", cpu, portable_cli_} + args, environment(variant), 600);
    }

private slots:
    void initTestCase() {
        qemu_ = QStandardPaths::findExecutable("qemu-x86_64");
        QVERIFY2(!qemu_.isEmpty(), "qemu-x86_64 not found: install Debian's qemu-user (packaging/debian-deps.sh)");

        // The reference: this build's kvscope-cli on the host, which must itself match run.c.
        const QString cli = QString::fromStdString(test::cli_path());
        const Run native = run(cli, generate_args(), environment(), 300);
        QVERIFY2(native.code == 0, qPrintable(native.err));
        native_ids_ = output_ids(native);
        const json expected = json::parse(test::read_all(test::models_dir() + "/expected.json"));
        std::vector<int> runc;
        for (const auto& c : expected["cases"])
            if (c["prompt"].get<std::string>() == kPrompt.toStdString())
                runc = c["continuation_ids"].get<std::vector<int>>();
        QCOMPARE(runc.size(), size_t(100));
        runc.resize(kTokens);
        QCOMPARE(native_ids_, runc);

        portable_cli_ = QString(KVSCOPE_PORTABLE_BUILD_DIR) + "/app/kvscope-cli";
        const Run info = portable("", info_args(true));
        QVERIFY2(info.code == 0, qPrintable(portable_cli_ + " (from the portable_build fixture): " + info.err));
        const std::string kernels = json::parse(info.out.toStdString()).value("cpu_kernels", "");
        QVERIFY2(kernels == "avx512" || kernels == "avx2" || kernels == "baseline",
                 qPrintable(portable_cli_ + " is not portable: its CPU kernels are " + QString::fromStdString(kernels)));
    }

    // The widest kernel set the (emulated) CPU runs, and info says so.
    void choosesFromCpuid_data() {
        QTest::addColumn<QString>("cpu");
        QTest::addColumn<QString>("kernels");
        QTest::addColumn<QString>("line");
        QTest::newRow("Haswell") << "Haswell" << "avx2" << "cpu kernels       avx2 (AVX2 FMA F16C), chosen from cpuid";
        QTest::newRow("Nehalem") << "Nehalem" << "baseline" << "cpu kernels       baseline (SSE4.2 POPCNT), chosen from cpuid";
    }
    void choosesFromCpuid() {
        QFETCH(QString, cpu);
        QFETCH(QString, kernels);
        QFETCH(QString, line);
        const Run j = portable(cpu, info_args(true));
        QVERIFY2(j.code == 0, qPrintable(j.err));
        QCOMPARE(QString::fromStdString(json::parse(j.out.toStdString())["cpu_kernels"].get<std::string>()), kernels);
        const Run text = portable(cpu, info_args(false));
        QVERIFY2(text.code == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(line + "\n"), qPrintable(text.out));
    }

    // Greedy tokens: every kernel set gives the native build's (the sets differ in summation trees and FMA
    // contraction only, far below stories260K's top-2 logit gaps on this prompt).
    void generateMatchesNative_data() {
        QTest::addColumn<QString>("cpu");
        QTest::addColumn<QString>("variant");
        QTest::newRow("host, from cpuid") << "" << "";
        QTest::newRow("host, KVSCOPE_CPU_VARIANT=avx2") << "" << "avx2";
        QTest::newRow("host, KVSCOPE_CPU_VARIANT=baseline") << "" << "baseline";
        QTest::newRow("qemu Haswell (avx2)") << "Haswell" << "";
        QTest::newRow("qemu Nehalem (baseline)") << "Nehalem" << "";
    }
    void generateMatchesNative() {
        QFETCH(QString, cpu);
        QFETCH(QString, variant);
        const Run r = portable(cpu, generate_args(), variant);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(output_ids(r), native_ids_);
    }

    // KVSCOPE_CPU_VARIANT naming a set the CPU cannot run, or no set at all: exit code 2 and a message that
    // says what is missing, never a SIGILL.
    void refusesWhatTheCpuCannotRun_data() {
        QTest::addColumn<QString>("cpu");
        QTest::addColumn<QString>("variant");
        QTest::addColumn<QString>("message");
        QTest::newRow("avx512 on a Haswell") << "Haswell" << "avx512"
                                             << "KVSCOPE_CPU_VARIANT=avx512: this CPU cannot run the avx512 kernels: it "
                                                "lacks AVX512F, AVX512CD, AVX512BW, AVX512DQ, AVX512VL, AVX512VNNI";
        QTest::newRow("avx2 on a Nehalem") << "Nehalem" << "avx2" << "this CPU cannot run the avx2 kernels: it lacks AVX";
        QTest::newRow("no such set") << "" << "avx10"
                                     << "KVSCOPE_CPU_VARIANT=avx10: no CPU kernel set 'avx10' in this build "
                                        "(avx512, avx2, baseline)";
    }
    void refusesWhatTheCpuCannotRun() {
        QFETCH(QString, cpu);
        QFETCH(QString, variant);
        QFETCH(QString, message);
        for (bool info : {false, true}) {
            const Run r = portable(cpu, info ? info_args(false) : generate_args(), variant);
            QCOMPARE(r.code, 2);
            QVERIFY2(r.err.contains(message), qPrintable(r.err));
        }
    }
};

QTEST_GUILESS_MAIN(TestPortableCpuKernels)
#include "test_portable_cpu_kernels.moc"
