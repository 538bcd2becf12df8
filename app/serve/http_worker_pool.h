// HttpWorkerPool: the threads that run HTTP requests in kvscope-cli serve. A request holds its thread
// from its first body byte to its last response byte (an SSE stream: until the last token), so the
// pool grows on demand up to max_threads and lets idle threads go after a while; past max_threads,
// work waits in a FIFO queue. Connections between requests do not hold a thread (HttpConnectionGate
// keeps them). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvscope::cli {

class HttpWorkerPool {
public:
    HttpWorkerPool(std::string name, int max_threads, std::chrono::seconds idle_exit = std::chrono::seconds(30));
    ~HttpWorkerPool();  // shutdown()
    HttpWorkerPool(const HttpWorkerPool&) = delete;
    HttpWorkerPool& operator=(const HttpWorkerPool&) = delete;

    // Runs `task` on a pool thread. After shutdown() the task is dropped (returns false).
    bool submit(std::function<void()> task);
    // Runs what is queued, then joins every thread.
    void shutdown();

    int num_threads() const;
    int num_busy() const;
    size_t num_queued() const;
    const std::string& name() const { return name_; }

private:
    void work();

    const std::string name_;
    const int max_threads_;
    const std::chrono::seconds idle_exit_;

    mutable std::mutex mu_;
    std::condition_variable wake_;
    std::condition_variable exited_;
    std::deque<std::function<void()>> queue_;
    int num_threads_ = 0;
    int num_idle_ = 0;
    bool stopping_ = false;
};

}  // namespace kvscope::cli
