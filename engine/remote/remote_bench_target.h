// RemoteBenchTarget: a remote OpenAI-compatible engine (vLLM, SGLang, TGI, llama-server, kvscope serve)
// as a BenchTarget. submit() hands the request to an HttpStreamPool and returns at once; the stream is
// read on the pool's thread into RequestMetrics on this target's clock (TTFT, ITL, TPOT by the same
// definitions as locally: a token time per streamed chunk, output tokens from the usage the server
// reports), and wait_finished() gives the finished ones to the driver's thread. A request that fails
// (refused, HTTP error, timeout, malformed or cut stream) finishes with FinishReason::ERROR and its
// message; the others go on. run_remote_bench() is BenchRunner's loop for this target.
// Thread: submit/now/wait_finished from the driver's thread; the pool's thread fills the queue.
#pragma once

#include "bench/bench_driver.h"
#include "remote/http_stream_pool.h"
#include "remote/openai_stream.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kvscope {

struct RemoteTargetOptions {
    HttpEndpoint endpoint;
    std::string path = "/v1/completions";  // --endpoint
    OpenAiApi api = OpenAiApi::COMPLETIONS;
    std::string model;                     // the served model name
    // Chat prompts as text, by prompt token ids (the workload's, decoded before the run so that
    // submit() never waits on a tokenizer or the server).
    std::map<std::vector<int32_t>, std::string> prompt_texts;
    bool min_tokens = false;  // send min_tokens = max_tokens too (OpenAiRequest::min_tokens)
};

struct RemoteFinished {
    RequestMetrics metrics;
    std::string error;  // "" when it succeeded
};

// Settles a streamed request: the reader's end (status, transport error) and what it read go into
// `metrics` (finish time `now`, a token time per chunk, the counts the server's usage reports, the
// finish reason; ERROR when it failed). Returns the error ("" on success). Every remote request ends
// here, benchmark or chat, so both measure by the same definitions.
std::string finish_remote_request(RequestMetrics& metrics, OpenAiStreamReader& reader, int status,
                                  const std::string& transport_error, double now);

class RemoteBenchTarget final : public BenchTarget {
public:
    explicit RemoteBenchTarget(RemoteTargetOptions options);
    ~RemoteBenchTarget() override;  // cancels what is still streaming

    double now() const override;
    void submit(NewRequest request) override;
    // The requests that finished since the last call; waits up to timeout_s for one when none has.
    std::vector<RemoteFinished> wait_finished(double timeout_s);
    int num_in_flight() const;
    // TCP (or TLS) connections opened so far; fewer than the requests when connections are reused.
    long connections_opened() const { return pool_.connections_opened(); }
    const RemoteTargetOptions& options() const { return options_; }

private:
    struct Flight;
    void on_done(const std::shared_ptr<Flight>& flight, int status, const std::string& error);

    RemoteTargetOptions options_;
    std::chrono::steady_clock::time_point t0_;
    mutable std::mutex mutex_;
    std::condition_variable finished_cv_;
    std::vector<RemoteFinished> finished_;
    int in_flight_ = 0;
    HttpStreamPool pool_;  // last: its thread stops before the queue above goes away
};

// Runs the workload against `target` with the BenchDriver's rules (arrivals, max_concurrency exact,
// warm-up) and returns the run, with each failed request's message in errors. Blocks the calling
// thread until the run ends (it waits on finishes and arrivals, never on a single stream).
// hooks (optional): on_finished sees each finished request as it comes (a live view); cancelled is
// asked between waits and ends the run early (what never finished counts as failed).
struct RemoteBenchHooks {
    std::function<void(const RemoteFinished&)> on_finished;
    std::function<bool()> cancelled;
};
BenchRun run_remote_bench(RemoteBenchTarget& target, const std::vector<BenchRequest>& workload,
                          const BenchOptions& options, const std::string& label, const std::string& id_prefix,
                          const RemoteBenchHooks& hooks = {});

}  // namespace kvscope
