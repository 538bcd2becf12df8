// EngineLoop: the one thread that owns the LlmEngine in kvscope-cli serve. Connection threads submit
// and abort requests through a command queue; the loop runs the commands, steps while any request is
// unfinished, hands every RequestOutput to the OutputStream of the connection that submitted it, and
// sleeps on a condition variable when there is nothing to do. Everything else here is thread-safe.
// Tests (kvscope-soak) also reconfigure the engine and read its state through the loop, between steps.
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

// The engine steps that threw (the loop finished every request with reason error). With
// EngineConfig::check_invariants, a broken scheduler or pool invariant throws std::logic_error.
struct StepFailures {
    int64_t count = 0;
    int64_t logic_errors = 0;  // std::logic_error: a broken invariant, a bug
    std::string last_message;
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

    // After start(). Applies the configuration that `choose` returns, on the engine thread between two
    // steps (LlmEngine::reconfigure, a transaction); `choose` sees the engine as it is at that moment.
    // Returns "" when the change was applied, else the refusal (BadInput's message: nothing changed).
    // Throws ServerStopping after stop().
    std::string reconfigure(std::function<EngineConfig(const LlmEngine&)> choose);
    std::string reconfigure(const EngineConfig& config);
    // After start(). Runs `read` on the engine thread between two steps and waits for it: the way to
    // read engine state while the loop runs. Throws ServerStopping after stop().
    void inspect(std::function<void(const LlmEngine&)> read);
    StepFailures step_failures() const;

private:
    struct Route {
        std::shared_ptr<OutputStream> stream;
        int num_prompt_tokens = 0;
        bool prefilled = false;  // its first token arrived (its prompt counted)
    };

    void run();
    void post(std::function<void()> command);
    // Posts `command` and waits until the engine thread has run it.
    void call(std::function<void()> command);
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

    mutable std::mutex failures_mu_;
    StepFailures failures_;  // guarded by failures_mu_
};

}  // namespace kvscope::cli
