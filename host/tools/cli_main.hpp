// SPDX-License-Identifier: Apache-2.0
// The shared ending of the `tessera` and `tessera-train` mains: parse, run, and turn every
// error into one line on stderr and exit status 1.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::tools {

int run_cli(CLI::App& app, int argc, char** argv);

}  // namespace tessera::tools
