// BlockMapWidget: the physical KV blocks as cells (GUI thread). Painted from a QImage written
// pixel by pixel, so 100,000 blocks repaint in about a millisecond. When the blocks in view do not fit
// at 5 px a cell, each cell stands for a run of consecutive blocks and shows their mix of states (in use
// in the first owner's colour, cached-free, free, left to right in proportion). The detail view zooms
// (wheel, +/-) and pans (drag, arrows, Page Up/Down, Home/End) over the pool; an overview strip above
// it shows the whole pool with a frame where the detail view is (click or drag it to move there);
// a double click or 0 shows the whole pool again. Free blocks are dark, cached-free (evictable)
// blocks teal by age in the LRU queue, in-use blocks in their owner's colour with the last block's fill
// shown and shared blocks (ref_cnt > 1) marked; blocks behind every holder's sliding window in a colour
// of their own (a legend key for models with a window). Hover names a block's owners; a selected
// request's block table is traced in order. Repaints at most every 30 ms and within 30 ms of a new snapshot.
#pragma once

#include "kv/kv_cache_snapshot.h"

#include <QColor>
#include <QElapsedTimer>
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
    // Moves the detail view by a number of blocks (negative: towards block 0), kept inside the pool.
    void pan(int blocks);
    void showWholePool();
    // The colour a block is painted with (before highlight overlays).
    QColor blockColor(int blockId) const;

    // The overview strip (the whole pool, left to right) and, inside it, the detail view's frame.
    QRect overviewRect() const { return m_overview; }
    QRect overviewFrame() const;
    // The legend's keys as laid out at the current width: one row, a key elided when the row is too narrow.
    struct LegendKey {
        QString text;
        QString toolTip;  // the full explanation the short text stands for
        QRect rect;       // swatch and text, widget coordinates
    };
    const std::vector<LegendKey>& legendKeys() const { return m_legend; }
    QRect totalsRect() const { return m_totals; }
    // Where the cells are drawn: below the legend, the figures and the overview strip.
    QRect mapArea() const;
    // How long the last full render of the image took (for the frame-rate figures).
    double lastRenderMs() const { return m_renderMs; }

    // Tall enough for the legend, the figures, the strip and 120 px of cells (a 1024x700 window gave the
    // cells 50 px once).
    QSize minimumSizeHint() const override;
    QSize sizeHint() const override { return {640, 320}; }

public slots:
    void setSnapshot(std::shared_ptr<const kvscope::KvCacheSnapshot> snapshot);
    void highlightRequest(const QString& requestId, const std::vector<int32_t>& blockTable);
    void clearHighlight();

signals:
    void blockClicked(int blockId, const QStringList& owners);

protected:
    bool event(QEvent* event) override;
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void changeEvent(QEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;

private:
    void computeLayout();
    void layoutLegend();
    void renderImage();
    void renderOverview(const std::vector<QRgb>& ownerRgb);
    void viewChanged();  // after zoom or pan: new layout, new image
    void centerOn(int block);
    int overviewBlockAt(int x) const;
    QString legendToolTip(const QPoint& pos) const;
    // The figures under the keys: the pool, the block counts, the view (empty when it is the whole pool
    // a block a cell).
    QStringList totalsSegments() const;

    std::shared_ptr<const KvCacheSnapshot> m_snapshot;
    ColorProvider m_colorOf;
    QImage m_image;
    bool m_dirty = true;
    QTimer m_repaintTimer;   // the next frame when a snapshot came too soon after the last one
    QElapsedTimer m_sincePaint;  // since the last frame
    double m_renderMs = 0;
    int m_legendBottom = 40;  // the legend rows and the totals lines end here
    QRect m_totals;           // the figures under the keys, on one line
    QRect m_overview;
    std::vector<LegendKey> m_legend;
    int m_cell = 1;  // cell size in device-independent pixels
    int m_cols = 1;
    int m_perCell = 1;  // consecutive blocks per cell (level of detail)
    int m_first = 0;    // the zoomed view: blocks [m_first, m_first + m_count); m_count 0 = the whole pool
    int m_count = 0;
    QString m_highlightId;
    std::vector<int32_t> m_highlight;
    int m_hoverBlock = -1;
    // A press in the map becomes a pan once it moves; one in the overview moves the view there.
    enum class Drag { None, Press, PanMap, Overview };
    Drag m_drag = Drag::None;
    QPoint m_pressPos;
    int m_pressFirst = 0;
};

}  // namespace kvscope::ui
