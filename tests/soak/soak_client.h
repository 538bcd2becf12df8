// One kvscope-soak client request over a raw loopback socket: send it, read the reply (or go away as the
// request says), and judge how it ended. Every request ends exactly one way: completed (a 200 whose
// every choice finished with stop or length, a stream that ended with [DONE]), aborted (the client went
// away), refused (a 4xx with OpenAI's error body) or error (a 5xx, an invalid request that was accepted,
// a malformed or cut reply, or none within the timeout). Thread-safe: one call per request, any thread.
#pragma once

#include "soak_workload.h"

#include <string>
#include <utility>

namespace kvscope::soak {

// REFUSED_4XX, not REFUSED: <arpa/nameser.h> (through httplib) defines REFUSED as a macro.
enum class Outcome { COMPLETED, ABORTED, REFUSED_4XX, ERROR };

struct RequestResult {
    Outcome outcome = Outcome::ERROR;
    int status = 0;      // HTTP status, 0 when none arrived
    std::string detail;  // ERROR: what was wrong; REFUSED: the server's message
    bool reused_connection = false;  // it went on a connection kept alive from an earlier request
};

// A connection kept alive between one client's requests (closed when replaced or destroyed).
class KeptConnection {
public:
    KeptConnection() = default;
    KeptConnection(const KeptConnection&) = delete;
    KeptConnection& operator=(const KeptConnection&) = delete;
    ~KeptConnection() { reset(); }
    int take() { return std::exchange(fd_, -1); }  // -1 when there is none
    void keep(int fd) {
        reset();
        fd_ = fd;
    }
    void reset();

private:
    int fd_ = -1;
};

// A request with keep_alive goes on `kept` when it holds a connection (on a new one when the server has
// closed that one meanwhile), and leaves its connection there when the server keeps it open.
RequestResult run_request(int port, const SoakRequest& request, double timeout_s, KeptConnection& kept);

}  // namespace kvscope::soak
