// SPDX-License-Identifier: Apache-2.0
// Mini-batch samplers: multi-layer neighbor sampling into blocks, uniform negative sampling for
// link prediction, and Cluster-GCN batches of graph parts.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampling_graph.hpp"

namespace tessera::ops {

class DeviceNeighborSampler;

/// Options of a multi-layer neighbor sampler (DGL's NeighborSampler). The graph, its weights,
/// its layouts and where it lives are the SamplingGraph's.
struct NeighborSamplerOptions {
  /// Fanout per GNN layer, input layer first (DGL order): [15, 10, 5] samples 5 neighbors of
  /// each seed, then 10 of each of those, then 15. Each entry >= 0 or -1 (all).
  std::vector<int64_t> fanouts;
  bool replace = false;
  EdgeDir dir = EdgeDir::kIn;
  /// Threads per hop of one sample_blocks call (see SampleOptions::num_threads); the blocks do
  /// not depend on it. The loaders keep 1 and sample batches in parallel instead.
  int num_threads = 1;
};

/// Time and volume of sampling work, accumulated over calls (seconds of wall time in the thread
/// that did the work).
struct SampleStats {
  double sample_seconds = 0;
  double compact_seconds = 0;
  int64_t sampled_edges = 0;
  int64_t seeds = 0;
  void add(const SampleStats& o) {
    sample_seconds += o.sample_seconds;
    compact_seconds += o.compact_seconds;
    sampled_edges += o.sampled_edges;
    seeds += o.seeds;
  }
};

/// Multi-layer neighbor sampling over a SamplingGraph: on the CPU each uniform hop is sampled
/// straight into its block over a compaction workspace (threads split the hop's seeds); a graph
/// placed on a GPU is sampled and compacted there (DeviceNeighborSampler), the blocks coming back
/// to the host identical to the CPU twin's. Copies share the graph; const methods are
/// thread-safe.
class NeighborSampler {
 public:
  /// Samples `graph`, which must outlive the sampler. Validates the options once (ValueError).
  NeighborSampler(const SamplingGraph& graph, NeighborSamplerOptions opts);
  /// Samples a graph it shares.
  NeighborSampler(std::shared_ptr<const SamplingGraph> graph, NeighborSamplerOptions opts);
  /// Prepares SamplingGraph(graph, prep) and keeps it; `graph` must outlive the sampler.
  NeighborSampler(const Graph& graph, const NeighborSamplerOptions& opts,
                  const SamplingGraphOptions& prep = {});

  /// The blocks of one mini-batch, input layer first (blocks.back().dst_nodes() == seeds).
  /// Hop h (0 = the seeds' neighborhood) uses the Philox key (seed, epoch, batch, layer = h).
  /// For dir=kOut the blocks are built on reversed edges (messages flow neighbor -> seed).
  /// `seeds` must be unique (ValueError) and in range (IndexError). `exclude` edges are left out
  /// of every hop. `ws`: the caller's compaction scratch (one per thread); null lends one from
  /// the graph's pool. `stats` is optional.
  std::vector<Block> sample_blocks(Span<const int64_t> seeds, const RngKey& key,
                                   const ExcludeEdges* exclude = nullptr,
                                   CompactWorkspace* ws = nullptr,
                                   SampleStats* stats = nullptr) const;

  const Graph& graph() const { return graph_->graph(); }
  const SamplingGraph& sampling_graph() const { return *graph_; }
  const NeighborSamplerOptions& options() const { return opts_; }
  bool weighted() const { return graph_->weighted(); }
  /// Bytes per edge of the interleaved adjacency copy the CPU sampler reads: 8 (packed), 16
  /// (pairs) or 0 (none: interleave off, a CUDA sampler, or no edges).
  int adjacency_copy_bytes_per_edge() const { return graph_->adjacency_copy_bytes_per_edge(); }

 private:
  std::vector<Block> sample_blocks_cpu(Span<const int64_t> seeds, const RngKey& key,
                                       const ExcludeEdges* exclude, CompactWorkspace& ws,
                                       SampleStats* stats) const;

  NeighborSamplerOptions opts_;
  std::shared_ptr<const SamplingGraph> graph_;
  // A graph placed on a GPU: the GPU sampler over it (shared by copies).
  std::shared_ptr<const DeviceNeighborSampler> dev_sampler_;
};

/// Uniform negative sampling (DGL's dgl.dataloading.negative_sampler.Uniform): for each
/// positive edge i (source pos_src[i], edge ID pos_eids[i]), `k` negatives (pos_src[i], t) with
/// t uniform over [0, num_nodes). Draw j of edge e uses the Philox key (key.seed, key.epoch,
/// key.batch, layer 0, stream kNegative, node = e, draw j), so it does not depend on which
/// batch position the edge has. Output: neg_src/neg_dst of size k * pos_src.size(), grouped by
/// positive edge.
void uniform_negatives(int64_t num_nodes, Span<const int64_t> pos_src, Span<const int64_t> pos_eids,
                       int64_t k, const RngKey& key, std::vector<int64_t>& neg_src,
                       std::vector<int64_t>& neg_dst);

/// Cluster-GCN batches: the nodes are split into parts (e.g. by METIS, or randomly each epoch
/// with random_clustering); each epoch the parts are shuffled (Philox stream kCluster, keyed by
/// seed, epoch and rank) and taken `parts_per_batch` at a time; a batch is the subgraph induced
/// by the union of its parts: its nodes and every edge whose two ends are among them, i.e. the
/// edges within and between the chosen parts (the way DeepGCNs trains on ogbn-proteins). Holds
/// a reference to the graph.
class ClusterGcnSampler {
 public:
  /// `part_of_node[v]` in [0, P) for every node (P = max + 1); every part must be non-empty
  /// (ValueError otherwise). parts_per_batch >= 1; seed < 2^32; rank in [0, 2^32) keys the part
  /// order too, so trainers sharing a clustering draw different batches (rank 0: the order of
  /// a single trainer).
  ClusterGcnSampler(const Graph& graph, std::vector<int64_t> part_of_node, int64_t parts_per_batch,
                    uint64_t seed, int64_t rank = 0);
  int64_t num_parts() const { return num_parts_; }
  /// ceil(num_parts / parts_per_batch).
  int64_t num_batches() const;
  /// The parts of batch `batch` in epoch `epoch`, in drawn order.
  std::vector<int64_t> batch_parts(int64_t epoch, int64_t batch) const;
  /// The nodes of the batch (parts in drawn order, nodes of a part in increasing ID) and their
  /// induced subgraph.
  Subgraph sample(int64_t epoch, int64_t batch, int num_threads = 1) const;

 private:
  std::vector<int64_t> part_order(int64_t epoch) const;
  const Graph& graph_;
  int64_t num_parts_ = 0, parts_per_batch_ = 1;
  uint32_t seed_ = 0, rank_ = 0;
  std::vector<int64_t> part_ptr_, part_nodes_;  // CSR of parts -> nodes
};

/// A balanced random clustering of `num_nodes` nodes into `num_parts` parts (DeepGCN's random
/// partition of ogbn-proteins, redrawn every epoch): the node at position i of the Philox
/// permutation keyed by (seed, epoch, batch = rank, layer 1, stream kCluster) goes to part
/// i mod num_parts, so part sizes differ by at most one and no part is empty. A function of
/// (num_nodes, num_parts, seed, epoch, rank) only. 1 <= num_parts <= num_nodes (ValueError).
std::vector<int64_t> random_clustering(int64_t num_nodes, int64_t num_parts, uint64_t seed,
                                       int64_t epoch, int64_t rank = 0);

/// Fisher-Yates permutation of 0..n-1 driven by Philox (stream kShuffle, item = position,
/// batch 0, layer 0): step i (from n-1 down to 1) swaps i with bounded(draw 0 of item i, i + 1).
/// `batch` and `layer` are the key's batch and layer words (0 for the loaders' shuffle;
/// Cluster-GCN keys its part order with batch = rank, layer 0, and its random clustering with
/// batch = rank, layer 1).
std::vector<int64_t> philox_permutation(int64_t n, uint32_t seed, uint32_t epoch,
                                        RngStream stream = RngStream::kShuffle, uint32_t batch = 0,
                                        uint32_t layer = 0);

}  // namespace tessera::ops
