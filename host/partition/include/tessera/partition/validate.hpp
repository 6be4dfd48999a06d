// SPDX-License-Identifier: Apache-2.0
// Checks a written partitioning against every partition contract of docs/design.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera {

struct Dataset;

/// Outcome of validate_partitions: the violations found (empty when valid) and a summary.
struct ValidationReport {
  std::vector<std::string> errors;  ///< each names the partition, file and field
  int64_t num_errors = 0;           ///< all violations, including those not kept in `errors`
  std::string summary;              ///< one line per partition plus totals
  bool ok() const { return num_errors == 0; }
};

/// Options of validate_partitions.
struct ValidateOptions {
  bool verify_checksums = true;
  /// Violations kept in the report (more are counted only).
  int64_t max_errors = 50;
};

/// Validates the partitioning described by `config_json`: config consistency; every file
/// present with the listed size, checksum, dtype and shape; every node owned exactly once
/// and owned IDs forming node_ranges; every edge stored exactly once as an inner edge in the
/// partition of its destination; orig_nid/orig_eid bijections; halo nodes exactly the k-hop
/// in-neighbors not owned (and halo edges exactly those needed); with `original` (read with
/// the config's build options), that structure, features and labels moved with their nodes
/// and edges. An unreadable config throws IOError/ValueError; violations go in the report.
ValidationReport validate_partitions(const std::filesystem::path& config_json,
                                     const Dataset* original = nullptr,
                                     const ValidateOptions& opts = {});

}  // namespace tessera
