#include "engine_types.h"

namespace kvscope::ui {

void registerEngineMetaTypes() {
    qRegisterMetaType<kvscope::EngineConfig>();
    qRegisterMetaType<kvscope::RequestMetrics>();
    qRegisterMetaType<SubmitCommand>();
    qRegisterMetaType<RequestProgress>();
    qRegisterMetaType<EngineUpdate>();
    qRegisterMetaType<ModelSummary>();
}

QString statusName(RequestStatus s) {
    switch (s) {
    case RequestStatus::WAITING: return QStringLiteral("waiting");
    case RequestStatus::RUNNING: return QStringLiteral("running");
    case RequestStatus::PREEMPTED: return QStringLiteral("preempted");
    case RequestStatus::FINISHED: return QStringLiteral("finished");
    }
    return {};
}

QString finishReasonName(FinishReason r) { return QString::fromUtf8(std::string(to_string(r)).c_str()); }

}  // namespace kvscope::ui
