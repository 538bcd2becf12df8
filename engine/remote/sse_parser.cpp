#include "remote/sse_parser.h"

namespace kvscope {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
    std::vector<std::string> events;
    if (overflowed_) return events;
    for (const char c : bytes) {
        if (c == '\n' && last_was_cr_) {  // the second half of "\r\n"
            last_was_cr_ = false;
            continue;
        }
        last_was_cr_ = c == '\r';
        if (c == '\r' || c == '\n') take_line(events);
        else line_ += c;
        if (line_.size() + data_.size() > kMaxEventBytes) {
            overflowed_ = true;
            line_.clear(), data_.clear(), has_data_ = false;
            break;
        }
    }
    return events;
}

void SseParser::take_line(std::vector<std::string>& events) {
    if (line_.empty()) {  // a blank line dispatches the event; one without data is dropped
        if (has_data_) events.push_back(std::move(data_));
        data_.clear();
        has_data_ = false;
        return;
    }
    if (line_[0] != ':') {
        const size_t colon = line_.find(':');
        const std::string_view field = std::string_view(line_).substr(0, colon);
        std::string_view value = colon == std::string::npos ? std::string_view() : std::string_view(line_).substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
        if (field == "data") {
            if (has_data_) data_ += '\n';
            data_ += value;
            has_data_ = true;
        }
    }
    line_.clear();
}

}  // namespace kvscope
