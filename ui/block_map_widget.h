// BlockMapWidget: every physical KV block as one cell (GUI thread). Painted from a QImage written
// pixel by pixel, so 100,000 blocks repaint in about a millisecond. Free blocks are dark, cached-free
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

    // Block under a widget position, -1 when none.
    int blockAt(const QPoint& pos) const;
    // The cell rectangle of a block (widget coordinates).
    QRect cellRect(int blockId) const;
    QString describeBlock(int blockId) const;
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
    QString m_highlightId;
    std::vector<int32_t> m_highlight;
    int m_hoverBlock = -1;
};

}  // namespace kvscope::ui
