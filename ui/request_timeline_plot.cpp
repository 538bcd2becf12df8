#include "request_timeline_plot.h"

#include "engine_types.h"
#include "theme.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace kvscope::ui {

namespace {

constexpr double kLaneFill = 0.84;  // share of a lane's height used by its tallest span (a gap between lanes)

// A legend entry for one phase (or, without one, the finish tick): its swatch as drawn in a lane.
class PhaseLegendItem : public QCPAbstractLegendItem {
public:
    PhaseLegendItem(QCPLegend* legend, std::optional<RequestPhase> phase, const QString& text)
        : QCPAbstractLegendItem(legend), m_phase(phase), m_text(text) {}

protected:
    void draw(QCPPainter* painter) override {
        painter->setFont(mFont);
        painter->setPen(QPen(mTextColor));
        const QSize icon = mParentLegend->iconSize();
        const QRect text = painter->fontMetrics().boundingRect(0, 0, 0, icon.height(), Qt::TextDontClip, m_text);
        painter->drawText(mRect.x() + icon.width() + mParentLegend->iconTextPadding(), mRect.y(), text.width(),
                          std::max(text.height(), icon.height()), Qt::TextDontClip, m_text);
        const QRect iconRect(mRect.topLeft(), icon);
        painter->save();
        painter->setClipRect(iconRect, Qt::IntersectClip);
        if (m_phase) RequestTimelinePlot::paintPhase(painter, iconRect, *m_phase, Theme::series(7), 1);
        else RequestTimelinePlot::paintFinish(painter, iconRect, iconRect.center().x(), false);
        painter->restore();
    }
    QSize minimumOuterSizeHint() const override {
        const QSize icon = mParentLegend->iconSize();
        const QRect text = QFontMetrics(mFont).boundingRect(0, 0, 0, icon.height(), Qt::TextDontClip, m_text);
        return {icon.width() + mParentLegend->iconTextPadding() + text.width() + mMargins.left() + mMargins.right(),
                std::max(text.height(), icon.height()) + mMargins.top() + mMargins.bottom()};
    }

private:
    std::optional<RequestPhase> m_phase;
    QString m_text;
};

QString millis(double seconds) {
    const double ms = seconds * 1e3;
    return QString::number(ms, 'f', ms < 10 ? 2 : ms < 100 ? 1 : 0) + " ms";
}

}  // namespace

RequestTimelinePlot::RequestTimelinePlot(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPAbstractPlottable(keyAxis, valueAxis) {
    setSelectable(QCP::stNone);
    setAntialiasedFill(false);
}

void RequestTimelinePlot::paintPhase(QCPPainter* painter, const QRectF& lane, RequestPhase phase, const QColor& color,
                                     int chunk) {
    // Height tells the phases apart even where lane colours are alike: queued is a thin line, decode
    // a half-height bar, prefill and preempted fill the lane (prefill solid, preempted hatched red).
    auto band = [&](double share) {
        const double h = std::max(1.0, lane.height() * share);
        return QRectF(lane.left(), lane.center().y() - h / 2, lane.width(), h);
    };
    switch (phase) {
    case RequestPhase::Queued: {
        QColor c = color;
        c.setAlpha(110);
        painter->fillRect(band(0.22), c);
        break;
    }
    case RequestPhase::Prefill:
        painter->fillRect(band(1.0), chunk % 2 ? color.darker(140) : color.lighter(115));
        break;
    case RequestPhase::Decode: {
        QColor c = color;
        c.setAlpha(190);
        painter->fillRect(band(0.5), c);
        break;
    }
    case RequestPhase::Preempted: {
        QColor bg = Theme::series(3);
        bg.setAlpha(60);
        painter->fillRect(band(1.0), bg);
        painter->fillRect(band(1.0), QBrush(Theme::series(3), Qt::BDiagPattern));
        break;
    }
    }
}

void RequestTimelinePlot::addPhaseLegend() {
    QCPLegend* legend = mParentPlot->legend;
    for (RequestPhase phase : {RequestPhase::Queued, RequestPhase::Prefill, RequestPhase::Decode, RequestPhase::Preempted})
        legend->addItem(new PhaseLegendItem(legend, phase, QString::fromLatin1(phaseName(phase))));
    legend->addItem(new PhaseLegendItem(legend, std::nullopt, tr("finished")));
}

void RequestTimelinePlot::paintFinish(QCPPainter* painter, const QRectF& lane, double x, bool failed) {
    painter->fillRect(QRectF(x - 1, lane.top(), 2, lane.height()), failed ? Theme::series(3) : Theme::chartForeground());
}

void RequestTimelinePlot::draw(QCPPainter* painter) {
    QCPAxis* keyAxis = mKeyAxis.data();
    QCPAxis* valueAxis = mValueAxis.data();
    if (!keyAxis || !valueAxis || m_lanes.empty()) return;
    const QCPRange keys = keyAxis->range(), values = valueAxis->range();
    const int first = std::max(0, int(std::floor(values.lower)));
    const int last = std::min(int(m_lanes.size()) - 1, int(std::ceil(values.upper)));
    const QRect clip = clipRect();
    // Clamped to the clip rect: a span from far off-screen must not become a huge rectangle.
    auto xPixel = [&](double t) {
        return std::clamp(keyAxis->coordToPixel(t), double(clip.left() - 2), double(clip.right() + 2));
    };
    painter->setAntialiasing(false);
    for (int i = first; i <= last; ++i) {
        const TimelineLane& lane = m_lanes[size_t(i)];
        const double y0 = valueAxis->coordToPixel(i - kLaneFill / 2), y1 = valueAxis->coordToPixel(i + kLaneFill / 2);
        const double top = std::min(y0, y1), height = std::max(1.0, std::abs(y1 - y0));
        // Two passes: the thin queued and decode bands first, then the full-height prefill and preempted
        // spans over them, so a chunk narrower than a pixel (widened to one) is not painted over by the
        // decode that follows it in the same pixel.
        for (const bool fullHeight : {false, true}) {
            int chunk = 0;
            for (const PhaseSpan& s : lane.phases) {
                const bool full = s.phase == RequestPhase::Prefill || s.phase == RequestPhase::Preempted;
                if (full == fullHeight && s.end >= keys.lower && s.start <= keys.upper) {
                    const double x0 = xPixel(s.start), x1 = xPixel(s.end);
                    paintPhase(painter, QRectF(std::min(x0, x1), top, std::max(1.0, std::abs(x1 - x0)), height),
                               s.phase, lane.color, chunk);
                }
                chunk += s.phase == RequestPhase::Prefill;
            }
        }
        if (lane.finishTime >= 0 && keys.contains(lane.finishTime)) {
            const bool failed = lane.finishReason == FinishReason::ABORT || lane.finishReason == FinishReason::ERROR;
            paintFinish(painter, QRectF(0, top, 0, height), xPixel(lane.finishTime), failed);
        }
    }
}

void RequestTimelinePlot::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
    paintPhase(painter, rect, RequestPhase::Prefill, Theme::series(7), 0);
}

int RequestTimelinePlot::laneAt(const QPointF& pixel) const {
    if (!mKeyAxis || !mValueAxis) return -1;
    const int i = int(std::lround(mValueAxis->pixelToCoord(pixel.y())));
    if (i < 0 || i >= int(m_lanes.size())) return -1;
    const TimelineLane& lane = m_lanes[size_t(i)];
    if (lane.phases.empty()) return -1;
    // Three pixels of slack, so thin spans and the finish tick can be hovered.
    const double t = mKeyAxis->pixelToCoord(pixel.x()), slack = std::abs(mKeyAxis->pixelToCoord(pixel.x() + 3) - t);
    return t >= lane.phases.front().start - slack && t <= lane.phases.back().end + slack ? i : -1;
}

QString RequestTimelinePlot::toolTip(int i) const {
    if (i < 0 || i >= int(m_lanes.size())) return {};
    const TimelineLane& lane = m_lanes[size_t(i)];
    QString text = QString("<b>%1</b>").arg(lane.requestId.toHtmlEscaped());
    if (!lane.origin.isEmpty()) text += QString(" (%1)").arg(lane.origin.toHtmlEscaped());
    const PhaseTotals totals = phaseTotals(lane.phases);
    for (int p = 0; p < kNumRequestPhases; ++p) {
        if (!totals.spans[p]) continue;
        text += QString("<br>%1: %2").arg(QString::fromLatin1(phaseName(RequestPhase(p))), millis(totals.seconds[p]));
        if (p == int(RequestPhase::Prefill) && totals.spans[p] > 1) text += tr(" in %1 chunks").arg(totals.spans[p]);
        if (p == int(RequestPhase::Preempted)) text += tr(", %n time(s)", nullptr, totals.spans[p]);
    }
    if (!lane.phases.empty()) {
        const double life = lane.phases.back().end - lane.phases.front().start;
        text += lane.finishTime >= 0
                    ? tr("<br>finished (%1) after %2").arg(finishReasonName(lane.finishReason), millis(life))
                    : tr("<br>running for %1").arg(millis(life));
    }
    return text;
}

double RequestTimelinePlot::selectTest(const QPointF&, bool, QVariant*) const { return -1; }

QCPRange RequestTimelinePlot::getKeyRange(bool& foundRange, QCP::SignDomain) const {
    QCPRange range;
    foundRange = false;
    for (const TimelineLane& lane : m_lanes) {
        if (lane.phases.empty()) continue;
        const QCPRange r(lane.phases.front().start, lane.phases.back().end);
        if (foundRange) range.expand(r);
        else range = r;
        foundRange = true;
    }
    return range;
}

QCPRange RequestTimelinePlot::getValueRange(bool& foundRange, QCP::SignDomain, const QCPRange&) const {
    foundRange = !m_lanes.empty();
    return QCPRange(-0.5, double(m_lanes.size()) - 0.5);
}

}  // namespace kvscope::ui
