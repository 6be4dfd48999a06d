// Neighbor sampling on the GPU: a graph's sampling arrays placed in device memory or in pinned
// host memory that kernels read in place (UVA), and the multi-layer sampler over them, the CUDA
// twin of NeighborSampler::sample_blocks (same Philox keys, same blocks, bit for bit).
//
// In a CPU-only build every constructor throws NotCompiledError (not_compiled_with_cuda).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::ops {

/// The arrays the sampling kernels read (indptr, indices, edge IDs, optional storage-order
/// weights and their per-row prefix sums), copied once into device memory (Placement::kGpu) or
/// into pinned host memory read through UVA (Placement::kPinnedHost). Immutable afterwards.
class DeviceGraph {
 public:
  /// Copies `graph` (CSC for in-edge sampling, CSR for out) and, when given, its storage-order
  /// `weights` (validated: one per edge, finite, >= 0; their prefix sums are formed on the
  /// device, equal to ops::weight_prefix_sums). Synchronizes `stream`
  /// before returning. Throws ValueError for Placement::kHost or bad weights, NotCompiledError
  /// without CUDA.
  DeviceGraph(const Graph& graph, cuda::Placement placement, Span<const float> weights = {},
              cuda::StreamHandle stream = nullptr);

  int64_t num_nodes() const { return num_nodes_; }
  int64_t num_edges() const { return num_edges_; }
  cuda::Placement placement() const { return placement_; }
  /// The CUDA device the graph was placed from (the constructing thread's current device); the
  /// samplers run their kernels there whatever the calling thread's current device.
  int device() const { return device_; }
  bool weighted() const { return has_weights_; }
  /// Bytes held (device or pinned).
  size_t bytes() const;

  const int64_t* indptr() const { return static_cast<const int64_t*>(indptr_.data()); }
  const int64_t* indices() const { return static_cast<const int64_t*>(indices_.data()); }
  /// Null when edge IDs are storage positions (the graph had no eids array).
  const int64_t* eids() const { return static_cast<const int64_t*>(eids_.data()); }
  const float* weights() const { return static_cast<const float*>(weights_.data()); }
  const double* prefix() const { return static_cast<const double*>(prefix_.data()); }

 private:
  // Device or pinned memory, whichever the placement asked for.
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
  Array upload(const void* host, size_t bytes, cuda::StreamHandle stream) const;

  int64_t num_nodes_ = 0, num_edges_ = 0;
  int device_ = -1;
  cuda::Placement placement_;
  bool has_weights_ = false;
  Array indptr_, indices_, eids_, weights_, prefix_;
};

/// Blocks sampled on the GPU for one batch, input layer first (as NeighborSampler): each block's
/// src_nodes / src / dst, plus its edge IDs (`eids[l]`, in edge order) in device memory.
struct DeviceBlocks {
  std::vector<cuda::DeviceBlock> blocks;
  std::vector<std::unique_ptr<cuda::ScratchBuffer>> eids;
  SampleStats stats;  ///< host wall-clock per stage (sampling, compaction), including syncs
};

/// Multi-layer neighbor sampling on a DeviceGraph: for each layer (output layer first, Philox
/// layer index 0 for it, as NeighborSampler) the sampling kernel and then the compaction kernel,
/// the next frontier being the block's source nodes, all on `stream`. Each kernel pair
/// synchronizes the stream twice per layer (output sizes). Uniform, or weighted when the graph
/// holds weights; with or without replacement; in or out edges; optionally leaving an
/// ExcludeEdges set out of every hop (as NeighborSampler::sample_blocks). Holds a reference to
/// the graph, which must outlive it.
class DeviceNeighborSampler {
 public:
  /// Throws ValueError for no fanouts, more than 256 layers or a fanout < -1.
  DeviceNeighborSampler(const DeviceGraph& graph, std::vector<int64_t> fanouts, bool replace,
                        EdgeDir dir = EdgeDir::kIn);

  /// Samples the blocks of `n` seed IDs in device memory (unique, each in [0, num_nodes); not
  /// checked on this path: sample_blocks_host checks them). `exclude` (host memory, may be null
  /// or empty; not owned) is copied to device scratch on `stream` once per call and its edges
  /// are left out of every hop, as by the CPU sampler.
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

 private:
  const DeviceGraph& graph_;
  std::vector<int64_t> fanouts_;
  bool replace_;
  EdgeDir dir_;
};

/// Copies device blocks (and their edge IDs) back into host Blocks. Synchronizes `stream`.
std::vector<Block> download_blocks(const DeviceBlocks& blocks, cuda::StreamHandle stream);

namespace detail {
/// ops::sample_neighbors / to_block with device=kCuda on host data (arguments validated): the
/// inputs are copied to the GPU for this one call, the CUDA twin runs, the result comes back.
/// Convenient for checks; for repeated sampling keep a DeviceGraph (or NeighborSampler with
/// device=kCuda), which copies the graph once. opts.exclude is copied to the GPU as well.
void sample_neighbors_cuda(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                           SampledEdges& out);
Block to_block_cuda(const SampledEdges& edges, Span<const int64_t> dst_nodes);
}  // namespace detail

}  // namespace tessera::ops
