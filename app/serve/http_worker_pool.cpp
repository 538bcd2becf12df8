#include "http_worker_pool.h"

#include <cstdio>
#include <exception>

namespace kvscope::cli {

HttpWorkerPool::HttpWorkerPool(std::string name, int max_threads, std::chrono::seconds idle_exit)
    : name_(std::move(name)), max_threads_(max_threads < 1 ? 1 : max_threads), idle_exit_(idle_exit) {}

HttpWorkerPool::~HttpWorkerPool() { shutdown(); }

bool HttpWorkerPool::submit(std::function<void()> task) {
    std::unique_lock lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(task));
    if (num_idle_ > 0) {
        wake_.notify_one();
    } else if (num_threads_ < max_threads_) {
        // Threads are detached: an idle one leaves on its own, and shutdown() waits for the count.
        ++num_threads_;
        try {
            std::thread(&HttpWorkerPool::work, this).detach();
        } catch (const std::system_error& e) {  // out of threads: the queue waits for a running one
            --num_threads_;
            std::fprintf(stderr, "kvscope serve: %s pool: cannot start a thread (%s)\n", name_.c_str(), e.what());
            if (num_threads_ == 0) {
                queue_.pop_back();
                return false;
            }
        }
    }
    return true;
}

void HttpWorkerPool::work() {
    std::unique_lock lock(mu_);
    while (true) {
        if (queue_.empty()) {
            if (stopping_) break;
            ++num_idle_;
            const bool woken = wake_.wait_for(lock, idle_exit_, [&] { return stopping_ || !queue_.empty(); });
            --num_idle_;
            if (!woken) break;  // idle for idle_exit_: give the thread back
            continue;
        }
        std::function<void()> task = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        try {
            task();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kvscope serve: %s pool: a request failed: %s\n", name_.c_str(), e.what());
        }
        task = nullptr;  // destroy what it captured before taking the lock again
        lock.lock();
    }
    --num_threads_;
    exited_.notify_all();
}

void HttpWorkerPool::shutdown() {
    std::unique_lock lock(mu_);
    stopping_ = true;
    wake_.notify_all();
    exited_.wait(lock, [&] { return num_threads_ == 0; });
}

int HttpWorkerPool::num_threads() const {
    std::lock_guard lock(mu_);
    return num_threads_;
}

int HttpWorkerPool::num_busy() const {
    std::lock_guard lock(mu_);
    return num_threads_ - num_idle_;
}

size_t HttpWorkerPool::num_queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
}

}  // namespace kvscope::cli
