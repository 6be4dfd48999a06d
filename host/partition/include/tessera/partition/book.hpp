// SPDX-License-Identifier: Apache-2.0
// The partition book: which partition owns a (relabelled) node or edge ID, and where.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

namespace tessera {

struct PartitionConfig;

/// Maps global (new) node and edge IDs to (partition, local offset) by binary search over the
/// contiguous ranges, O(log P). Partition p owns nodes [node_offset(p), node_offset(p+1)); the
/// local offset of an inner node is its local node ID. Immutable, cheap to copy, thread-safe.
class PartitionBook {
 public:
  PartitionBook() = default;
  /// Offsets of size P + 1, non-decreasing from 0 (empty partitions allowed).
  PartitionBook(std::vector<int64_t> node_offsets, std::vector<int64_t> edge_offsets);
  static PartitionBook from_config(const PartitionConfig& c);
  /// Reads only the JSON config (no partition files).
  static PartitionBook load(const std::filesystem::path& config_json);

  int64_t num_parts() const { return static_cast<int64_t>(node_offsets_.size()) - 1; }
  int64_t num_nodes() const { return node_offsets_.back(); }
  int64_t num_edges() const { return edge_offsets_.back(); }
  /// [start, end) of partition p's nodes / edges.
  std::pair<int64_t, int64_t> node_range(int64_t p) const;
  std::pair<int64_t, int64_t> edge_range(int64_t p) const;

  /// Owner of a node; throws IndexError outside [0, num_nodes).
  int32_t nid2part(int64_t nid) const;
  /// (owner, offset within the owner's range).
  std::pair<int32_t, int64_t> nid2local(int64_t nid) const;
  int32_t eid2part(int64_t eid) const;
  std::pair<int32_t, int64_t> eid2local(int64_t eid) const;
  /// Batched nid2part: out[i] = owner of ids[i].
  void nid2part(const int64_t* ids, int64_t n, int32_t* out) const;

  const std::vector<int64_t>& node_offsets() const { return node_offsets_; }
  const std::vector<int64_t>& edge_offsets() const { return edge_offsets_; }

 private:
  std::vector<int64_t> node_offsets_{0}, edge_offsets_{0};
};

}  // namespace tessera
