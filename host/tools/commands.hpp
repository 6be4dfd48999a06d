// SPDX-License-Identifier: Apache-2.0
// Subcommands of the `tessera` command line. Each file registers one subcommand; `tessera
// bench` comes from the benchmark harness (benchmarks/harness/bench_commands.hpp).
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::tools {

void register_info(CLI::App& app);
void register_partition(CLI::App& app);
void register_generate(CLI::App& app);
void register_validate(CLI::App& app);
void register_launch(CLI::App& app);
/// `tessera train` (cmd_train.cpp): the libtorch trainer of host/train.
void register_train(CLI::App& app);

}  // namespace tessera::tools
