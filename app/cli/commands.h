// The subcommands of kvscope-cli. Each takes its own argv (argv[0] = the command name), parses it with
// command_line/ (--help exits 0, bad flags exit 2 there) and returns the exit code; BadInput escapes to
// main, which prints it and exits with 2.
#pragma once

namespace kvscope::cli {

int run_generate(int argc, char** argv);
int run_info(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_sim_calibrate(int argc, char** argv);

}  // namespace kvscope::cli
