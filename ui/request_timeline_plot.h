// RequestTimelinePlot: a QCustomPlot plottable that paints one swimlane per request over engine time
// (GUI thread): queued, prefill chunks, decode and preempted spans (request_phases.h) in the request's
// colour, and a tick where it finished. Lane i is centred on value i. Painting walks only the lanes
// and spans inside the visible ranges with plain fillRect calls, so hundreds of lanes stay cheap.
#pragma once

#include "request_phases.h"
#include "sched/request.h"

#include <QColor>
#include <QString>
#include <qcustomplot.h>

#include <vector>

namespace kvscope::ui {

struct TimelineLane {
    QString requestId;
    QString origin;
    QColor color;
    std::vector<PhaseSpan> phases;
    double finishTime = -1;  // engine seconds; -1 while it runs
    FinishReason finishReason = FinishReason::NONE;
};

class RequestTimelinePlot : public QCPAbstractPlottable {
    Q_OBJECT
public:
    RequestTimelinePlot(QCPAxis* keyAxis, QCPAxis* valueAxis);

    std::vector<TimelineLane>& lanes() { return m_lanes; }  // edit in place, then replot
    const std::vector<TimelineLane>& lanes() const { return m_lanes; }
    // The lane under a pixel position that has a span or finish tick at that time; -1 for none.
    int laneAt(const QPointF& pixel) const;
    // Request id, origin and the time spent in each phase.
    QString toolTip(int lane) const;

    // How a phase looks in a lane of the given colour (also drawn by the legend items).
    // chunk alternates the shade of consecutive prefill chunks so their boundaries show.
    static void paintPhase(QCPPainter* painter, const QRectF& lane, RequestPhase phase, const QColor& color, int chunk);
    // The tick at x where a request finished (red when aborted or failed).
    static void paintFinish(QCPPainter* painter, const QRectF& lane, double x, bool failed);
    // Adds one legend item per phase, and one for the finish tick, to the plot's legend.
    void addPhaseLegend();

    double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
    QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
    QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                           const QCPRange& inKeyRange = QCPRange()) const override;

protected:
    void draw(QCPPainter* painter) override;
    void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

private:
    std::vector<TimelineLane> m_lanes;
};

}  // namespace kvscope::ui
