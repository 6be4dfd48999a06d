// SPDX-License-Identifier: Apache-2.0
// The on-disk partition format: the JSON config and the per-partition .npy folders, and a
// loader (memory-mapped) used by `tessera validate` and DistGraph. See docs/partition-format.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/graph/graph.hpp"
#include "tessera/graph/npy.hpp"

namespace tessera {

/// Version written in "format_version". Version 2 stores each row in the unpartitioned graph's
/// order, (original source ID, original edge ID), and numbers edges in that order; version 1
/// (still read) stored rows by (stored source ID, new edge ID).
inline constexpr int kPartitionFormatVersion = 2;
/// Oldest version read.
inline constexpr int kPartitionFormatVersionMin = 1;

/// One file of a partition folder as the config lists it.
struct PartFile {
  std::string name;  ///< relative to the partition folder, e.g. "indptr.npy"
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  DType dtype = DType::kInt64;
  std::vector<int64_t> shape;
};

/// Schema of a node or edge data array: dtype and global shape ([N or E, ...]).
struct ArraySchema {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string file;  ///< file name inside each partition folder ("node_feat.npy")
};

/// What the config says about one partition.
struct PartInfo {
  std::string dir;                             ///< folder relative to the config's folder ("part0")
  int64_t num_nodes = 0, num_inner_nodes = 0;  ///< local nodes (inner + halo), inner nodes
  int64_t num_edges = 0, num_inner_edges = 0;  ///< local edges, inner edges
  std::vector<PartFile> files;
  const PartFile* file(const std::string& name) const;
};

/// The parsed `<name>.json` config of a partitioning.
struct PartitionConfig {
  std::filesystem::path path;  ///< the config file
  std::filesystem::path dir;   ///< its folder (partition folders are relative to it)
  int format_version = kPartitionFormatVersion;
  std::string graph_name;
  int64_t num_nodes = 0, num_edges = 0;
  int64_t num_input_edges = 0;  ///< rows of the dataset's edge arrays (edata)
  int64_t num_parts = 0;
  std::string part_method;
  int halo_hops = 0;
  /// How nodes are numbered within a partition: "original" or "degree" (see NodeOrder); configs
  /// without the field are "original".
  std::string node_order = "original";
  /// True if local CSC indices are local node IDs (halo_hops >= 1); false: global new IDs.
  bool local_indices = true;
  BuildOptions build;
  std::vector<int64_t> node_offsets, edge_offsets;  ///< size P + 1 (ranges as offsets)
  std::vector<ArraySchema> ndata, edata;
  std::vector<PartInfo> parts;
  nlohmann::json json;  ///< the whole document (provenance, options, stats)
};

/// Reads and checks a config (required fields, types, contiguous ranges covering [0, N) and
/// [0, E)); throws IOError / ValueError naming the file and the field.
PartitionConfig load_partition_config(const std::filesystem::path& path);
/// Serializes a config (the inverse of load_partition_config, plus `json`'s extra fields).
nlohmann::json config_to_json(const PartitionConfig& c);
/// config_to_json as indented text with short arrays (ranges, shapes) kept on one line.
std::string config_to_string(const PartitionConfig& c);

/// One partition loaded from disk (arrays memory-mapped read-only, or read into memory).
struct LocalPartition {
  int64_t part_id = 0;
  int64_t num_inner_nodes = 0, num_inner_edges = 0;
  Array indptr, indices, eid, nid, inner_node, inner_edge, orig_nid, orig_eid;
  std::map<std::string, Array> ndata;  ///< rows of inner nodes (local IDs 0..inner-1)
  std::map<std::string, Array> edata;  ///< rows of inner edges, by global edge ID - range start
  int64_t num_nodes() const { return nid.rows(); }
  int64_t num_edges() const { return eid.rows(); }
};

/// Options of load_partition.
struct LoadOptions {
  bool mmap = true;  ///< memory-map (default) or read into memory
  /// Check every file's size and CRC-32 against the config (ValueError naming the file on a
  /// mismatch). On by default: the data is checksummed where it was loaded, so the cost is
  /// one CRC pass, not a second read.
  bool verify_checksums = true;
  /// Map node data (with `mmap`) copy-on-write and writable: writes stay in this process and
  /// never reach the file, which other processes keep reading as stored.
  bool writable_node_data = false;
};

/// "[2, 5278]" for a shape.
std::string shape_string(const std::vector<int64_t>& shape);

/// The graph arrays every partition folder holds (without features).
const std::vector<std::string>& partition_graph_files();

/// Whether `dir` is a part<N>/ folder holding nothing but regular .npy files, and whether `file`
/// is a .json that reads as a partition config (format_version, graph_name, partitions): what
/// a partitioning writes, and so what --overwrite may replace and what the trainers take for
/// another dataset's partitioning (a user's other files are not ours).
bool is_partition_folder(const std::filesystem::path& dir);
bool is_partition_config(const std::filesystem::path& file);

/// A file of a partition folder as the config's counts and schema imply it.
struct ExpectedFile {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

/// Every file partition `p` holds: the graph arrays (dtype and shape from the partition's
/// counts), then the node and edge data of the schema (their dtype, the trailing dimensions of
/// their shape, and the partition's inner node or edge count as rows).
std::vector<ExpectedFile> expected_partition_files(const PartitionConfig& c, int64_t p);

/// Loads partition `p`; throws IOError for a missing file, ValueError for a size or checksum
/// mismatch, a wrong dtype or shape, or a file the config lists otherwise than its counts and
/// schema imply (expected_partition_files), naming the partition and file.
LocalPartition load_partition(const PartitionConfig& c, int64_t p, const LoadOptions& opts = {});

}  // namespace tessera
