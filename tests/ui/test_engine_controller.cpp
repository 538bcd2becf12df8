// EngineController + EngineWorker on the real engine (stories260K): three chat panes streaming at
// once give the greedy text of the engine alone; max_num_seqs and block_size moved mid-run change no
// request's text; every KV snapshot agrees with the requests' block tables and the step stats; a bad
// request comes back as a signal and the engine keeps serving.
#include "chat_pane.h"
#include "engine_controller.h"
#include "token_alternatives.h"
#include "tuning_panel.h"
#include "llm_engine.h"
#include "model/model.h"
#include "process_run.h"
#include "test_support.h"

#include <QLabel>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTextEdit>
#include <QScrollBar>
#include <QtTest>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

std::string modelDir() { return kvscope::test::models_dir() + "/stories260K-hf"; }

EngineConfig testConfig() {
    EngineConfig c = EngineController::defaultConfig();
    c.num_threads = 2;
    c.kv_cache_memory = 4ll << 20;
    c.scheduler.max_model_len = 512;
    c.check_invariants = true;
    return c;
}

// The engine alone, one request at a time: the reference text.
std::string greedyAlone(const Model& model, const std::vector<int32_t>& prompt, SamplingParams params) {
    EngineConfig c = testConfig();
    c.kv_cache_memory = 0;
    c.num_blocks = 256;
    std::shared_ptr<const Model> shared(&model, [](const Model*) {});
    LlmEngine engine(shared, c);
    engine.add_request({"ref", prompt, params, 0, ""});
    std::string text;
    while (engine.has_unfinished_requests())
        for (const RequestOutput& o : engine.step()) text += o.text_delta;
    return text;
}

std::vector<int32_t> chatPrompt(const Model& m, const std::string& user) {
    const std::string text = m.chat_template.render({{"user", user}}, true);
    return m.tokenizer.encode(text, !m.chat_template.renders_bos());
}

bool loadInto(EngineController& controller) {
    QSignalSpy loaded(&controller, &EngineController::modelLoaded);
    controller.loadModel(QString::fromStdString(modelDir()), testConfig());
    return loaded.wait(60000);
}

bool waitIdle(EngineController& controller, int timeoutMs = 120000) {
    QElapsedTimer t;
    t.start();
    while (!controller.isIdle() && t.elapsed() < timeoutMs) {
        QSignalSpy spy(&controller, &EngineController::updateApplied);
        spy.wait(200);
    }
    return controller.isIdle();
}

}  // namespace

class TestEngineController : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { m_model = load_model(modelDir()); }

    void threePanesStreamGreedyText() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        const QStringList prompts = {"Once upon a time", "Lily liked to play", "The big dog"};
        std::vector<std::unique_ptr<ChatPane>> panes;
        std::vector<std::unique_ptr<QSignalSpy>> spies;
        SamplingParams p;
        p.temperature = 0;
        p.top_p = 1;
        p.max_tokens = 48;
        for (int i = 0; i < 3; ++i) {
            panes.push_back(std::make_unique<ChatPane>(&controller, i + 1, QColor::fromHsl(i * 100, 150, 130)));
            panes.back()->setSamplingParams(p);
            spies.push_back(std::make_unique<QSignalSpy>(panes.back().get(), &ChatPane::replyFinished));
        }
        int streamed = 0;
        connect(&controller, &EngineController::requestUpdated, this, [&](const RequestProgress& r) {
            if (!r.textDelta.isEmpty()) ++streamed;
        });
        for (int i = 0; i < 3; ++i) panes[size_t(i)]->sendText(prompts[i]);  // all three before the first step
        for (auto& spy : spies) QVERIFY(spy->count() == 1 || spy->wait(60000));
        QVERIFY2(streamed >= 3, "replies must stream in pieces, not arrive at the end only");
        for (int i = 0; i < 3; ++i) {
            const std::string expected = greedyAlone(*m_model, chatPrompt(*m_model, prompts[i].toStdString()), [&] {
                SamplingParams q = p;
                q.seed.reset();
                return q;
            }());
            QCOMPARE(panes[size_t(i)]->lastReply(), QString::fromStdString(expected));
            QVERIFY(!panes[size_t(i)]->isBusy());
        }
        // Each pane's colour is its requests' colour.
        QCOMPARE(controller.colorFor(spies[1]->at(0).at(0).toString()), panes[1]->color());
    }

    // Settings > Alternatives: resting the mouse on a reply token shows its probability and the
    // alternatives the engine reported for it; the user's own text has none.
    void hoverShowsTokenAlternatives() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        ChatPane pane(&controller, 1, Qt::blue);
        pane.resize(500, 600);
        pane.show();
        SamplingParams p;
        p.temperature = 0;
        p.top_p = 1;
        p.max_tokens = 12;
        p.logprobs = 3;
        pane.setSamplingParams(p);
        QSignalSpy finished(&pane, &ChatPane::replyFinished);
        pane.sendText("Once upon a time");
        QVERIFY(finished.wait(60000));

        // The engine alone gives the first token's figures.
        EngineConfig c = testConfig();
        c.kv_cache_memory = 0;
        c.num_blocks = 256;
        std::shared_ptr<const Model> shared(m_model.get(), [](const Model*) {});
        LlmEngine engine(shared, c);
        engine.add_request({"ref", chatPrompt(*m_model, "Once upon a time"), p, 0, ""});
        std::vector<TokenLogprobs> want;
        while (engine.has_unfinished_requests())
            for (const RequestOutput& o : engine.step()) want.insert(want.end(), o.logprobs.begin(), o.logprobs.end());
        QCOMPARE(want.size(), size_t(12));

        auto* transcript = pane.findChild<QTextEdit*>();
        QVERIFY(transcript);
        const QString all = transcript->toPlainText();
        const QString reply = pane.lastReply();
        QVERIFY(!reply.trimmed().isEmpty());
        const int start = int(all.lastIndexOf(reply));
        QVERIFY(start > 0);
        auto tipAt = [&](int position) {
            QTextCursor cursor(transcript->document());
            cursor.setPosition(position);
            const QRect r = transcript->cursorRect(cursor);
            return pane.tokenToolTipAt(QPoint(r.left() + 2, r.center().y()));
        };
        // Every visible character of the reply has a tooltip, and together they hold every token's
        // figures in order.
        QString tips;
        int withTips = 0;
        for (int i = 0; i < int(reply.size()); ++i) {
            const QString tip = tipAt(start + i);
            if (!reply[i].isSpace()) withTips += !tip.isEmpty();
            if (!tip.isEmpty() && !tips.endsWith(tip)) tips += tip;
        }
        QCOMPARE(withTips, int(reply.size() - reply.count(' ') - reply.count('\n')));
        qsizetype from = 0;
        for (const TokenLogprobs& l : want) {
            from = tips.indexOf(tokenAlternativesToolTip(l, m_model->tokenizer), from);
            QVERIFY2(from >= 0, qPrintable(tips));
        }
        QVERIFY(tips.contains("rank 1"));
        QVERIFY(tipAt(int(all.indexOf("Once")) + 1).isEmpty());  // the user's text

        // A click on the finished reply still selects its request (the table row, its numbers).
        QSignalSpy selected(&pane, &ChatPane::requestSelected);
        QTest::mouseClick(transcript->viewport(), Qt::LeftButton, {}, QPoint(5, 5));
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).toString(), finished.at(0).at(0).toString());
    }

    // Stopping a benchmark with thousands of requests still queued aborts them in one update: an update per
    // abort (each with the pool's snapshot and every pending request) made stopping 15,000 queued requests
    // quadratic, with gigabytes of queued updates and no end.
    void cancellingABigBenchmarkIsOneUpdate() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        BenchSpec spec;
        spec.numPrompts = 3000;
        spec.inputLen = 4;
        spec.outputLen = 1;
        spec.seed = 1;
        QSignalSpy progressed(&controller, &EngineController::benchmarkProgressed);
        controller.runBenchmark(spec);
        QVERIFY(progressed.wait(30000));
        QElapsedTimer queued;  // most of it admitted and still waiting
        queued.start();
        while (controller.status().numWaiting < 1000 && queued.elapsed() < 30000) {
            QSignalSpy spy(&controller, &EngineController::updateApplied);
            spy.wait(50);
        }
        QVERIFY2(controller.status().numWaiting >= 1000, "the benchmark's requests never queued");
        QSignalSpy updates(&controller, &EngineController::updateApplied);
        QSignalSpy finished(&controller, &EngineController::benchmarkFinished);
        controller.cancelBenchmark();
        QVERIFY(finished.wait(30000));
        QVERIFY(waitIdle(controller));
        const BenchResult result = finished.front().front().value<BenchResult>();
        const int completed = result.summary["completed"].toInt();
        QVERIFY2(completed < 3000, qPrintable(QString("%1 completed: nothing was left to abort").arg(completed)));
        qInfo("%d completed, %d updates", completed, int(updates.count()));
        // Steps run meanwhile publish their own updates; 3000 - completed aborts must not add one each.
        QVERIFY2(updates.count() < 100, qPrintable(QString("%1 updates for %2 aborts").arg(updates.count()).arg(3000 - completed)));
    }

    // The panel's benchmark fits max_model_len by `kvscope-cli bench`'s rule: prompts that no request fits are
    // refused before anything runs, with the CLI's message; an output that reaches max_model_len ends there
    // (the panel refused the whole run for one such request, a run the CLI made).
    void benchmarkFitsMaxModelLenAsTheCli() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        BenchSpec spec;
        spec.numPrompts = 4;
        spec.inputLen = 600;  // max_model_len 512
        spec.outputLen = 8;
        spec.seed = 1;
        QSignalSpy errors(&controller, &EngineController::errorOccurred);
        QSignalSpy finished(&controller, &EngineController::benchmarkFinished);
        controller.runBenchmark(spec);
        QVERIFY(finished.wait(30000));
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.front().front().toString().contains("do not fit max_model_len 512"),
                 qPrintable(errors.front().front().toString()));
        QCOMPARE(finished.front().front().value<BenchResult>().requests.size(), size_t(0));

        spec.inputLen = 400;
        spec.outputLen = 200;  // 600 > 512: each request stops at max_model_len
        errors.clear();
        finished.clear();
        controller.runBenchmark(spec);
        QVERIFY(finished.wait(60000));
        QVERIFY2(errors.isEmpty(), qPrintable(errors.isEmpty() ? QString() : errors.front().front().toString()));
        const BenchResult result = finished.front().front().value<BenchResult>();
        QCOMPARE(result.summary["completed"].toInt(), 4);
        for (const RequestMetrics& r : result.requests) QCOMPARE(r.num_prompt_tokens + r.num_output_tokens, 512);

        // Every request refused (here by a pool of 64 tokens): the run fails with the first reason, as the
        // CLI's does; it was a row of zeros.
        EngineController small;
        QSignalSpy loaded(&small, &EngineController::modelLoaded);
        EngineConfig c = testConfig();
        c.kv_cache_memory = 0;
        c.num_blocks = 4;
        small.loadModel(QString::fromStdString(modelDir()), c);
        QVERIFY(loaded.wait(60000));
        spec.inputLen = 100;
        spec.outputLen = 8;
        QSignalSpy smallErrors(&small, &EngineController::errorOccurred);
        QSignalSpy smallFinished(&small, &EngineController::benchmarkFinished);
        small.runBenchmark(spec);
        QVERIFY(smallFinished.wait(60000));
        QCOMPARE(smallErrors.count(), 1);
        QVERIFY2(smallErrors.front().front().toString().startsWith("benchmark: every request was refused; the first: "),
                 qPrintable(smallErrors.front().front().toString()));
        QVERIFY(smallFinished.front().front().value<BenchResult>().summary.isEmpty());
    }

    void knobsMovedMidRunChangeNothing() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 300;
        p.ignore_eos = true;
        const QStringList prompts = {"One day", "Tom saw a bird", "The sun was", "She ran to", "A little cat", "Mom said"};
        QStringList ids;
        for (const QString& prompt : prompts) {
            SubmitCommand c;
            c.useChatTemplate = false;
            c.promptText = prompt;
            c.sampling = p;
            ids << controller.submitRequest(c, "test");
        }
        // Every snapshot must agree with the block tables and the step figures of the same update.
        int snapshotsChecked = 0;
        QStringList problems;
        connect(&controller, &EngineController::updateApplied, this, [&] {
            auto snap = controller.latestSnapshot();
            const SessionData* s = controller.session();
            if (!snap || s->steps().empty()) return;
            int64_t tableEntries = 0, refs = 0;
            for (const RequestRecord& r : s->requests()) {
                if (r.status == RequestStatus::FINISHED) continue;
                for (int32_t b : r.blockTable) {
                    ++tableEntries;
                    if (b < 0 || b >= snap->num_blocks || snap->state[size_t(b)] != KvBlockState::IN_USE) {
                        problems << QString("%1: block %2 not in use").arg(r.requestId).arg(b);
                        continue;
                    }
                    const auto owners = snap->owner_ids(b);
                    if (std::find(owners.begin(), owners.end(), r.requestId.toStdString()) == owners.end())
                        problems << QString("%1 not an owner of block %2").arg(r.requestId).arg(b);
                }
            }
            for (int b = 0; b < snap->num_blocks; ++b) refs += snap->ref_cnt[size_t(b)];
            if (refs != tableEntries) problems << QString("ref_cnt sum %1 != block table entries %2").arg(refs).arg(tableEntries);
            const StepStats& last = s->steps().back().stats;
            if (snap->num_blocks == last.num_blocks && snap->num_in_use_blocks != last.num_used_blocks)
                problems << QString("snapshot in use %1 != step %2").arg(snap->num_in_use_blocks).arg(last.num_used_blocks);
            if (snap->num_in_use_blocks + snap->num_free_blocks != snap->num_blocks) problems << "in use + free != total";
            ++snapshotsChecked;
        });
        QSignalSpy updates(&controller, &EngineController::requestUpdated);
        QVERIFY(updates.wait(30000));
        EngineConfig c = controller.config();
        c.scheduler.max_num_seqs = 2;
        controller.reconfigure(c);
        QSignalSpy more(&controller, &EngineController::updateApplied);
        QVERIFY(more.wait(30000));
        c.block_size = 32;
        controller.reconfigure(c);  // drain-and-rebuild while requests run
        QVERIFY(more.wait(30000));
        c.block_size = 8;
        c.scheduler.max_num_seqs = 4;
        controller.reconfigure(c);
        QVERIFY(waitIdle(controller));
        QVERIFY2(problems.isEmpty(), qPrintable(problems.mid(0, 5).join("; ")));
        QVERIFY(snapshotsChecked > 0);
        bool rebuilt = false;
        for (const SessionEvent& e : controller.session()->events()) rebuilt |= e.text.startsWith("rebuild");
        QVERIFY2(rebuilt, "the block_size change must show as a rebuild event");
        QCOMPARE(controller.config().block_size, 8);
        for (int i = 0; i < prompts.size(); ++i) {
            const RequestRecord* r = controller.session()->request(ids[i]);
            QVERIFY(r);
            QCOMPARE(r->finishReason, FinishReason::LENGTH);
            QCOMPARE(r->numOutputTokens, 300);
            const auto prompt = m_model->tokenizer.encode(prompts[i].toStdString(), true);
            QCOMPARE(r->text, QString::fromStdString(greedyAlone(*m_model, prompt, p)));
        }
    }

    void badRequestIsReportedAndEngineKeepsRunning() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        QSignalSpy rejected(&controller, &EngineController::requestRejected);
        SubmitCommand bad;
        bad.useChatTemplate = false;
        bad.promptText = "Hello";
        bad.sampling.max_tokens = 0;
        const QString badId = controller.submitRequest(bad, "test");
        QVERIFY(rejected.wait(10000));
        QCOMPARE(rejected.at(0).at(0).toString(), badId);
        QVERIFY(rejected.at(0).at(1).toString().contains("max_tokens"));
        SubmitCommand good = bad;
        good.sampling.max_tokens = 8;
        good.sampling.temperature = 0;
        const QString id = controller.submitRequest(good, "test");
        QVERIFY(waitIdle(controller));
        QCOMPARE(controller.session()->request(id)->numOutputTokens > 0, true);
        QCOMPARE(controller.session()->request(badId)->finishReason, FinishReason::ERROR);
    }

    // A pane at the end of its transcript keeps the end in view: the rejection of a long message is shown,
    // not left below the view (the end was read before the new text was laid out).
    void rejectionIsScrolledIntoView() {
        EngineController controller;  // no model: the message is rejected ("no model is loaded")
        ChatPane pane(&controller, 1, Qt::blue);
        pane.resize(360, 300);
        pane.show();
        QVERIFY(QTest::qWaitForWindowExposed(&pane));
        QSignalSpy rejected(&controller, &EngineController::requestRejected);
        QStringList lines;
        for (int i = 0; i < 60; ++i) lines << QString("line %1 of a long message").arg(i);
        pane.sendText(lines.join('\n'));
        QVERIFY(rejected.wait(10000));
        QCoreApplication::processEvents();
        auto* transcript = pane.findChild<QTextEdit*>();
        QVERIFY(transcript && transcript->toPlainText().contains("[rejected: "));
        QScrollBar* bar = transcript->verticalScrollBar();
        QVERIFY(bar->maximum() > 0);
        QTRY_COMPARE(bar->value(), bar->maximum());
        // Scrolled up by the user, it stays where it was as text comes.
        bar->setValue(0);
        pane.sendText("again");
        QVERIFY(rejected.wait(10000));
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), 0);
    }

    // The GUI's default KV budget is the CLI's (default_kv_cache_memory): a small model gets 4096 blocks
    // of 16, a legible block map (256 MiB once gave dummy:tiny 13,107), whatever its cache type (the
    // budget counted float32 bytes, so a 16-bit cache got 8192); a large one at most 1 GiB.
    void defaultBudgetIsTheClisAndCountsTheCacheType() {
        QCOMPARE(default_kv_cache_memory(1280, 256, 512), int64_t(1280) * 65536);  // 4096 blocks of 16
        QCOMPARE(default_kv_cache_memory(1280, 4, 100), int64_t(1280) * 400);      // all that 4 requests need
        QCOMPARE(default_kv_cache_memory(46080, 64, 2048), int64_t(1) << 30);
        QCOMPARE(EngineController::defaultConfig().kv_cache_memory, int64_t(0));
        for (const char* dtype : {"float32", "float16"}) {
            EngineController controller;
            QSignalSpy loaded(&controller, &EngineController::modelLoaded);
            EngineConfig c = EngineController::defaultConfig();
            c.num_threads = 2;
            c.kv_cache_dtype = dtype;
            controller.loadModel("dummy:tiny", c);
            QVERIFY(loaded.wait(60000));
            QTRY_VERIFY(controller.latestSnapshot());
            QCOMPARE(controller.latestSnapshot()->num_blocks, 4096);
            QCOMPARE(controller.modelSummary().kvCacheDtype, QString(dtype));
            // The CLI, asked for the GUI's max_num_seqs and max_model_len, sizes the same pool.
            const kvscope::test::ProcessResult info = kvscope::test::run_process(
                QString::fromStdString(kvscope::test::cli_path()),
                {"info", "--model", "dummy:tiny", "--json", "--kv-cache-dtype", dtype, "--max-num-seqs",
                 QString::number(controller.config().scheduler.max_num_seqs), "--max-model-len",
                 QString::number(controller.config().scheduler.max_model_len)},
                QProcessEnvironment::systemEnvironment(), 120);
            QVERIFY2(info.code == 0, qPrintable(info.err));
            QCOMPARE(nlohmann::json::parse(info.out.toStdString())["num_blocks"].get<int>(), 4096);
        }
    }

    // A change the engine must refuse (naive mode needs max_model_len's blocks per request and the pool
    // has fewer): the tuning panel shows why, and its knobs go back to the configuration that runs.
    void refusedChangeIsShownAndTheKnobsGoBack() {
        EngineController controller;
        QVERIFY(loadInto(controller));
        TuningPanel panel;
        connect(&controller, &EngineController::configChanged, &panel, &TuningPanel::setConfig);
        connect(&controller, &EngineController::reconfigureRefused, &panel, &TuningPanel::showRefusal);
        panel.setConfig(controller.config());
        QSignalSpy refused(&controller, &EngineController::reconfigureRefused);
        EngineConfig next = controller.config();
        next.mode = BatchingMode::NAIVE;
        next.kv_cache_memory = 0;
        next.num_blocks = 8;  // 512 / 16 = 32 blocks needed per naive request
        SubmitCommand c;
        c.useChatTemplate = false;
        c.promptText = "Once upon a time";
        c.sampling.max_tokens = 200;
        c.sampling.temperature = 0;
        c.sampling.ignore_eos = true;
        const QString id = controller.submitRequest(c, "test");
        controller.reconfigure(next);
        QVERIFY(refused.wait(10000));
        QVERIFY(refused.at(0).at(0).toString().contains("nothing was changed"));
        QTRY_COMPARE(panel.config().mode, BatchingMode::PAGED);
        bool shown = false;
        for (QLabel* l : panel.findChildren<QLabel*>()) shown |= l->text().startsWith("Not applied");
        QVERIFY(shown);
        QVERIFY(waitIdle(controller));
        QCOMPARE(controller.session()->request(id)->numOutputTokens, 200);
    }

private:
    std::unique_ptr<Model> m_model;
};

QTEST_MAIN(TestEngineController)
#include "test_engine_controller.moc"
