#include "sched/scheduling_policy.h"

#include "util/errors.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace kvscope {

size_t SchedulingPolicy::arrival_position(const std::deque<Request*>& waiting, const Request& request) const {
    auto pos = std::upper_bound(waiting.begin(), waiting.end(), &request,
                                [this](const Request* a, const Request* b) { return before(*a, *b); });
    return static_cast<size_t>(pos - waiting.begin());
}

size_t SchedulingPolicy::requeue_position(const std::deque<Request*>& waiting, const Request& preempted) const {
    return arrival_position(waiting, preempted);
}

namespace {

class FcfsPolicy final : public SchedulingPolicy {
public:
    std::string_view name() const override { return "fcfs"; }
    bool before(const Request& a, const Request& b) const override { return a.arrival_seq < b.arrival_seq; }
    size_t arrival_position(const std::deque<Request*>& waiting, const Request&) const override {
        return waiting.size();
    }
    size_t requeue_position(const std::deque<Request*>&, const Request&) const override { return 0; }
    size_t pick_victim(const std::vector<Request*>& running) const override { return running.size() - 1; }
    bool preempts_for_seats() const override { return false; }
};

class PriorityPolicy final : public SchedulingPolicy {
public:
    std::string_view name() const override { return "priority"; }
    bool before(const Request& a, const Request& b) const override {
        return std::tie(a.priority, a.arrival_time, a.arrival_seq) < std::tie(b.priority, b.arrival_time, b.arrival_seq);
    }
    size_t pick_victim(const std::vector<Request*>& running) const override {
        auto worst = std::max_element(running.begin(), running.end(),
                                      [this](const Request* a, const Request* b) { return before(*a, *b); });
        return static_cast<size_t>(worst - running.begin());
    }
    bool preempts_for_seats() const override { return true; }
};

}  // namespace

std::unique_ptr<SchedulingPolicy> make_policy(SchedulerPolicy policy) {
    if (policy == SchedulerPolicy::PRIORITY) return std::make_unique<PriorityPolicy>();
    return std::make_unique<FcfsPolicy>();
}

}  // namespace kvscope
