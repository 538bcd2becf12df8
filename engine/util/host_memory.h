// The resident set size of this process (for the memory charts), from /proc/self/statm, and the
// machine's physical memory (to refuse weights that could never fit).
#pragma once

#include <cstdint>

namespace kvscope {

int64_t host_rss_bytes();
// Physical memory of the machine in bytes (0 if unknown).
int64_t host_memory_bytes();

}  // namespace kvscope
