// BlockMapWidget: the physical KV blocks as cells (GUI thread). Painted from a QImage written
// pixel by pixel, so 100,000 blocks repaint in about a millisecond. When the blocks in view do not fit
// at 5 px a cell, each cell stands for a run of consecutive blocks and shows their mix of states (in use
// in the first owner's colour, cached-free, free, left to right in proportion); the wheel zooms into a
// range of blocks around the mouse and a double click shows the whole pool again. Free blocks are dark, cached-free
// (evictable) blocks teal by age in the LRU queue, in-use blocks in their owner's colour with the
// last block's fill shown and shared blocks (ref_cnt > 1) marked. Hover shows a block's details; a
// selected request's block table is traced in order. Repaints at most every 33 ms.
#pragma once

#include "kv/kv_cache_snapshot.h"

#include <QColor>
#include <QImage>
#include <QTimer>
#include <QWidget>

#include <functional>
#include <memory>

namespace kvscope::ui {

class BlockMapWidget : public QWidget {
    Q_OBJECT
public:
    explicit BlockMapWidget(QWidget* parent = nullptr);

    using ColorProvider = std::function<QColor(const QString& requestId)>;
    void setColorProvider(ColorProvider provider) { m_colorOf = std::move(provider); }
    std::shared_ptr<const KvCacheSnapshot> snapshot() const { return m_snapshot; }
    QString highlightedRequest() const { return m_highlightId; }

    // Block under a widget position (the first of its cell's run), -1 when none.
    int blockAt(const QPoint& pos) const;
    // The rectangle of the cell holding a block (widget coordinates); empty when it is out of view.
    QRect cellRect(int blockId) const;
    QString describeBlock(int blockId) const;
    // The cell's blocks, with the count in each state when it holds more than one.
    QString describeCell(int firstBlock) const;
    int blocksPerCell() const { return m_perCell; }
    int firstVisibleBlock() const { return m_first; }
    int visibleBlockCount() const;  // the whole pool unless zoomed
    // Zooms to the blocks around one (factor < 1 zooms in, > 1 out); the whole pool at most.
    void zoom(int aroundBlock, double factor);
    void showWholePool();
    // The colour a block is painted with (before highlight overlays).
    QColor blockColor(int blockId) const;

    QSize minimumSizeHint() const override { return {200, 120}; }
    QSize sizeHint() const override { return {640, 320}; }

public slots:
    void setSnapshot(std::shared_ptr<const kvscope::KvCacheSnapshot> snapshot);
    void highlightRequest(const QString& requestId, const std::vector<int32_t>& blockTable);
    void clearHighlight();

signals:
    void blockClicked(int blockId, const QStringList& owners);

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void leaveEvent(QEvent* event) override;

private:
    void computeLayout();
    void renderImage();
    QRect mapArea() const;

    std::shared_ptr<const KvCacheSnapshot> m_snapshot;
    ColorProvider m_colorOf;
    QImage m_image;
    bool m_dirty = true;
    QTimer m_repaintTimer;  // caps repaints at ~30 fps
    int m_cell = 1;         // cell size in device-independent pixels
    int m_cols = 1;
    int m_perCell = 1;  // consecutive blocks per cell (level of detail)
    int m_first = 0;    // the zoomed view: blocks [m_first, m_first + m_count); m_count 0 = the whole pool
    int m_count = 0;
    QString m_highlightId;
    std::vector<int32_t> m_highlight;
    int m_hoverBlock = -1;
};

}  // namespace kvscope::ui
