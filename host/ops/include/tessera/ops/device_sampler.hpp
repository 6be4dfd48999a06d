// SPDX-License-Identifier: Apache-2.0
// Neighbor sampling on the GPU: a graph's sampling arrays placed once in device memory or in
// pinned host memory that kernels read in place (UVA), and the multi-layer sampler over them,
// the CUDA twin of NeighborSampler::sample_blocks (same Philox keys, same blocks, bit for bit).
//
// In a CPU-only build every constructor throws NotCompiledError (not_compiled_with_cuda).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/cuda/block_sampler.hpp"
#include "tessera/cuda/graph_view.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::ops {

/// How DeviceGraph lays out what it places.
struct DeviceGraphOptions {
  /// Keep each edge's neighbor and edge ID side by side, so one random read serves both: packed
  /// into 8 bytes (edge ID << 32 | neighbor) when every ID is below 2^32, else 16-byte pairs.
  /// The samplers read this copy (view()).
  bool interleave = true;
  /// Also keep `indices` and `eids` as separate arrays (indices(), eids()), for callers of the
  /// raw-array entry points (cuda::sample_neighbors_uniform_impl ...): 8 to 16 bytes per edge
  /// more. Without `interleave` they are kept regardless.
  bool split_arrays = true;
  /// With Placement::kPinnedHost: put the per-node arrays (indptr and, weighted, the per-row
  /// table) in device memory all the same (8 to 24 bytes per node), so that only the adjacency
  /// and the weights are read over the bus.
  bool node_arrays_on_device = true;
};

/// The arrays the sampling kernels read (indptr, the adjacency, optional storage-order weights
/// with their per-row prefix sums and a per-row table of positive weights), placed once in
/// device memory (Placement::kGpu) or in pinned host memory read through UVA
/// (Placement::kPinnedHost). Immutable afterwards; owns its memory, on the device it was placed
/// from.
class DeviceGraph {
 public:
  /// Places `graph` (CSC for in-edge sampling, CSR for out; a Graph, or borrowed arrays) and,
  /// when given, its storage-order `weights` (validated: one per edge, finite, >= 0; their
  /// prefix sums and the per-row table are formed on the device, the sums equal to
  /// ops::weight_prefix_sums). The arrays' row_keys, when set, are placed with the rows and key
  /// the draws (cuda::GraphView::row_keys): a row samples as the whole graph samples its node.
  /// Synchronizes `stream` before returning. Throws ValueError for Placement::kHost, offsets
  /// that do not run from 0 to num_edges, or bad weights; NotCompiledError without CUDA.
  DeviceGraph(const GraphArrays& graph, cuda::Placement placement, Span<const float> weights = {},
              cuda::StreamHandle stream = nullptr, DeviceGraphOptions opts = {});
  /// The same for a Graph, whose array sizes are checked first (ValueError).
  DeviceGraph(const Graph& graph, cuda::Placement placement, Span<const float> weights = {},
              cuda::StreamHandle stream = nullptr, DeviceGraphOptions opts = {});

  int64_t num_nodes() const { return num_nodes_; }
  int64_t num_edges() const { return num_edges_; }
  int64_t max_degree() const { return max_degree_; }
  cuda::Placement placement() const { return placement_; }
  /// The CUDA device the graph was placed from (the constructing thread's current device); the
  /// samplers run their kernels there whatever the calling thread's current device.
  int device() const { return device_; }
  bool weighted() const { return has_weights_; }
  /// Bytes held (device and pinned).
  size_t bytes() const;
  /// What the kernels read (cuda::sample_neighbors_impl, cuda::BlockSampler); valid while this
  /// graph lives.
  cuda::GraphView view() const;

  const int64_t* indptr() const { return static_cast<const int64_t*>(indptr_.data()); }
  /// The split arrays (DeviceGraphOptions::split_arrays); null when not kept. eids() is also
  /// null when edge IDs are storage positions (the graph had no eids array).
  const int64_t* indices() const { return static_cast<const int64_t*>(indices_.data()); }
  const int64_t* eids() const { return static_cast<const int64_t*>(eids_.data()); }
  const float* weights() const { return static_cast<const float*>(weights_.data()); }
  const double* prefix() const { return static_cast<const double*>(prefix_.data()); }

 private:
  // Device or pinned memory.
  class Array {
   public:
    Array() = default;
    Array(size_t bytes, cuda::Placement p);
    void* data() const { return dev_.data() ? dev_.data() : pinned_.data(); }
    size_t bytes() const { return bytes_; }

   private:
    cuda::DeviceBuffer dev_;
    cuda::PinnedBuffer pinned_;
    size_t bytes_ = 0;
  };
  Array upload(const void* host, size_t bytes, cuda::Placement p, cuda::StreamHandle stream,
               size_t pad = 0) const;

  int64_t num_nodes_ = 0, num_edges_ = 0, max_degree_ = 0;
  int device_ = -1;
  cuda::Placement placement_;
  bool has_weights_ = false;
  cuda::Adjacency layout_ = cuda::Adjacency::kSplit;
  Array indptr_, indices_, eids_, adjacency_, weights_, prefix_, row_info_, row_keys_;
};

/// Blocks sampled on the GPU for one batch, input layer first (as NeighborSampler): each block's
/// src_nodes / src / dst / eids in device memory (cuda::DeviceBlock, whose buffers may be shared
/// with the other batches of the same call; the block keeps them alive).
struct DeviceBlocks {
  std::vector<cuda::DeviceBlock> blocks;
  /// The owner of block l's edge IDs (the same as blocks[l].eids); the IDs themselves start at
  /// eids_ptr(l), which differs from eids[l]->data() for the second and later batches of a
  /// multi-batch call.
  std::vector<std::shared_ptr<cuda::ScratchBuffer>> eids;
  const int64_t* eids_ptr(size_t l) const { return blocks[l].eids_ptr(); }
  /// Sampled edges and seeds; sample_seconds is the host wall time from the call to its blocks
  /// (compact_seconds 0: compaction is fused into the same launches).
  SampleStats stats;
};

/// How a DeviceNeighborSampler schedules its work (cuda::BlockSamplerOptions).
struct DeviceSamplerOptions {
  /// Batches one sample_blocks_async call may take (1..64): one launch sequence serves them all.
  int max_batches = 1;
  /// Replay each call shape's launches from a CUDA graph captured on first use.
  bool cuda_graph = true;
  /// UVA rows up to this many bytes are read whole; -1: the engine's default.
  int stage_bytes = -1;
  cuda::NodeTable table = cuda::NodeTable::kAuto;
  /// Node IDs are < id_space (0: the graph's num_nodes), and node v samples row rows.rows[v -
  /// rows.base] (keyed by the row's node, GraphView::row_keys) when `rows` is set.
  int64_t id_space = 0;
  cuda::RowMap rows;
};

/// Multi-layer neighbor sampling on a DeviceGraph (cuda::BlockSampler): hop h (output layer
/// first, Philox layer index h, as NeighborSampler) samples and compacts on the GPU, the next
/// frontier being the block's source nodes; uniform, or weighted when the graph holds weights;
/// with or without replacement; in or out edges (a CSC or CSR graph); optionally leaving an
/// ExcludeEdges set out of every hop. Holds a reference to the graph, which must outlive it.
/// Const methods are thread-safe: calls from several threads on their own streams overlap.
class DeviceNeighborSampler {
 public:
  /// Throws ValueError for no fanouts, more than 256 layers or a fanout < -1.
  DeviceNeighborSampler(const DeviceGraph& graph, std::vector<int64_t> fanouts, bool replace,
                        EdgeDir dir = EdgeDir::kIn, DeviceSamplerOptions opts = {});

  /// Work queued by sample_blocks_async.
  class Pending {
   public:
    /// Waits for the call's sizes (one synchronization: an event of the call, not the stream)
    /// and returns the blocks of each batch. IndexError for a seed out of range, ValueError for
    /// a seed listed twice in its batch.
    std::vector<DeviceBlocks> wait();

   private:
    friend class DeviceNeighborSampler;
    cuda::BlockSampler::Pending p_;
    std::vector<int64_t> seeds_;
    double t0_ = 0;
  };

  /// Queues the blocks of K = seed_offsets.size() - 1 batches (K <= max_batches) on `stream`:
  /// batch k's seeds are d_seeds[seed_offsets[k], seed_offsets[k + 1]) (device memory, unique
  /// within the batch), its key keys[k]. Does not synchronize, unless a hop needs exact sizes
  /// (fanout -1, or `exclude`: then once per such hop, and the batches run one by one).
  /// `exclude` (host memory, may be null or empty; not owned) is copied to device scratch on
  /// `stream` and left out of every hop, as by the CPU sampler. Its rows are row numbers of the
  /// graph, so a sampler with a node-to-row map (DeviceSamplerOptions::rows) refuses a
  /// non-empty one (ValueError).
  Pending sample_blocks_async(const int64_t* d_seeds, const std::vector<int64_t>& seed_offsets,
                              const std::vector<RngKey>& keys, cuda::StreamHandle stream,
                              const ExcludeEdges* exclude = nullptr) const;

  /// The blocks of `n` seed IDs in device memory (unique, in range: checked by the kernels, see
  /// Pending::wait) on `stream`: sample_blocks_async of one batch, then wait(). Synchronizes
  /// once, at the end, to learn the sizes (plus once per exact hop, see above).
  DeviceBlocks sample_blocks(const int64_t* d_seeds, int64_t n, const RngKey& key,
                             cuda::StreamHandle stream,
                             const ExcludeEdges* exclude = nullptr) const;

  /// Host seeds in, host blocks out: the seeds are checked (IndexError out of range, ValueError
  /// when repeated: they become destination nodes), uploaded, sampled and downloaded. The result
  /// equals NeighborSampler::sample_blocks with the same options, key, seeds and `exclude`. A
  /// null `stream` means the calling thread's own stream, lent from a per-device pool that
  /// outlives the thread (so calls from several threads overlap, and the scratch cached for a
  /// stream is reused after the thread ends); either way the call returns when its blocks are on
  /// the host. Kernels run on the graph's device() whatever the thread's current device.
  std::vector<Block> sample_blocks_host(Span<const int64_t> seeds, const RngKey& key,
                                        cuda::StreamHandle stream = nullptr,
                                        SampleStats* stats = nullptr,
                                        const ExcludeEdges* exclude = nullptr) const;

  const std::vector<int64_t>& fanouts() const { return fanouts_; }
  const DeviceGraph& graph() const { return graph_; }
  /// The direction the graph was given for (a CSC samples in-edges, a CSR out-edges).
  EdgeDir dir() const { return dir_; }
  /// The engine (its counters: graph replays, synchronizations, workspace bytes).
  const cuda::BlockSampler& engine() const { return *engine_; }

 private:
  const DeviceGraph& graph_;
  std::vector<int64_t> fanouts_;
  bool replace_;
  EdgeDir dir_;
  bool mapped_rows_ = false;  // DeviceSamplerOptions::rows set: nodes are not row numbers
  std::unique_ptr<cuda::BlockSampler> engine_;
};

/// Copies device blocks (and their edge IDs) back into host Blocks. Synchronizes `stream`.
std::vector<Block> download_blocks(const DeviceBlocks& blocks, cuda::StreamHandle stream);

namespace detail {
/// ops::to_block with device=kCuda on host data (arguments validated): the inputs are copied to
/// the GPU for this one call, the CUDA twin runs, the result comes back. Convenient for checks.
/// (ops::sample_neighbors reaches the CUDA twin through a SamplingGraph placed on the GPU, which
/// copies the graph once: detail::sample_neighbors_cuda in sample.hpp.)
Block to_block_cuda(const SampledEdges& edges, Span<const int64_t> dst_nodes);
}  // namespace detail

}  // namespace tessera::ops
