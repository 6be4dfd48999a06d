// SPDX-License-Identifier: Apache-2.0
// Neighbor sampling on a compressed graph: uniform or weighted, with or without replacement.
// Randomness follows the Philox key layout in tessera/core/philox.hpp (docs/sampling.md).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/span.hpp"

namespace tessera::ops {

/// Which adjacency `Graph` holds. kIn: CSC (row v lists the sources of v's in-edges; DGL's
/// edge_dir='in', Tessera's default); a sampled edge is (neighbor -> v). kOut: CSR (row v lists
/// out-edge destinations); a sampled edge is (v -> neighbor).
enum class EdgeDir { kIn, kOut };
const char* edge_dir_name(EdgeDir d);

/// Sampled edges as COO: edge i is (src[i] -> dst[i]) with global edge ID eid[i]. Edges are
/// grouped by seed in the order the seeds were given; within a seed, without replacement in
/// increasing storage position, with replacement in draw order.
struct SampledEdges {
  std::vector<int64_t> src;
  std::vector<int64_t> dst;
  std::vector<int64_t> eid;
  int64_t size() const { return static_cast<int64_t>(src.size()); }
  void clear() {
    src.clear();
    dst.clear();
    eid.clear();
  }
};

/// A set of edges to leave out of sampling (e.g. a link-prediction batch's own edges), stored as
/// (row, edge ID) pairs where row is the node whose adjacency row holds the edge (its
/// destination for kIn, its source for kOut). Excluded edges are removed *before* drawing, so a
/// node with excluded edges samples from its remaining neighbors.
class ExcludeEdges {
 public:
  ExcludeEdges() = default;
  /// Builds the set from parallel arrays of rows and edge IDs (duplicates are fine).
  ExcludeEdges(Span<const int64_t> rows, Span<const int64_t> eids);
  bool empty() const { return rows_.empty(); }
  int64_t size() const { return static_cast<int64_t>(eids_.size()); }
  /// The excluded edge IDs of `row` as a sorted range [first, last) into an internal array, or
  /// an empty range when the row has none.
  std::pair<const int64_t*, const int64_t*> row_eids(int64_t row) const;
  /// The set's three arrays, read-only (e.g. to upload it for the CUDA twin): the sorted unique
  /// rows; rows().size() + 1 offsets into eids() (row i's edge IDs are eids()[offsets()[i] ..
  /// offsets()[i + 1]), sorted and unique); the edge IDs. An empty set has no rows, one offset
  /// (0) when built from empty arrays or none when default-constructed, and no edge IDs.
  Span<const int64_t> rows() const { return rows_; }
  Span<const int64_t> offsets() const { return offsets_; }
  Span<const int64_t> eids() const { return eids_; }

 private:
  std::vector<int64_t> rows_;     // sorted unique rows
  std::vector<int64_t> offsets_;  // rows_.size() + 1 offsets into eids_
  std::vector<int64_t> eids_;     // sorted within each row
};

/// Options of one sample_neighbors call.
struct SampleOptions {
  /// Neighbors per seed: -1 takes all of them; without replacement a node with degree <= fanout
  /// keeps all its neighbors; with replacement exactly `fanout` draws (0 if degree is 0).
  int64_t fanout = -1;
  bool replace = false;
  /// Optional edge weights in *storage order* (weights[k] belongs to graph.indices[k]; see
  /// weights_in_storage_order), float32, non-negative and finite. Empty: uniform. A weight of 0
  /// is never drawn; without replacement a node keeps all its positive-weight neighbors when
  /// there are at most `fanout` of them.
  Span<const float> weights;
  EdgeDir dir = EdgeDir::kIn;
  /// (seed, epoch, batch, layer) of the Philox key; the stream is always kNeighbor.
  RngKey key;
  /// Optional copy of the adjacency as (neighbor, edge ID) pairs in storage order (size
  /// 2 * num_edges; see interleave_adjacency). A sampled edge then costs one cache miss instead
  /// of two (indices and eids). Same output either way. Not owned.
  Span<const int64_t> adjacency_pairs;
  /// Optional copy of the adjacency packed into one word per edge, edge ID << 32 | neighbor, in
  /// storage order (size num_edges; see pack_adjacency): half the bytes of adjacency_pairs, so
  /// the picks of a row share more cache lines. Same output either way; takes precedence over
  /// adjacency_pairs. Not owned.
  Span<const uint64_t> adjacency_packed;
  /// Optional per-row prefix sums of `weights` (see weight_prefix_sums; size num_edges, not
  /// owned). Weighted sampling then reads a row's sums instead of re-adding its weights (O(fanout
  /// log degree) per row instead of O(degree)); same output either way. The weights must have
  /// been checked when the sums were built. Ignored for rows with excluded edges.
  Span<const double> weight_prefix;
  /// Edges to leave out (not owned; may be null).
  const ExcludeEdges* exclude = nullptr;
  /// Threads for this call: 0 = tessera::num_threads(), 1 = run in the caller's thread (what the
  /// loaders use: they parallelize over batches). The result never depends on it.
  int num_threads = 0;
  Device device = Device::kCpu;
};

/// Samples the neighbors of every node in `seeds` (host int64 IDs in [0, num_nodes); repeats
/// allowed) from `graph` (CSC for kIn, CSR for kOut). The sample of each seed is a function of
/// (key, seed node) only. Throws IndexError for a seed out of range, ValueError for a bad fanout,
/// weights of the wrong length, a negative or non-finite weight, or a layer >= 256;
/// NotCompiledError for device=kCuda in a CPU-only build.
SampledEdges sample_neighbors(const Graph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts);

/// sample_neighbors writing into `out` (cleared first), reusing its capacity across calls.
void sample_neighbors_into(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                           SampledEdges& out);

/// Reorders per-edge-ID values into storage order: out[k] = by_eid[eid(k) mod by_eid.size()]
/// (the modulo maps the reverse edge E+i of a symmetrized build onto input row i). Throws
/// ValueError if by_eid is empty while the graph has edges.
std::vector<float> weights_in_storage_order(const Graph& graph, Span<const float> by_eid);

/// Per-row inclusive prefix sums of storage-order weights, in double, summed in storage order
/// from each row's start (exactly the sums weighted sampling forms): the layout of
/// SampleOptions::weight_prefix (8 bytes per edge). Validates every weight (validate_weights).
std::vector<double> weight_prefix_sums(const Graph& graph, Span<const float> weights);

/// (indices[k], eid(k)) for every stored edge k, interleaved: the layout of
/// SampleOptions::adjacency_pairs (16 bytes per edge).
std::vector<int64_t> interleave_adjacency(const Graph& graph);

/// Whether every neighbor ID and edge ID of `graph` is below 2^32 (pack_adjacency applies).
bool can_pack_adjacency(const Graph& graph);

/// eid(k) << 32 | indices[k] for every stored edge k: the layout of
/// SampleOptions::adjacency_packed (8 bytes per edge). Throws ValueError when an ID does not fit
/// in 32 bits (see can_pack_adjacency).
std::vector<uint64_t> pack_adjacency(const Graph& graph);

/// pack_adjacency in one pass that also checks the IDs: empty when one does not fit in 32 bits
/// (or the graph has no edges).
std::vector<uint64_t> try_pack_adjacency(const Graph& graph);

/// Checks a whole weight array once (length == num_edges, every value finite and >= 0); throws
/// ValueError naming `what` and the first bad position. sample_neighbors checks only the length
/// and the weights it reads; call this once up front for a clear early error.
void validate_weights(const Graph& graph, Span<const float> weights, const char* what);

/// Builds a Philox RngKey from wide integers, throwing ValueError naming the field if the seed
/// or epoch or batch does not fit in 32 bits (or is negative) or the layer is not < 256.
RngKey make_rng_key(uint64_t seed, int64_t epoch, int64_t batch, int64_t layer);

namespace detail {
/// The CPU twin (arguments already validated).
SampledEdges sample_neighbors_cpu(const Graph& graph, Span<const int64_t> seeds,
                                  const SampleOptions& opts);
void sample_neighbors_cpu_into(const Graph& graph, Span<const int64_t> seeds,
                               const SampleOptions& opts, SampledEdges& out);
/// The one validator of sample_neighbors.
void validate_sample_args(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts);
}  // namespace detail

}  // namespace tessera::ops

namespace tessera::ops {

/// Moves the graph's arrays into memory the kernel backs with transparent huge pages
/// (madvise(MADV_HUGEPAGE) before first touch), which cuts TLB misses of random neighbor
/// accesses on large graphs. Copies one array at a time (peak: the largest array twice).
/// Returns the bytes now advised; 0 where the kernel refuses (the graph is unchanged then).
int64_t advise_huge_pages(Graph& graph);

}  // namespace tessera::ops
