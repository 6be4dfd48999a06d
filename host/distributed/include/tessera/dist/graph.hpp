// SPDX-License-Identifier: Apache-2.0
// DistGraph: this rank's partition of a partitioned graph, its node and edge data as
// DistTensors, the partition book and the global counts (DGL's dgl.distributed.DistGraph);
// node_split / edge_split.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dist/tensor.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/partition/book.hpp"
#include "tessera/partition/format.hpp"

namespace tessera::dist {

namespace detail {
struct GraphState;
}

/// Options of DistGraph.
struct DistGraphOptions {
  /// Check every file of this rank's partition against the size and CRC-32 the config lists
  /// (a corrupt file is a ValueError naming it). On by default; its cost is a CRC pass over
  /// data that loading reads anyway (docs/partition-format.md). Stored IDs are range-checked
  /// whatever this says.
  bool verify_checksums = true;
};

/// One rank's view of a partitioned graph. Rank r loads partition r (memory-mapped), so the
/// partitioning must have exactly world_size partitions; a world of one process loads the only
/// partition of a 1-part config (standalone mode, no code change). Several trainers per machine
/// (DGL's num_trainers_per_machine): a world of M * T ranks over an M-part partitioning runs T
/// trainers per machine, rank r on machine r / T (local rank r % T). The machine's T trainers
/// share its partition: the node and edge data live in one POSIX shared-memory segment per
/// machine that each trainer maps (each fills its own rows once), and the machine's node range
/// is cut into T contiguous ranges, one per trainer, that route reads, writes and sampling (each
/// trainer keeps the sampling structure of its range only). Reads of rows of the machine's other
/// trainers are copies from the shared segment. The segment's name is unlinked once every
/// trainer of the machine has mapped it, so nothing outlives the job, even a killed one. Creation
/// is collective: the ranks compare their configs (graph name, partition count, node and edge
/// ranges, and the checksums of every partition's files) and all refuse, naming the differing rank
/// and field, when one was given a config of another partitioning.
///
/// IDs: everything a DistGraph takes and returns uses the relabelled global IDs of the
/// partitioning ("new" IDs; docs/partition-format.md). orig_nid() / orig_eid() map them back,
/// new_nid() maps original node IDs to new ones. Sampling keys by the *original* node ID (see
/// sampling.hpp).
class DistGraph {
 public:
  /// Collective. `graph_name` must be the config's graph_name.
  DistGraph(const std::shared_ptr<Runtime>& rt, const std::string& graph_name,
            const std::filesystem::path& part_config, const DistGraphOptions& opts = {});
  ~DistGraph();
  DistGraph(const DistGraph&) = delete;
  DistGraph& operator=(const DistGraph&) = delete;

  const std::string& graph_name() const;
  int64_t num_nodes() const;
  int64_t num_edges() const;
  /// One partition per rank (routes reads and sampling): the config's book with one trainer per
  /// machine, else each machine's ranges cut into trainers_per_machine() ranges.
  const PartitionBook& book() const;
  /// The config's book: one partition per machine.
  const PartitionBook& machine_book() const;
  /// T of a world of M * T ranks over M partitions (1: one partition per rank).
  int trainers_per_machine() const;
  /// The machine (= partition) this rank serves: rank / trainers_per_machine().
  int machine() const;
  /// Bytes of the machine's shared-memory segment (0 with one trainer per machine).
  int64_t shared_bytes() const;
  const PartitionConfig& config() const;
  /// This rank's partition (arrays memory-mapped).
  const LocalPartition& local_partition() const;
  int64_t part_id() const;
  /// [first, second): the node / edge IDs this rank owns (with several trainers per machine, its
  /// part of the machine's range).
  std::pair<int64_t, int64_t> local_node_range() const;
  std::pair<int64_t, int64_t> local_edge_range() const;
  /// Node data ("feat", "label", "train_mask", ...) as DistTensors over the node policy,
  /// named "<graph>@<id>:node:<name>" (<id>: CRC32 of the partitioning's file checksums); edge
  /// data over the edge policy ("<graph>@<id>:edge:<name>").
  const std::map<std::string, DistTensor>& ndata() const;
  const std::map<std::string, DistTensor>& edata() const;
  /// ndata().at(name) with a ValueError listing the names when absent.
  const DistTensor& node_data(const std::string& name) const;
  const DistTensor& edge_data(const std::string& name) const;
  /// The original node ID of every node, as a DistTensor (int64, [num_nodes]).
  const DistTensor& orig_nid() const;
  /// The original edge ID (the input's CSC edge space, docs/partition-format.md) of every edge:
  /// int64 [num_edges] over the edge policy, "<graph>:orig_eid".
  const DistTensor& orig_eid() const;
  /// (src, dst) of every edge in new node IDs: int64 [num_edges, 2] over the edge policy,
  /// "<graph>:edge:_endpoints" (the owner of an edge is the owner of its destination and fills
  /// it from its partition's inner edges at load). Not in edata().
  const DistTensor& edge_endpoints() const;
  /// The inverse of orig_nid: row o holds the new ID of original node o. int64 [num_nodes]
  /// over PartPolicy::even (rows are original IDs), "<graph>:new_nid"; filled at load by one
  /// write per rank of its own nodes.
  const DistTensor& new_nid() const;
  const std::shared_ptr<Runtime>& runtime() const;

  detail::GraphState& state() const { return *st_; }

 private:
  std::unique_ptr<detail::GraphState> st_;
};

/// DGL's node_split over a node mask DistTensor (e.g. g.ndata()["train_mask"]; 1-D, or 2-D with
/// `column` picking one split; any dtype, nonzero = selected). Collective when force_even.
/// force_even: the selected IDs in increasing order are cut into world_size consecutive chunks
/// whose sizes differ by at most one (the first `count % world` ranks get one more), so every
/// rank gets (almost) the same number of batches and nobody leaves the gradient all-reduce early;
/// with several trainers per machine (T: the graph's, for a graph's data, else
/// `trainers_per_machine`), a machine's T chunks together are dealt to its trainers in turn (the
/// i-th selected ID of the machine to trainer i mod T; the same sizes), as DGL spreads a
/// machine's chunk over its trainers at random: consecutive chunks gave the first trainer the
/// machine's highest-degree nodes, numbered first, and the most sampling per step. With one
/// trainer per machine and range partitioning most of a rank's chunk is its own. Otherwise: the
/// selected IDs this rank owns; with several trainers per machine, the selected IDs of the
/// machine dealt to its trainers in turn the same way (sizes differing by at most one, DGL's
/// _split_local cuts them by count instead): read from the machine's shared rows for a graph's
/// data, else (a tensor whose trainers hold their own ranges) gathered from the machine's
/// trainers when `trainers_per_machine` > 1 is given (then collective too; the world is
/// machines x trainers_per_machine ranks, a machine's trainers consecutive). Returns sorted
/// global IDs.
std::vector<int64_t> node_split(const DistTensor& mask, bool force_even = true, int64_t column = 0,
                                int trainers_per_machine = 0);
/// The same over an edge mask DistTensor (edge policy).
std::vector<int64_t> edge_split(const DistTensor& mask, bool force_even = true, int64_t column = 0,
                                int trainers_per_machine = 0);
/// Host variants over a global mask Array ([num_nodes] or [num_nodes, S]) and a partition book,
/// for rank `rank` of `book.num_parts()` ranks, `trainers_per_machine` consecutive ranks a machine
/// (force_even deals a machine's chunks as above); not collective.
std::vector<int64_t> node_split(const Array& mask, const PartitionBook& book, int rank,
                                bool force_even = true, int64_t column = 0,
                                int trainers_per_machine = 1);
std::vector<int64_t> edge_split(const Array& mask, const PartitionBook& book, int rank,
                                bool force_even = true, int64_t column = 0,
                                int trainers_per_machine = 1);

}  // namespace tessera::dist
