// BlockMapWidget against real engine snapshots (dummy:tiny): every block maps to its own cell, in-use
// blocks are painted in their owner's colour, the tooltip names ref_cnt and owners; 100,000 blocks
// render fast enough to stay smooth and, a run of blocks per cell, still show the pool's structure;
// the wheel zooms down to single blocks.
#include "block_map_widget.h"
#include "llm_engine.h"
#include "model/model.h"

#include <QElapsedTimer>
#include <QtTest>

using namespace kvscope;
using namespace kvscope::ui;

class TestBlockMapWidget : public QObject {
    Q_OBJECT
private slots:
    void cellsMatchTheEnginePool() {
        std::shared_ptr<const Model> model = load_model("dummy:tiny");
        EngineConfig c;
        c.num_blocks = 300;
        c.block_size = 4;
        c.num_threads = 2;
        c.scheduler.max_model_len = 256;
        c.scheduler.enable_prefix_caching = true;
        LlmEngine engine(model, c);
        SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 40;
        p.ignore_eos = true;
        const std::vector<int32_t> prefix(24, 65);
        for (int i = 0; i < 3; ++i) {
            auto prompt = prefix;
            prompt.push_back(66 + i);
            engine.add_request({"r" + std::to_string(i), prompt, p, 0, ""});
        }
        for (int i = 0; i < 12; ++i) engine.step();
        auto snap = std::make_shared<KvCacheSnapshot>();
        engine.kv_cache_manager().snapshot_into(*snap);
        QVERIFY(snap->num_in_use_blocks > 0);

        const QHash<QString, QColor> colors = {{"r0", QColor(255, 0, 0)}, {"r1", QColor(0, 255, 0)}, {"r2", QColor(0, 0, 255)}};
        BlockMapWidget w;
        w.setColorProvider([&](const QString& id) { return colors.value(id, Qt::gray); });
        w.resize(700, 420);
        w.setSnapshot(snap);
        const QImage image = w.grab().toImage();
        int shared = 0;
        for (int b = 0; b < snap->num_blocks; ++b) {
            const QRect cell = w.cellRect(b);
            QCOMPARE(w.blockAt(cell.center()), b);
            if (snap->state[size_t(b)] != KvBlockState::IN_USE) continue;
            const auto owners = snap->owner_ids(b);
            QVERIFY(!owners.empty());
            // The bottom-right pixel of a filled block is the first owner's colour (shared marks sit top-left).
            const QColor painted = image.pixelColor(cell.right() - 1, cell.bottom() - 1);
            if (snap->tokens_filled[size_t(b)] == snap->block_size)
                QCOMPARE(painted, colors.value(QString::fromStdString(owners.front())));
            QVERIFY(w.describeBlock(b).contains(QString("ref_cnt: %1").arg(snap->ref_cnt[size_t(b)])));
            if (snap->ref_cnt[size_t(b)] > 1) {
                ++shared;
                QVERIFY(owners.size() > 1);
            }
        }
        QVERIFY2(shared > 0, "the shared prefix must show blocks with ref_cnt > 1");
        QVERIFY(w.describeBlock(0).contains("block 0"));
        QCOMPARE(w.blockAt(QPoint(-5, -5)), -1);

        // Highlighting a request keeps its block table in order.
        const auto info = engine.request_info("r1");
        QVERIFY(info);
        w.highlightRequest("r1", info->block_table);
        QCOMPARE(w.highlightedRequest(), QString("r1"));
    }

    void hundredThousandBlocksRenderFast() {
        auto snap = std::make_shared<KvCacheSnapshot>();
        const int n = 100000;
        snap->num_blocks = n;
        snap->block_size = 16;
        snap->state.resize(n);
        snap->ref_cnt.resize(n);
        snap->tokens_filled.resize(n);
        snap->eviction_order.resize(n);
        snap->block_hash.resize(n);
        snap->owner_offsets.resize(n + 1);
        snap->request_ids = {"a", "b"};
        for (int b = 0; b < n; ++b) {
            snap->state[size_t(b)] = KvBlockState(b % 3);
            snap->owner_offsets[size_t(b)] = int32_t(snap->owners.size());
            if (snap->state[size_t(b)] == KvBlockState::IN_USE) {
                snap->ref_cnt[size_t(b)] = 1;
                snap->tokens_filled[size_t(b)] = b % 17;
                snap->owners.push_back(b % 2);
            } else {
                snap->eviction_order[size_t(b)] = b / 3;
            }
        }
        snap->owner_offsets[size_t(n)] = int32_t(snap->owners.size());
        snap->num_free_blocks = 2 * n / 3;
        BlockMapWidget w;
        w.resize(1000, 640);
        w.setSnapshot(snap);
        w.grab();  // warm
        QElapsedTimer t;
        t.start();
        for (int i = 0; i < 10; ++i) {
            w.setSnapshot(snap);
            w.grab();
        }
        const double ms = double(t.elapsed()) / 10;
        qInfo("100,000 blocks: %.2f ms per frame", ms);  // a figure for the notes, not an assertion
        QVERIFY(w.blocksPerCell() > 1);  // 100,000 blocks do not fit at 5 px: runs of blocks per cell
        QCOMPARE(w.blockAt(w.cellRect(n - 1).center()), (n - 1) / w.blocksPerCell() * w.blocksPerCell());
    }

    // 100,000 blocks in a small map: every block is in a cell, and the cells show the pool's structure
    // (a region in use, a cached-free one, a free one) rather than a uniform slab; zooming in around a
    // block reaches single blocks with that block still in view, and a double click shows the whole pool.
    void levelOfDetailShowsStructure() {
        const int n = 100000;
        auto snap = std::make_shared<KvCacheSnapshot>();
        snap->num_blocks = n;
        snap->block_size = 16;
        snap->state.resize(n);
        snap->ref_cnt.resize(n);
        snap->tokens_filled.resize(n, 16);
        snap->eviction_order.resize(n, -1);
        snap->block_hash.resize(n);
        snap->owner_offsets.resize(n + 1);
        snap->request_ids = {"a"};
        for (int b = 0; b < n; ++b) {
            snap->owner_offsets[size_t(b)] = int32_t(snap->owners.size());
            if (b < 30000) {
                snap->state[size_t(b)] = KvBlockState::IN_USE;
                snap->ref_cnt[size_t(b)] = 1;
                snap->owners.push_back(0);
            } else {
                snap->state[size_t(b)] = b < 50000 ? KvBlockState::CACHED_FREE : KvBlockState::FREE;
                snap->eviction_order[size_t(b)] = b - 30000;
            }
        }
        snap->owner_offsets[size_t(n)] = int32_t(snap->owners.size());
        snap->num_free_blocks = 70000;
        snap->num_cached_free_blocks = 20000;
        const QColor red(255, 0, 0);
        BlockMapWidget w;
        w.setColorProvider([&](const QString&) { return red; });
        w.resize(640, 320);
        w.setSnapshot(snap);
        QVERIFY(w.blocksPerCell() > 1);
        QVERIFY(w.rect().contains(w.cellRect(n - 1)));  // the last block has a cell too
        const QImage image = w.grab().toImage();
        auto at = [&](int block) { return image.pixelColor(w.cellRect(block).center()); };
        QCOMPARE(at(1000), red);
        const QColor cached = at(40000), free = at(90000);
        QVERIFY(cached != red && cached != free);
        QVERIFY(cached.green() > cached.red() + 40);  // teal
        // A cell across the in-use/cached boundary shows both, left to right.
        const int boundary = 30000 / w.blocksPerCell() * w.blocksPerCell();
        if (boundary < 30000) {
            const QRect r = w.cellRect(boundary);
            QCOMPARE(image.pixelColor(r.left(), r.center().y()), red);
            QVERIFY(image.pixelColor(r.right() - 1, r.center().y()) != red);
        }
        QVERIFY(w.describeCell(1000).contains("in use: " + QString::number(w.blocksPerCell())));

        // The wheel zooms in around the block under the mouse.
        const QPointF pos = w.cellRect(40000).center();
        QWheelEvent wheel(pos, w.mapToGlobal(pos), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(&w, &wheel);
        QVERIFY(w.visibleBlockCount() < n);
        while (w.blocksPerCell() > 1) w.zoom(40000, 0.5);
        QVERIFY(!w.cellRect(40000).isEmpty());
        QCOMPARE(w.blockAt(w.cellRect(40000).center()), 40000);
        QVERIFY(w.cellRect(0).isEmpty());  // out of view
        QVERIFY(w.describeCell(40000).contains("block 40000"));
        QTest::mouseDClick(&w, Qt::LeftButton, {}, w.rect().center());
        QCOMPARE(w.visibleBlockCount(), n);
        QVERIFY(w.blocksPerCell() > 1);
    }
};

QTEST_MAIN(TestBlockMapWidget)
#include "test_block_map_widget.moc"
