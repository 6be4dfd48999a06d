// SPDX-License-Identifier: Apache-2.0
// `tessera validate`: check a partitioning against the partition contracts.
#include <fmt/format.h>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/validate.hpp"

namespace tessera::tools {

namespace {

struct ValidateArgs {
  std::string config, dataset, format = "auto";
  bool no_checksums = false, quiet = false;
  int64_t max_errors = 50;
};

}  // namespace

void register_validate(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Check a partitioning (every contract and checksum); exit 0 if valid, 2 on violations");
  cmd->add_option("config", args->config, "The partition config <out>/<name>.json")->required();
  cmd->add_option("--dataset", args->dataset,
                  "The original dataset: also check structure, features and labels against it");
  cmd->add_option("--format", args->format, "Format of --dataset")
      ->check(CLI::IsMember({"auto", "npy", "ogb", "snap", "metis", "mtx"}));
  cmd->add_flag("--no-checksums", args->no_checksums,
                "Skip the CRC32 checks (sizes still checked)");
  cmd->add_option("--max-errors", args->max_errors, "Violations to print")->capture_default_str();
  cmd->add_flag("--quiet,-q", args->quiet, "No progress on stderr");
  cmd->callback([args] {
    set_quiet(args->quiet);
    std::unique_ptr<Dataset> ds;
    if (!args->dataset.empty()) {
      // The dataset is rebuilt with the build options the partitioning used.
      const PartitionConfig c = load_partition_config(args->config);
      ReadOptions ro;
      ro.build = c.build;
      ds = std::make_unique<Dataset>(read_dataset(args->dataset, parse_format(args->format), ro));
    }
    ValidateOptions vo;
    vo.verify_checksums = !args->no_checksums;
    TESSERA_EXPECTS(args->max_errors >= 0, ValueError, "--max-errors must be >= 0, got {}",
                    args->max_errors);
    vo.max_errors = args->max_errors;
    const ValidationReport r = validate_partitions(args->config, ds.get(), vo);
    if (r.ok()) {
      fmt::print("OK {}", r.summary);
      return;
    }
    fmt::print(stderr, "INVALID: {} violation(s) in {}\n", r.num_errors, args->config);
    for (const auto& e : r.errors) {
      fmt::print(stderr, "  {}\n", e);
    }
    if (r.num_errors > static_cast<int64_t>(r.errors.size())) {
      fmt::print(stderr, "  ... and {} more\n",
                 r.num_errors - static_cast<int64_t>(r.errors.size()));
    }
    throw CLI::RuntimeError(2);
  });
}

}  // namespace tessera::tools
