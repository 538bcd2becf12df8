#include "sched/request.h"

namespace kvscope {

std::string_view to_string(RequestStatus s) {
    switch (s) {
    case RequestStatus::WAITING: return "waiting";
    case RequestStatus::RUNNING: return "running";
    case RequestStatus::PREEMPTED: return "preempted";
    case RequestStatus::FINISHED: return "finished";
    }
    return "?";
}

std::string_view to_string(FinishReason r) {
    switch (r) {
    case FinishReason::NONE: return "";
    case FinishReason::STOP: return "stop";
    case FinishReason::LENGTH: return "length";
    case FinishReason::ABORT: return "abort";
    case FinishReason::ERROR: return "error";
    }
    return "?";
}

}  // namespace kvscope
