#include "remote/prometheus_text.h"

#include <cmath>
#include <cstdlib>

namespace kvscope {

namespace {

// Reads `key="value",...}` from position i (after '{'); false when malformed.
bool read_labels(std::string_view line, size_t& i, std::map<std::string, std::string>& labels) {
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i < line.size() && line[i] == '}') return ++i, true;
        const size_t eq = line.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
        std::string key(line.substr(i, eq - i));
        while (!key.empty() && key.back() == ' ') key.pop_back();
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
            if (line[j] == '\\' && j + 1 < line.size()) {
                ++j;
                value += line[j] == 'n' ? '\n' : line[j];
            } else {
                value += line[j];
            }
        }
        if (j >= line.size()) return false;
        labels[std::move(key)] = std::move(value);
        i = j + 1;
    }
    return false;
}

bool read_value(std::string_view s, double& out) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    const size_t end = s.find(' ');
    const std::string v(s.substr(0, end));
    if (v == "NaN") return out = NAN, true;
    if (v == "+Inf") return out = INFINITY, true;
    if (v == "-Inf") return out = -INFINITY, true;
    char* stop = nullptr;
    out = std::strtod(v.c_str(), &stop);
    return !v.empty() && stop && *stop == '\0';
}

}  // namespace

std::vector<PromSample> parse_prometheus_text(std::string_view text) {
    std::vector<PromSample> out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        start = end + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (line.empty() || line.front() == '#') continue;
        PromSample s;
        size_t i = 0;
        while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
        s.name = std::string(line.substr(0, i));
        if (i < line.size() && line[i] == '{' && !read_labels(line, ++i, s.labels)) continue;
        if (s.name.empty() || !read_value(line.substr(i), s.value)) continue;
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace kvscope
