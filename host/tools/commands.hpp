// Subcommands of the `tessera` command line. Each file registers one subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::tools {

void register_info(CLI::App& app);
void register_partition(CLI::App& app);
void register_generate(CLI::App& app);
void register_validate(CLI::App& app);
void register_bench(CLI::App& app);
/// `tessera bench gather` (bench_gather.cpp), added to the `bench` group by register_bench.
void register_bench_gather(CLI::App& bench);
/// `tessera bench dist-gather` (bench_dist_gather.cpp), added to the `bench` group.
void register_bench_dist_gather(CLI::App& bench);
void register_launch(CLI::App& app);
/// `tessera train` (cmd_train.cpp): the libtorch trainer of host/train.
void register_train(CLI::App& app);

}  // namespace tessera::tools
