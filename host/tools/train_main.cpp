// SPDX-License-Identifier: Apache-2.0
// `tessera-train`: the libtorch trainer, run by `tessera train` (the same arguments), a separate
// executable so that only training loads libtorch.
#include <cstdio>
#include <exception>

#include "cli_main.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  try {
    // Named as the user called it (tessera train), not by this executable's path.
    CLI::App app{"Tessera: the libtorch trainer (run as tessera train)", "tessera"};
    app.require_subcommand(1);
    tessera::tools::register_train(app);
    return tessera::tools::run_cli(app, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
}
