// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the `tessera bench` subcommands: provenance of a result (machine, commit)
// and small parsing/statistics utilities.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tessera/core/progress.hpp"
#include "tessera/ops/block.hpp"

namespace tessera::tools {

/// "tessera bench <name> --opt value ..." with the options given on `cmd`'s command line (as
/// results record the command that made them).
std::string given_command(const CLI::App& cmd);

/// ValueError naming the options among `names` given on `cmd`'s command line, when `device`
/// is not `only_on`: they tune the `only_on` run only, and another run would ignore them
/// silently.
void refuse_options_of_device(const CLI::App& cmd, const std::string& device,
                              const std::string& only_on, const std::vector<std::string>& names);

/// Runs a shell command and returns its stdout without the trailing newline ("" on failure).
std::string run_capture(const std::string& cmd);
/// The machine a result was measured on: hostname, hardware threads, CPU model, memory,
/// kernel, load average.
nlohmann::json machine_json();
/// Median (upper median for even sizes); 0 for an empty vector.
double median(std::vector<double> v);
/// Parses a size list for `flag`: "128..4096" (doubling), "128,256,1000" or "512"; every item
/// a positive integer. Throws ValueError naming the flag and the bad item.
std::vector<int64_t> parse_size_list(const std::string& s, const std::string& flag);

/// The phases of a PhaseTimer as a JSON array of {name, seconds, peak_rss}.
nlohmann::json phases_json(const PhaseTimer& timer);
/// Writes `j` (indented) to `path` through a temporary file renamed into place, so a failed
/// write leaves no half-written report; prints "wrote PATH". Throws IOError naming the path.
void write_json_report(const std::string& path, const nlohmann::json& j);

/// Checks, before a benchmark runs, that its --json file and --results folder (either may be
/// empty: not asked for) can be written (check_output_path): a bad path fails at once instead
/// of after the whole run.
void check_report_paths(const std::string& json, const std::string& results);

/// A digest of sampled blocks (FNV-1a 64 over every batch's blocks in order: num_dst, the
/// sizes, src_nodes, src, dst, eids), as 16 hex digits: equal digests mean bit-identical blocks,
/// so runs with other thread counts or devices can be compared from their JSON.
std::string blocks_digest(const std::vector<std::vector<ops::Block>>& batches);

/// A name for this machine in result file names: the first CUDA device's name when `gpu`
/// ("NVIDIA-H200"), else the host name; letters, digits and '-' only.
std::string machine_tag(bool gpu);
/// The configuration part of a sampling result's folder name: "" for the reference
/// configuration (graph rmat:21,25, fanouts 15,10,5, batch 1024, uniform, without replacement,
/// stored node order), else one "-<what>" per setting that differs, in this order: -weighted,
/// -replace, -degree, -fanouts-10-25, -batch-512, -<graph> (the graph's file name or spec in
/// tag characters, e.g. -rmat21 for /tmp/rmat21), then "-<flag>" for each of `flags` (the
/// switches given away from their defaults, e.g. no-symmetrize, stage-bytes-512). So each
/// configuration keeps its own folder.
std::string sample_config_tag(const std::string& graph, const std::vector<int64_t>& fanouts,
                              int64_t batch_size, bool weighted, bool replace,
                              const std::string& order, const std::vector<std::string>& flags = {});
/// `dir`/`bench`/<YYYY-MM-DD>-<commit>-<machine>.json (UTC date, source_commit() with '+' as '-'),
/// creating `dir`/`bench`: where results live (benchmarks/results/<bench>/).
std::string result_path(const std::string& dir, const std::string& bench,
                        const std::string& machine);

}  // namespace tessera::tools
