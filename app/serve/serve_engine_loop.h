// EngineLoop: the one thread that owns the LlmEngine in kvscope-cli serve. Connection threads submit
// and abort requests through a command queue; the loop runs the commands, steps while any request is
// unfinished, hands every RequestOutput to the OutputStream of the connection that submitted it, and
// sleeps on a condition variable when there is nothing to do. Everything else here is thread-safe.
#pragma once

#include "llm_engine.h"
#include "serve_metrics.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kvscope::cli {

// The engine is stopping and takes no more requests (HTTP 503).
struct ServerStopping : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The outputs of one connection's requests, in engine order. Filled by the engine thread, drained by
// the connection thread.
class OutputStream {
public:
    void push(std::vector<RequestOutput> outputs);
    // Waits up to `timeout` for outputs and takes all that are queued (none on timeout).
    std::vector<RequestOutput> wait(std::chrono::milliseconds timeout);

private:
    std::mutex mu_;
    std::condition_variable ready_;
    std::vector<RequestOutput> queue_;
};

class EngineLoop {
public:
    // The engine must outlive the loop; metrics (the engine's sink) too.
    EngineLoop(LlmEngine& engine, ServeMetrics& metrics);
    ~EngineLoop();  // stop()
    EngineLoop(const EngineLoop&) = delete;
    EngineLoop& operator=(const EngineLoop&) = delete;

    void start();
    // Adds the requests, all or none, and routes their outputs to `stream`. Returns the engine's ids,
    // one list per request (n > 1: one id per sample). Throws BadInput (the engine's message) when a
    // request is rejected, ServerStopping after stop().
    std::vector<std::vector<std::string>> submit(std::vector<NewRequest> requests, std::shared_ptr<OutputStream> stream);
    // Aborts the requests (their blocks are freed); no further output reaches their stream.
    void abort(std::vector<std::string> request_ids);
    // Aborts every request (each stream gets a final output with reason abort) and joins the thread.
    void stop();

private:
    struct Route {
        std::shared_ptr<OutputStream> stream;
        int num_prompt_tokens = 0;
        bool prefilled = false;  // its first token arrived (its prompt counted)
    };

    void run();
    void post(std::function<void()> command);
    void deliver(std::vector<RequestOutput> outputs);
    void finish_all(FinishReason reason);
    void publish_gauges();

    LlmEngine& engine_;
    ServeMetrics& metrics_;
    std::thread thread_;

    std::mutex mu_;
    std::condition_variable wake_;
    std::vector<std::function<void()>> commands_;  // guarded by mu_
    bool stopping_ = false;                        // guarded by mu_

    std::map<std::string, Route> routes_;  // engine thread only: unfinished request id -> its connection
};

}  // namespace kvscope::cli
