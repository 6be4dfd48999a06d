// SPDX-License-Identifier: Apache-2.0
// Multi-layer neighbor sampling with compaction on the GPU: the CUDA twin of
// ops::NeighborSampler::sample_blocks over a placed graph (a GraphView), for one or several
// mini-batches per call. Plain C++ (no CUDA headers); in a CPU-only build the constructor throws
// NotCompiledError.
//
// Per hop, for every batch of the call at once: a sample pass (a group of lanes per frontier
// node), a mark pass (first appearances, through one node table per batch that lives across
// hops and calls), a scan, a number pass (dense edges, new nodes appended to the batch's node
// list), and a relabel pass (fused into the next hop's sample pass). Output buffers are sized by
// upper bounds (frontier bound x fanout), so a call enqueues everything without waiting and
// synchronizes once, in Pending::wait(), to read the sizes; the launches of one call shape are
// captured once into a CUDA graph and replayed. A hop with fanout -1, or an exclusion set,
// needs exact sizes: such calls synchronize once more per hop of that kind, run one batch per
// launch and are not captured.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/graph_view.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda {

namespace rows {
struct ExcludeView;  // tessera/cuda/sample_rows.hpp
}  // namespace rows

/// How compaction finds a node's local ID.
enum class NodeTable : uint8_t {
  kAuto,    ///< kDense when its tables take at most 256 MiB or no more than hashed ones
  kDense,   ///< one 8-byte entry per node ID (id_space) per batch slot: one access per edge
  kHashed,  ///< open addressing sized by the batch's node bound (16 bytes per slot)
};

struct BlockSamplerOptions {
  /// Fanout per GNN layer, input layer first (DGL order); hop h samples fanouts[H - 1 - h].
  /// Each >= -1; at most 256 layers.
  std::vector<int64_t> fanouts;
  bool replace = false;
  /// Batches one call may take (1..64). Each batch slot has its own node table.
  int max_batches = 1;
  /// Capture each call shape's launches in a CUDA graph and replay it (not on the legacy
  /// default stream, nor for calls that need exact sizes).
  bool cuda_graph = true;
  /// Rows of at most this many bytes of a UVA adjacency are read whole (16-byte pieces) rather
  /// than one load per sampled edge; -1: 1024 for a graph in pinned memory, 0 in device memory.
  int stage_bytes = -1;
  NodeTable table = NodeTable::kAuto;
  /// Node IDs written into the blocks are < id_space (0: the graph's num_nodes). A frontier ID
  /// outside it, or whose row is outside the graph, makes Pending::wait() throw IndexError.
  int64_t id_space = 0;
  /// The row (and Philox node) of each node ID; default: the ID itself.
  RowMap rows;
};

/// The blocks of one batch, input layer first (blocks.back() has the seeds as destinations);
/// every array in device memory, shared with the other batches of the call (each DeviceBlock
/// keeps its buffers alive).
struct SampledBatch {
  std::vector<DeviceBlock> blocks;
  int64_t sampled_edges = 0;
};

/// Counters of a BlockSampler (for benchmarks and tests).
struct BlockSamplerStats {
  int64_t calls = 0;           ///< enqueue() calls
  int64_t graph_launches = 0;  ///< calls replayed from a captured CUDA graph
  int64_t captures = 0;        ///< CUDA graphs captured
  int64_t host_syncs = 0;      ///< synchronizations: one per wait(), plus one per exact hop
  int64_t workspaces = 0;      ///< workspaces held (tables, scratch, a graph per call shape)
  int64_t workspace_bytes = 0;
};

class BlockSampler {
 public:
  /// The result of enqueue(): its work is queued on the call's stream.
  class Pending {
   public:
    Pending();
    ~Pending();
    Pending(Pending&&) noexcept;
    Pending& operator=(Pending&&) noexcept;
    /// Waits for the call's work (the one synchronization: an event, not the whole stream) and
    /// returns one SampledBatch per batch. Throws IndexError for a frontier ID out of range and
    /// ValueError for a seed listed twice in its batch. Call once.
    std::vector<SampledBatch> wait();
    struct State;

   private:
    friend class BlockSampler;
    std::unique_ptr<State> s_;
  };

  /// Holds `graph`'s pointers (the arrays must outlive the sampler) and validates `opts`
  /// (ValueError). The sampler belongs to the current device; calls run there.
  BlockSampler(const GraphView& graph, BlockSamplerOptions opts);
  ~BlockSampler();
  BlockSampler(const BlockSampler&) = delete;
  BlockSampler& operator=(const BlockSampler&) = delete;

  /// Queues the sampling of K = seed_offsets.size() - 1 batches (K <= max_batches) on `stream`:
  /// batch k's seeds are d_seeds[seed_offsets[k], seed_offsets[k + 1]) (device memory, unique
  /// within the batch, read by the queued work), its key keys[k] (layer set per hop). `exclude`
  /// (device arrays, null or empty: none) is left out of every hop; it must stay valid until
  /// wait() returns. Thread-safe; calls on different streams overlap. Nothing synchronizes here
  /// unless a hop needs exact sizes (fanout -1, exclusion).
  Pending enqueue(const int64_t* d_seeds, const std::vector<int64_t>& seed_offsets,
                  const std::vector<RngKey>& keys, StreamHandle stream,
                  const rows::ExcludeView* exclude = nullptr) const;

  const BlockSamplerOptions& options() const { return opts_; }
  const GraphView& graph() const { return g_; }
  BlockSamplerStats stats() const;

  struct Impl;

 private:
  GraphView g_;
  BlockSamplerOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::cuda
