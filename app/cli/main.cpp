// kvscope-cli: generate | bench | serve | info (contracts in DESIGN.md section 4).
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    std::fprintf(stderr, "usage: kvscope-cli generate|bench|serve|info --model M ...\n");
    return 2;
}
