// SPDX-License-Identifier: Apache-2.0
#include "cli_main.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <new>

#include "tessera/core/error.hpp"

namespace tessera::tools {

int run_cli(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    const auto subs = app.get_subcommands();  // got_subcommand throws where none is so named
    if (std::any_of(subs.begin(), subs.end(),
                    [](const CLI::App* sub) { return sub->get_name() == "launch"; })) {
      // Options of the ranks' command (python3 -c ...) were taken for launch's own.
      fmt::print(stderr,
                 "tessera launch: {}: put the command the ranks run after `--` (tessera launch "
                 "--nproc-per-node 2 -- python3 -c ...)\n",
                 e.what());
      return e.get_exit_code();
    }
    return app.exit(e);
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

}  // namespace tessera::tools
