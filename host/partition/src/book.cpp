// SPDX-License-Identifier: Apache-2.0
#include "tessera/partition/book.hpp"

#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/partition/format.hpp"

namespace tessera {

namespace {

void check_offsets(const std::vector<int64_t>& off, const char* what) {
  TESSERA_EXPECTS(off.size() >= 2, ValueError, "partition book: {} offsets need at least 2 entries",
                  what);
  TESSERA_EXPECTS(off[0] == 0, ValueError, "partition book: {} offsets start at {}, not 0", what,
                  off[0]);
  for (size_t p = 0; p + 1 < off.size(); ++p) {
    TESSERA_EXPECTS(off[p] <= off[p + 1], ValueError,
                    "partition book: {} offsets decrease at partition {} ({} > {})", what, p,
                    off[p], off[p + 1]);
  }
}

// The partition p with off[p] <= id < off[p+1]: the last offset <= id; empty partitions have
// off[p] == off[p+1] and are skipped by upper_bound.
int32_t find(const std::vector<int64_t>& off, int64_t id, const char* what) {
  TESSERA_EXPECTS(id >= 0 && id < off.back(), IndexError, "{} ID {} outside [0, {})", what, id,
                  off.back());
  return static_cast<int32_t>(std::upper_bound(off.begin(), off.end(), id) - off.begin() - 1);
}

}  // namespace

PartitionBook::PartitionBook(std::vector<int64_t> node_offsets, std::vector<int64_t> edge_offsets)
    : node_offsets_(std::move(node_offsets)), edge_offsets_(std::move(edge_offsets)) {
  check_offsets(node_offsets_, "node");
  check_offsets(edge_offsets_, "edge");
  TESSERA_EXPECTS(node_offsets_.size() == edge_offsets_.size(), ValueError,
                  "partition book: {} node ranges but {} edge ranges", node_offsets_.size() - 1,
                  edge_offsets_.size() - 1);
}

PartitionBook PartitionBook::from_config(const PartitionConfig& c) {
  return PartitionBook(c.node_offsets, c.edge_offsets);
}

PartitionBook PartitionBook::load(const std::filesystem::path& config_json) {
  return from_config(load_partition_config(config_json));
}

std::pair<int64_t, int64_t> PartitionBook::node_range(int64_t p) const {
  TESSERA_EXPECTS(p >= 0 && p < num_parts(), IndexError, "partition {} outside [0, {})", p,
                  num_parts());
  return {node_offsets_[p], node_offsets_[p + 1]};
}

std::pair<int64_t, int64_t> PartitionBook::edge_range(int64_t p) const {
  TESSERA_EXPECTS(p >= 0 && p < num_parts(), IndexError, "partition {} outside [0, {})", p,
                  num_parts());
  return {edge_offsets_[p], edge_offsets_[p + 1]};
}

int32_t PartitionBook::nid2part(int64_t nid) const {
  return find(node_offsets_, nid, "node");
}

std::pair<int32_t, int64_t> PartitionBook::nid2local(int64_t nid) const {
  const int32_t p = find(node_offsets_, nid, "node");
  return {p, nid - node_offsets_[p]};
}

int32_t PartitionBook::eid2part(int64_t eid) const {
  return find(edge_offsets_, eid, "edge");
}

std::pair<int32_t, int64_t> PartitionBook::eid2local(int64_t eid) const {
  const int32_t p = find(edge_offsets_, eid, "edge");
  return {p, eid - edge_offsets_[p]};
}

void PartitionBook::nid2part(const int64_t* ids, int64_t n, int32_t* out) const {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = find(node_offsets_, ids[i], "node");
  }
}

}  // namespace tessera
