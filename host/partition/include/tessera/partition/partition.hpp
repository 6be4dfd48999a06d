// SPDX-License-Identifier: Apache-2.0
// Graph partitioning: METIS k-way or random node assignment, ID relabelling so every partition
// owns one contiguous node and edge ID range, halo (ghost) nodes, and writing the on-disk format
// (docs/partition-format.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/graph/graph.hpp"

namespace tessera {

/// How nodes are assigned to partitions.
enum class PartMethod { kMetis, kRandom };
/// Parses "metis" or "random"; throws ValueError otherwise.
PartMethod parse_part_method(const std::string& s);
const char* part_method_name(PartMethod m);

/// How nodes are numbered within a partition: kOriginal keeps the input's relative order;
/// kDegree puts them by in-degree, highest first (ties by original ID), so the hubs that
/// neighbor sampling visits in almost every batch share the cache lines of every per-node array.
enum class NodeOrder { kOriginal, kDegree };
/// Parses "original" or "degree"; throws ValueError otherwise.
NodeOrder parse_node_order(const std::string& s);
const char* node_order_name(NodeOrder o);

/// The largest METIS imbalance tolerance PartitionOptions::ufactor accepts (in 1/1000: a part may
/// hold 101 times its share).
constexpr int kMaxUfactor = 100000;

/// Options of a partitioning run.
struct PartitionOptions {
  int64_t num_parts = 1;
  PartMethod method = PartMethod::kMetis;
  /// Node masks (ndata names) to balance across partitions, one METIS constraint each, like
  /// DGL's balance_ntypes; nodes in none of them form one more constraint. "name:c" picks
  /// column c of an [N, S] mask (several fixed splits); a bare name of an [N, S] mask uses
  /// column 0.
  std::vector<std::string> balance_masks;
  /// Node sets to balance that no node array holds (Python's balance_ntypes arrays): a name
  /// for the config and the summary, and one entry per node (non-zero: in the set). One METIS
  /// constraint each, after balance_masks and counted with them for the "in none" constraint;
  /// never written with the partitions.
  std::vector<std::pair<std::string, std::vector<uint8_t>>> balance_sets;
  /// Balance in-edges too (DGL's balance_edges): in-degree becomes one more vertex-weight
  /// constraint.
  bool balance_edges = false;
  /// Hops of in-neighborhood stored as halo nodes (0: none).
  int halo_hops = 1;
  /// Numbering of the nodes within each partition. Degree order by default: the hubs that
  /// neighbor sampling visits in almost every batch then share the cache lines of every
  /// per-node array (indptr, compaction tags, features). The committed CPU sampling runs do
  /// not show it faster than the input's order (docs/sampling.md).
  NodeOrder node_order = NodeOrder::kDegree;
  /// METIS: its RNG seed (-1: METIS's default, which is what Debian's gpmetis uses).
  /// random: the shuffle seed (-1 means 0).
  int64_t seed = -1;
  /// METIS load-imbalance tolerance in 1/1000 (-1: METIS's default, 30 for k-way); otherwise in
  /// [1, kMaxUfactor] (assign_parts refuses other values).
  int ufactor = -1;
  /// METIS: park the CSC's indices and edge IDs in a temporary file beside the output folder while
  /// METIS runs (it reads only its own 32-bit copy of the adjacency), so the peak is lower by
  /// 16 bytes per stored edge, for one write and one read of that much (the `Dataset&` overload
  /// reads it once more at the end, to hand the dataset back as it was). Needs the mutable
  /// partition_dataset overload; nothing may point into the graph's arrays meanwhile. (glibc
  /// keeps freed blocks resident above a threshold it raises as large blocks are freed;
  /// `tessera partition --low-memory` also pins that threshold with mallopt for the lowest peak.)
  bool low_memory = false;
};

/// The partition of every node (before relabelling), plus what the partitioner reported.
struct Assignment {
  int64_t num_parts = 0;
  std::vector<int32_t> part;  ///< size N, values in [0, num_parts)
  /// Edge cut METIS reported (-1 when METIS did not run).
  int64_t metis_objval = -1;
  /// Entries of the symmetric adjacency METIS partitioned (2x undirected edges; -1 if none).
  int64_t metis_adj_entries = -1;
  /// Names of the balance constraints METIS used (empty: node count only).
  std::vector<std::string> constraints;
  /// Non-fatal notes for the user (fallbacks, empty partitions).
  std::vector<std::string> warnings;
};

/// Symmetric adjacency in METIS's CSR form (32-bit idx_t): no self loops, no duplicates.
/// Row v holds every u with an edge u->v or v->u in the input: in-neighbors first in edge-ID
/// order (a METIS .graph file's own line order), then the remaining out-neighbors.
struct SymAdjacency {
  std::vector<int32_t> xadj;    ///< size N + 1
  std::vector<int32_t> adjncy;  ///< size xadj[N] (twice the undirected edge count)
};

/// Throws ValueError (suggesting --method random) unless `num_nodes` and `adj_entries`
/// (directed adjacency entries, i.e. 2x undirected edges) fit METIS's 32-bit idx_t.
void check_metis_limits(int64_t num_nodes, int64_t adj_entries);

/// Builds the METIS adjacency of a CSC graph whatever its directedness; throws ValueError via
/// check_metis_limits if it does not fit 32-bit indices.
SymAdjacency symmetric_adjacency(const Graph& csc);

/// Edge cut of an assignment in METIS's sense: undirected pairs {u, v}, u != v, with an edge
/// in either direction and endpoints in different partitions.
int64_t symmetric_edge_cut(const Graph& csc, const std::vector<int32_t>& part);
/// The METIS-sense cut and the number of undirected pairs it is out of, in one pass.
struct SymmetricCut {
  int64_t cut = 0, undirected_edges = 0;
};
SymmetricCut symmetric_cut(const Graph& csc, const std::vector<int32_t>& part);
/// Stored (directed) edges whose source and destination are in different partitions.
int64_t directed_edge_cut(const Graph& csc, const std::vector<int32_t>& part);

/// METIS vertex weights for the balance constraints of `opts` (balance_masks, balance_sets,
/// then balance_edges), row-major [N, ncon]; `names` receives the constraint names. Without
/// any of them, the dataset's own vertex weights (ndata "node_weight", e.g. from a METIS .graph
/// file) are used, as gpmetis would. Constraints with zero total weight are dropped (METIS
/// cannot balance them). Returns an empty vector (ncon = 1, node count) when nothing is
/// balanced.
std::vector<int32_t> balance_weights(const Dataset& ds, const PartitionOptions& opts,
                                     std::vector<std::string>* names);

/// Throws ValueError naming the option (as `tessera partition` spells it) when an option of
/// `opts` is out of range: parts, halo hops, ufactor, seed. assign_parts calls it; callers may
/// call it before reading a graph to fail fast.
void check_partition_options(const PartitionOptions& opts);

/// Seeded random assignment with balanced sizes (sizes differ by at most 1). Deterministic
/// across platforms (own shuffle, no std distributions).
Assignment assign_random(int64_t num_nodes, int64_t num_parts, uint64_t seed);
/// METIS k-way on the symmetric adjacency of `csc` with vertex weights `vwgt` ([N, ncon], may
/// be empty). num_parts = 1 skips METIS; num_parts >= N puts node v in part v (warning);
/// partitions METIS leaves empty are reported as warnings. With `timer`, a "METIS" phase begins
/// after the adjacency is built, so the caller can time METIS's own work apart.
Assignment assign_metis(const Graph& csc, int64_t num_parts, const std::vector<int32_t>& vwgt,
                        int ncon, const PartitionOptions& opts, PhaseTimer* timer = nullptr);
/// Validates `opts` against the dataset and runs the chosen method.
Assignment assign_parts(const Dataset& ds, const PartitionOptions& opts);

/// The graph relabelled: partition p owns new node IDs [node_offsets[p], node_offsets[p+1])
/// (within a partition in the original relative order, or by `order`) and new edge IDs
/// [edge_offsets[p], edge_offsets[p+1]) (edges belong to the partition of their destination).
/// The new edge ID of an edge is its position in `csc`.
struct Relabelled {
  int64_t num_parts = 0;
  std::vector<int64_t> node_offsets;  ///< size P + 1
  std::vector<int64_t> edge_offsets;  ///< size P + 1
  std::vector<int64_t> orig_nid;      ///< new node ID -> original node ID
  std::vector<int64_t> new_nid;       ///< original node ID -> new node ID
  /// CSC over new node IDs; each row keeps the input's order, (original source, original edge
  /// ID), the order sampling draws from (so, unlike Graph's rule, not sorted by the new source
  /// IDs it holds); `eids` holds the original edge IDs (the Dataset's CSC edge space), i.e.
  /// orig_eid by new edge ID.
  Graph csc;
};
Relabelled relabel(const Graph& csc, const Assignment& a, NodeOrder order = NodeOrder::kOriginal);

/// One partition in memory, as written to part<p>/ (see docs/partition-format.md).
struct LocalGraph {
  int64_t part_id = 0;
  int64_t num_inner_nodes = 0, num_inner_edges = 0;
  std::vector<int64_t> indptr, indices;  ///< local CSC (indices: local IDs, or global new IDs
                                         ///< when halo_hops = 0)
  std::vector<int64_t> eid;              ///< global new edge ID per local edge
  std::vector<int64_t> nid;              ///< global new node ID per local node
  std::vector<uint8_t> inner_node, inner_edge;
  std::vector<int64_t> orig_nid, orig_eid;
};
/// Builds partition p with `halo_hops` hops of in-neighborhood.
LocalGraph build_local(const Relabelled& r, int64_t p, int halo_hops);

/// Per-partition figures of a run.
struct PartStats {
  int64_t inner_nodes = 0, inner_edges = 0, halo_nodes = 0, local_edges = 0;
  std::vector<int64_t> constraint_weights;  ///< total weight of each balance constraint
};

/// Machine-readable summary of a partitioning run.
struct PartitionStats {
  std::string graph_name, method;
  int64_t num_nodes = 0, num_edges = 0, num_parts = 0;
  int halo_hops = 0;
  std::vector<PhaseRecord> phases;
  int64_t peak_rss_bytes = 0;
  int64_t feature_bytes = 0;  ///< bytes of the input's node and edge data arrays
  int64_t edge_cut = 0;       ///< symmetric_edge_cut (comparable with gpmetis)
  int64_t cut_edges = 0;      ///< directed_edge_cut
  int64_t metis_objval = -1;
  /// Entries of the symmetric adjacency METIS partitioned (2x undirected edges; -1 if none).
  int64_t metis_adj_entries = -1;  ///< what METIS reported, -1 if it did not run
  int64_t undirected_edges = 0;  ///< edges of the symmetric simple graph (denominator of edge_cut)
  std::vector<std::string> constraints;
  std::vector<PartStats> parts;
  std::vector<std::string> warnings;
  std::filesystem::path config_path;
  /// max / mean over partitions of inner nodes, inner edges and each constraint (1.0 = perfect).
  double node_balance() const;
  double edge_balance() const;
  double constraint_balance(size_t c) const;
  nlohmann::json to_json() const;
  /// Human-readable table: nodes/edges per part, edge cut, balance.
  std::string summary() const;
};

/// Output of partition_dataset.
struct WriteOptions {
  std::filesystem::path out_dir;
  std::string name;
  bool overwrite = false;
  /// Recorded in the config as provenance ("source").
  std::string source_path;
};

/// Partitions a finalized dataset and writes `<out_dir>/<name>.json` and `<out_dir>/partN/`
/// atomically (the whole out_dir is written to a temporary sibling and renamed at the end).
/// Phases (METIS/random, relabel, halo + write) are recorded on `timer`.
PartitionStats partition_dataset(const Dataset& ds, const PartitionOptions& opts,
                                 const WriteOptions& out, PhaseTimer& timer);
/// The same, and with `opts.low_memory` the dataset's CSC is released during the METIS call and
/// read back after it (also when METIS fails): `ds` is unchanged when this returns or throws,
/// unless reading the CSC back itself fails, which leaves `ds` empty and not finalized.
PartitionStats partition_dataset(Dataset& ds, const PartitionOptions& opts, const WriteOptions& out,
                                 PhaseTimer& timer);
/// The same for a dataset the caller is done with: with `opts.low_memory` its CSC is not read
/// back at the end (one read of 16 bytes per edge less) and `ds` is left empty and not
/// finalized.
PartitionStats partition_dataset(Dataset&& ds, const PartitionOptions& opts,
                                 const WriteOptions& out, PhaseTimer& timer);

}  // namespace tessera
