// The requests of kvscope-soak: completions and chat, streaming or not, random sampling parameters,
// n in 1..4, priorities, a few shared prompt prefixes (so that prefix caching hits), clients that go away
// mid-stream or mid-request, kept-alive connections, and now and then a request the server must refuse
// with a 4xx. Request i comes from its own generator seeded by (seed, i), so a run draws the same
// requests whatever order the client threads take them in. Const after construction: any thread may
// call make().
#pragma once

#include "model/model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kvscope::soak {

enum class Disconnect {
    NONE,
    AFTER_FIRST_EVENT,  // streaming: the client closes its socket once the first SSE event arrived
    MID_REQUEST,        // not streaming: the client closes its socket while the server generates
};

struct SoakRequest {
    uint64_t index = 0;
    std::string label;   // what it is, for failure messages ("chat stream n=2", "invalid: top_p 2")
    std::string bytes;   // the whole HTTP request
    bool valid = true;   // false: the server must refuse it with a 4xx
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage: a usage chunk before [DONE]
    size_t num_choices = 1;      // prompts x n
    int max_tokens = 0;          // per choice
    Disconnect disconnect = Disconnect::NONE;
    int disconnect_after_ms = 0;  // MID_REQUEST: how long after sending the client closes
    bool keep_alive = false;      // `Connection: keep-alive`: the client sends its next such request on the same connection
};

struct WorkloadMix {
    double invalid = 0.06;            // requests the server must refuse
    double stream = 0.5;
    double chat = 0.5;
    double disconnect = 0.10;         // of streams: close after the first event; of the others: mid-request
    double keep_alive = 0.3;          // of the valid requests whose client stays
    int max_output_tokens = 48;
};

class Workload {
public:
    // served_name: what the requests name as "model". The model's tokenizer and chat template size the
    // prompts so that prompt + max_tokens always fits max_model_len.
    Workload(const Model& model, std::string served_name, int max_model_len, uint64_t seed, WorkloadMix mix = {});

    SoakRequest make(uint64_t index) const;

private:
    SoakRequest valid_request(std::mt19937_64& rng) const;
    SoakRequest invalid_request(std::mt19937_64& rng) const;
    std::string words(std::mt19937_64& rng, int min_words, int max_words) const;
    std::string prompt_text(std::mt19937_64& rng) const;
    int chat_prompt_tokens(const nlohmann::json& messages) const;

    const Model& model_;
    std::string served_name_;
    int max_model_len_;
    uint64_t seed_;
    WorkloadMix mix_;
    std::vector<std::vector<int32_t>> prefix_ids_;  // the shared prefixes, tokenized (with BOS)
};

}  // namespace kvscope::soak
