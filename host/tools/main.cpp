// SPDX-License-Identifier: Apache-2.0
// `tessera`: partition graphs, generate R-MAT graphs, validate partitions, run benchmarks.
#include <fmt/format.h>

#include <exception>
#include <new>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#ifdef TESSERA_WITH_BENCH
#include "bench_commands.hpp"
#endif

int main(int argc, char** argv) {
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
  tessera::tools::register_train(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    fmt::print(stderr, "tessera: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "tessera: error: out of memory: the input needs more memory than this machine "
               "could give (std::bad_alloc); try a smaller input\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tessera: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
