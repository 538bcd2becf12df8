// kvscope-cli bench (issue 5) and serve (issue 6 era) are not built yet: they say so plainly.
#include "commands.h"

#include <cstdio>

namespace kvscope::cli {

int run_bench(int, char**) {
    std::fprintf(stderr, "kvscope-cli bench: not implemented yet\n");
    return 1;
}

int run_serve(int, char**) {
    std::fprintf(stderr, "kvscope-cli serve: not implemented yet\n");
    return 1;
}

}  // namespace kvscope::cli
