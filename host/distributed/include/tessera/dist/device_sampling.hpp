// SPDX-License-Identifier: Apache-2.0
// Neighbor sampling of a DistGraph on this rank's GPU: the CUDA twin of DistNeighborSampler.
// The rank's sampling structure (its rows of the unpartitioned graph, by original node ID, in
// the original storage order) is placed once in device memory or in pinned host memory read
// through UVA; the CUDA sampling kernels draw with the same Philox keys (the original node ID)
// and the compaction kernel builds the blocks, so the blocks equal DistNeighborSampler's bit for
// bit. Nodes other ranks own are sampled by their owners, as on the CPU.
//
// In a build without CUDA the constructor throws NotCompiledError (not_compiled_with_cuda).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/device_sampler.hpp"

namespace tessera::dist {

class DistGraph;

/// Multi-layer neighbor sampling over a DistGraph on the calling thread's current GPU (the
/// device at construction; every call runs there whatever the calling thread's device).
class DistDeviceSampler {
 public:
  /// Places this rank's sampling structure (indptr over original IDs, neighbors as new IDs, new
  /// edge IDs, and with `weights_name` that edge feature's weights and their prefix sums) by
  /// `structure` (kGpu or kPinnedHost), plus the original ID of every owned node in device
  /// memory. Samplers of one graph with the same device, placement and weights share one placed
  /// copy while any of them lives. Fanouts input layer first, each >= -1 (ValueError
  /// otherwise). Holds a reference to the graph. Not collective. NotCompiledError without CUDA,
  /// ValueError without a device.
  DistDeviceSampler(const DistGraph& g, std::vector<int64_t> fanouts, bool replace = false,
                    cuda::Placement structure = cuda::Placement::kGpu,
                    std::string weights_name = {});
  ~DistDeviceSampler();
  DistDeviceSampler(const DistDeviceSampler&) = delete;
  DistDeviceSampler& operator=(const DistDeviceSampler&) = delete;

  /// Blocks of `seeds` (unique global new IDs; not checked here) on `stream`, input layer first,
  /// in device memory; hop h uses key layer h, as DistNeighborSampler. `d_seeds` holds the same
  /// IDs in device memory. With one rank (every node local) the whole batch stays on the device
  /// and the stream is synchronized only by the sampling and compaction kernels' own size reads;
  /// with several ranks each hop's frontier is copied to the host to route remote nodes to
  /// their owners (one request per owner, answered while this GPU samples its own nodes), the
  /// hop's edges are assembled on the host and compacted on the device. When the frontier of
  /// the input layer was copied to the host, `input_nodes_host` holds it.
  struct Result {
    ops::DeviceBlocks blocks;
    std::vector<int64_t> input_nodes_host;
  };
  Result sample_blocks(ops::Span<const int64_t> seeds, const int64_t* d_seeds, const RngKey& key,
                       cuda::StreamHandle stream) const;

  /// Host seeds in, host blocks out (checked: IndexError out of range, ValueError repeated);
  /// equal to DistNeighborSampler::sample_blocks with the same options and key. Synchronizes.
  std::vector<ops::Block> sample_blocks_host(ops::Span<const int64_t> seeds,
                                             const RngKey& key) const;

  const std::vector<int64_t>& fanouts() const { return fanouts_; }
  bool replace() const { return replace_; }
  const std::string& weights_name() const { return weights_name_; }
  cuda::Placement placement() const;
  /// Device or pinned bytes the placed structure holds.
  size_t bytes() const;
  int device() const;
  const DistGraph& graph() const { return g_; }

 private:
  struct Impl;
  const DistGraph& g_;
  std::vector<int64_t> fanouts_;
  bool replace_;
  std::string weights_name_;
  std::unique_ptr<Impl> impl_;
};

/// What place_on_device decided and did on this rank.
struct DevicePlacement {
  cuda::Placement structure = cuda::Placement::kGpu;  ///< for DistDeviceSampler
  bool weighted = false;        ///< the structure was charged with weights and prefix sums
  int64_t structure_bytes = 0;  ///< its bytes by the plan, per-row arrays included
  /// Per mirrored node-data tensor: its name, placement and hot-row cache rows.
  struct Tensor {
    std::string name;
    cuda::Placement placement = cuda::Placement::kGpu;
    int64_t bytes = 0;
    int64_t cache_rows = 0;
  };
  std::vector<Tensor> tensors;
  int64_t gpu_budget_bytes = 0;  ///< the budget the plan used
  int64_t gpu_bytes = 0;         ///< what it placed on the GPU (structure, rows, caches)
  int64_t gpu_bytes_left = 0;    ///< gpu_budget_bytes - gpu_bytes
  int64_t pinned_bytes = 0;      ///< what it placed in pinned host memory
  double seconds = 0;            ///< time taken by the mirrors (the sampler places the structure)
  /// "structure: gpu (1.68 GB); feat: uva + cache 120000 rows; label: gpu" for logs.
  std::string describe() const;
};

/// What place_on_device's plan depends on, all of it known without a GPU.
struct PlacementRequest {
  int64_t rows = 0;       ///< rows of the sampling structure (this rank's nodes)
  int64_t edges = 0;      ///< its edges
  bool packed = true;     ///< every neighbor and edge ID below 2^32: 8-byte adjacency entries
  bool weighted = false;  ///< weights (4 bytes) and their prefix sums (8) per edge, 16 per row
  struct Tensor {
    std::string name;
    int64_t rows = 0;
    int64_t row_bytes = 0;
  };
  std::vector<Tensor> tensors;   ///< in placement order
  int64_t gpu_budget_bytes = 0;  ///< >= 0
};

/// The bytes of a placed sampling structure (ops::DeviceGraph over DistDeviceSampler's rows):
/// per row, its offset and key (and, weighted, a 16-byte table entry), always in device memory;
/// per edge, the interleaved adjacency entry (8 bytes packed, else 16) and, weighted, the weight
/// and its prefix sum, where the plan puts the structure.
struct StructureBytes {
  int64_t per_row_arrays = 0;
  int64_t edge_arrays = 0;
};
StructureBytes structure_bytes(int64_t rows, int64_t edges, bool packed, bool weighted);

/// place_on_device's plan, without placing anything (no GPU needed): the per-row arrays of the
/// structure first (ValueError when they exceed the budget), then the structure's edge arrays,
/// then each tensor in order, each on the GPU if it fits whole, else in pinned host memory;
/// a tensor in pinned memory gets a GPU cache of as many rows as the bytes left hold, after its
/// slot map (8 bytes per row of the tensor) and the cache's fill (8 bytes per cached row, freed
/// after). gpu_bytes never exceeds the budget. `seconds` is 0.
DevicePlacement plan_device_placement(const PlacementRequest& request);

/// The placement policy of the GPU training path for this rank: within `gpu_budget_bytes` of
/// device memory (negative: half of the device's free memory now), the sampling structure goes
/// to the GPU first (sampling reads it at random), then each tensor of `node_data` in the given
/// order (labels and features); what does not fit goes to pinned host memory read through UVA,
/// and the GPU bytes left over cache the hottest rows (highest in-degree) of the first tensor
/// placed there. Mirrors the node-data tensors accordingly (DistTensor::mirror_on_device) and
/// returns the plan; the caller creates its DistDeviceSampler with `structure`. Not collective.
/// ValueError for an unknown node-data name; NotCompiledError without CUDA.
DevicePlacement place_on_device(const DistGraph& g, const std::vector<std::string>& node_data,
                                int64_t gpu_budget_bytes = -1, bool weighted = false);

}  // namespace tessera::dist
