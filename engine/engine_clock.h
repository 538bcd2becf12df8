// EngineClock: the time base of every engine timestamp (arrivals, tokens, steps). Real backends read
// the steady clock. A simulated backend runs on virtual time: each step advances it by the step's
// predicted duration, and idle waits jump ahead instead of sleeping, so a benchmark of minutes of GPU
// time finishes as fast as the host schedules. Paced virtual time (pace > 0) never runs ahead of
// pace x the wall time elapsed (it sleeps to keep step), for servers and watchable GUIs. Engine thread only.
#pragma once

#include <chrono>

namespace kvscope {

class EngineClock {
public:
    // The steady clock, from now.
    EngineClock();
    // Virtual time from 0; pace 0 = as fast as the host allows, else simulated seconds per wall second.
    static EngineClock virtual_time(double pace = 0.0);

    bool is_virtual() const { return virtual_; }
    double pace() const { return pace_; }
    // From now on: the simulated time so far stays and the wall clock restarts under it, so a slower
    // pace after a faster one owes no sleep for the time the faster one ran ahead (nor jumps ahead).
    void set_pace(double pace);
    // Seconds since the engine started.
    double now() const;
    // A step took `seconds` on the simulated device (virtual clocks only; a real clock ignores it).
    void advance(double seconds);
    // Nothing to do until `t` (engine seconds): a real clock sleeps, a virtual one jumps there.
    void wait_until(double t);

private:
    double wall() const;
    void sleep_to_pace();

    bool virtual_ = false;
    double pace_ = 0.0;
    double virtual_now_ = 0.0;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace kvscope
