// A reader of the Prometheus text exposition format (version 0.0.4), enough for the /metrics pages of
// serving engines: `name{label="value",...} value [timestamp]` lines; comments (# HELP, # TYPE) and
// lines it cannot read are skipped. Pure function.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

struct PromSample {
    std::string name;  // with the _bucket, _sum, _count suffix of histogram series
    std::map<std::string, std::string> labels;
    double value = 0;
};

std::vector<PromSample> parse_prometheus_text(std::string_view text);

}  // namespace kvscope
