// The resident set size of this process (for the memory charts), from /proc/self/statm.
#pragma once

#include <cstdint>

namespace kvscope {

int64_t host_rss_bytes();

}  // namespace kvscope
