// RequestTableModel under QAbstractItemModelTester while SessionData grows, changes and clears; the
// request table's empty-state hint shows exactly while the table is empty.
#include "hint_table_view.h"
#include "natural_order.h"
#include "request_table_model.h"
#include "session_data.h"

#include <QAbstractItemModelTester>
#include <QtTest>

using namespace kvscope;
using namespace kvscope::ui;

class TestRequestTableModel : public QObject {
    Q_OBJECT
private slots:
    void growsChangesAndClears() {
        SessionData session;
        RequestTableModel model(&session);
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), int(RequestTableModel::ColumnCount));

        session.addRequest("a", "Pane 1", Qt::red);
        session.addRequest("b", "Pane 2", Qt::blue);
        QCOMPARE(model.rowCount(), 2);

        EngineUpdate u;
        RequestProgress p;
        p.requestId = "a";
        p.status = RequestStatus::RUNNING;
        p.textDelta = "hello";
        p.numPromptTokens = 5;
        p.numOutputTokens = 1;
        p.blockTable = {3, 4};
        p.ttft = 0.012;
        u.requests.push_back(p);
        RequestProgress unknown;  // a request the GUI did not submit (benchmark): a new row
        unknown.requestId = "bench-1-0";
        unknown.status = RequestStatus::WAITING;
        u.requests.push_back(unknown);
        session.applyUpdate(u);
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.index(0, RequestTableModel::State).data().toString(), QString("running"));
        QCOMPARE(model.index(0, RequestTableModel::Blocks).data().toInt(), 2);
        QCOMPARE(model.index(0, RequestTableModel::Ttft).data().toString(), QString("12.0"));
        QCOMPARE(model.index(2, RequestTableModel::Origin).data().toString(), QString("benchmark"));
        QCOMPARE(model.index(1, 0).data(RequestTableModel::RequestIdRole).toString(), QString("b"));
        QVERIFY(model.index(0, 0).data(Qt::DecorationRole).value<QColor>() == QColor(Qt::red));

        EngineUpdate done;
        RequestMetrics m;
        m.request_id = "a";
        m.num_prompt_tokens = 5;
        m.num_output_tokens = 3;
        m.finish_reason = FinishReason::LENGTH;
        m.arrival_time = 1.0;
        m.token_times = {1.01, 1.02, 1.03};
        m.finish_time = 1.03;
        done.finished.push_back(m);
        session.applyUpdate(done);
        QCOMPARE(model.index(0, RequestTableModel::State).data().toString(), QString("finished (length)"));
        QCOMPARE(model.index(0, RequestTableModel::E2el).data().toString(), QString("30.0"));

        session.rejectRequest("b", "max_tokens must be >= 1");
        QCOMPARE(model.index(1, RequestTableModel::State).data().toString(), QString("finished (error)"));
        // The export's summary counts it failed (it was neither completed nor failed).
        const std::vector<RequestMetrics> finished = session.finishedMetrics();
        QCOMPARE(finished.size(), size_t(2));
        QCOMPARE(finished[1].request_id, std::string("b"));
        QVERIFY(finished[1].finish_reason == FinishReason::ERROR);

        session.clear();
        QCOMPARE(model.rowCount(), 0);
        session.addRequest("c", "Pane 1", Qt::green);
        QCOMPARE(model.rowCount(), 1);
    }

    // The worker reports a step's new requests in string order; the table lists a benchmark's requests
    // in the order of their numbers (issue 17: bench-1-59, bench-1-6, bench-1-60).
    void newRequestsTakeTheirIdsNaturalOrder() {
        QVERIFY(naturalLess(u"bench-1-6", u"bench-1-59"));
        QVERIFY(naturalLess(u"bench-1-59", u"bench-1-60"));
        QVERIFY(!naturalLess(u"bench-1-60", u"bench-1-6"));
        QVERIFY(naturalLess(u"bench-2-1", u"bench-10-1"));
        QVERIFY(naturalLess(u"req-9", u"req-000010"));
        QVERIFY(naturalLess(u"bench-1", u"bench-1-0"));
        QVERIFY(!naturalLess(u"req-7", u"req-7"));
        QVERIFY(naturalLess(u"req-99999999999999999999998", u"req-99999999999999999999999"));

        SessionData session;
        RequestTableModel model(&session);
        session.addRequest("req-1", "Pane 1", Qt::red);  // a pane's request keeps its row
        QStringList ids;
        for (int i = 1; i <= 64; ++i) ids << QString("bench-1-%1").arg(i);
        QStringList asSent = ids;
        std::sort(asSent.begin(), asSent.end());  // as the worker's std::map lists them
        QCOMPARE(asSent.mid(0, 3), (QStringList{"bench-1-1", "bench-1-10", "bench-1-11"}));
        EngineUpdate u;
        for (const QString& id : asSent.mid(0, 60)) {
            RequestProgress p;
            p.requestId = id;
            u.requests.push_back(p);
        }
        for (const QString& id : asSent.mid(60)) {  // finished within the update: only their metrics
            RequestMetrics m;
            m.request_id = id.toStdString();
            u.finished.push_back(m);
        }
        session.applyUpdate(u);
        QCOMPARE(model.rowCount(), 65);
        QStringList rows;
        for (int r = 1; r < model.rowCount(); ++r) rows << model.index(r, RequestTableModel::Id).data().toString();
        QCOMPARE(rows, ids);
        QCOMPARE(model.index(0, RequestTableModel::Id).data().toString(), QString("req-1"));
    }

    void emptyTableShowsItsHint() {
        SessionData session;
        RequestTableModel model(&session);
        HintTableView view;
        view.setModel(&model);
        view.setEmptyHint("No requests yet");
        view.resize(500, 200);
        // Pixels in the middle band of the viewport (below a first row) that are not its background: the
        // hint's text.
        auto inkPixels = [&view] {
            const QImage image = view.viewport()->grab().toImage();
            const QRgb base = image.pixel(1, image.height() - 2);
            int count = 0;
            for (int y = image.height() / 3; y < 2 * image.height() / 3; ++y)
                for (int x = 0; x < image.width(); ++x) count += image.pixel(x, y) != base;
            return count;
        };
        QVERIFY(view.showsHint());
        QVERIFY(inkPixels() > 20);
        session.addRequest("req-1", "pane 1", Qt::red);
        QVERIFY(!view.showsHint());
        QCOMPARE(inkPixels(), 0);
        session.clear();
        QVERIFY(view.showsHint());
        QVERIFY(inkPixels() > 20);
    }
};

QTEST_MAIN(TestRequestTableModel)
#include "test_request_table_model.moc"
