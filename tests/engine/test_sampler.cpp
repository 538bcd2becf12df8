// The host sampler (runner/sampler.h) against vLLM's semantics: its filtered distribution against an
// independent reference (tests/support/sampling_reference.h) by frequencies, top-p taken over what top-k
// and min-p left (vLLM renormalizes before its nucleus), and which tokens each penalty reaches.
#include "runner/sampler.h"
#include "sampling_reference.h"

#include <QtTest>

#include <cmath>
#include <random>

using namespace kvscope;

namespace {

// Draw counts of `draws` samples of one row (a fresh copy each time: sample() edits the row).
std::vector<int> counts(const std::vector<float>& logits, const SamplingParams& p, int draws, uint64_t seed) {
    Sampler sampler;
    std::mt19937_64 rng(seed);
    std::vector<int> n(logits.size(), 0);
    for (int i = 0; i < draws; ++i) {
        std::vector<float> row = logits;
        ++n[sampler.sample(row, p, {}, {}, rng)];
    }
    return n;
}

SamplingParams params(float temperature, int top_k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

}  // namespace

class TestSampler : public QObject {
    Q_OBJECT

private slots:
    // Probabilities 0.5, 0.2, 0.15, 0.1, 0.05. min_p 0.25 keeps p >= 0.125: the first three, 0.85 of the
    // mass. vLLM then takes top_p 0.8 of those three (0.588, 0.235, 0.176): the first two. Top-p over the
    // whole row's mass (0.5, 0.7, 0.85) would keep the third as well.
    void topPOverWhatMinPLeft() {
        const std::vector<float> logits = {std::log(0.5f), std::log(0.2f), std::log(0.15f), std::log(0.1f), std::log(0.05f)};
        const std::vector<int> n = counts(logits, params(1.0f, 0, 0.8f, 0.25f), 4000, 11);
        QCOMPARE(n[2] + n[3] + n[4], 0);
        // 0.5 : 0.2 of 4000 draws: 2857 expected for token 0, sd 29.
        QVERIFY2(std::abs(n[0] - 2857) < 150, qPrintable(QString("token 0 drawn %1 times").arg(n[0])));
    }

    // Every filter combination on random rows: the frequencies follow the reference's probabilities (total
    // variation under 0.02 in 40000 draws; its expected value here is about 0.01), and nothing outside its
    // set is ever drawn.
    void frequenciesMatchReference_data() {
        QTest::addColumn<float>("temperature");
        QTest::addColumn<int>("top_k");
        QTest::addColumn<float>("top_p");
        QTest::addColumn<float>("min_p");
        QTest::newRow("temperature") << 0.7f << 0 << 1.0f << 0.0f;
        QTest::newRow("top_k") << 1.0f << 5 << 1.0f << 0.0f;
        QTest::newRow("top_p") << 1.3f << 0 << 0.6f << 0.0f;
        QTest::newRow("min_p") << 1.0f << 0 << 1.0f << 0.2f;
        QTest::newRow("top_k min_p top_p") << 1.2f << 8 << 0.7f << 0.1f;
        QTest::newRow("min_p top_p") << 0.9f << 0 << 0.5f << 0.05f;
    }
    void frequenciesMatchReference() {
        QFETCH(float, temperature);
        QFETCH(int, top_k);
        QFETCH(float, top_p);
        QFETCH(float, min_p);
        std::mt19937_64 gen(5);
        std::normal_distribution<float> normal(0.0f, 1.5f);
        for (int row = 0; row < 3; ++row) {
            std::vector<float> logits(24);
            for (float& l : logits) l = normal(gen);
            const int draws = 40000;
            const std::vector<int> n = counts(logits, params(temperature, top_k, top_p, min_p), draws, 100 + row);
            const std::vector<double> want =
                test::filtered_probs(logits.data(), static_cast<int>(logits.size()), test::sampling_row(temperature, top_k, top_p, min_p, 0, 0));
            double tv = 0;
            for (size_t t = 0; t < logits.size(); ++t) {
                QVERIFY2(n[t] == 0 || want[t] > 0, qPrintable(QString("row %1: token %2 drawn outside the reference's set").arg(row).arg(t)));
                tv += std::fabs(n[t] / static_cast<double>(draws) - want[t]) / 2;
            }
            QVERIFY2(tv < 0.02, qPrintable(QString("row %1: total variation %2").arg(row).arg(tv)));
        }
    }

    // vLLM's penalties: repetition over the prompt and the output, presence and frequency over the output
    // only. Greedy rows where the penalty decides between two tokens.
    void penaltiesReachWhatVllmsDo() {
        Sampler sampler;
        std::mt19937_64 rng(1);
        const std::vector<int32_t> prompt = {0}, output = {0, 0};
        auto pick = [&](SamplingParams p, std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens) {
            p.temperature = 0;
            std::vector<float> row = {2.0f, 1.9f, -1.0f};
            return sampler.sample(row, p, prompt_tokens, output_tokens, rng);
        };
        SamplingParams repetition;
        repetition.repetition_penalty = 1.2f;  // 2.0 / 1.2 = 1.67 < 1.9
        QCOMPARE(pick(repetition, prompt, {}), 1);
        QCOMPARE(pick(repetition, {}, output), 1);
        QCOMPARE(pick(repetition, {}, {}), 0);
        SamplingParams presence;
        presence.presence_penalty = 0.5f;  // 2.0 - 0.5 = 1.5 < 1.9, but only for output tokens
        QCOMPARE(pick(presence, prompt, {}), 0);
        QCOMPARE(pick(presence, {}, output), 1);
        SamplingParams frequency;
        frequency.frequency_penalty = 0.06f;  // two occurrences: 2.0 - 0.12 = 1.88 < 1.9; one: 1.94
        QCOMPARE(pick(frequency, {}, output), 1);
        QCOMPARE(pick(frequency, {}, std::vector<int32_t>{0}), 0);
        QCOMPARE(pick(frequency, prompt, {}), 0);
    }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
