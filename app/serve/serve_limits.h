// The limits of kvscope-cli serve, all set by flags (serve --help lists them with their defaults).
// HttpLimits bound what a connection may cost before any handler runs; RequestLimits bound what one
// OpenAI request may ask for before the engine sees it. Anything past a limit is refused with a 4xx in
// OpenAI's error shape and costs at most a few MB and ms.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvscope::cli {

struct HttpLimits {
    int max_threads = 512;             // requests in flight at once (each holds a thread); more wait in a queue
    int max_connections = 4096;        // open client sockets; past it new ones are closed at once
    size_t max_header_bytes = 16 * 1024;         // request line and headers (431 past it)
    size_t max_body_bytes = 32 * 1024 * 1024;    // request body (413 past it)
    double header_timeout_s = 10;      // from a request's first byte to its whole head (408 past it)
    double body_timeout_s = 30;        // for the whole body once the head is in
    double keep_alive_timeout_s = 5;   // an idle connection between requests is closed after this
    double write_timeout_s = 30;       // a client that reads nothing for this long is dropped
    int keep_alive_max_requests = 1000;  // per connection, then the server closes it
};

struct RequestLimits {
    int max_json_depth = 64;           // nesting of arrays and objects in a body
    // Arrays and objects in a body: parsed, each costs a hundred bytes or more (3.5 million "{}" in 28 MB
    // took 650 MB); numbers, a long prompt's token ids, are not counted.
    int max_json_containers = 100000;
    int64_t max_prompt_bytes = 0;      // per prompt, before tokenization; 0 = what max_model_len tokens can hold
    int max_stop = 64;                 // entries of `stop`
    int max_stop_bytes = 256;          // bytes of one stop string
    int max_choices = 256;             // prompts x n in one request
    int max_logit_bias = 1024;         // entries of logit_bias
};

}  // namespace kvscope::cli
