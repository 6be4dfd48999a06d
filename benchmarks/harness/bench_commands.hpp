// SPDX-License-Identifier: Apache-2.0
// The `tessera bench` commands: the benchmark harness registers them on the `tessera` tool.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::tools {

/// `tessera bench` with its subcommands sample, gather, dist-gather and update-all.
void register_bench(CLI::App& app);
/// `tessera bench gather` (bench_gather.cpp), added to the `bench` group by register_bench.
void register_bench_gather(CLI::App& bench);
/// `tessera bench dist-gather` (bench_dist_gather.cpp), added to the `bench` group.
void register_bench_dist_gather(CLI::App& bench);
/// `tessera bench update-all` (bench_update_all.cpp), added to the `bench` group.
void register_bench_update_all(CLI::App& bench);

}  // namespace tessera::tools
