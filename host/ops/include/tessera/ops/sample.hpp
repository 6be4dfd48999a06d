// SPDX-License-Identifier: Apache-2.0
// Neighbor sampling on a compressed graph: uniform or weighted, with or without replacement.
// Randomness follows the Philox key layout in tessera/core/philox.hpp (docs/sampling.md).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/sampling_graph.hpp"
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

/// Options of one sample_neighbors call. What is sampled (the structure, its weights, its
/// layouts and where they live) is the SamplingGraph's.
struct SampleOptions {
  /// Neighbors per seed: -1 takes all of them; without replacement a node with degree <= fanout
  /// keeps all its neighbors; with replacement exactly `fanout` draws (0 if degree is 0). On a
  /// weighted graph draws are proportional to the weights and a weight of 0 is never drawn;
  /// without replacement a node keeps all its positive-weight neighbors when there are at most
  /// `fanout` of them.
  int64_t fanout = -1;
  bool replace = false;
  EdgeDir dir = EdgeDir::kIn;
  /// (seed, epoch, batch, layer) of the Philox key; the stream is always kNeighbor.
  RngKey key;
  /// Edges to leave out (not owned; may be null).
  const ExcludeEdges* exclude = nullptr;
  /// Threads for this call: 0 = tessera::num_threads(), 1 = run in the caller's thread (what the
  /// loaders use: they parallelize over batches). The result never depends on it.
  int num_threads = 0;
};

/// Samples the neighbors of every node in `seeds` (host int64 IDs in [0, num_nodes); repeats
/// allowed) from `graph`, with the twin of where the graph lives (the CPU twin over its CPU
/// layouts, the CUDA twin over its placed DeviceGraph). The sample of each seed is a function of
/// (key, seed node) only, the same on either twin. Throws IndexError for a seed out of range,
/// ValueError for a bad fanout or a negative or non-finite weight read, or a layer >= 256.
SampledEdges sample_neighbors(const SamplingGraph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts);

/// sample_neighbors writing into `out` (cleared first), reusing its capacity across calls.
void sample_neighbors_into(const SamplingGraph& graph, Span<const int64_t> seeds,
                           const SampleOptions& opts, SampledEdges& out);

/// Uniform sampling of `graph` as stored (SamplingGraph::as_stored: nothing prepared), for
/// one-off calls. To sample a graph repeatedly, or weighted, prepare a SamplingGraph.
SampledEdges sample_neighbors(const Graph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts);

/// Builds a Philox RngKey from wide integers, throwing ValueError naming the field if the seed
/// or epoch or batch does not fit in 32 bits (or is negative) or the layer is not < 256.
RngKey make_rng_key(uint64_t seed, int64_t epoch, int64_t batch, int64_t layer);

namespace detail {
/// The one validator of sample_neighbors (the graph's own checks ran when it was prepared).
void validate_sample_args(const SamplingGraph& graph, Span<const int64_t> seeds,
                          const SampleOptions& opts);
/// The CPU twin (arguments validated, graph on the CPU).
void sample_neighbors_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                          const SampleOptions& opts, SampledEdges& out);
/// The CUDA twin's dispatch (arguments validated, graph placed): host seeds in, host edges out.
void sample_neighbors_cuda(const SamplingGraph& graph, Span<const int64_t> seeds,
                           const SampleOptions& opts, SampledEdges& out);
}  // namespace detail

}  // namespace tessera::ops
