#include "block_map_widget.h"

#include <QMouseEvent>
#include <QWheelEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

namespace {
constexpr int kLegendHeight = 40;  // two rows: colour keys, then totals
constexpr int kMinCell = 5;        // the smallest cell with a gap between neighbours; below it, runs of blocks
const QColor kFree(0x3a, 0x3e, 0x45);
const QColor kCachedOld(0x1f, 0x5a, 0x5a);
const QColor kCachedNew(0x3c, 0xc8, 0xbe);

QRgb mix(QColor a, QColor b, double t) {
    return qRgb(int(a.red() + (b.red() - a.red()) * t), int(a.green() + (b.green() - a.green()) * t),
                int(a.blue() + (b.blue() - a.blue()) * t));
}
}  // namespace

BlockMapWidget::BlockMapWidget(QWidget* parent) : QWidget(parent), m_repaintTimer(this) {
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    m_repaintTimer.setSingleShot(true);
    m_repaintTimer.setInterval(33);
    connect(&m_repaintTimer, &QTimer::timeout, this, [this] { update(); });
    setToolTip(tr("KV block map: one cell per physical block. Hover for details, click to select the owning request."));
}

void BlockMapWidget::setSnapshot(std::shared_ptr<const KvCacheSnapshot> snapshot) {
    const bool relayout = !m_snapshot || !snapshot || snapshot->num_blocks != m_snapshot->num_blocks;
    m_snapshot = std::move(snapshot);
    if (relayout) {
        m_first = m_count = 0;  // a new pool: its whole
        computeLayout();
    }
    m_dirty = true;
    if (!m_repaintTimer.isActive()) m_repaintTimer.start();
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

QRect BlockMapWidget::mapArea() const { return rect().adjusted(4, kLegendHeight + 4, -4, -4); }

int BlockMapWidget::visibleBlockCount() const {
    const int total = m_snapshot ? m_snapshot->num_blocks : 0;
    return m_count > 0 ? std::min(m_count, total - m_first) : total;
}

void BlockMapWidget::computeLayout() {
    const QRect area = mapArea();
    const int blocks = std::max(1, visibleBlockCount());
    const int capacity = std::max(1, (area.width() / kMinCell) * (area.height() / kMinCell));
    m_perCell = (blocks + capacity - 1) / capacity;
    const int n = (blocks + m_perCell - 1) / m_perCell;  // cells
    int cell = std::max(1, int(std::floor(std::sqrt(double(area.width()) * area.height() / n))));
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

QColor BlockMapWidget::blockColor(int b) const {
    const KvCacheSnapshot& s = *m_snapshot;
    switch (s.state[size_t(b)]) {
    case KvBlockState::FREE: return kFree;
    case KvBlockState::CACHED_FREE: {
        const int span = std::max(1, s.num_free_blocks - 1);
        return QColor(mix(kCachedOld, kCachedNew, std::clamp(double(s.eviction_order[size_t(b)]) / span, 0.0, 1.0)));
    }
    case KvBlockState::IN_USE: {
        const auto owners = s.owner_indices(b);
        if (owners.empty() || !m_colorOf) return QColor(0x9a, 0x9e, 0xa6);
        return m_colorOf(QString::fromStdString(s.request_ids[size_t(owners.front())]));
    }
    }
    return kFree;
}

void BlockMapWidget::renderImage() {
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
        ownerRgb[i] = m_colorOf ? m_colorOf(QString::fromStdString(s.request_ids[i])).rgb() : qRgb(0x9a, 0x9e, 0xa6);
    const int cellPx = std::max(1, int(std::lround(m_cell * dpr)));
    const int gap = cellPx >= 5 ? 1 : 0;
    const int inner = cellPx - gap;
    const QRect area = mapArea();
    const int x0 = int(area.left() * dpr), y0 = int(area.top() * dpr);
    const int span = std::max(1, s.num_free_blocks - 1);
    const QRgb freeRgb = kFree.rgb(), sharedMark = qRgb(255, 255, 255);
    const int cells = (visibleBlockCount() + m_perCell - 1) / m_perCell;
    for (int cell = 0; cell < cells; ++cell) {
        const int px = x0 + (cell % m_cols) * cellPx, py = y0 + (cell / m_cols) * cellPx;
        if (py + inner > size.height() || px + inner > size.width()) break;
        const int first = m_first + cell * m_perCell, last = std::min(first + m_perCell, m_first + visibleBlockCount());
        if (m_perCell > 1) {
            // A run of blocks: in use (first owner's colour), cached-free (mean age), free, left to right in
            // proportion; any state present gets at least a pixel column.
            int inUse = 0, cached = 0;
            double age = 0;
            QRgb owner = qRgb(0x9a, 0x9e, 0xa6);
            bool ownerFound = false;
            for (int b = first; b < last; ++b) {
                if (s.state[size_t(b)] == KvBlockState::IN_USE) {
                    ++inUse;
                    const int32_t begin = s.owner_offsets[size_t(b)];
                    if (!ownerFound && begin < s.owner_offsets[size_t(b) + 1]) {
                        owner = ownerRgb[size_t(s.owners[size_t(begin)])];
                        ownerFound = true;
                    }
                } else if (s.state[size_t(b)] == KvBlockState::CACHED_FREE) {
                    ++cached;
                    age += std::clamp(double(s.eviction_order[size_t(b)]) / span, 0.0, 1.0);
                }
            }
            const int count = last - first;
            auto width = [&](int k) { return k == 0 ? 0 : std::max(1, int(std::lround(double(inner) * k / count))); };
            const int useEnd = std::min(inner, width(inUse)), cachedEnd = std::min(inner, useEnd + width(cached));
            const QRgb cachedRgb = cached ? mix(kCachedOld, kCachedNew, age / cached) : freeRgb;
            for (int y = 0; y < inner; ++y) {
                auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(py + y)) + px;
                for (int x = 0; x < inner; ++x) line[x] = x < useEnd ? owner : x < cachedEnd ? cachedRgb : freeRgb;
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
            c = begin < s.owner_offsets[size_t(b) + 1] ? ownerRgb[size_t(s.owners[size_t(begin)])] : qRgb(0x9a, 0x9e, 0xa6);
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
}

void BlockMapWidget::paintEvent(QPaintEvent*) {
    if (m_dirty || m_image.size() != (QSizeF(size()) * devicePixelRatioF()).toSize()) renderImage();
    QPainter p(this);
    p.drawImage(0, 0, m_image);
    // Legend and totals.
    p.setRenderHint(QPainter::Antialiasing);
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 0.9);
    p.setFont(f);
    int x = 6;
    const int y = 4;
    auto key = [&](QColor c, const QString& text) {
        p.fillRect(QRect(x, y + 3, 11, 11), c);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QRect(x + 15, y, 400, 18), Qt::AlignVCenter, text);
        x += 15 + p.fontMetrics().horizontalAdvance(text) + 12;
    };
    key(kFree, tr("free"));
    key(kCachedNew, tr("cached-free, evictable (bright = recent)"));
    key(QColor(0x4e, 0x9a, 0xf0), tr("in use (owner colour; white corner = shared)"));
    if (m_snapshot) {
        const KvCacheSnapshot& s = *m_snapshot;
        const QString totals = tr("%1 blocks x %2 tokens   in use %3   cached-free %4   free %5   usage %6%   waste %7%")
                                   .arg(s.num_blocks)
                                   .arg(s.block_size)
                                   .arg(s.num_in_use_blocks)
                                   .arg(s.num_cached_free_blocks)
                                   .arg(s.num_free_blocks - s.num_cached_free_blocks)
                                   .arg(s.usage * 100, 0, 'f', 1)
                                   .arg(s.kv_waste * 100, 0, 'f', 1);
        QString view;  // what a cell is, once it is not simply one block
        if (m_perCell > 1 || visibleBlockCount() < s.num_blocks)
            view = tr("   |   %1-%2, %3/cell (wheel: zoom)").arg(m_first).arg(m_first + visibleBlockCount() - 1).arg(m_perCell);
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(QRect(6, y + 18, width() - 12, 18), Qt::AlignVCenter | Qt::AlignLeft,
                   p.fontMetrics().elidedText(totals + view, Qt::ElideMiddle, width() - 12));
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
    if (m_hoverBlock >= 0 && m_snapshot && m_hoverBlock < m_snapshot->num_blocks) {
        p.setPen(QPen(palette().color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(cellRect(m_hoverBlock).adjusted(-1, -1, 0, 0));
    }
}

void BlockMapWidget::resizeEvent(QResizeEvent*) { computeLayout(); }

QString BlockMapWidget::describeBlock(int b) const {
    if (!m_snapshot || b < 0 || b >= m_snapshot->num_blocks) return {};
    const KvCacheSnapshot& s = *m_snapshot;
    QString state;
    switch (s.state[size_t(b)]) {
    case KvBlockState::FREE: state = tr("free"); break;
    case KvBlockState::CACHED_FREE: state = tr("cached-free (evictable, position %1 in the LRU queue)").arg(s.eviction_order[size_t(b)]); break;
    case KvBlockState::IN_USE: state = tr("in use"); break;
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

void BlockMapWidget::mouseMoveEvent(QMouseEvent* event) {
    const int b = blockAt(event->position().toPoint());
    if (b != m_hoverBlock) {
        m_hoverBlock = b;
        update();
    }
    if (b >= 0) QToolTip::showText(event->globalPosition().toPoint(), m_perCell > 1 ? describeCell(b) : describeBlock(b), this);
    else QToolTip::hideText();
}

void BlockMapWidget::mousePressEvent(QMouseEvent* event) {
    const int b = blockAt(event->position().toPoint());
    if (b < 0) {
        emit blockClicked(-1, {});
        return;
    }
    QStringList owners;
    for (const auto& id : m_snapshot->owner_ids(b)) owners << QString::fromStdString(id);
    emit blockClicked(b, owners);
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
    return tr("<b>blocks %1-%2</b><br>in use: %3<br>cached-free: %4<br>free: %5<br>owners: %6<br>(wheel to zoom in)")
        .arg(first)
        .arg(last - 1)
        .arg(counts[int(KvBlockState::IN_USE)])
        .arg(counts[int(KvBlockState::CACHED_FREE)])
        .arg(counts[int(KvBlockState::FREE)])
        .arg(owners.isEmpty() ? tr("none") : owners.join(", "));
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
    computeLayout();
    update();
}

void BlockMapWidget::showWholePool() {
    m_first = m_count = 0;
    computeLayout();
    update();
}

void BlockMapWidget::wheelEvent(QWheelEvent* event) {
    const int b = blockAt(event->position().toPoint());
    const int around = b >= 0 ? b : m_first + visibleBlockCount() / 2;
    if (event->angleDelta().y() != 0) zoom(around, event->angleDelta().y() > 0 ? 0.5 : 2.0);
    event->accept();
}

void BlockMapWidget::mouseDoubleClickEvent(QMouseEvent*) { showWholePool(); }

void BlockMapWidget::leaveEvent(QEvent*) {
    m_hoverBlock = -1;
    update();
}

}  // namespace kvscope::ui
