// SPDX-License-Identifier: Apache-2.0
// Internal: the arguments of the sampling kernels (cuda/src/sample_neighbors.cu) and of the
// compaction passes (cuda/src/sampler.cu), and their launchers. Plain C++ (no CUDA syntax), so
// both .cu files and the tests of the launch shapes can include it.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/graph_view.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::cuda::detail {

/// Batches one launch may serve.
inline constexpr int kMaxBatches = 64;
/// Threads per block of every sampling kernel.
inline constexpr int kBlockThreads = 256;

/// What changes from one sampler call to the next, in device memory: the sampler rewrites it
/// (one copy from pinned memory) before the launches, so a captured CUDA graph replays with new
/// seeds, keys and output buffers. Followed in the same buffer by the per-hop output pointers
/// and the sizes (see SamplerLayout in sampler.cu).
struct LaunchParams {
  const int64_t* seeds = nullptr;       ///< every batch's seeds, concatenated
  int64_t* nodes = nullptr;             ///< per batch: its unique node list (node_stride apart)
  int64_t seed_off[kMaxBatches + 1]{};  ///< batch k: seeds[seed_off[k], seed_off[k + 1])
  RngKey keys[kMaxBatches]{};           ///< (seed, epoch, batch) of each batch; layer set per hop
  uint32_t gen = 0;                     ///< the node tables' generation of this call
  int32_t K = 0;                        ///< batches in this call
};

/// Error bits the kernels set in the sizes' error word.
inline constexpr unsigned long long kErrSeedRange = 1;  ///< a frontier node's row out of range
inline constexpr unsigned long long kErrSeedTwice = 2;  ///< a seed listed twice in its batch

/// One hop's kernels. Two uses:
/// - multi-layer sampling (P set): batch k's frontier is P->nodes[k * node_stride + i] for
///   i < width[k] (hop 0: the seeds, which the sample pass copies there), keys from P;
/// - one-hop sampling (P null): one batch, frontier seeds[0, n), key `key`, no table.
struct HopArgs {
  GraphView g;
  RowMap map;                          ///< node -> row (pipeline)
  int64_t id_space = 0;                ///< node IDs are < id_space (0: not checked)
  const int64_t* seed_rows = nullptr;  ///< one-hop: per position, the row (null: the seed)
  rows::ExcludeView ex;                ///< num_rows 0: none (then no thread mode for it)
  int64_t fanout = 0;
  bool replace = false;
  bool weighted = false;
  bool thread_mode = false;  ///< one thread per node (exclusion, fanout > kMaxGroupFanout)
  int G = 32;                ///< lanes per group
  int64_t cap = 0;           ///< scratch entries per group (group::scratch_entries)
  int stage_bytes = 0;       ///< UVA: rows up to this size are read whole (0: never)

  const LaunchParams* P = nullptr;
  int hop = 0;
  int64_t node_stride = 0;
  const int64_t* width = nullptr;        ///< device: w[hop][k]
  int64_t* next_width = nullptr;         ///< device: w[hop + 1][k] (number pass)
  int64_t* edges = nullptr;              ///< device: m[hop][k] (number pass)
  unsigned long long* errors = nullptr;  ///< device: error bits (null: not checked)
  int64_t* const* outs = nullptr;        ///< device: per hop src, dst, eid buffers (3 per hop)
  int64_t out_stride = 0;                ///< entries per batch in this hop's outputs

  const int64_t* seeds = nullptr;  ///< one-hop frontier (P null)
  int64_t n = 0;
  RngKey key;

  int64_t* pad_nbr = nullptr;  ///< padded neighbors, pad_stride per batch
  int64_t* pad_eid = nullptr;
  int64_t pad_stride = 0;
  int64_t* cnt = nullptr;         ///< flat per frontier node: its edges
  int64_t items_bound = 0;        ///< flat entries the scans cover; the tail past the frontier is 0
  const int64_t* base = nullptr;  ///< exact offsets (one batch): slot of node i; null: i * fanout
  const int64_t* soff = nullptr;  ///< exclusion: candidate scratch offsets
  int64_t* scnt = nullptr;        ///< exclusion: count pass output of scratch entries
  int64_t* cand = nullptr;
  float* cand_w = nullptr;
  double* cand_cdf = nullptr;
  uint64_t* pairs = nullptr;       ///< mark pass: (new << 32 | edges) per node
  const uint64_t* scan = nullptr;  ///< exclusive scan of pairs

  uint64_t* table_vals = nullptr;  ///< null: no compaction
  uint64_t* table_keys = nullptr;  ///< null: one entry per node
  uint64_t table_mask = 0;
  int64_t table_stride = 0;  ///< entries per batch

  // The relabel pass of the previous hop, fused into this hop's sample pass (rel_hop >= 0), or
  // run alone by relabel_kernel.
  int rel_hop = -1;
  const int64_t* rel_edges = nullptr;  ///< device: m[rel_hop][k]
  int64_t rel_stride = 0;
};

/// Launch shape of a group kernel: groups per block and dynamic shared memory.
struct GroupShape {
  int groups_per_block = 0;
  size_t group_bytes = 0;
  size_t smem_bytes = 0;
};
GroupShape group_shape(const HopArgs& a);

/// Blocks for a grid-stride kernel over `items` work items of `per_block` each: enough to cover
/// them, at most a few waves of the device.
unsigned grid_for_items(int64_t items, int64_t per_block);

// Launchers (sample_neighbors.cu). `grid_items` sizes the grid (an upper bound of the frontier).
void launch_sample(const HopArgs& a, int64_t grid_items, StreamHandle stream);
void launch_count(const HopArgs& a, int64_t grid_items, StreamHandle stream);
void launch_densify(const HopArgs& a, int64_t* src, int64_t* dst, int64_t* eid, bool dir_in,
                    StreamHandle stream);
/// Exclusive sum of n + 1 values (the last of which must be 0) into out; `temp` of `temp_bytes`
/// (null: returns the bytes needed and launches nothing).
size_t exclusive_sum_i64(void* temp, size_t temp_bytes, const int64_t* in, int64_t* out, int64_t n,
                         StreamHandle stream);
size_t exclusive_sum_u64(void* temp, size_t temp_bytes, const uint64_t* in, uint64_t* out,
                         int64_t n, StreamHandle stream);

// Launchers (sampler.cu).
void launch_mark(const HopArgs& a, int64_t grid_items, StreamHandle stream);
void launch_number(const HopArgs& a, int64_t grid_items, StreamHandle stream);
void launch_relabel(const HopArgs& a, int64_t grid_items, StreamHandle stream);

}  // namespace tessera::cuda::detail
