// SseParser: the event-stream framing of Server-Sent Events (WHATWG HTML, "event stream
// interpretation"), incremental: bytes go in as the network delivers them, split anywhere, and each
// complete event's data comes out. Only `data:` matters to OpenAI streams; comments (": ...") and the
// other fields are skipped. No I/O, no threads: one parser per stream, owned by whoever reads it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

class SseParser {
public:
    // Appends bytes; returns the data of every event that these bytes completed (several "data:" lines
    // of one event are joined with '\n', as the standard says).
    std::vector<std::string> feed(std::string_view bytes);
    // True when bytes that do not end an event are buffered (a stream cut in the middle of an event).
    bool has_partial_event() const { return !line_.empty() || !data_.empty() || has_data_; }
    // An event (or a line) grew past kMaxEventBytes: the stream is not one to read on (a 1.5 GB data
    // line took 2 GB of memory). feed() then keeps nothing more.
    bool overflowed() const { return overflowed_; }
    static constexpr size_t kMaxEventBytes = 16u << 20;

private:
    void take_line(std::vector<std::string>& events);

    std::string line_;  // the current line, without its terminator
    std::string data_;  // the current event's data so far
    bool has_data_ = false;
    bool last_was_cr_ = false;  // a "\r\n" split between two feeds is one line end
    bool overflowed_ = false;
};

}  // namespace kvscope
