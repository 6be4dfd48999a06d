// SPDX-License-Identifier: Apache-2.0
// CUDA twins of host/ops (gather, scatter, SpMM). Plain C++ declarations over raw pointers and
// opaque streams: host/ops validates arguments once and dispatches here when the data lives on
// the GPU. Every function only enqueues work on `stream`; none synchronizes the device.
// In a CPU-only build each throws NotCompiledError (not_compiled_with_cuda).
#pragma once

#include <cstdint>

#include <memory>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/aggregate_rows.hpp"
#include "tessera/cuda/gather_plan.hpp"
#include "tessera/cuda/graph_view.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda {

/// Element type of an index vector.
enum class IndexType : uint8_t { kInt32, kInt64 };

/// Sentinel in a "first bad position" flag: no out-of-range index was seen.
inline constexpr unsigned long long kNoBadIndex = ~0ull;

/// out[i] = src[idx[i]] for i in [0, n), each row `row_bytes` bytes (any width; 16-byte vector
/// accesses when row_bytes and both base addresses allow, else 8/4/2/1). `src` is device memory
/// or a UVA pointer of pinned host memory; `out` is device memory (or UVA). An index outside
/// [0, src_rows) zero-fills its output row and, when `d_first_bad` (device memory, preset to
/// kNoBadIndex) is non-null, atomically lowers it to that position i.
/// `order` (tessera/cuda/gather_plan.hpp) says in which order the rows are read; the output is
/// the same. kAuto sorts when the source is in host memory and the batch is large enough
/// (gather::sort_pays): (row, position) pairs are radix-sorted on `stream` with scratch from
/// scratch_allocator(), and each row is read once in row order and written to its position, so
/// a page of the source is translated once per batch rather than once per row.
void gather_rows_impl(const void* src, int64_t src_rows, int64_t row_bytes, const void* idx,
                      IndexType idx_type, int64_t n, void* out, unsigned long long* d_first_bad,
                      StreamHandle stream, GatherOrder order = GatherOrder::kAuto);

/// Whether gather_rows_impl / gather_rows_cached_impl with `order` sorts the indices of a
/// gather of n rows of `row_bytes` from `src` (kAuto: gather::sort_pays for where src lives).
bool gather_sorts_indices(const void* src, int64_t row_bytes, int64_t n,
                          GatherOrder order = GatherOrder::kAuto);

/// dst[idx[i]] = src[i] for i in [0, n). With duplicate indices, which source row lands is
/// unspecified (the CPU twin keeps the last). An index outside [0, dst_rows) writes nothing and
/// lowers `*d_first_bad` as in gather_rows_impl.
void scatter_rows_impl(const void* src, int64_t n, int64_t row_bytes, const void* idx,
                       IndexType idx_type, void* dst, int64_t dst_rows,
                       unsigned long long* d_first_bad, StreamHandle stream);

/// Gather through a GPU cache of hot rows: row r is read from `cache` slot d_slot_of[r] when
/// that is >= 0, else from `src` (typically UVA). Same output, out-of-range handling and `order`
/// as gather_rows_impl. When `d_counters` (device memory, two entries) is non-null, [0] gains n
/// lookups and [1] the number of rows read from the cache, whatever the order.
void gather_rows_cached_impl(const void* src, int64_t src_rows, int64_t row_bytes,
                             const void* cache, const int64_t* d_slot_of, const void* idx,
                             IndexType idx_type, int64_t n, void* out,
                             unsigned long long* d_counters, unsigned long long* d_first_bad,
                             StreamHandle stream, GatherOrder order = GatherOrder::kAuto);

/// Aggregation of an SpMM.
enum class Reduce : uint8_t { kSum, kMean };

/// Who runs an SpMM on the GPU. kCusparse: cuSPARSE (descriptors, a workspace and the edge
/// values built per call: fastest on large patterns). kRows: Tessera's row kernels (a warp per
/// row of A, lanes over the columns of B, forward in storage order then times 1 / degree, the
/// CPU twin's bits; the transpose adds with atomics): two launches and no scratch, for the
/// per-step blocks of mini-batch training, where the host's time per call is the bound.
enum class SpmmEngine : uint8_t { kCusparse, kRows };

/// C = op(A) * B through cuSPARSE or Tessera's row kernels (`engine`), float32. A is a num_rows x
/// num_cols CSR pattern (indptr of num_rows + 1 and indices of nnz entries, both `idx_type`, in
/// device memory) whose values are 1 (kSum) or 1 / deg(row) (kMean; a row of degree 0 yields
/// zeros). Without `transpose`, B is num_cols x feat and C num_rows x feat; with it, op(A) = A^T, B
/// is num_rows x feat and C num_cols x feat (the backward of the forward aggregation). Row-major,
/// device memory. Scratch (edge values, cuSPARSE workspace) comes from scratch_allocator() on
/// `stream`.
void spmm_impl(const void* indptr, const void* indices, IndexType idx_type, int64_t num_rows,
               int64_t num_cols, int64_t nnz, const float* B, int64_t feat, float* C, Reduce reduce,
               bool transpose, StreamHandle stream, SpmmEngine engine = SpmmEngine::kCusparse);

/// C (num_rows x feat) = aggregate_rows_cpu's aggregation on the GPU, the same bits: for every
/// row r, the sum, mean or max over its entries e (storage order) of (w ? w[e] : 1) *
/// B[cols[e]]; zeros for a row without entries. `indptr` (num_rows + 1), `cols` and `w` (one
/// per entry, or null), B and C in device memory, row-major; asynchronous on `stream`.
void aggregate_rows_impl(const int64_t* indptr, const int64_t* cols, const float* w,
                         int64_t num_rows, const float* B, int64_t feat, float* C, RowReduce reduce,
                         StreamHandle stream);

/// indptr[0 .. num_rows] = csr_offsets_cpu's offsets of the non-decreasing rows[0, m) (device
/// memory, int64), asynchronous on `stream`: one thread per offset (csr_offsets.hpp).
void csr_offsets_impl(const int64_t* rows, int64_t m, int64_t num_rows, int64_t* indptr,
                      StreamHandle stream);

/// A GPU cache of hot feature rows in front of a (typically pinned, UVA) source matrix.
/// Owns the cached rows and the slot map in device memory.
class FeatureCache {
 public:
  /// Copies rows `hot_rows` of `src` (src_rows x row_bytes, readable by the GPU) into a device
  /// buffer and uploads the slot map (slot_of has src_rows entries, -1 = not cached). The copy
  /// is enqueued on `stream`; the cache is usable by later work on that stream.
  FeatureCache(const void* src, int64_t src_rows, int64_t row_bytes, const int64_t* hot_rows,
               int64_t num_hot, const int64_t* slot_of, StreamHandle stream);
  ~FeatureCache();
  FeatureCache(const FeatureCache&) = delete;
  FeatureCache& operator=(const FeatureCache&) = delete;

  const void* src() const { return src_; }
  int64_t src_rows() const { return src_rows_; }
  int64_t row_bytes() const { return row_bytes_; }
  int64_t capacity_rows() const { return num_hot_; }
  const void* cache() const { return cache_.data(); }
  const int64_t* slot_of() const { return static_cast<const int64_t*>(slot_.data()); }
  /// Device counters: [0] lookups, [1] hits (accumulated by gathers that pass them).
  unsigned long long* d_counters() const { return static_cast<unsigned long long*>(cnt_.data()); }
  /// Reads the counters back (synchronizes `stream`: call between epochs, not per batch).
  void read_counters(StreamHandle stream, int64_t* lookups, int64_t* hits) const;
  /// Zeroes the counters on `stream`.
  void reset_counters(StreamHandle stream);

 private:
  const void* src_;
  int64_t src_rows_, row_bytes_, num_hot_;
  DeviceBuffer cache_, slot_, cnt_;
};

/// Sampled edges in device memory (scratch from scratch_allocator(), returned when destroyed):
/// edge i is (src[i] -> dst[i]) with edge ID eid[i], the layout of ops::SampledEdges.
struct DeviceSample {
  int64_t size = 0;
  std::unique_ptr<ScratchBuffer> src, dst, eid;
  const int64_t* src_ptr() const {
    return src ? static_cast<const int64_t*>(src->data()) : nullptr;
  }
  const int64_t* dst_ptr() const {
    return dst ? static_cast<const int64_t*>(dst->data()) : nullptr;
  }
  const int64_t* eid_ptr() const {
    return eid ? static_cast<const int64_t*>(eid->data()) : nullptr;
  }
};

namespace rows {
struct ExcludeView;  // tessera/cuda/sample_rows.hpp: ops::ExcludeEdges in device memory
}  // namespace rows

/// CUDA twin of ops::sample_neighbors over a placed graph `g` (any adjacency layout; weighted
/// when g.weights is set): the same Philox draws (tessera/core/philox.hpp, stream kNeighbor), the
/// same algorithms and the same output order (grouped by seed in seed order), so the edges are
/// bit-identical to the CPU twin's. `seeds` are n int64 IDs in device memory (not checked here:
/// a row outside the graph yields no edges). `dir_in`: CSC, edges (neighbor -> seed); else CSR,
/// edges (seed -> neighbor). `exclude` (null or no rows: none; arrays in device memory or UVA)
/// removes edges from their rows before drawing, as SampleOptions::exclude does. `seed_rows`
/// (null: the seeds themselves) gives, per seed, the row it samples (whose Philox node is
/// node_key(g, row): g.row_keys, or the row), while `seeds[i]` is the ID written into the edges:
/// a distributed owner's rows are numbered locally, keyed by original node ID, and write new
/// IDs (dist/device_sampling).
/// A group of lanes samples each seed (one thread per seed with exclusion or a fanout above
/// 256). Outputs are sized by n x fanout and the stream is synchronized ONCE, at the end, to
/// learn the number of edges; with fanout -1 or exclusion the exact sizes are counted first
/// (one synchronization before the sample pass instead). Scratch and outputs come from
/// scratch_allocator() on `stream`.
DeviceSample sample_neighbors_impl(const GraphView& g, const int64_t* seeds, int64_t n,
                                   int64_t fanout, bool replace, bool dir_in, const RngKey& key,
                                   StreamHandle stream, const rows::ExcludeView* exclude = nullptr,
                                   const int64_t* seed_rows = nullptr);

/// sample_neighbors_impl, UNIFORM, over raw arrays: indptr (num_nodes + 1), indices and eids
/// (null: identity) int64 in device memory or UVA (two reads per sampled edge; a DeviceGraph's
/// interleaved layout needs one). Synchronizes as sample_neighbors_impl.
DeviceSample sample_neighbors_uniform_impl(const int64_t* indptr, const int64_t* indices,
                                           const int64_t* eids, const int64_t* seeds, int64_t n,
                                           int64_t fanout, bool replace, bool dir_in,
                                           const RngKey& key, StreamHandle stream,
                                           const rows::ExcludeView* exclude = nullptr,
                                           const int64_t* seed_rows = nullptr);

/// sample_neighbors_impl, WEIGHTED, over raw arrays: `weights` (float, storage order, already
/// validated finite and >= 0) and `prefix` (their per-row double prefix sums, the layout of
/// ops::weight_prefix_sums; see weight_prefix_sums_impl) in device memory or UVA. A zero weight
/// is never drawn; without replacement a row keeps all its positive-weight neighbors when there
/// are at most `fanout`. A seed with excluded edges draws over its remaining edges' weights with
/// prefix sums re-added in storage order (as the CPU twin does), not the row's `prefix`. Without
/// a per-row table of positive weights (DeviceGraph has one) each seed's group counts them.
DeviceSample sample_neighbors_weighted_impl(const int64_t* indptr, const int64_t* indices,
                                            const int64_t* eids, const float* weights,
                                            const double* prefix, const int64_t* seeds, int64_t n,
                                            int64_t fanout, bool replace, bool dir_in,
                                            const RngKey& key, StreamHandle stream,
                                            const rows::ExcludeView* exclude = nullptr,
                                            const int64_t* seed_rows = nullptr);

/// out[k] = per-row inclusive prefix sums of `weights` in double, summed in storage order from
/// each row's start (exactly ops::weight_prefix_sums), for a graph of num_nodes rows; indptr,
/// weights and out (num_edges doubles) in device memory or UVA. Enqueued on `stream`.
void weight_prefix_sums_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                             double* out, StreamHandle stream);

/// weight_prefix_sums_impl, and with `row_info` (2 int64 per row, device memory or UVA; may be
/// null) each row's {number of positive weights, position of its last positive weight} (0, 0
/// for a row without any): the per-row table of GraphView::row_info. Enqueued on `stream`.
void weight_row_tables_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                            double* prefix, int64_t* row_info, StreamHandle stream);

/// A block (message-flow graph) in device memory: local source IDs index src_nodes, whose
/// first num_dst entries are the destination nodes; the layout of ops::Block. Each array is a
/// range of a scratch buffer (from scratch_allocator()) that the block shares with the other
/// blocks and batches sampled by the same call; the shared pointers keep the buffers alive, the
/// offsets (in elements) place the block's range. `eids` may be null (to_block_impl leaves it).
struct DeviceBlock {
  int64_t num_dst = 0;
  int64_t num_src = 0;
  int64_t num_edges = 0;
  std::shared_ptr<ScratchBuffer> src_nodes, src, dst, eids;
  int64_t src_nodes_offset = 0, src_offset = 0, dst_offset = 0, eids_offset = 0;
  const int64_t* src_nodes_ptr() const { return at(src_nodes, src_nodes_offset); }
  const int64_t* src_ptr() const { return at(src, src_offset); }
  const int64_t* dst_ptr() const { return at(dst, dst_offset); }
  const int64_t* eids_ptr() const { return at(eids, eids_offset); }

 private:
  static const int64_t* at(const std::shared_ptr<ScratchBuffer>& b, int64_t off) {
    return b && b->data() ? static_cast<const int64_t*>(b->data()) + off : nullptr;
  }
};

/// CUDA twin of ops::to_block: compacts m edges (edge_src, edge_dst: int64 global IDs in device
/// memory) onto local IDs, the destination nodes (nd unique IDs >= 0, device memory) first and
/// then the new source nodes in order of first appearance in the edge list, exactly as the CPU
/// twin. A GPU hash table keeps, for every node, the smallest position at which it appears
/// (atomicMin); a node is new at the edge where that position is reached, and a scan over those
/// edges numbers the new nodes in first-appearance order. Synchronizes `stream` once (to learn
/// the number of source nodes and check errors). Throws ValueError, with the CPU twin's
/// message, for a destination node listed twice or an edge whose dst is not a destination node.
DeviceBlock to_block_impl(const int64_t* edge_src, const int64_t* edge_dst, int64_t m,
                          const int64_t* dst_nodes, int64_t nd, StreamHandle stream);

/// A second figure of the sampling benchmark: reads per second of single `elem_bytes` (8 or 16)
/// elements at uniform random positions of `array` (count elements, device memory, or pinned
/// host memory read through UVA when `uva`), by a kernel that keeps eight independent reads in
/// flight on every resident thread; median of `iters` timed runs after a warm-up. (Not a limit
/// of the sampler, which reads whole rows: see row_read_rate.) Synchronizes (a benchmark).
double random_read_rate(const void* array, int64_t count, int elem_bytes, bool uva, int iters);

/// Visits [begin, end) of a list of frontier visits, sampled with `fanout` (-1: all).
struct VisitSegment {
  int64_t begin = 0, end = 0, fanout = 0;
};

/// The limit of the sampling benchmark: sampled edges per second when a plain kernel reads, for
/// each visit of `d_visits` (node IDs in device memory, in `segments` of equal fanout), only
/// what the sampler must read of the placed graph `g` (tessera/cuda/row_reads.hpp: the node's
/// indptr entries, then its row whole when the sampler stages it (`stage_bytes`, resolved; 0:
/// none) or takes every edge, else the drawn entries, weighted draws after their prefix-sum
/// search), with a group of lanes per visit as wide as the sampler's. `edges` is what the
/// visits yield (the rate is edges / time). Median of `iters` runs after a warm-up, the L2 left
/// warm as the sampler finds it. Synchronizes (it is a benchmark).
double row_read_rate(const GraphView& g, const int64_t* d_visits, const VisitSegment* segments,
                     int num_segments, bool replace, int stage_bytes, int64_t edges, int iters);

/// A diagnostic run of the library's gather (`tessera bench gather --probe`): median
/// milliseconds (`iters` runs after a warm-up, L2 flushed before each) of gathering `n` random
/// rows (int64 indices, fixed `seed`) of `row_bytes` from `src` (device memory or UVA) into
/// device memory in `order`, with `rows_per_group` (1, 2, 4 or 8; 0: the library's choice) rows per
/// thread group; with `sort_only`, of the sorted path's keys and radix sort alone.
/// Synchronizes (it is a benchmark).
double probe_gather_ms(const void* src, int64_t src_rows, int64_t row_bytes, int64_t n,
                       GatherOrder order, int rows_per_group, bool sort_only, int iters,
                       uint64_t seed);

}  // namespace tessera::cuda
