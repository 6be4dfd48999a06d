// SPDX-License-Identifier: Apache-2.0
// CUDA twin of ops::NeighborSampler::sample_blocks (host/ops/src/sampler.cpp): the compaction
// passes of the GPU sampler (mark, number, relabel; the sample pass is in sample_neighbors.cu)
// and BlockSampler, which sizes, schedules and replays them (tessera/cuda/block_sampler.hpp).
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "gather_launch.hpp"
#include "sample_device.cuh"
#include "tessera/core/error.hpp"
#include "tessera/cuda/block_sampler.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {
namespace detail {
namespace {

// The mark pass: first appearances flagged, per node (edges, new nodes) for the scan; the tail
// of `pairs` up to items_bound (inclusive) zeroed. At hop 0 it also checks that every seed kept
// its own local ID (a seed listed twice in its batch did not).
__global__ void __launch_bounds__(kBlockThreads)
    mark_kernel(const __grid_constant__ HopArgs a, size_t group_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Batches b;
  batch_prologue(a, b);
  const int G = a.G;
  const int gpb = kBlockThreads / G;
  const int gib = static_cast<int>(threadIdx.x) / G;
  const WarpExec ex{G, static_cast<int>(threadIdx.x) & (G - 1), group_mask(G)};
  const GroupSmem sm = carve(smem, group_bytes, gib, G);
  const int64_t total = b.start[b.K];
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * gpb + gib; gi < total;
       gi += static_cast<int64_t>(gridDim.x) * gpb) {
    const int k = group::batch_of(b.start, b.K, gi);
    const int64_t i = gi - b.start[k];
    const items::TableView t = table_of(a, k);
    const int64_t slot0 = slot_of(a, b, k, i, gi);
    const int64_t c = a.cnt[gi];
    if (a.hop == 0 && a.errors && ex.lane == 0) {
      const int64_t v = frontier_node(a, k, i);
      if (row_of(a, v, gi) >= 0 && t.value(v) != group::final_code(t.gen, i))
        atomicOr(a.errors, kErrSeedTwice);
    }
    const int64_t fresh =
        items::mark_item(ex, t, a.pad_nbr + k * a.pad_stride + slot0, c, slot0, sm.s);
    if (ex.lane == 0) a.pairs[gi] = items::count_pair(c, fresh);
    __syncwarp(ex.mask);
  }
  for (int64_t j = total + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       j <= a.items_bound; j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a.pairs[j] = 0;
}

// The number pass: dense edges, new nodes appended, and the batch's sizes for the next hop.
__global__ void __launch_bounds__(kBlockThreads)
    number_kernel(const __grid_constant__ HopArgs a, size_t group_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Batches b;
  batch_prologue(a, b);
  const int G = a.G;
  const int gpb = kBlockThreads / G;
  const int gib = static_cast<int>(threadIdx.x) / G;
  const WarpExec ex{G, static_cast<int>(threadIdx.x) & (G - 1), group_mask(G)};
  const GroupSmem sm = carve(smem, group_bytes, gib, G);
  const int64_t total = b.start[b.K];
  int64_t* const* outs = a.outs + 3 * a.hop;
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * gpb + gib; gi < total;
       gi += static_cast<int64_t>(gridDim.x) * gpb) {
    const int k = group::batch_of(b.start, b.K, gi);
    const int64_t i = gi - b.start[k];
    const int64_t wk = b.start[k + 1] - b.start[k];
    const int64_t slot0 = slot_of(a, b, k, i, gi);
    const int64_t c = a.cnt[gi];
    const uint64_t off = a.scan[gi] - a.scan[b.start[k]];
    const int64_t e0 = items::pair_edges(off), nb = items::pair_new(off);
    items::NumberOut o;
    o.src = outs[0] + k * a.out_stride;
    o.dst = outs[1] + k * a.out_stride;
    o.eid = outs[2] + k * a.out_stride;
    o.nodes = a.P->nodes + k * a.node_stride;
    const int64_t* pad = a.pad_nbr + k * a.pad_stride + slot0;
    const int64_t* pad_eid = a.pad_eid + k * a.pad_stride + slot0;
    items::number_item(ex, table_of(a, k), pad, pad_eid, c, i, e0, wk + nb, o, sm.s);
    if (i == wk - 1 && ex.lane == 0) {
      a.edges[k] = e0 + c;
      a.next_width[k] = wk + nb + items::pair_new(a.pairs[gi]);
    }
    __syncwarp(ex.mask);
  }
}

// The relabel pass of the last hop (earlier hops' run inside the next sample pass).
__global__ void __launch_bounds__(kBlockThreads) relabel_kernel(const __grid_constant__ HopArgs a) {
  __shared__ Batches b;
  batch_prologue(a, b);
  relabel_loop(a, b);
}

// Mark and number passes use a group's state and b (G entries) only.
GroupShape pass_shape(const HopArgs& a) {
  HopArgs p = a;
  p.cap = p.G;
  p.stage_bytes = 0;
  return group_shape(p);
}

}  // namespace

void launch_mark(const HopArgs& a, int64_t grid_items, StreamHandle stream) {
  const GroupShape sh = pass_shape(a);
  TESSERA_KERNEL_CALL(
      mark_kernel, grid_for_items(std::max(grid_items, a.items_bound + 1), sh.groups_per_block),
      kBlockThreads, sh.smem_bytes, static_cast<cudaStream_t>(stream), a, sh.group_bytes);
}

void launch_number(const HopArgs& a, int64_t grid_items, StreamHandle stream) {
  const GroupShape sh = pass_shape(a);
  TESSERA_KERNEL_CALL(number_kernel, grid_for_items(grid_items, sh.groups_per_block), kBlockThreads,
                      sh.smem_bytes, static_cast<cudaStream_t>(stream), a, sh.group_bytes);
}

void launch_relabel(const HopArgs& a, int64_t grid_items, StreamHandle stream) {
  TESSERA_KERNEL_CALL(relabel_kernel, grid_for_items(grid_items, kBlockThreads), kBlockThreads, 0,
                      static_cast<cudaStream_t>(stream), a);
}

}  // namespace detail

namespace {

using detail::HopArgs;
using detail::kMaxBatches;
using detail::LaunchParams;

constexpr int64_t kMaxWorkspacesPerShape = 4;
constexpr uint64_t kDenseBudget = uint64_t{256} << 20;

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x)
    p <<= 1;
  return p;
}

size_t align16(size_t x) {
  return (x + 15) & ~size_t{15};
}

// Where things are in the parameter block (device) and in its pinned mirror (a Slot): the
// LaunchParams, then 3 output pointers per hop, then the sizes: w[h][k] for h <= H, m[h][k] for
// h < H (K slots each), and the error word.
struct Layout {
  int H = 0, K = 0;
  size_t outs_off = 0, sizes_off = 0, total = 0;
  size_t w_index(int h, int k) const { return static_cast<size_t>(h) * K + k; }
  size_t m_index(int h, int k) const { return static_cast<size_t>(H + 1 + h) * K + k; }
  size_t err_index() const { return static_cast<size_t>(2 * H + 1) * K; }
  size_t sizes_bytes() const { return (err_index() + 1) * sizeof(int64_t); }
  Layout(int layers, int batches) : H(layers), K(batches) {
    outs_off = align16(sizeof(LaunchParams));
    sizes_off = outs_off + align16(static_cast<size_t>(3 * H) * sizeof(int64_t*));
    total = sizes_off + sizes_bytes();
  }
};

// Pinned mirror of a parameter block, reused once the call that filled it was waited for.
struct Slot {
  PinnedBuffer buf;
  cudaEvent_t ev = nullptr;
  std::atomic<bool> busy{false};
  explicit Slot(size_t bytes) : buf(bytes) {
    TESSERA_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  }
  ~Slot() {
    if (ev) TESSERA_CUDA_TRY_NOTHROW(cudaEventDestroy(ev));
  }
  unsigned char* bytes() const { return static_cast<unsigned char*>(buf.data()); }
};

struct Shape {
  int K = 1;
  int64_t nb = 0;  // seeds per batch, rounded up to a power of two
  bool exact = false;
  bool operator<(const Shape& o) const {
    return std::tie(K, nb, exact) < std::tie(o.K, o.nb, o.exact);
  }
};

struct Workspace {
  std::mutex mu;  // held by the call that enqueues on it
  Shape shape;
  Layout L{0, 0};
  int H = 0;
  std::vector<int64_t> wb, mb;  // per batch: frontier bound of hop h (h <= H), edge bound
  int64_t node_stride = 0;
  DeviceBuffer params;
  DeviceBuffer tvals, tkeys;
  uint64_t tmask = 0;
  int64_t tstride = 0;
  // Fixed scratch of the fast path (every hop padded).
  DeviceBuffer pad_nbr, pad_eid, cnt, pairs, scan, cub_temp;
  size_t cub_bytes = 0;
  std::vector<HopArgs> hops;
  HopArgs relabel;
  cudaGraphExec_t exec = nullptr;
  bool graph_failed = false;
  cudaEvent_t done = nullptr;
  bool done_recorded = false;
  uint32_t gen = 0;
  StreamHandle last_stream = nullptr;  // the stream of the latest call
  std::vector<std::unique_ptr<Slot>> slots;
  size_t bytes = 0;

  ~Workspace() {
    if (exec) TESSERA_CUDA_TRY_NOTHROW(cudaGraphExecDestroy(exec));
    if (done) TESSERA_CUDA_TRY_NOTHROW(cudaEventDestroy(done));
  }
  Slot* take_slot() {
    for (auto& s : slots) {
      bool expect = false;
      if (s->busy.compare_exchange_strong(expect, true)) return s.get();
    }
    slots.push_back(std::make_unique<Slot>(L.total));
    slots.back()->busy = true;
    return slots.back().get();
  }
  LaunchParams* params_at(Slot* s) const { return reinterpret_cast<LaunchParams*>(s->bytes()); }
  int64_t** outs_at(unsigned char* base) const {
    return reinterpret_cast<int64_t**>(base + L.outs_off);
  }
  int64_t* sizes_at(unsigned char* base) const {
    return reinterpret_cast<int64_t*>(base + L.sizes_off);
  }
  // The generation of the next call; the tables are cleared when it wraps (hashed keys keep its
  // low 16 bits, never 0).
  uint32_t next_gen(cudaStream_t s) {
    ++gen;
    const bool wrap = gen == 0 || (tkeys.data() && (gen & 0xFFFFu) == 0);
    if (wrap || gen == 1) {
      if (tvals.data()) TESSERA_CUDA_TRY(cudaMemsetAsync(tvals.data(), 0, tvals.size(), s));
      if (tkeys.data()) TESSERA_CUDA_TRY(cudaMemsetAsync(tkeys.data(), 0, tkeys.size(), s));
      gen = 1;
    }
    return gen;
  }
};

DeviceBuffer device_array(size_t bytes, size_t* total) {
  *total += bytes;
  return DeviceBuffer(std::max<size_t>(bytes, 16));
}

}  // namespace

struct BlockSampler::Impl {
  int device = 0;
  int64_t id_space = 0;
  std::mutex mu;
  std::map<Shape, std::vector<std::unique_ptr<Workspace>>> pools;
  std::atomic<int64_t> calls{0}, graph_launches{0}, captures{0}, host_syncs{0};
};

struct BlockSampler::Pending::State {
  const BlockSampler* owner = nullptr;
  Workspace* ws = nullptr;
  Slot* slot = nullptr;
  int K = 0, H = 0;
  std::vector<int64_t> out_stride;  // per hop
  int64_t node_stride = 0;
  std::vector<std::shared_ptr<ScratchBuffer>> outs;  // 3 per hop
  std::shared_ptr<ScratchBuffer> nodes;
  std::vector<std::unique_ptr<State>> parts;  // a multi-batch call that ran batch by batch
  bool done = false;

  void release() {
    if (slot) {
      slot->busy = false;
      slot = nullptr;
    }
  }
  ~State() {
    if (slot) {
      TESSERA_CUDA_TRY_NOTHROW(cudaEventSynchronize(slot->ev));
      release();
    }
  }
};

BlockSampler::Pending::Pending() = default;
BlockSampler::Pending::~Pending() = default;
BlockSampler::Pending::Pending(Pending&&) noexcept = default;
BlockSampler::Pending& BlockSampler::Pending::operator=(Pending&&) noexcept = default;

std::vector<SampledBatch> BlockSampler::Pending::wait() {
  TESSERA_EXPECTS(s_ && !s_->done, ValueError, "BlockSampler::Pending::wait: called twice");
  State& st = *s_;
  st.done = true;
  std::vector<SampledBatch> out;
  if (!st.parts.empty()) {
    for (auto& p : st.parts) {
      Pending one;
      one.s_ = std::move(p);
      for (SampledBatch& b : one.wait())
        out.push_back(std::move(b));
    }
    return out;
  }
  if (!st.slot) return out;
  TESSERA_CUDA_TRY(cudaEventSynchronize(st.slot->ev));  // the one synchronization of the call
  st.owner->impl_->host_syncs++;
  const Layout& L = st.ws->L;
  std::vector<int64_t> sizes(L.sizes_bytes() / sizeof(int64_t));
  std::memcpy(sizes.data(), st.ws->sizes_at(st.slot->bytes()), L.sizes_bytes());
  st.release();
  const int64_t err = sizes[L.err_index()];
  TESSERA_EXPECTS((err & static_cast<int64_t>(detail::kErrSeedRange)) == 0, IndexError,
                  "sample_blocks: a node ID outside [0, {}) or whose row is outside the graph "
                  "(seeds must be valid node IDs)",
                  st.owner->impl_->id_space);
  TESSERA_EXPECTS((err & static_cast<int64_t>(detail::kErrSeedTwice)) == 0, ValueError,
                  "sample_blocks: a seed is listed twice in its batch (seeds become destination "
                  "nodes)");
  out.resize(static_cast<size_t>(st.K));
  for (int k = 0; k < st.K; ++k) {
    SampledBatch& b = out[k];
    b.blocks.resize(static_cast<size_t>(st.H));
    for (int h = 0; h < st.H; ++h) {
      DeviceBlock& blk = b.blocks[static_cast<size_t>(st.H - 1 - h)];
      blk.num_dst = sizes[L.w_index(h, k)];
      blk.num_src = sizes[L.w_index(h + 1, k)];
      blk.num_edges = sizes[L.m_index(h, k)];
      blk.src_nodes = st.nodes;
      blk.src_nodes_offset = k * st.node_stride;
      blk.src = st.outs[3 * h];
      blk.dst = st.outs[3 * h + 1];
      blk.eids = st.outs[3 * h + 2];
      blk.src_offset = blk.dst_offset = blk.eids_offset = k * st.out_stride[h];
      b.sampled_edges += blk.num_edges;
    }
  }
  return out;
}

BlockSampler::BlockSampler(const GraphView& graph, BlockSamplerOptions opts)
    : g_(graph), opts_(std::move(opts)), impl_(std::make_unique<Impl>()) {
  require_cuda("BlockSampler");
  TESSERA_EXPECTS(!opts_.fanouts.empty(), ValueError, "BlockSampler: no fanouts given");
  TESSERA_EXPECTS(opts_.fanouts.size() <= 256, ValueError,
                  "BlockSampler: {} layers exceed the 256 of the Philox key layout",
                  opts_.fanouts.size());
  for (size_t i = 0; i < opts_.fanouts.size(); ++i)
    TESSERA_EXPECTS(opts_.fanouts[i] >= -1, ValueError,
                    "BlockSampler: fanout {} of layer {} is negative (use -1 for all)",
                    opts_.fanouts[i], i);
  TESSERA_EXPECTS(opts_.max_batches >= 1 && opts_.max_batches <= kMaxBatches, ValueError,
                  "BlockSampler: max_batches {} outside [1, {}]", opts_.max_batches, kMaxBatches);
  TESSERA_EXPECTS(opts_.stage_bytes <= 2048, ValueError, "BlockSampler: stage_bytes {} above 2048",
                  opts_.stage_bytes);
  if (opts_.stage_bytes < 0) opts_.stage_bytes = g_.uva ? 1024 : 0;
  if (g_.layout == Adjacency::kSplit) opts_.stage_bytes = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&impl_->device));
  impl_->id_space = opts_.id_space > 0 ? opts_.id_space : g_.num_nodes;
}

BlockSampler::~BlockSampler() {
  if (!impl_) return;
  int cur = 0;
  if (cudaGetDevice(&cur) == cudaSuccess && cur != impl_->device) cudaSetDevice(impl_->device);
  for (auto& [shape, pool] : impl_->pools)
    for (auto& ws : pool)
      if (ws->done_recorded) TESSERA_CUDA_TRY_NOTHROW(cudaEventSynchronize(ws->done));
  impl_->pools.clear();
  if (cur != impl_->device) cudaSetDevice(cur);
}

BlockSamplerStats BlockSampler::stats() const {
  BlockSamplerStats s;
  s.calls = impl_->calls;
  s.graph_launches = impl_->graph_launches;
  s.captures = impl_->captures;
  s.host_syncs = impl_->host_syncs;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& [shape, pool] : impl_->pools) {
    s.workspaces += static_cast<int64_t>(pool.size());
    for (auto& ws : pool)
      s.workspace_bytes += static_cast<int64_t>(ws->bytes);
  }
  return s;
}

namespace {

// The hop arguments every path shares.
HopArgs hop_common(const GraphView& g, const BlockSamplerOptions& o, int64_t id_space,
                   const Workspace& ws, int h) {
  HopArgs a;
  const int H = ws.H;
  const int64_t F = o.fanouts[static_cast<size_t>(H - 1 - h)];
  a.g = g;
  a.map = o.rows;
  a.id_space = id_space;
  a.fanout = F;
  a.replace = o.replace;
  a.weighted = g.weights != nullptr;
  a.thread_mode = F > group::kMaxGroupFanout;
  a.G = group::group_size(F);
  a.cap = group::scratch_entries(F, a.G);
  a.stage_bytes = o.stage_bytes;
  auto* base = static_cast<unsigned char*>(ws.params.data());
  a.P = reinterpret_cast<const LaunchParams*>(base);
  a.hop = h;
  a.node_stride = ws.node_stride;
  int64_t* sizes = reinterpret_cast<int64_t*>(base + ws.L.sizes_off);
  a.width = sizes + ws.L.w_index(h, 0);
  a.next_width = sizes + ws.L.w_index(h + 1, 0);
  a.edges = sizes + ws.L.m_index(h, 0);
  a.errors = reinterpret_cast<unsigned long long*>(sizes + ws.L.err_index());
  a.outs = reinterpret_cast<int64_t* const*>(base + ws.L.outs_off);
  a.table_vals = static_cast<uint64_t*>(ws.tvals.data());
  a.table_keys = static_cast<uint64_t*>(ws.tkeys.data());
  a.table_mask = ws.tmask;
  a.table_stride = ws.tstride;
  if (h > 0) {
    a.rel_hop = h - 1;
    a.rel_edges = sizes + ws.L.m_index(h - 1, 0);
  }
  return a;
}

// Per-batch bounds of a fast (all hops padded) shape: frontier wb[h], edges mb[h].
void fast_bounds(const BlockSamplerOptions& o, int64_t id_space, int64_t nb,
                 std::vector<int64_t>& wb, std::vector<int64_t>& mb) {
  const int H = static_cast<int>(o.fanouts.size());
  wb.assign(H + 1, 0);
  mb.assign(H, 0);
  wb[0] = nb;
  for (int h = 0; h < H; ++h) {
    const int64_t F = o.fanouts[static_cast<size_t>(H - 1 - h)];
    TESSERA_EXPECTS(F <= 0 || wb[h] <= (int64_t{1} << 40) / F, ValueError,
                    "sample_blocks: {} frontier nodes x fanout {} overflow", wb[h], F);
    mb[h] = wb[h] * F;
    wb[h + 1] = std::min(id_space, wb[h] + mb[h]);
  }
}

}  // namespace

// A new workspace for `shape` (caller holds impl mutex).
static std::unique_ptr<Workspace> make_workspace(const GraphView& g, const BlockSamplerOptions& o,
                                                 int64_t id_space, const Shape& shape) {
  auto ws = std::make_unique<Workspace>();
  ws->shape = shape;
  ws->H = static_cast<int>(o.fanouts.size());
  ws->L = Layout(ws->H, shape.K);
  size_t total = 0;
  ws->params = device_array(ws->L.total, &total);
  TESSERA_CUDA_TRY(cudaEventCreateWithFlags(&ws->done, cudaEventDisableTiming));
  const int K = shape.K;
  // Node tables: dense when affordable (or exact shapes, whose node bound is unknown).
  int64_t node_bound = id_space;
  if (!shape.exact) {
    fast_bounds(o, id_space, shape.nb, ws->wb, ws->mb);
    node_bound = ws->wb[ws->H];
    for (int h = 0; h < ws->H; ++h) {
      TESSERA_EXPECTS(ws->mb[h] < group::kMaxTableValue && ws->wb[h + 1] < group::kMaxTableValue &&
                          K * ws->mb[h] < (int64_t{1} << 32),
                      ValueError,
                      "sample_blocks: hop {} may yield {} edges per batch ({} batches per call): "
                      "above what one call can number; use smaller batches",
                      h, ws->mb[h], K);
    }
  }
  ws->node_stride = node_bound;
  const uint64_t dense_bytes = static_cast<uint64_t>(K) * static_cast<uint64_t>(id_space) * 8;
  const int64_t hash_slots = next_pow2(std::max<int64_t>(2 * node_bound, 1024));
  const uint64_t hash_bytes = static_cast<uint64_t>(K) * static_cast<uint64_t>(hash_slots) * 16;
  bool dense =
      o.table == NodeTable::kDense || shape.exact ||
      (o.table == NodeTable::kAuto && (dense_bytes <= kDenseBudget || dense_bytes <= hash_bytes));
  if (dense) {
    ws->tstride = id_space;
    ws->tvals = device_array(dense_bytes, &total);
  } else {
    ws->tstride = hash_slots;
    ws->tmask = static_cast<uint64_t>(hash_slots - 1);
    ws->tvals = device_array(hash_bytes / 2, &total);
    ws->tkeys = device_array(hash_bytes / 2, &total);
  }
  if (!shape.exact) {
    int64_t pad = 1, items = 1;
    for (int h = 0; h < ws->H; ++h) {
      pad = std::max(pad, ws->mb[h]);
      items = std::max(items, K * ws->wb[h]);
    }
    ws->pad_nbr = device_array(static_cast<size_t>(K * pad) * 8, &total);
    ws->pad_eid = device_array(static_cast<size_t>(K * pad) * 8, &total);
    ws->cnt = device_array(static_cast<size_t>(items + 1) * 8, &total);
    ws->pairs = device_array(static_cast<size_t>(items + 1) * 8, &total);
    ws->scan = device_array(static_cast<size_t>(items + 1) * 8, &total);
    for (int h = 0; h < ws->H; ++h) {
      HopArgs a = hop_common(g, o, id_space, *ws, h);
      a.out_stride = ws->mb[h];
      a.pad_nbr = static_cast<int64_t*>(ws->pad_nbr.data());
      a.pad_eid = static_cast<int64_t*>(ws->pad_eid.data());
      a.pad_stride = pad;
      a.cnt = static_cast<int64_t*>(ws->cnt.data());
      a.items_bound = K * ws->wb[h];
      a.pairs = static_cast<uint64_t*>(ws->pairs.data());
      a.scan = static_cast<const uint64_t*>(ws->scan.data());
      if (h > 0) a.rel_stride = ws->mb[h - 1];
      ws->cub_bytes =
          std::max(ws->cub_bytes, detail::exclusive_sum_u64(nullptr, 0, a.pairs,
                                                            static_cast<uint64_t*>(ws->scan.data()),
                                                            a.items_bound, nullptr));
      ws->hops.push_back(a);
    }
    ws->cub_temp = device_array(ws->cub_bytes, &total);
    ws->relabel = ws->hops.back();
    ws->relabel.rel_hop = ws->H - 1;
    ws->relabel.rel_edges = ws->hops.back().edges;
    ws->relabel.rel_stride = ws->mb[ws->H - 1];
  }
  ws->bytes = total;
  return ws;
}

namespace {

// The fast path's launches (captured once per workspace when graphs are on).
void launch_fast(Workspace& ws, cudaStream_t s) {
  for (int h = 0; h < ws.H; ++h) {
    const HopArgs& a = ws.hops[static_cast<size_t>(h)];
    const int64_t items = a.items_bound;
    detail::launch_sample(a, items, s);
    detail::launch_mark(a, items, s);
    detail::exclusive_sum_u64(ws.cub_temp.data(), ws.cub_bytes, a.pairs,
                              const_cast<uint64_t*>(a.scan), a.items_bound, s);
    detail::launch_number(a, items, s);
  }
  detail::launch_relabel(ws.relabel, ws.shape.K * ws.mb[ws.H - 1], s);
}

}  // namespace

BlockSampler::Pending BlockSampler::enqueue(const int64_t* d_seeds,
                                            const std::vector<int64_t>& seed_offsets,
                                            const std::vector<RngKey>& keys, StreamHandle stream,
                                            const rows::ExcludeView* exclude) const {
  TESSERA_EXPECTS(!seed_offsets.empty() && seed_offsets.front() == 0, ValueError,
                  "BlockSampler::enqueue: seed_offsets must start at 0");
  const int K = static_cast<int>(seed_offsets.size()) - 1;
  TESSERA_EXPECTS(K <= opts_.max_batches, ValueError,
                  "BlockSampler::enqueue: {} batches exceed max_batches {}", K, opts_.max_batches);
  TESSERA_EXPECTS(static_cast<int>(keys.size()) == K, ValueError,
                  "BlockSampler::enqueue: {} keys for {} batches", keys.size(), K);
  int64_t nmax = 0;
  for (int k = 0; k < K; ++k) {
    const int64_t n = seed_offsets[k + 1] - seed_offsets[k];
    TESSERA_EXPECTS(n >= 0, ValueError, "BlockSampler::enqueue: seed_offsets decrease at {}", k);
    nmax = std::max(nmax, n);
  }
  Pending out;
  out.s_ = std::make_unique<Pending::State>();
  out.s_->owner = this;
  if (K == 0) return out;
  int cur_dev = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&cur_dev));
  struct Restore {
    int dev;
    bool on;
    ~Restore() {
      if (on) cudaSetDevice(dev);
    }
  } restore{cur_dev, cur_dev != impl_->device};
  if (restore.on) TESSERA_CUDA_TRY(cudaSetDevice(impl_->device));

  const bool excluding = exclude != nullptr && exclude->num_rows > 0;
  bool exact = excluding;
  for (int64_t f : opts_.fanouts)
    exact = exact || f < 0;
  if (exact && K > 1) {  // exact sizes: one batch per launch
    for (int k = 0; k < K; ++k) {
      Pending one = enqueue(d_seeds + seed_offsets[k], {0, seed_offsets[k + 1] - seed_offsets[k]},
                            {keys[k]}, stream, exclude);
      out.s_->parts.push_back(std::move(one.s_));
    }
    return out;
  }
  impl_->calls++;
  Shape shape;
  shape.K = exact ? 1 : opts_.max_batches;
  shape.nb = next_pow2(std::max<int64_t>(nmax, 1));
  shape.exact = exact;
  // A workspace of this shape: the one this stream used last (stream order keeps its calls
  // apart), else an idle one, else a new one (up to a few per shape), else any (its previous
  // calls are waited for on the device through its event).
  Workspace* ws = nullptr;
  bool locked = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto& pool = impl_->pools[shape];
    for (int pass = 0; pass < 2 && !ws; ++pass)
      for (auto& w : pool) {
        if (pass == 0 && w->last_stream != stream) continue;
        if (!w->mu.try_lock()) continue;
        if (pass == 0 || !w->done_recorded || cudaEventQuery(w->done) == cudaSuccess) {
          ws = w.get();
          locked = true;
          break;
        }
        w->mu.unlock();
      }
    (void)cudaGetLastError();  // cudaEventQuery's "not ready" is not an error
    if (!ws && static_cast<int64_t>(pool.size()) < kMaxWorkspacesPerShape) {
      pool.push_back(make_workspace(g_, opts_, impl_->id_space, shape));
      ws = pool.back().get();
      ws->mu.lock();
      locked = true;
    }
    if (!ws) ws = pool[static_cast<size_t>(impl_->calls % static_cast<int64_t>(pool.size()))].get();
  }
  std::unique_lock<std::mutex> ws_lock = locked
                                             ? std::unique_lock<std::mutex>(ws->mu, std::adopt_lock)
                                             : std::unique_lock<std::mutex>(ws->mu);
  auto s = static_cast<cudaStream_t>(stream);
  Pending::State& st = *out.s_;
  st.ws = ws;
  st.K = K;
  st.H = ws->H;
  if (ws->done_recorded) TESSERA_CUDA_TRY(cudaStreamWaitEvent(s, ws->done, 0));
  const uint32_t gen = ws->next_gen(s);
  Slot* slot = ws->take_slot();
  st.slot = slot;
  std::memset(slot->bytes(), 0, ws->L.total);
  LaunchParams* P = ws->params_at(slot);
  P->seeds = d_seeds;
  P->gen = gen;
  P->K = K;
  for (int k = 0; k <= K; ++k)
    P->seed_off[k] = seed_offsets[k];
  for (int k = 0; k < K; ++k)
    P->keys[k] = keys[k];
  int64_t* sizes = ws->sizes_at(slot->bytes());
  for (int k = 0; k < K; ++k)
    sizes[ws->L.w_index(0, k)] = seed_offsets[k + 1] - seed_offsets[k];
  int64_t** outs = ws->outs_at(slot->bytes());
  CachingAllocator& alloc = scratch_allocator();
  auto buffer = [&](int64_t n) {
    return std::make_shared<ScratchBuffer>(alloc, static_cast<size_t>(std::max<int64_t>(n, 1)) * 8,
                                           stream);
  };
  auto* dparams = static_cast<unsigned char*>(ws->params.data());
  // Should anything below throw (a check, an allocation) after copies or kernels were queued,
  // they still read the slot and the workspace: wait for them before the Pending gives both back
  // (its destructor waits only for the slot's event, recorded at the end of a call).
  struct WaitOnThrow {
    cudaStream_t s;
    int entered = std::uncaught_exceptions();
    ~WaitOnThrow() {
      if (std::uncaught_exceptions() > entered) {
        TESSERA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(s));
      }
    }
  } wait_on_throw{s};
  // The parameters from the pinned slot (wait_on_throw keeps the slot until this copy is done
  // should anything below throw).
  auto copy_params = [&] {
    TESSERA_CUDA_TRY(
        cudaMemcpyAsync(dparams, slot->bytes(), ws->L.total, cudaMemcpyHostToDevice, s));
  };

  if (!exact) {
    st.node_stride = ws->node_stride;
    st.nodes = buffer(K * ws->node_stride);
    P->nodes = static_cast<int64_t*>(st.nodes->data());
    for (int h = 0; h < ws->H; ++h) {
      st.out_stride.push_back(ws->mb[h]);
      for (int j = 0; j < 3; ++j) {
        st.outs.push_back(buffer(K * ws->mb[h]));
        outs[3 * h + j] = static_cast<int64_t*>(st.outs.back()->data());
      }
    }
    copy_params();
    const bool graph = opts_.cuda_graph && stream != nullptr && !ws->graph_failed;
    if (graph && !ws->exec) {
      TESSERA_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      bool launched = true;
      try {
        launch_fast(*ws, s);
      } catch (...) {
        launched = false;
      }
      cudaGraph_t cg = nullptr;
      const cudaError_t e = cudaStreamEndCapture(s, &cg);
      if (launched && e == cudaSuccess && cg &&
          cudaGraphInstantiate(&ws->exec, cg, 0) == cudaSuccess) {
        impl_->captures++;
      } else {
        ws->exec = nullptr;
        ws->graph_failed = true;
        (void)cudaGetLastError();
        fmt::print(stderr,
                   "[tessera] warning: BlockSampler: CUDA graph capture failed ({}); "
                   "launching the kernels directly\n",
                   cudaGetErrorName(e));
      }
      if (cg) TESSERA_CUDA_TRY_NOTHROW(cudaGraphDestroy(cg));
    }
    if (graph && ws->exec) {
      TESSERA_CUDA_TRY(cudaGraphLaunch(ws->exec, s));
      impl_->graph_launches++;
    } else {
      launch_fast(*ws, s);
    }
  } else {
    // Exact sizes (fanout -1, exclusion): one batch; hops are sized as they come, buffers from
    // the caching allocator, one synchronization per exact hop to learn its edge count.
    const int64_t n = seed_offsets[1];
    int64_t wcur = n;
    int64_t node_cap = std::max<int64_t>(n, 1);
    st.nodes = buffer(node_cap);
    st.node_stride = 0;
    P->nodes = static_cast<int64_t*>(st.nodes->data());
    copy_params();
    // Later changes of the parameters (each hop's output pointers, a longer node list) go
    // through a pageable copy of the header, which cudaMemcpyAsync consumes before it returns:
    // the pinned slot must not change while copies queued from it may still read it.
    std::vector<unsigned char> header(slot->bytes(), slot->bytes() + ws->L.sizes_off);
    P = reinterpret_cast<LaunchParams*>(header.data());
    outs = ws->outs_at(header.data());
    std::vector<std::shared_ptr<ScratchBuffer>> keep;  // per-hop scratch, freed on `stream`
    for (int h = 0; h < ws->H; ++h) {
      HopArgs a = hop_common(g_, opts_, impl_->id_space, *ws, h);
      const int64_t F = a.fanout;
      const bool hop_exact = F < 0 || excluding;
      if (excluding) {
        a.ex = *exclude;
        a.thread_mode = true;
      }
      a.items_bound = wcur + 1;
      auto cnt = buffer(wcur + 1), pairs = buffer(wcur + 2), scan = buffer(wcur + 2);
      a.cnt = static_cast<int64_t*>(cnt->data());
      a.pairs = static_cast<uint64_t*>(pairs->data());
      a.scan = static_cast<const uint64_t*>(scan->data());
      keep.insert(keep.end(), {cnt, pairs, scan});
      int64_t m = 0;
      if (hop_exact) {
        auto scnt = buffer(wcur + 1), base = buffer(wcur + 1), soff = buffer(wcur + 1);
        keep.insert(keep.end(), {scnt, base, soff});
        a.scnt = excluding ? static_cast<int64_t*>(scnt->data()) : nullptr;
        detail::launch_count(a, wcur, s);
        auto scan_i64 = [&](const int64_t* in, int64_t* o) {
          const size_t bytes = detail::exclusive_sum_i64(nullptr, 0, in, o, wcur, s);
          ScratchBuffer temp(alloc, bytes, stream);
          detail::exclusive_sum_i64(temp.data(), bytes, in, o, wcur, s);
        };
        scan_i64(a.cnt, static_cast<int64_t*>(base->data()));
        if (excluding) scan_i64(a.scnt, static_cast<int64_t*>(soff->data()));
        int64_t totals[2] = {0, 0};
        TESSERA_CUDA_TRY(cudaMemcpyAsync(&totals[0], static_cast<int64_t*>(base->data()) + wcur, 8,
                                         cudaMemcpyDeviceToHost, s));
        if (excluding)
          TESSERA_CUDA_TRY(cudaMemcpyAsync(&totals[1], static_cast<int64_t*>(soff->data()) + wcur,
                                           8, cudaMemcpyDeviceToHost, s));
        TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // this hop's exact sizes
        impl_->host_syncs++;
        m = totals[0];
        a.base = static_cast<const int64_t*>(base->data());
        a.scnt = nullptr;
        if (excluding) {
          a.soff = static_cast<const int64_t*>(soff->data());
          auto cand = buffer(totals[1]);
          keep.push_back(cand);
          a.cand = static_cast<int64_t*>(cand->data());
          if (a.weighted) {
            auto cw = buffer(totals[1]), cc = buffer(totals[1]);  // 8 bytes each: room for both
            keep.insert(keep.end(), {cw, cc});
            a.cand_w = static_cast<float*>(cw->data());
            a.cand_cdf = static_cast<double*>(cc->data());
          }
        }
      } else {
        m = wcur * F;
      }
      TESSERA_EXPECTS(m < group::kMaxTableValue, ValueError,
                      "sample_blocks: hop {} yields {} edges, above what one call can number", h,
                      m);
      auto pad_nbr = buffer(m), pad_eid = buffer(m);
      keep.insert(keep.end(), {pad_nbr, pad_eid});
      a.pad_nbr = static_cast<int64_t*>(pad_nbr->data());
      a.pad_eid = static_cast<int64_t*>(pad_eid->data());
      a.pad_stride = 0;
      a.out_stride = 0;
      st.out_stride.push_back(0);
      for (int j = 0; j < 3; ++j) {
        st.outs.push_back(buffer(m));
        outs[3 * h + j] = static_cast<int64_t*>(st.outs.back()->data());
      }
      const int64_t wnext = std::min(impl_->id_space, wcur + m);
      // Local IDs reach wnext - 1; from kMaxTableValue on they would collide with the tables'
      // final-code bit (as the fast shapes check through their node bounds).
      TESSERA_EXPECTS(wnext < group::kMaxTableValue, ValueError,
                      "sample_blocks: hop {} may number {} nodes, above what one call can number",
                      h, wnext);
      if (wnext > node_cap) {  // a longer node list: copy the frontier over
        auto bigger = buffer(wnext);
        TESSERA_CUDA_TRY(cudaMemcpyAsync(bigger->data(), st.nodes->data(),
                                         static_cast<size_t>(node_cap) * 8,
                                         cudaMemcpyDeviceToDevice, s));
        st.nodes = bigger;
        node_cap = wnext;
        P->nodes = static_cast<int64_t*>(st.nodes->data());
      }
      // This hop's output pointers and the node list.
      TESSERA_CUDA_TRY(
          cudaMemcpyAsync(dparams, header.data(), header.size(), cudaMemcpyHostToDevice, s));
      detail::launch_sample(a, wcur, s);
      detail::launch_mark(a, wcur, s);
      const size_t bytes = detail::exclusive_sum_u64(nullptr, 0, a.pairs,
                                                     const_cast<uint64_t*>(a.scan), wcur + 1, s);
      {
        ScratchBuffer temp(alloc, bytes, stream);
        detail::exclusive_sum_u64(temp.data(), bytes, a.pairs, const_cast<uint64_t*>(a.scan),
                                  wcur + 1, s);
      }
      detail::launch_number(a, wcur, s);
      if (h == ws->H - 1) {
        HopArgs r = a;
        r.rel_hop = h;
        r.rel_edges = a.edges;
        r.rel_stride = 0;
        detail::launch_relabel(r, m, s);
      }
      wcur = wnext;
    }
  }
  TESSERA_CUDA_TRY(cudaMemcpyAsync(ws->sizes_at(slot->bytes()), dparams + ws->L.sizes_off,
                                   ws->L.sizes_bytes(), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_TRY(cudaEventRecord(slot->ev, s));
  TESSERA_CUDA_TRY(cudaEventRecord(ws->done, s));
  ws->done_recorded = true;
  ws->last_stream = stream;
  return out;
}

}  // namespace tessera::cuda
