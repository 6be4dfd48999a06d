// SPDX-License-Identifier: Apache-2.0
// A graph prepared once for neighbor sampling. Every sampling entry point (sample_neighbors,
// NeighborSampler and the loaders over it, Python, `tessera bench sample`) samples through one,
// so they all take the same path; where its arrays live picks the twin that samples it.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cuda/placement.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/span.hpp"

namespace tessera::ops {

class CompactWorkspace;
class DeviceGraph;

/// A compressed graph's arrays as the samplers read them, borrowed: whoever builds one keeps the
/// arrays alive and unchanged while it is used. A Graph converts to it; a caller with arrays of
/// its own (a DistGraph sampling its memory-mapped partition files in place) fills one in.
struct GraphArrays {
  int64_t num_nodes = 0;  ///< rows
  int64_t num_edges = 0;
  const int64_t* indptr = nullptr;   ///< num_nodes + 1 offsets, from 0 to num_edges
  const int64_t* indices = nullptr;  ///< num_edges neighbor IDs
  const int64_t* eids = nullptr;     ///< num_edges edge IDs, or null: the identity 0..E-1
  /// The node whose random draws row v takes (its Philox node, docs/sampling.md), or null: node
  /// v. A graph that stores some nodes' rows under row numbers of its own (a partition's rows,
  /// numbered locally) names each row's node here, and so samples it exactly as the whole graph
  /// samples that node. Sampled edges carry the row number as given, not the key. Neighbor IDs
  /// need not be row numbers (nor below num_nodes), so such arrays are sampled one layer at a
  /// time (sample_neighbors); NeighborSampler, which compacts over rows, refuses them.
  const int64_t* row_keys = nullptr;

  GraphArrays() = default;
  GraphArrays(const Graph& g);  // NOLINT(google-explicit-constructor): a Graph is its arrays

  int64_t eid(int64_t k) const { return eids ? eids[k] : k; }
  int64_t row_key(int64_t v) const { return row_keys ? row_keys[v] : v; }
};

/// What a SamplingGraph prepares.
struct SamplingGraphOptions {
  /// Edge weights in storage order (weights[k] belongs to graph.indices[k]; see
  /// weights_in_storage_order), float32, finite, >= 0. Empty: the graph is sampled uniformly.
  /// Not owned (SamplingGraph has a constructor that keeps a vector of them).
  Span<const float> weights;
  /// kCpu: the CPU layouts below, sampled by the CPU twins. kCuda: the graph (and weights) placed
  /// once on the calling thread's CUDA device, in `placement`, sampled by the CUDA twins
  /// (NotCompiledError in a CPU-only build).
  Device device = Device::kCpu;
  /// With kCuda: kGpu (HBM) or kPinnedHost (pinned host memory read through UVA).
  cuda::Placement placement = cuda::Placement::kGpu;
  /// CPU: keep a copy of the adjacency with each edge's neighbor and edge ID side by side, so a
  /// sampled edge costs one cache miss instead of two: packed into 8 bytes (edge ID << 32 |
  /// neighbor) when every node and edge ID is below 2^32, else 16-byte pairs. Off: sample
  /// indices / eids as stored (for layout comparisons). The samples are the same either way.
  bool interleave = true;
  /// With interleave: pack into 8 bytes when the IDs fit (false keeps the 16-byte pairs; for
  /// comparisons).
  bool packed = true;
  /// CPU, weighted: keep per-row prefix sums of the weights (8 bytes per edge), so a weighted
  /// row costs O(fanout log degree) instead of O(degree). The samples are the same either way.
  bool weight_prefix = true;
  /// Check every weight now (O(E); always done with weight_prefix); false checks each weight as a
  /// sample reads it (one-off calls, see as_stored).
  bool check_weights = true;

  /// Nothing prepared and nothing read in advance: sample `graph` as stored (O(1) to build), the
  /// weights checked as they are read. What a one-off sample_neighbors(Graph, ...) call uses.
  static SamplingGraphOptions as_stored(Span<const float> weights = {});
};

/// A graph (CSC for in-edge sampling, CSR for out-edge sampling) with what the samplers read,
/// prepared once: on the CPU an interleaved copy of the adjacency, per-row prefix sums of the
/// weights and a pool of compaction workspaces over its nodes; on a GPU the placed DeviceGraph.
/// Holds a reference to `graph`, which must outlive it and stay unchanged. Immutable after
/// construction; const methods are thread-safe. Movable, not copyable. It may also be built over
/// borrowed GraphArrays (CPU only, nothing copied: see that constructor).
class SamplingGraph {
  struct Pool;

 public:
  /// Validates the structure (indptr of num_nodes + 1 entries, fewer than 2^48 nodes: the
  /// Philox key layout) and the weights (one per stored edge; each finite and >= 0 unless
  /// opts.check_weights is off), ValueError naming the field and value, then prepares what
  /// `opts` asks for.
  explicit SamplingGraph(const Graph& graph, SamplingGraphOptions opts = {});
  /// The same with `weights` (storage order) kept by the SamplingGraph itself; opts.weights must
  /// be empty.
  SamplingGraph(const Graph& graph, std::vector<float> weights, SamplingGraphOptions opts = {});
  /// Over borrowed arrays, which must outlive it and stay unchanged: the same checks (each row
  /// key too, when given, in [0, 2^48)), then what `opts` asks for. CPU only (opts.device kCuda
  /// is a ValueError: a DeviceGraph places arrays itself). graph() is not available.
  SamplingGraph(const GraphArrays& arrays, SamplingGraphOptions opts);
  /// sample_neighbors of a graph as stored (SamplingGraphOptions::as_stored).
  static SamplingGraph as_stored(const Graph& graph, Span<const float> weights = {});
  ~SamplingGraph();
  SamplingGraph(SamplingGraph&&) noexcept;
  SamplingGraph& operator=(SamplingGraph&&) noexcept;
  SamplingGraph(const SamplingGraph&) = delete;
  SamplingGraph& operator=(const SamplingGraph&) = delete;

  /// The Graph it was built from (ValueError when built over borrowed arrays).
  const Graph& graph() const;
  /// The arrays the samplers read (those of graph(), or the borrowed ones).
  const GraphArrays& arrays() const { return arrays_; }
  /// Whether it was built over borrowed arrays (then it has no graph()).
  bool borrowed() const { return graph_ == nullptr; }
  int64_t num_nodes() const { return arrays_.num_nodes; }
  int64_t num_edges() const { return arrays_.num_edges; }
  /// Where the sampling arrays live, and so which twin samples: kCpu or kCuda.
  Device device() const { return device_; }
  const SamplingGraphOptions& options() const { return opts_; }

  bool weighted() const { return weighted_; }
  /// Storage-order weights (host memory; empty when uniform).
  Span<const float> weights() const { return weights_; }
  /// Whether every weight was checked when the graph was prepared (else each is checked as it
  /// is read).
  bool weights_checked() const { return weights_checked_; }
  /// Per-row inclusive prefix sums of the weights in double (weight_prefix_sums), or empty.
  Span<const double> weight_prefix() const { return prefix_; }
  /// The interleaved adjacency: packed (edge ID << 32 | neighbor, one word per edge) or pairs
  /// ((neighbor, edge ID), two words per edge); at most one is non-empty.
  Span<const uint64_t> adjacency_packed() const { return packed_; }
  Span<const int64_t> adjacency_pairs() const { return pairs_; }
  /// Bytes per edge of the interleaved copy the CPU sampler reads: 8, 16, or 0 (none).
  int adjacency_copy_bytes_per_edge() const {
    return !packed_.empty() ? 8 : !pairs_.empty() ? 16 : 0;
  }
  /// The placed graph when device() is kCuda, else null.
  const DeviceGraph* device_graph() const { return device_graph_.get(); }
  /// Host bytes this object holds beyond the Graph (layouts, owned weights; not workspaces).
  size_t prepared_bytes() const;

  /// Compaction scratch for one call, lent from a pool kept with the graph: a direct-mapped
  /// table over the graph's nodes (4 bytes per node, for graphs of up to 2^25 nodes) that a
  /// sampling call compacts its blocks over. The pool holds one workspace per caller that ever
  /// sampled at the same time as others; they are reused by later calls. Thread-safe.
  class WorkspaceLease {
   public:
    WorkspaceLease(WorkspaceLease&& o) noexcept;
    WorkspaceLease& operator=(WorkspaceLease&&) = delete;
    WorkspaceLease(const WorkspaceLease&) = delete;
    WorkspaceLease& operator=(const WorkspaceLease&) = delete;
    ~WorkspaceLease();
    CompactWorkspace& operator*() const { return *ws_; }
    CompactWorkspace* get() const { return ws_.get(); }

   private:
    friend class SamplingGraph;
    WorkspaceLease(Pool* pool, std::unique_ptr<CompactWorkspace> ws);
    Pool* pool_;
    std::unique_ptr<CompactWorkspace> ws_;
  };
  WorkspaceLease lend_workspace() const;

 private:
  void prepare();

  const Graph* graph_ = nullptr;  // null when built over borrowed arrays
  GraphArrays arrays_;
  SamplingGraphOptions opts_;
  Device device_ = Device::kCpu;
  bool weighted_ = false;
  bool weights_checked_ = false;
  std::vector<float> owned_weights_;
  Span<const float> weights_;
  std::vector<double> prefix_;
  std::vector<uint64_t> packed_;
  std::vector<int64_t> pairs_;
  std::unique_ptr<DeviceGraph> device_graph_;
  std::unique_ptr<Pool> pool_;
};

/// Reorders per-edge-ID values into storage order: out[k] = by_eid[eid(k) mod by_eid.size()]
/// (the modulo maps the reverse edge E+i of a symmetrized build onto input row i). Throws
/// ValueError if by_eid is empty while the graph has edges.
std::vector<float> weights_in_storage_order(const GraphArrays& graph, Span<const float> by_eid);

namespace detail {
/// sampling_weight's error for `x`, `where` its message's start.
[[noreturn]] void throw_bad_weight(double x, const std::string& where);
}  // namespace detail

/// A sampling weight given as float32 or float64 (`x`) as the float32 the samplers draw by.
/// ValueError, its message `where()` (e.g. "sample_neighbors: weight 1e-50 of edge ID 3")
/// followed by the reason, when `x` is negative or not finite, overflows float32, or is positive
/// and below float32's smallest normal number (about 1.18e-38) without being a float32 itself:
/// it would be drawn as zero, or by a float with a few bits of its value, so the draws would not
/// follow the weights; such weights must be rescaled. (A subnormal float32 input is drawn by its
/// exact value: the prefix sums are double.)
template <class Where>
float sampling_weight(double x, Where&& where) {
  const auto w = static_cast<float>(x);
  if (!(x >= 0) || !std::isfinite(x) || !std::isfinite(w) ||
      (x > 0 && !(w >= std::numeric_limits<float>::min()) && static_cast<double>(w) != x)) {
    detail::throw_bad_weight(x, where());
  }
  return w;
}

/// Checks a whole weight array once (length == num_edges, every value finite and >= 0); throws
/// ValueError naming `what` and the first bad position.
void validate_weights(const GraphArrays& graph, Span<const float> weights, const char* what);

/// Per-row inclusive prefix sums of storage-order weights, in double, summed in storage order
/// from each row's start (exactly the sums weighted sampling forms; 8 bytes per edge).
/// Validates every weight (validate_weights).
std::vector<double> weight_prefix_sums(const GraphArrays& graph, Span<const float> weights);

/// (indices[k], eid(k)) for every stored edge k, interleaved (16 bytes per edge).
std::vector<int64_t> interleave_adjacency(const GraphArrays& graph);

/// Whether every neighbor ID and edge ID of `graph` is below 2^32 (pack_adjacency applies).
bool can_pack_adjacency(const GraphArrays& graph);

/// eid(k) << 32 | indices[k] for every stored edge k (8 bytes per edge). Throws ValueError when
/// an ID does not fit in 32 bits (see can_pack_adjacency).
std::vector<uint64_t> pack_adjacency(const GraphArrays& graph);

/// pack_adjacency in one pass that also checks the IDs: empty when one does not fit in 32 bits
/// (or the graph has no edges).
std::vector<uint64_t> try_pack_adjacency(const GraphArrays& graph);

/// Moves the graph's arrays into memory the kernel backs with transparent huge pages
/// (madvise(MADV_HUGEPAGE) before first touch), which cuts TLB misses of random neighbor
/// accesses on large graphs. Copies one array at a time (peak: the largest array twice).
/// Returns the bytes now advised; 0 where the kernel refuses (the graph is unchanged then).
/// Call it before preparing a SamplingGraph of the graph.
int64_t advise_huge_pages(Graph& graph);

}  // namespace tessera::ops
