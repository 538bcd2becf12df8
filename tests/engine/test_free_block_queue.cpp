// FreeBlockQueue: LRU order (popleft from the head, append at the tail), O(1) removal anywhere, and
// the behaviour of an empty queue.
#include "test_support.h"

#include "kv/free_block_queue.h"

#include <stdexcept>
#include <vector>

using namespace kvscope;

namespace {

std::vector<int> ids(const std::vector<KvCacheBlock*>& blocks) {
    std::vector<int> out;
    for (const KvCacheBlock* b : blocks) out.push_back(b->block_id);
    return out;
}

std::vector<KvCacheBlock> make_blocks(int n) {
    std::vector<KvCacheBlock> blocks(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) blocks[size_t(i)].block_id = i;
    return blocks;
}

}  // namespace

Q_DECLARE_METATYPE(std::vector<int>)

class TestFreeBlockQueue : public QObject {
    Q_OBJECT
private slots:
    void popleftInBlockOrder() {
        auto blocks = make_blocks(4);
        FreeBlockQueue q(blocks);
        QCOMPARE(q.num_free_blocks(), 4);
        QCOMPARE(ids(q.get_all_free_blocks()), (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(q.popleft()->block_id, 0);
        QCOMPARE(q.popleft()->block_id, 1);
        QCOMPARE(q.num_free_blocks(), 2);
        QVERIFY(!blocks[0].is_in_free_queue());
        QVERIFY(blocks[2].is_in_free_queue());
    }

    void removeAnywhere_data() {
        QTest::addColumn<int>("removed");
        QTest::addColumn<std::vector<int>>("left");
        QTest::newRow("head") << 0 << std::vector<int>{1, 2, 3, 4};
        QTest::newRow("middle") << 2 << std::vector<int>{0, 1, 3, 4};
        QTest::newRow("tail") << 4 << std::vector<int>{0, 1, 2, 3};
    }
    void removeAnywhere() {
        QFETCH(int, removed);
        QFETCH(std::vector<int>, left);
        auto blocks = make_blocks(5);
        FreeBlockQueue q(blocks);
        q.remove(&blocks[size_t(removed)]);
        QCOMPARE(q.num_free_blocks(), 4);
        QCOMPARE(ids(q.get_all_free_blocks()), left);
        QVERIFY(!blocks[size_t(removed)].is_in_free_queue());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, q.remove(&blocks[size_t(removed)]));
        // Popping drains in the remaining order.
        QCOMPARE(ids(q.popleft_n(4)), left);
    }

    void appendGoesToTail() {
        auto blocks = make_blocks(3);
        FreeBlockQueue q(blocks);
        KvCacheBlock* first = q.popleft();
        q.remove(&blocks[2]);
        q.append(first);
        q.append(&blocks[2]);
        QCOMPARE(ids(q.get_all_free_blocks()), (std::vector<int>{1, 0, 2}));
        QVERIFY_THROWS_EXCEPTION(std::logic_error, q.append(first));  // already queued
        QCOMPARE(q.num_free_blocks(), 3);
    }

    void popleftNAndAppendN() {
        auto blocks = make_blocks(6);
        FreeBlockQueue q(blocks);
        std::vector<KvCacheBlock*> taken = q.popleft_n(3);
        QCOMPARE(ids(taken), (std::vector<int>{0, 1, 2}));
        QCOMPARE(q.num_free_blocks(), 3);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, q.popleft_n(4));
        QCOMPARE(q.num_free_blocks(), 3);  // a refused popleft_n takes nothing
        std::vector<KvCacheBlock*> back{taken[2], taken[0]};
        q.append_n(back);
        QCOMPARE(ids(q.get_all_free_blocks()), (std::vector<int>{3, 4, 5, 2, 0}));
        QCOMPARE(ids(q.popleft_n(0)), std::vector<int>{});
    }

    void emptyQueue() {
        auto blocks = make_blocks(2);
        FreeBlockQueue q(blocks);
        q.popleft_n(2);
        QCOMPARE(q.num_free_blocks(), 0);
        QVERIFY(q.get_all_free_blocks().empty());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, q.popleft());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, q.popleft_n(1));
        int visited = 0;
        q.for_each_free([&](const KvCacheBlock&) { ++visited; });
        QCOMPARE(visited, 0);
        q.append(&blocks[1]);  // a drained queue accepts blocks again
        QCOMPARE(q.popleft()->block_id, 1);
        std::vector<KvCacheBlock> none;
        FreeBlockQueue empty(none);
        QCOMPARE(empty.num_free_blocks(), 0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, empty.popleft());
    }

    void forEachFreeMatchesList() {
        auto blocks = make_blocks(5);
        FreeBlockQueue q(blocks);
        q.remove(&blocks[1]);
        q.append(&blocks[1]);
        std::vector<int> seen;
        q.for_each_free([&](const KvCacheBlock& b) { seen.push_back(b.block_id); });
        QCOMPARE(seen, (std::vector<int>{0, 2, 3, 4, 1}));
    }
};

QTEST_GUILESS_MAIN(TestFreeBlockQueue)
#include "test_free_block_queue.moc"
