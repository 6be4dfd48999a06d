// SPDX-License-Identifier: Apache-2.0
// `tessera`: partition graphs, generate R-MAT graphs, validate partitions, run benchmarks, launch
// jobs; `tessera train` runs the libtorch trainer, the executable `tessera-train` beside it.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "cli_main.hpp"
#include "commands.hpp"
#include "train_exec.hpp"
#ifdef TESSERA_WITH_BENCH
#include "bench_commands.hpp"
#endif

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "train") == 0 &&
      !tessera::tools::train_executable().empty()) {
    const std::string why = tessera::tools::exec_train(argc, argv);
    fmt::print(stderr, "tessera: error: tessera train: {}\n", why);
    return 1;
  }
  CLI::App app{"Tessera: GPU-first distributed GNN training -- graph tools"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  tessera::tools::register_info(app);
  tessera::tools::register_partition(app);
  tessera::tools::register_generate(app);
  tessera::tools::register_validate(app);
#ifdef TESSERA_WITH_BENCH
  tessera::tools::register_bench(app);
#endif
  tessera::tools::register_launch(app);
  // Without tessera-train beside it (a build without libtorch): the options, then the stub's
  // not_compiled_with_torch error.
  tessera::tools::register_train(app);
  return tessera::tools::run_cli(app, argc, argv);
}
