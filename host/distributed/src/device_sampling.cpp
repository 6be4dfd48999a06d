// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/device_sampling.hpp"

#include <algorithm>
#include <unordered_set>

#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/sampling.hpp"

namespace tessera::dist {

namespace {

// This rank's sampling structure on one GPU, shared by the samplers that place it alike: its
// rows as the owner samples them on the CPU (row v - lo for node v, keyed by original ID;
// detail::SampleGraph::placed_arrays), so the GPU holds nothing per node of other ranks.
struct Placed {
  int device = -1;
  std::unique_ptr<ops::DeviceGraph> graph;
  ~Placed() {
    if (device >= 0) {
      try {
        cuda::set_device(device);  // the arrays are freed on their device
      } catch (const std::exception&) {
      }
    }
  }
};

}  // namespace

struct DistDeviceSampler::Impl {
  int device = -1;
  int64_t lo = 0, hi = 0;
  bool one_rank = true;
  std::shared_ptr<const Placed> placed;
};

namespace {

std::unique_ptr<cuda::ScratchBuffer> upload(const std::vector<int64_t>& v,
                                            cuda::StreamHandle stream) {
  auto b = std::make_unique<cuda::ScratchBuffer>(cuda::scratch_allocator(), v.size() * 8, stream);
  // From pageable memory: returns once the bytes are staged, so `v` may go afterwards.
  if (!v.empty()) cuda::copy_async(b->data(), v.data(), v.size() * 8, stream);
  return b;
}

std::vector<int64_t> download(const void* src, int64_t n, cuda::StreamHandle stream) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (n > 0) cuda::copy_async(v.data(), src, static_cast<size_t>(n) * 8, stream);
  return v;  // valid after the caller synchronizes `stream`
}

/// Whether the placed adjacency surely packs into 8-byte entries: DistDeviceSampler's neighbors
/// are new node IDs and its edge IDs new edge IDs, below 2^32 when the graph's counts are (it
/// may still pack otherwise; the plan then charges pairs).
bool packs_adjacency(const DistGraph& g) {
  constexpr int64_t kLimit = int64_t{1} << 32;
  return g.num_nodes() <= kLimit && g.num_edges() <= kLimit;
}

/// What a structure about to be placed costs place_on_device's plan: the structure the plan
/// reserved (its placement and weighting, the first time), or GPU bytes from what the plan's
/// budget left.
struct PlanCharge {
  bool reserved = false;
  int64_t spare_bytes = 0;
};

/// The charge of placing a structure by `structure` (weighted or not) under the plan in `gs`
/// (caller holds placed_mu); ValueError, before anything is placed, when it does not fit.
PlanCharge plan_charge(const detail::GraphState& gs, const detail::SampleGraph& sg, bool packed,
                       cuda::Placement structure, bool weighted) {
  PlanCharge c;
  if (!gs.device_plan) {
    return c;  // no plan: placed without a budget
  }
  const DevicePlacement& plan = *gs.device_plan;
  if (!gs.device_reserved_used && structure == plan.structure && weighted == plan.weighted) {
    c.reserved = true;
    return c;
  }
  const StructureBytes b = structure_bytes(sg.hi - sg.lo, sg.arrays.num_edges, packed, weighted);
  c.spare_bytes = b.per_row_arrays + (structure == cuda::Placement::kGpu ? b.edge_arrays : 0);
  TESSERA_EXPECTS(c.spare_bytes <= gs.device_spare_bytes, ValueError,
                  "DistDeviceSampler: placing a{} sampling structure in {} takes {} bytes of GPU "
                  "memory, and place_on_device's plan (structure in {}{}) left {} of its {}-byte "
                  "budget: call place_on_device with weighted={} and the same placement, or a "
                  "larger gpu_budget",
                  weighted ? " weighted" : "n unweighted", cuda::placement_name(structure),
                  c.spare_bytes, cuda::placement_name(plan.structure),
                  plan.weighted ? ", weighted" : "", gs.device_spare_bytes, plan.gpu_budget_bytes,
                  weighted ? "True" : "False");
  return c;
}

}  // namespace

DistDeviceSampler::DistDeviceSampler(const DistGraph& g, std::vector<int64_t> fanouts, bool replace,
                                     cuda::Placement structure, std::string weights_name)
    : g_(g),
      fanouts_(std::move(fanouts)),
      replace_(replace),
      weights_name_(std::move(weights_name)),
      impl_(std::make_unique<Impl>()) {
  TESSERA_EXPECTS(!fanouts_.empty(), ValueError, "DistDeviceSampler: no fanouts given");
  TESSERA_EXPECTS(fanouts_.size() <= 256, ValueError,
                  "DistDeviceSampler: {} layers exceed the 256 of the Philox key layout",
                  fanouts_.size());
  for (size_t i = 0; i < fanouts_.size(); ++i) {
    TESSERA_EXPECTS(fanouts_[i] >= -1, ValueError,
                    "DistDeviceSampler: fanout {} of layer {} is negative (use -1 for all)",
                    fanouts_[i], i);
  }
  TESSERA_EXPECTS(structure != cuda::Placement::kHost, ValueError,
                  "DistDeviceSampler: the structure placement must be gpu or uva, not host");
  cuda::require_cuda("DistDeviceSampler");
  auto& gs = g.state();
  const auto& sg = *gs.sg;
  Impl& im = *impl_;
  im.device = cuda::current_device();
  im.lo = sg.lo;
  im.hi = sg.hi;
  im.one_rank = g.runtime()->world_size() == 1;
  const std::string key =
      fmt::format("{}/{}/{}", im.device, cuda::placement_name(structure), weights_name_);
  std::lock_guard<std::mutex> lk(gs.placed_mu);
  if (auto hit = std::static_pointer_cast<const Placed>(gs.placed[key].lock())) {
    im.placed = std::move(hit);  // another sampler of this graph placed it already
    return;
  }
  TESSERA_ASSERT(!im.one_rank || (im.lo == 0 && im.hi == sg.num_nodes),
                 "one rank owns [{}, {}) of {} nodes", im.lo, im.hi, sg.num_nodes);
  const PlanCharge charge =
      plan_charge(gs, sg, packs_adjacency(g), structure, !weights_name_.empty());
  auto p = std::make_shared<Placed>();
  p->device = im.device;
  std::vector<int64_t> renamed;  // neighbors stored as local IDs, as new IDs (freed after)
  const ops::GraphArrays rows = sg.placed_arrays(renamed);
  std::vector<float> w;  // in the rows' storage order, as the CPU path's
  if (!weights_name_.empty()) {
    w = detail::placed_weights(sg, weights_name_);  // validated; ValueError naming the feature
  }
  // The samplers read the view (neighbor and edge ID in one read), not the split arrays.
  ops::DeviceGraphOptions opts;
  opts.split_arrays = false;
  cuda::Stream stream;
  p->graph = std::make_unique<ops::DeviceGraph>(
      rows, structure,
      w.empty() ? ops::Span<const float>()
                : ops::Span<const float>(w.data(), static_cast<int64_t>(w.size())),
      stream.get(), opts);  // synchronizes the stream: the host arrays may go
  gs.device_reserved_used = gs.device_reserved_used || charge.reserved;
  gs.device_spare_bytes -= charge.spare_bytes;
  gs.placed[key] = p;
  im.placed = std::move(p);
}

DistDeviceSampler::~DistDeviceSampler() = default;

cuda::Placement DistDeviceSampler::placement() const {
  return impl_->placed->graph->placement();
}
size_t DistDeviceSampler::bytes() const {
  return impl_->placed->graph->bytes();
}
int DistDeviceSampler::device() const {
  return impl_->device;
}

DistDeviceSampler::Result DistDeviceSampler::sample_blocks(ops::Span<const int64_t> seeds,
                                                           const int64_t* d_seeds,
                                                           const RngKey& key,
                                                           cuda::StreamHandle stream) const {
  const Impl& im = *impl_;
  const cuda::DeviceGuard guard(im.device);
  const cuda::GraphView view = im.placed->graph->view();
  const size_t layers = fanouts_.size();
  Result r;
  ops::DeviceBlocks& out = r.blocks;
  out.blocks.resize(layers);
  out.eids.resize(layers);
  out.stats.seeds = seeds.size();
  const int64_t* frontier = d_seeds;
  int64_t width = seeds.size();
  std::vector<int64_t> frontier_host;  // several ranks: routes the next hop
  if (!im.one_rank) frontier_host.assign(seeds.begin(), seeds.end());
  const auto& sg = *g_.state().sg;
  const int me = g_.runtime()->rank();
  RngKey k = key;
  for (size_t h = 0; h < layers; ++h) {
    const size_t l = layers - 1 - h;  // GNN layer; the output layer samples first
    k.layer = static_cast<uint32_t>(h);
    const int64_t fanout = fanouts_[l];
    // One hop of the given seeds (new IDs d_ids, their rows d_rows: null when the IDs are the
    // rows): edges grouped by seed in seed order, dst = the seed's new ID, src and eid new IDs;
    // each row draws as its original node (the view's row keys).
    auto hop = [&](const int64_t* d_ids, const int64_t* d_rows, int64_t n) {
      return cuda::sample_neighbors_impl(view, d_ids, n, fanout, replace_, true, k, stream, nullptr,
                                         d_rows);
    };
    const double t0 = now_seconds();
    if (im.one_rank) {
      // Every node is ours and row v is node v (lo = 0): nothing leaves the GPU.
      cuda::DeviceSample e = hop(frontier, nullptr, width);
      const double t1 = now_seconds();
      out.blocks[l] =
          cuda::to_block_impl(e.src_ptr(), e.dst_ptr(), e.size, frontier, width, stream);
      out.eids[l] = std::shared_ptr<cuda::ScratchBuffer>(std::move(e.eid));
      out.blocks[l].eids = out.eids[l];  // the block's edge IDs, in edge order
      out.stats.sample_seconds += t1 - t0;
      out.stats.compact_seconds += now_seconds() - t1;
      out.stats.sampled_edges += e.size;
    } else {
      DistSampleOptions so;
      so.fanout = fanout;
      so.replace = replace_;
      so.weights_name = weights_name_;
      so.key = k;
      const ops::SampledEdges edges =
          detail::sample_neighbors_with(g_, frontier_host, so, [&](const int64_t* ids, int64_t n) {
            const detail::UniqueSeeds u = detail::unique_seeds(sg, ids, n, me, me);
            const auto d_ids = upload(u.ids, stream);
            const auto d_rows = upload(u.rows, stream);  // this rank's rows: v - lo
            const cuda::DeviceSample e = hop(static_cast<const int64_t*>(d_ids->data()),
                                             static_cast<const int64_t*>(d_rows->data()),
                                             static_cast<int64_t>(u.ids.size()));
            const auto dst = download(e.dst_ptr(), e.size, stream);
            const auto src = download(e.src_ptr(), e.size, stream);
            const auto eid = download(e.eid_ptr(), e.size, stream);
            cuda::synchronize(stream);
            return detail::expand_unique(u, u.ids, dst, src, eid);
          });
      const double t1 = now_seconds();
      const auto d_src = upload(edges.src, stream);
      const auto d_dst = upload(edges.dst, stream);
      out.blocks[l] = cuda::to_block_impl(static_cast<const int64_t*>(d_src->data()),
                                          static_cast<const int64_t*>(d_dst->data()), edges.size(),
                                          frontier, width, stream);
      out.eids[l] = upload(edges.eid, stream);
      out.blocks[l].eids = out.eids[l];
      frontier_host = download(out.blocks[l].src_nodes_ptr(), out.blocks[l].num_src, stream);
      cuda::synchronize(stream);
      out.stats.sample_seconds += t1 - t0;
      out.stats.compact_seconds += now_seconds() - t1;
      out.stats.sampled_edges += edges.size();
    }
    frontier = out.blocks[l].src_nodes_ptr();
    width = out.blocks[l].num_src;
  }
  if (!im.one_rank) r.input_nodes_host = std::move(frontier_host);
  return r;
}

std::vector<ops::Block> DistDeviceSampler::sample_blocks_host(ops::Span<const int64_t> seeds,
                                                              const RngKey& key) const {
  const int64_t nn = g_.num_nodes();
  std::unordered_set<int64_t> seen;
  seen.reserve(static_cast<size_t>(seeds.size()));
  for (int64_t i = 0; i < seeds.size(); ++i) {
    const int64_t v = seeds[i];
    TESSERA_EXPECTS(v >= 0 && v < nn, IndexError,
                    "sample_blocks: seed {} at position {} is out of range [0, {})", v, i, nn);
    TESSERA_EXPECTS(seen.insert(v).second, ValueError,
                    "sample_blocks: seed {} is listed twice (seeds become destination nodes)", v);
  }
  const cuda::DeviceGuard guard(impl_->device);
  cuda::Stream stream;
  const std::vector<int64_t> host(seeds.begin(), seeds.end());
  const auto d_seeds = upload(host, stream.get());
  const Result r =
      sample_blocks(seeds, static_cast<const int64_t*>(d_seeds->data()), key, stream.get());
  std::vector<ops::Block> out = ops::download_blocks(r.blocks, stream.get());
  return out;
}

// --- placement
// -------------------------------------------------------------------------------------

std::string DevicePlacement::describe() const {
  auto gb = [](int64_t b) { return fmt::format("{:.2f} GB", static_cast<double>(b) / 1e9); };
  std::string s = fmt::format("structure: {}", cuda::placement_name(structure));
  for (const auto& t : tensors) {
    s += fmt::format("; {}: {} ({})", t.name, cuda::placement_name(t.placement), gb(t.bytes));
    if (t.cache_rows > 0) s += fmt::format(" + GPU cache of {} hot rows", t.cache_rows);
  }
  s += fmt::format("; {} on the GPU of a {} budget, {} pinned", gb(gpu_bytes), gb(gpu_budget_bytes),
                   gb(pinned_bytes));
  return s;
}

StructureBytes structure_bytes(int64_t rows, int64_t edges, bool packed, bool weighted) {
  StructureBytes b;
  // Offsets (rows + 1) and keys; weighted, the row tables {positive weights, last position}.
  b.per_row_arrays = (2 * rows + 1) * 8 + (weighted ? rows * 16 : 0);
  if (edges > 0) {
    // The interleaved adjacency with its 16 bytes of padding; weighted, the float weights and
    // their double prefix sums.
    b.edge_arrays = edges * (packed ? 8 : 16) + 16 + (weighted ? edges * 12 : 0);
  }
  return b;
}

DevicePlacement plan_device_placement(const PlacementRequest& r) {
  TESSERA_EXPECTS(r.gpu_budget_bytes >= 0, ValueError,
                  "place_on_device: the GPU budget must be >= 0 bytes, got {}", r.gpu_budget_bytes);
  DevicePlacement out;
  out.gpu_budget_bytes = r.gpu_budget_bytes;
  out.weighted = r.weighted;
  const StructureBytes sb = structure_bytes(r.rows, r.edges, r.packed, r.weighted);
  out.structure_bytes = sb.per_row_arrays + sb.edge_arrays;
  TESSERA_EXPECTS(sb.per_row_arrays <= r.gpu_budget_bytes, ValueError,
                  "place_on_device: a GPU budget of {} bytes is less than the {} bytes the "
                  "sampling structure of {} rows keeps in device memory whatever the placement "
                  "(per-row offsets and keys{})",
                  r.gpu_budget_bytes, sb.per_row_arrays, r.rows,
                  r.weighted ? ", weight tables" : "");
  std::vector<cuda::ArraySpec> specs;
  specs.push_back({"structure", sb.edge_arrays, 0, true, true});
  for (const auto& t : r.tensors) {
    specs.push_back({t.name, t.rows * t.row_bytes, 1, true, true});
  }
  cuda::MemoryBudget budget;
  budget.gpu_bytes = r.gpu_budget_bytes - sb.per_row_arrays;
  budget.pinned_bytes = -1;
  const cuda::PlacementPlan plan = cuda::plan_placement(specs, budget);
  out.structure =
      plan.where[0] == cuda::Placement::kGpu ? cuda::Placement::kGpu : cuda::Placement::kPinnedHost;
  out.gpu_bytes = sb.per_row_arrays + plan.gpu_bytes_used;
  out.pinned_bytes = plan.pinned_bytes_used;
  int64_t left = plan.gpu_bytes_left;
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    DevicePlacement::Tensor rec;
    rec.name = t.name;
    rec.bytes = specs[i + 1].bytes;
    rec.placement = plan.where[i + 1] == cuda::Placement::kGpu ? cuda::Placement::kGpu
                                                               : cuda::Placement::kPinnedHost;
    const int64_t slot_map = t.rows * 8;  // cuda::FeatureCache's slot of every row
    if (rec.placement == cuda::Placement::kPinnedHost && t.row_bytes > 0 && left > slot_map) {
      // Each cached row costs its bytes, and 8 more while the cache fills (its ID, freed after).
      rec.cache_rows = std::min(t.rows, (left - slot_map) / (t.row_bytes + 8));
      if (rec.cache_rows > 0) {
        const int64_t held = slot_map + rec.cache_rows * t.row_bytes;
        left -= held;
        out.gpu_bytes += held;
      }
    }
    out.tensors.push_back(rec);
  }
  out.gpu_bytes_left = out.gpu_budget_bytes - out.gpu_bytes;
  return out;
}

DevicePlacement place_on_device(const DistGraph& g, const std::vector<std::string>& node_data,
                                int64_t gpu_budget_bytes, bool weighted) {
  cuda::require_cuda("place_on_device");
  const double t0 = now_seconds();
  if (gpu_budget_bytes < 0) {
    int64_t free = 0, total = 0;
    cuda::device_memory(&free, &total);
    gpu_budget_bytes = free / 2;  // the rest stays for the model, its activations and scratch
  }
  const auto& sg = *g.state().sg;
  PlacementRequest req;
  req.rows = sg.hi - sg.lo;
  req.edges = sg.arrays.num_edges;
  req.packed = packs_adjacency(g);
  req.weighted = weighted;
  req.gpu_budget_bytes = gpu_budget_bytes;
  std::vector<DistTensor> tensors;
  for (const auto& name : node_data) {
    const DistTensor& t = g.node_data(name);  // ValueError listing the names when absent
    const auto [lo, hi] = t.local_range();
    req.tensors.push_back({name, hi - lo, static_cast<int64_t>(t.row_bytes())});
    tensors.push_back(t);  // a handle to the same tensor
  }
  DevicePlacement out = plan_device_placement(req);
  for (size_t i = 0; i < tensors.size(); ++i) {
    DistTensor& t = tensors[i];
    const DevicePlacement::Tensor& rec = out.tensors[i];
    std::vector<int64_t> hot;
    if (rec.cache_rows > 0) {
      // The hottest local rows (highest in-degree). The machine's partition stores its rows
      // from the machine's first node on: this trainer's rows start lo - (that node) rows in.
      const auto& part = g.local_partition();
      const auto [lo, hi] = t.local_range();
      const int64_t first = lo - g.machine_book().node_range(g.machine()).first;
      const int64_t* indptr = part.indptr.data<int64_t>() + first;
      std::vector<int64_t> deg(static_cast<size_t>(hi - lo));
      for (int64_t r = 0; r < hi - lo; ++r)
        deg[r] = indptr[r + 1] - indptr[r];
      hot = cuda::plan_feature_cache(deg, static_cast<int64_t>(t.row_bytes()),
                                     rec.cache_rows * static_cast<int64_t>(t.row_bytes()))
                .hot_rows;
    }
    t.mirror_on_device(rec.placement, hot);
  }
  {
    auto& gs = g.state();
    std::lock_guard<std::mutex> lk(gs.placed_mu);
    gs.device_plan = std::make_shared<const DevicePlacement>(out);
    gs.device_spare_bytes = out.gpu_bytes_left;
    gs.device_reserved_used = false;
  }
  out.seconds = now_seconds() - t0;
  return out;
}

}  // namespace tessera::dist
