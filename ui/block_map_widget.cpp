#include "block_map_widget.h"

#include "elided_label.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <utility>

namespace kvscope::ui {

namespace {
constexpr int kRow = 18;           // one legend or totals line
constexpr int kOverviewHeight = 12;
const char* const kTotalsGap = "  |  ";
constexpr int kMinCell = 5;        // the smallest cell with a gap between neighbours; below it, runs of blocks
constexpr int kDetailCell = 10;    // a click on the overview of the whole pool zooms to cells this size
constexpr qint64 kFrameMs = 25;    // at most 40 frames/s, and a snapshot waits at most this long
const QColor kFree(0x3a, 0x3e, 0x45);
const QColor kCachedOld(0x1f, 0x5a, 0x5a);
const QColor kCachedNew(0x3c, 0xc8, 0xbe);
const QColor kInUseKey(0x4e, 0x9a, 0xf0);
// In use but behind the sliding window of every holder: no windowed layer reads it again.
const QColor kOutsideWindow(0x8c, 0x6e, 0xb4);
const QRgb kUnowned = qRgb(0x9a, 0x9e, 0xa6);

QRgb mix(QColor a, QColor b, double t) {
    return qRgb(int(a.red() + (b.red() - a.red()) * t), int(a.green() + (b.green() - a.green()) * t),
                int(a.blue() + (b.blue() - a.blue()) * t));
}

QFont legendFont(const QFont& base) {
    QFont f = base;
    if (f.pointSizeF() > 0) f.setPointSizeF(f.pointSizeF() * 0.9);
    return f;
}
// Whether the snapshot's model has a sliding window (and so the legend its key).
bool hasWindow(const KvCacheSnapshot* s) { return s && s->sliding_window > 0 && !s->outside_window.empty(); }
bool outsideWindow(const KvCacheSnapshot& s, int b) { return !s.outside_window.empty() && s.outside_window[size_t(b)]; }

// What a run of blocks [first, last) holds, for the cells and the strip that show a run in proportion.
struct BlockRun {
    int inUse = 0, behind = 0, cached = 0;  // behind: in use, behind every holder's sliding window
    double age = 0;                         // the cached-free blocks' eviction positions in [0, 1], summed
    QRgb owner = kUnowned;                  // the owner colour of the first in-use block not behind
};
BlockRun countRun(const KvCacheSnapshot& s, int first, int last, const std::vector<QRgb>& ownerRgb, int span) {
    BlockRun run;
    bool ownerFound = false;
    for (int b = first; b < last; ++b) {
        const KvBlockState state = s.state[size_t(b)];
        if (state == KvBlockState::IN_USE && outsideWindow(s, b)) {
            ++run.behind;
        } else if (state == KvBlockState::IN_USE) {
            ++run.inUse;
            const int32_t begin = s.owner_offsets[size_t(b)];
            if (!ownerFound && begin < s.owner_offsets[size_t(b) + 1]) {
                run.owner = ownerRgb[size_t(s.owners[size_t(begin)])];
                ownerFound = true;
            }
        } else if (state == KvBlockState::CACHED_FREE) {
            ++run.cached;
            run.age += std::clamp(double(s.eviction_order[size_t(b)]) / span, 0.0, 1.0);
        }
    }
    return run;
}
}  // namespace

BlockMapWidget::BlockMapWidget(QWidget* parent) : QWidget(parent), m_repaintTimer(this) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);  // + / - / arrows zoom and pan
    setAttribute(Qt::WA_OpaquePaintEvent);
    m_repaintTimer.setSingleShot(true);
    m_repaintTimer.setTimerType(Qt::PreciseTimer);
    connect(&m_repaintTimer, &QTimer::timeout, this, [this] { update(); });
    setToolTip(tr("KV block map: one cell per physical block (or per run of blocks when the pool does not fit). "
                  "Hover for details, click to select the owning request.<br>Zoom: wheel or + / -; pan: drag, "
                  "arrows, Page Up / Page Down, Home / End; the strip above is the whole pool: click or drag it "
                  "to move the view; double click or 0: the whole pool."));
    layoutLegend();
}

void BlockMapWidget::setSnapshot(std::shared_ptr<const KvCacheSnapshot> snapshot) {
    const bool relayout = !m_snapshot || !snapshot || snapshot->num_blocks != m_snapshot->num_blocks;
    const bool newLegend = hasWindow(m_snapshot.get()) != hasWindow(snapshot.get());
    m_snapshot = std::move(snapshot);
    if (relayout) {
        m_first = m_count = 0;  // a new pool: its whole
        computeLayout();
    } else if (newLegend) {
        computeLayout();
    }
    m_dirty = true;
    // Throttle, don't delay: a snapshot that comes 25 ms or more after the last frame is painted at once;
    // one that comes sooner waits only for the rest of the 25 ms. (A fixed 33 ms delay after every
    // snapshot gave 33 ms + the wait for the next snapshot per frame: 16-20 frames/s.)
    if (m_repaintTimer.isActive()) return;
    const qint64 since = m_sincePaint.isValid() ? m_sincePaint.elapsed() : kFrameMs;
    if (since >= kFrameMs) update();  // painted with the rest of the window's changes from this update
    else m_repaintTimer.start(int(kFrameMs - since));
}

void BlockMapWidget::highlightRequest(const QString& requestId, const std::vector<int32_t>& blockTable) {
    m_highlightId = requestId;
    m_highlight = blockTable;
    update();
}

void BlockMapWidget::clearHighlight() {
    m_highlightId.clear();
    m_highlight.clear();
    update();
}

QSize BlockMapWidget::minimumSizeHint() const {
    constexpr int kMinMapHeight = 120;
    return {200, m_overview.bottom() + 1 + 4 + kMinMapHeight + 4};  // as mapArea() measures
}

QRect BlockMapWidget::mapArea() const { return rect().adjusted(4, m_overview.bottom() + 1 + 4, -4, -4); }

int BlockMapWidget::visibleBlockCount() const {
    const int total = m_snapshot ? m_snapshot->num_blocks : 0;
    return m_count > 0 ? std::min(m_count, total - m_first) : total;
}

void BlockMapWidget::layoutLegend() {
    // Short keys; each key's tooltip says the rest.
    const QFontMetrics fm(legendFont(font()), this);  // this widget's DPI, as its painter measures
    struct Key {
        QString text, tip;
    };
    const Key keys[] = {
        {tr("free"), tr("free: in the free queue, nothing reusable in it")},
        {tr("cached-free (bright = recent)"),
         tr("cached-free: in the free queue with a prefix hash, evictable; a prefix-cache hit revives it. Bright = "
            "freed recently (evicted last), dark = evicted next")},
        {tr("in use (owner colour)"),
         tr("in use: held by running requests, in the owner's colour (its pane's colour); the darker part of a "
            "request's last block is its unfilled slots")},
        {tr("shared"), tr("shared: a white corner marks a block with ref_cnt > 1 (a prefix-cache hit or n > 1)")},
        {tr("behind window"),
         tr("behind the sliding window: in use, but every request holding it has moved more than the model's "
            "sliding window past it, so no windowed layer reads it again. Only global layers still do (Gemma); "
            "where every layer is windowed (Mistral) the engine frees such blocks instead. Shown for models "
            "with a sliding window")},
    };
    // One row of keys and one line of figures at any width: wrapped, they took five lines of a small
    // window's map (1024x700) and left the blocks 50 px. A key that does not fit whole is elided (its
    // tooltip says it all): keys that fit an equal share of the row keep their width, the rest share
    // what is left.
    m_legend.clear();
    const int right = width() - 6;
    constexpr int kGap = 12;
    constexpr int kSwatch = 15;  // the swatch and the space after it
    const int n = hasWindow(m_snapshot.get()) ? 5 : 4;  // the window's key only for models with a window
    std::vector<int> want, given(size_t(n), 0);
    for (int i = 0; i < n; ++i) want.push_back(kSwatch + fm.horizontalAdvance(keys[i].text) + 2);  // + 2: elidedText rounds fractional advances up
    int room = std::max(0, right - 6 - kGap * (n - 1));
    std::vector<int> pending(static_cast<size_t>(n));  // keys not yet given their width
    std::iota(pending.begin(), pending.end(), 0);
    while (!pending.empty()) {
        const int share = room / int(pending.size());
        const auto fits = std::stable_partition(pending.begin(), pending.end(), [&](int i) { return want[size_t(i)] > share; });
        if (fits == pending.end()) {
            for (int i : pending) given[size_t(i)] = std::max(share, kSwatch);
            break;
        }
        for (auto it = fits; it != pending.end(); ++it) {
            given[size_t(*it)] = want[size_t(*it)];
            room -= want[size_t(*it)];
        }
        pending.erase(fits, pending.end());
    }
    int x = 6;
    const int y = 4;
    for (int i = 0; i < n; ++i) {
        m_legend.push_back({keys[i].text, keys[i].tip, QRect(x, y, std::max(1, std::min(given[size_t(i)], right - x)), kRow)});
        x = std::min(right, x + given[size_t(i)] + kGap);
    }
    m_totals = QRect(6, y + kRow, std::max(1, right - 6), kRow);
    m_legendBottom = m_totals.bottom() + 1 + 2;
    m_overview = QRect(4, m_legendBottom, std::max(1, width() - 8), kOverviewHeight);
}

QStringList BlockMapWidget::totalsSegments() const {
    const KvCacheSnapshot* s = m_snapshot.get();
    if (!s) return {};
    return {
        tr("%1 blocks x %2 tokens, usage %3%, waste %4%")
            .arg(s->num_blocks)
            .arg(s->block_size)
            .arg(s->usage * 100, 0, 'f', 1)
            .arg(s->kv_waste * 100, 0, 'f', 1),
        tr("in use %1, cached-free %2, free %3")
            .arg(s->num_in_use_blocks)
            .arg(s->num_cached_free_blocks)
            .arg(s->num_free_blocks - s->num_cached_free_blocks),
        // What a cell is, once it is not simply one block.
        m_perCell > 1 || visibleBlockCount() < s->num_blocks
            ? tr("view %1-%2, %3/cell").arg(m_first).arg(m_first + visibleBlockCount() - 1).arg(m_perCell)
            : QString(),
    };
}

void BlockMapWidget::computeLayout() {
    layoutLegend();
    const QRect area = mapArea();
    const int blocks = std::max(1, visibleBlockCount());
    const int capacity = std::max(1, (area.width() / kMinCell) * (area.height() / kMinCell));
    m_perCell = (blocks + capacity - 1) / capacity;
    const int n = (blocks + m_perCell - 1) / m_perCell;  // cells
    int cell = std::max(1, int(std::floor(std::sqrt(double(std::max(1, area.width())) * std::max(1, area.height()) / n))));
    while (cell > 1 && (area.width() / cell) * (area.height() / cell) < n) --cell;
    m_cell = std::min(cell, 48);
    m_cols = std::max(1, area.width() / m_cell);
    m_dirty = true;
}

QRect BlockMapWidget::cellRect(int blockId) const {
    if (blockId < m_first || blockId >= m_first + visibleBlockCount()) return {};
    const QRect area = mapArea();
    const int c = (blockId - m_first) / m_perCell;
    return {area.left() + (c % m_cols) * m_cell, area.top() + (c / m_cols) * m_cell, m_cell, m_cell};
}

int BlockMapWidget::blockAt(const QPoint& pos) const {
    if (!m_snapshot) return -1;
    const QRect area = mapArea();
    if (!area.contains(pos)) return -1;
    const int col = (pos.x() - area.left()) / m_cell, row = (pos.y() - area.top()) / m_cell;
    if (col >= m_cols) return -1;
    const int offset = (row * m_cols + col) * m_perCell;
    return offset < visibleBlockCount() ? m_first + offset : -1;
}

QRect BlockMapWidget::overviewFrame() const {
    if (!m_snapshot || m_snapshot->num_blocks == 0) return {};
    const double w = m_overview.width(), n = m_snapshot->num_blocks;
    const int x0 = m_overview.left() + int(std::floor(m_first * w / n));
    const int x1 = m_overview.left() + int(std::ceil((m_first + visibleBlockCount()) * w / n));
    return QRect(x0, m_overview.top(), std::max(2, x1 - x0), m_overview.height());
}

int BlockMapWidget::overviewBlockAt(int x) const {
    if (!m_snapshot || m_snapshot->num_blocks == 0) return -1;
    const double t = std::clamp(double(x - m_overview.left()) / std::max(1, m_overview.width()), 0.0, 1.0);
    return std::min(m_snapshot->num_blocks - 1, int(t * m_snapshot->num_blocks));
}

QColor BlockMapWidget::blockColor(int b) const {
    const KvCacheSnapshot& s = *m_snapshot;
    switch (s.state[size_t(b)]) {
    case KvBlockState::FREE: return kFree;
    case KvBlockState::CACHED_FREE: {
        const int span = std::max(1, s.num_free_blocks - 1);
        return QColor(mix(kCachedOld, kCachedNew, std::clamp(double(s.eviction_order[size_t(b)]) / span, 0.0, 1.0)));
    }
    case KvBlockState::IN_USE: {
        if (outsideWindow(s, b)) return kOutsideWindow;
        const auto owners = s.owner_indices(b);
        if (owners.empty() || !m_colorOf) return QColor(kUnowned);
        return m_colorOf(QString::fromStdString(s.request_ids[size_t(owners.front())]));
    }
    }
    return kFree;
}

void BlockMapWidget::renderImage() {
    QElapsedTimer clock;
    clock.start();
    const qreal dpr = devicePixelRatioF();
    const QSize size = (QSizeF(this->size()) * dpr).toSize();
    if (m_image.size() != size) {
        m_image = QImage(size, QImage::Format_RGB32);
        m_image.setDevicePixelRatio(dpr);
    }
    m_image.fill(palette().color(QPalette::Base));
    m_dirty = false;
    if (!m_snapshot || m_snapshot->num_blocks == 0) return;
    const KvCacheSnapshot& s = *m_snapshot;
    // Owner colours once per frame, not once per block.
    std::vector<QRgb> ownerRgb(s.request_ids.size());
    for (size_t i = 0; i < ownerRgb.size(); ++i)
        ownerRgb[i] = m_colorOf ? m_colorOf(QString::fromStdString(s.request_ids[i])).rgb() : kUnowned;
    renderOverview(ownerRgb);
    const int cellPx = std::max(1, int(std::lround(m_cell * dpr)));
    const int gap = cellPx >= 5 ? 1 : 0;
    const int inner = cellPx - gap;
    const QRect area = mapArea();
    const int x0 = int(area.left() * dpr), y0 = int(area.top() * dpr);
    const int span = std::max(1, s.num_free_blocks - 1);
    const QRgb freeRgb = kFree.rgb(), sharedMark = qRgb(255, 255, 255), behindRgb = kOutsideWindow.rgb();
    const int cells = (visibleBlockCount() + m_perCell - 1) / m_perCell;
    for (int cell = 0; cell < cells; ++cell) {
        const int px = x0 + (cell % m_cols) * cellPx, py = y0 + (cell / m_cols) * cellPx;
        if (py + inner > size.height() || px + inner > size.width()) break;
        const int first = m_first + cell * m_perCell, last = std::min(first + m_perCell, m_first + visibleBlockCount());
        if (m_perCell > 1) {
            // A run of blocks: in use (first owner's colour), behind the window, cached-free (mean age), free,
            // left to right in proportion; any state present gets at least a pixel column.
            const BlockRun run = countRun(s, first, last, ownerRgb, span);
            const int count = last - first;
            auto width = [&](int k) { return k == 0 ? 0 : std::max(1, int(std::lround(double(inner) * k / count))); };
            const int useEnd = std::min(inner, width(run.inUse)), behindEnd = std::min(inner, useEnd + width(run.behind));
            const int cachedEnd = std::min(inner, behindEnd + width(run.cached));
            const QRgb cachedRgb = run.cached ? mix(kCachedOld, kCachedNew, run.age / run.cached) : freeRgb;
            for (int y = 0; y < inner; ++y) {
                auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(py + y)) + px;
                for (int x = 0; x < inner; ++x)
                    line[x] = x < useEnd ? run.owner : x < behindEnd ? behindRgb : x < cachedEnd ? cachedRgb : freeRgb;
            }
            continue;
        }
        const int b = first;
        QRgb c = freeRgb, rest = freeRgb;
        int filledPx = inner;
        bool shared = false;
        switch (s.state[size_t(b)]) {
        case KvBlockState::FREE: break;
        case KvBlockState::CACHED_FREE:
            c = rest = mix(kCachedOld, kCachedNew, std::clamp(double(s.eviction_order[size_t(b)]) / span, 0.0, 1.0));
            break;
        case KvBlockState::IN_USE: {
            const int32_t begin = s.owner_offsets[size_t(b)];
            c = begin < s.owner_offsets[size_t(b) + 1] ? ownerRgb[size_t(s.owners[size_t(begin)])] : kUnowned;
            if (outsideWindow(s, b)) c = behindRgb;
            rest = QColor(c).darker(260).rgb();
            if (s.block_size > 0 && s.tokens_filled[size_t(b)] < s.block_size)
                filledPx = std::max(1, inner * s.tokens_filled[size_t(b)] / s.block_size);
            shared = s.ref_cnt[size_t(b)] > 1;
            break;
        }
        }
        for (int y = 0; y < inner; ++y) {
            auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(py + y)) + px;
            for (int x = 0; x < inner; ++x) line[x] = x < filledPx ? c : rest;
        }
        if (shared) {
            // A white corner marks a block shared by several requests (prefix cache or n > 1).
            const int mark = std::max(1, inner / 3);
            for (int y = 0; y < mark; ++y) {
                auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(py + y)) + px;
                for (int x = 0; x < mark - y; ++x) line[x] = sharedMark;
            }
        }
    }
    m_renderMs = double(clock.nsecsElapsed()) / 1e6;
}

void BlockMapWidget::renderOverview(const std::vector<QRgb>& ownerRgb) {
    // The whole pool in one strip: each pixel column is a run of blocks, stacked bottom up as in use (first
    // owner's colour), behind the window, cached-free, free in proportion. One pass over the blocks: ~0.2 ms
    // at 100,000.
    const KvCacheSnapshot& s = *m_snapshot;
    const qreal dpr = devicePixelRatioF();
    const QRect r(QPoint(int(m_overview.left() * dpr), int(m_overview.top() * dpr)),
                  QSize(int(m_overview.width() * dpr), int(m_overview.height() * dpr)));
    const int w = std::min(r.width(), m_image.width() - r.left()), h = std::min(r.height(), m_image.height() - r.top());
    if (w <= 0 || h <= 0) return;
    const int64_t n = s.num_blocks;
    const QRgb freeRgb = kFree.rgb(), cachedRgb = mix(kCachedOld, kCachedNew, 0.6), behindRgb = kOutsideWindow.rgb();
    const int span = std::max(1, s.num_free_blocks - 1);
    for (int x = 0; x < w; ++x) {
        const int first = int(x * n / w), last = std::max(first + 1, int((x + 1) * n / w));
        const BlockRun run = countRun(s, first, last, ownerRgb, span);
        const int count = last - first;
        auto height = [&](int k) { return k == 0 ? 0 : std::max(1, int(std::lround(double(h) * k / count))); };
        const int useTop = h - std::min(h, height(run.inUse)), behindTop = std::max(0, useTop - height(run.behind));
        const int cachedTop = std::max(0, behindTop - height(run.cached));
        for (int y = 0; y < h; ++y)
            reinterpret_cast<QRgb*>(m_image.scanLine(r.top() + y))[r.left() + x] =
                y >= useTop ? run.owner : y >= behindTop ? behindRgb : y >= cachedTop ? cachedRgb : freeRgb;
    }
}

void BlockMapWidget::paintEvent(QPaintEvent*) {
    m_sincePaint.start();
    if (m_dirty || m_image.size() != (QSizeF(size()) * devicePixelRatioF()).toSize()) renderImage();
    QPainter p(this);
    p.drawImage(0, 0, m_image);
    // Legend and totals.
    p.setRenderHint(QPainter::Antialiasing);
    p.setFont(legendFont(font()));
    for (size_t i = 0; i < m_legend.size(); ++i) {
        const LegendKey& k = m_legend[i];
        const QRect swatch(k.rect.left(), k.rect.top() + 3, 11, 11);
        p.fillRect(swatch, i == 0 ? kFree : i == 1 ? kCachedNew : i == 4 ? kOutsideWindow : kInUseKey);
        if (i == 3) {  // shared: the white corner on an in-use swatch
            p.setPen(Qt::NoPen);
            p.setBrush(Qt::white);
            p.drawPolygon(QPolygon({swatch.topLeft(), swatch.topLeft() + QPoint(5, 0), swatch.topLeft() + QPoint(0, 5)}));
        }
        p.setPen(palette().color(QPalette::Text));
        p.drawText(k.rect.adjusted(15, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   p.fontMetrics().elidedText(k.text, Qt::ElideRight, k.rect.width() - 15));
    }
    if (m_snapshot) {
        QStringList segments = totalsSegments();
        segments.removeAll(QString());
        // One line of whole figures, the last ones dropped in a narrow map; its tooltip has every figure.
        p.setPen(palette().color(QPalette::PlaceholderText));
        const QFontMetrics metrics = p.fontMetrics();
        p.drawText(m_totals, Qt::AlignVCenter | Qt::AlignLeft,
                   metrics.elidedText(elidedParts(segments, kTotalsGap, m_totals.width(),
                                                  [&](const QString& t) { return metrics.horizontalAdvance(t); }),
                                      Qt::ElideRight, m_totals.width()));  // a first figure wider than the map, by character
        // Where the detail view is: the rest of the strip dimmed, a frame around the view.
        const QRect frame = overviewFrame();
        if (m_count > 0) {
            const QColor dim(0, 0, 0, 140);
            p.fillRect(QRect(m_overview.topLeft(), QPoint(frame.left() - 1, m_overview.bottom())), dim);
            p.fillRect(QRect(QPoint(frame.right() + 1, m_overview.top()), m_overview.bottomRight()), dim);
        }
        p.setRenderHint(QPainter::Antialiasing, false);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(Qt::black, 1));
        p.drawRect(frame.adjusted(-1, -1, 0, 0));
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(frame.adjusted(0, 0, -1, -1));
        p.setRenderHint(QPainter::Antialiasing);
    } else {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(mapArea(), Qt::AlignCenter, tr("No model loaded"));
    }
    // The selected request's block table, traced in order.
    if (m_snapshot && !m_highlight.empty()) {
        QPainterPath path;
        bool first = true;
        for (int32_t b : m_highlight) {
            if (cellRect(b).isEmpty()) continue;
            const QPointF c = QRectF(cellRect(b)).center();
            if (first) path.moveTo(c);
            else path.lineTo(c);
            first = false;
        }
        p.setPen(QPen(QColor(255, 255, 255, 200), std::max(1.0, m_cell / 6.0)));
        p.setBrush(Qt::NoBrush);
        p.drawPath(path);
        p.setPen(QPen(QColor(255, 220, 80), m_cell >= 6 ? 2 : 1));
        for (size_t i = 0; i < m_highlight.size(); ++i) {
            const int b = m_highlight[i];
            if (cellRect(b).isEmpty()) continue;
            const QRect r = cellRect(b).adjusted(0, 0, -1, -1);
            p.drawRect(m_cell >= 4 ? r : r.adjusted(-1, -1, 1, 1));
            if (m_cell >= 18 && m_perCell == 1) p.drawText(r, Qt::AlignCenter, QString::number(i));
        }
    }
    if (m_hoverBlock >= 0 && m_snapshot && m_hoverBlock < m_snapshot->num_blocks && !cellRect(m_hoverBlock).isEmpty()) {
        p.setPen(QPen(palette().color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(cellRect(m_hoverBlock).adjusted(-1, -1, 0, 0));
    }
}

void BlockMapWidget::resizeEvent(QResizeEvent*) { computeLayout(); }

void BlockMapWidget::changeEvent(QEvent* event) {
    // The legend's rows follow the font; the image's background follows the palette (theme toggles).
    if (event->type() == QEvent::FontChange || event->type() == QEvent::StyleChange) computeLayout();
    if (event->type() == QEvent::PaletteChange) m_dirty = true;
    QWidget::changeEvent(event);
}

QString BlockMapWidget::describeBlock(int b) const {
    if (!m_snapshot || b < 0 || b >= m_snapshot->num_blocks) return {};
    const KvCacheSnapshot& s = *m_snapshot;
    QString state;
    switch (s.state[size_t(b)]) {
    case KvBlockState::FREE: state = tr("free"); break;
    case KvBlockState::CACHED_FREE: state = tr("cached-free (evictable, position %1 in the LRU queue)").arg(s.eviction_order[size_t(b)]); break;
    case KvBlockState::IN_USE:
        state = !outsideWindow(s, b)     ? tr("in use")
                : s.frees_outside_window ? tr("in use, behind the sliding window of every holder (read by no layer)")
                                         : tr("in use, behind the sliding window of every holder (read by global layers only)");
        break;
    }
    QStringList owners;
    for (const auto& id : s.owner_ids(b)) owners << QString::fromStdString(id);
    const auto& hash = s.block_hash[size_t(b)];
    return tr("<b>block %1</b><br>state: %2<br>ref_cnt: %3<br>tokens: %4 / %5<br>owners: %6<br>hash: %7")
        .arg(b)
        .arg(state)
        .arg(s.ref_cnt[size_t(b)])
        .arg(s.tokens_filled[size_t(b)])
        .arg(s.block_size)
        .arg(owners.isEmpty() ? tr("none") : owners.join(", "))
        .arg(hash ? QString("%1").arg(qulonglong(*hash), 16, 16, QChar('0')) : tr("none (not a full cached block)"));
}

QString BlockMapWidget::describeCell(int firstBlock) const {
    if (m_perCell == 1) return describeBlock(firstBlock);
    if (!m_snapshot || cellRect(firstBlock).isEmpty()) return {};
    const KvCacheSnapshot& s = *m_snapshot;
    const int first = m_first + (firstBlock - m_first) / m_perCell * m_perCell;
    const int last = std::min(first + m_perCell, m_first + visibleBlockCount());
    int counts[3] = {0, 0, 0};
    QStringList owners;
    for (int b = first; b < last; ++b) {
        ++counts[int(s.state[size_t(b)])];
        for (const auto& id : s.owner_ids(b))
            if (owners.size() < 6 && !owners.contains(QString::fromStdString(id))) owners << QString::fromStdString(id);
    }
    return tr("<b>blocks %1-%2</b><br>in use: %3<br>cached-free: %4<br>free: %5<br>owners: %6<br>(wheel or + to zoom in)")
        .arg(first)
        .arg(last - 1)
        .arg(counts[int(KvBlockState::IN_USE)])
        .arg(counts[int(KvBlockState::CACHED_FREE)])
        .arg(counts[int(KvBlockState::FREE)])
        .arg(owners.isEmpty() ? tr("none") : owners.join(", "));
}

QString BlockMapWidget::legendToolTip(const QPoint& pos) const {
    for (const LegendKey& k : m_legend)
        if (k.rect.contains(pos)) return k.toolTip;
    if (m_overview.contains(pos) && m_snapshot)
        return tr("The whole pool, blocks 0-%1, left to right (in use at the bottom of each column, then behind the "
                  "sliding window, cached-free, free). The frame is the detail view below (blocks %2-%3): click or drag here to move it.")
            .arg(m_snapshot->num_blocks - 1)
            .arg(m_first)
            .arg(m_first + visibleBlockCount() - 1);
    if (m_totals.contains(pos) && m_snapshot)
        return tr("%1 blocks of %2 tokens: %3 in use, %4 cached-free, %5 free; usage %6%, waste %7% (reserved slots "
                  "not yet filled)")
            .arg(m_snapshot->num_blocks)
            .arg(m_snapshot->block_size)
            .arg(m_snapshot->num_in_use_blocks)
            .arg(m_snapshot->num_cached_free_blocks)
            .arg(m_snapshot->num_free_blocks - m_snapshot->num_cached_free_blocks)
            .arg(m_snapshot->usage * 100, 0, 'f', 1)
            .arg(m_snapshot->kv_waste * 100, 0, 'f', 1);
    return {};
}

bool BlockMapWidget::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        const QPoint pos = static_cast<QHelpEvent*>(event)->pos();
        const int b = blockAt(pos);
        QString tip = b >= 0 ? describeCell(b) : legendToolTip(pos);
        if (tip.isEmpty()) tip = toolTip();
        QToolTip::showText(static_cast<QHelpEvent*>(event)->globalPos(), tip, this);
        return true;
    }
    return QWidget::event(event);
}

void BlockMapWidget::mouseMoveEvent(QMouseEvent* event) {
    const QPoint pos = event->position().toPoint();
    if (event->buttons() & Qt::LeftButton) {
        if (m_drag == Drag::Overview) {
            centerOn(overviewBlockAt(pos.x()));
            return;
        }
        if (m_drag == Drag::Press && (pos - m_pressPos).manhattanLength() >= 4) m_drag = Drag::PanMap;
        if (m_drag == Drag::PanMap) {
            // The blocks follow the pointer: a row down shows the previous row of blocks.
            const QPoint d = pos - m_pressPos;
            const int cells = int(std::lround(double(d.y()) / m_cell)) * m_cols + int(std::lround(double(d.x()) / m_cell));
            const int target = m_pressFirst - cells * m_perCell;
            pan(target - m_first);
            return;
        }
    }
    const int b = blockAt(pos);
    if (b != m_hoverBlock) {
        m_hoverBlock = b;
        update();
    }
    // Block details follow the mouse at once; elsewhere the ToolTip event explains the legend and strip.
    if (b >= 0) QToolTip::showText(event->globalPosition().toPoint(), describeCell(b), this);
    else if (mapArea().contains(pos)) QToolTip::hideText();
}

void BlockMapWidget::mousePressEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) return;
    const QPoint pos = event->position().toPoint();
    m_pressPos = pos;
    m_pressFirst = m_first;
    if (m_overview.contains(pos) && m_snapshot) {
        m_drag = Drag::Overview;
        centerOn(overviewBlockAt(pos.x()));
        return;
    }
    m_drag = Drag::Press;
}

void BlockMapWidget::mouseReleaseEvent(QMouseEvent* event) {
    const Drag drag = std::exchange(m_drag, Drag::None);
    if (event->button() != Qt::LeftButton || drag != Drag::Press) return;
    // A click (no drag) selects the block's owner.
    const int b = blockAt(event->position().toPoint());
    if (b < 0) {
        emit blockClicked(-1, {});
        return;
    }
    QStringList owners;
    for (const auto& id : m_snapshot->owner_ids(b)) owners << QString::fromStdString(id);
    emit blockClicked(b, owners);
}

void BlockMapWidget::zoom(int aroundBlock, double factor) {
    if (!m_snapshot || m_snapshot->num_blocks == 0) return;
    const int total = m_snapshot->num_blocks, shown = visibleBlockCount();
    const int count = std::clamp(int(std::lround(shown * factor)), std::min(total, 64), total);
    // The block under the mouse keeps its place in the view.
    const double at = std::clamp(double(aroundBlock - m_first) / std::max(1, shown), 0.0, 1.0);
    m_first = std::clamp(int(std::lround(aroundBlock - at * count)), 0, total - count);
    m_count = count == total ? 0 : count;
    if (m_count == 0) m_first = 0;
    viewChanged();
}

void BlockMapWidget::pan(int blocks) {
    if (!m_snapshot || m_count == 0) return;  // the whole pool is in view
    const int first = std::clamp(m_first + blocks, 0, m_snapshot->num_blocks - m_count);
    if (first == m_first) return;
    m_first = first;
    viewChanged();
}

void BlockMapWidget::centerOn(int block) {
    if (!m_snapshot || block < 0) return;
    if (m_count == 0) {
        // From the whole pool: the detail around the block, at cells big enough to point at.
        const QRect area = mapArea();
        const int fit = std::max(64, (area.width() / kDetailCell) * (area.height() / kDetailCell));
        if (fit >= m_snapshot->num_blocks) return;
        m_count = fit;
    }
    m_first = std::clamp(block - m_count / 2, 0, m_snapshot->num_blocks - m_count);
    viewChanged();
}

void BlockMapWidget::showWholePool() {
    m_first = m_count = 0;
    viewChanged();
}

void BlockMapWidget::viewChanged() {
    computeLayout();
    m_hoverBlock = -1;
    update();
}

void BlockMapWidget::wheelEvent(QWheelEvent* event) {
    const int b = blockAt(event->position().toPoint());
    const int around = b >= 0 ? b : m_first + visibleBlockCount() / 2;
    if (event->angleDelta().y() != 0) zoom(around, event->angleDelta().y() > 0 ? 0.5 : 2.0);
    event->accept();
}

void BlockMapWidget::keyPressEvent(QKeyEvent* event) {
    const int shown = visibleBlockCount(), center = m_first + shown / 2;
    const int row = m_cols * m_perCell, step = std::max(m_perCell, shown / 10 / m_perCell * m_perCell);
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom(center, 0.5); break;
    case Qt::Key_Minus: zoom(center, 2.0); break;
    case Qt::Key_0: showWholePool(); break;
    case Qt::Key_Up: pan(-row); break;
    case Qt::Key_Down: pan(row); break;
    case Qt::Key_Left: pan(-step); break;
    case Qt::Key_Right: pan(step); break;
    case Qt::Key_PageUp: pan(-shown); break;
    case Qt::Key_PageDown: pan(shown); break;
    case Qt::Key_Home: pan(-m_first); break;
    case Qt::Key_End: pan(m_snapshot ? m_snapshot->num_blocks : 0); break;
    default: QWidget::keyPressEvent(event); return;
    }
    event->accept();
}

void BlockMapWidget::mouseDoubleClickEvent(QMouseEvent*) { showWholePool(); }

void BlockMapWidget::leaveEvent(QEvent*) {
    m_hoverBlock = -1;
    update();
}

}  // namespace kvscope::ui
