#include "engine_clock.h"

#include <algorithm>
#include <thread>

namespace kvscope {

EngineClock::EngineClock() : t0_(std::chrono::steady_clock::now()) {}

EngineClock EngineClock::virtual_time(double pace) {
    EngineClock c;
    c.virtual_ = true;
    c.pace_ = pace;
    return c;
}

double EngineClock::wall() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

double EngineClock::now() const {
    if (!virtual_) return wall();
    // Paced: time that passed while the engine idled (a server waiting for requests) counts too.
    return pace_ > 0 ? std::max(virtual_now_, wall() * pace_) : virtual_now_;
}

void EngineClock::set_pace(double pace) {
    if (virtual_) {
        virtual_now_ = now();
        if (pace > 0)
            t0_ = std::chrono::steady_clock::now() -
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(virtual_now_ / pace));
    }
    pace_ = pace;
}

void EngineClock::sleep_to_pace() {
    if (pace_ <= 0) return;
    const double ahead = virtual_now_ / pace_ - wall();
    if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
}

void EngineClock::advance(double seconds) {
    if (!virtual_) return;
    virtual_now_ = now() + std::max(0.0, seconds);
    sleep_to_pace();
}

void EngineClock::wait_until(double t) {
    if (!virtual_) {
        const double wait = t - wall();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        return;
    }
    virtual_now_ = std::max(now(), t);
    sleep_to_pace();
}

}  // namespace kvscope
