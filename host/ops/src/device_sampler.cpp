// SPDX-License-Identifier: Apache-2.0
#include "tessera/ops/device_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::ops {

namespace {
// Streams lent to threads for calls that name none. A thread keeps its stream until it ends;
// then the stream, once idle, goes back to the pool of its device instead of being destroyed,
// so the scratch the caching allocator keeps per stream stays reusable (a loader starts new
// sampler threads every epoch). Streams and pool live as long as the process.
class StreamPool {
 public:
  static StreamPool& instance() {
    static StreamPool* pool = new StreamPool;  // never destroyed: thread exits may still return
    return *pool;
  }
  // A stream of `device`, which must be the calling thread's current device.
  cuda::StreamHandle take(int device) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<cuda::StreamHandle>& free = free_[device];
      if (!free.empty()) {
        const cuda::StreamHandle h = free.back();
        free.pop_back();
        return h;
      }
    }
    return (new cuda::Stream)->get();  // owned by the pool from now on
  }
  void give(int device, cuda::StreamHandle h) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[device].push_back(h);
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<cuda::StreamHandle>> free_;
};

struct StreamLease {
  int device = -1;
  cuda::StreamHandle stream = nullptr;
  StreamLease() = default;
  StreamLease(const StreamLease&) = delete;
  StreamLease& operator=(const StreamLease&) = delete;
  ~StreamLease() {
    if (!stream) return;
    try {
      cuda::DeviceGuard guard(device);
      cuda::synchronize(stream);  // idle before another thread may take it
    } catch (...) {
    }
    StreamPool::instance().give(device, stream);
  }
};

// The calling thread's stream on `device` (the thread's current device).
cuda::StreamHandle thread_stream(int device) {
  thread_local std::map<int, StreamLease> leases;
  StreamLease& l = leases[device];
  if (!l.stream) {
    l.stream = StreamPool::instance().take(device);
    l.device = device;
  }
  return l.stream;
}
}  // namespace

namespace {

// An ExcludeEdges set copied into scratch device memory on a stream (returned to the allocator
// on that stream when this goes away, after the kernels that read it were enqueued).
struct DeviceExclude {
  std::unique_ptr<cuda::ScratchBuffer> rows, offsets, eids;
  cuda::rows::ExcludeView view;  // num_rows == 0: nothing excluded
  const cuda::rows::ExcludeView* get() const { return view.num_rows > 0 ? &view : nullptr; }
};

DeviceExclude upload_exclude(const ExcludeEdges* ex, cuda::StreamHandle stream) {
  DeviceExclude d;
  if (ex == nullptr || ex->empty()) return d;
  auto up = [&](Span<const int64_t> a) {
    const size_t bytes = static_cast<size_t>(a.size()) * sizeof(int64_t);
    auto b = std::make_unique<cuda::ScratchBuffer>(cuda::scratch_allocator(), bytes, stream);
    if (bytes > 0) cuda::copy_async(b->data(), a.data(), bytes, stream);
    return b;
  };
  d.rows = up(ex->rows());
  d.offsets = up(ex->offsets());
  d.eids = up(ex->eids());
  d.view.rows = static_cast<const int64_t*>(d.rows->data());
  d.view.offsets = static_cast<const int64_t*>(d.offsets->data());
  d.view.eids = static_cast<const int64_t*>(d.eids->data());
  d.view.num_rows = ex->rows().size();
  return d;
}

}  // namespace

DeviceGraph::Array::Array(size_t bytes, cuda::Placement p) : bytes_(bytes) {
  if (bytes == 0) return;
  if (p == cuda::Placement::kGpu)
    dev_ = cuda::DeviceBuffer(bytes);
  else
    pinned_ = cuda::PinnedBuffer(bytes);
}

DeviceGraph::Array DeviceGraph::upload(const void* host, size_t bytes, cuda::Placement p,
                                       cuda::StreamHandle stream, size_t pad) const {
  Array a(bytes == 0 ? 0 : bytes + pad, p);
  if (bytes == 0) return a;
  if (p == cuda::Placement::kGpu) {
    cuda::copy_async(a.data(), host, bytes, stream);
    if (pad) cuda::memset_async(static_cast<char*>(a.data()) + bytes, 0, pad, stream);
  } else {
    std::memcpy(a.data(), host, bytes);
    if (pad) std::memset(static_cast<char*>(a.data()) + bytes, 0, pad);
  }
  return a;
}

namespace {

// A Graph's arrays once their sizes agree.
GraphArrays checked_arrays(const Graph& graph) {
  TESSERA_EXPECTS(static_cast<int64_t>(graph.indptr.size()) == graph.num_nodes + 1, ValueError,
                  "DeviceGraph: indptr has {} entries for {} nodes", graph.indptr.size(),
                  graph.num_nodes);
  TESSERA_EXPECTS(graph.eids.empty() || graph.eids.size() == graph.indices.size(), ValueError,
                  "DeviceGraph: {} edge IDs for {} edges", graph.eids.size(), graph.indices.size());
  TESSERA_EXPECTS(graph.indptr.back() == static_cast<int64_t>(graph.indices.size()), ValueError,
                  "DeviceGraph: indptr ends at {} for {} edges", graph.indptr.back(),
                  graph.indices.size());
  return GraphArrays(graph);
}

}  // namespace

DeviceGraph::DeviceGraph(const Graph& graph, cuda::Placement placement, Span<const float> weights,
                         cuda::StreamHandle stream, DeviceGraphOptions opts)
    : DeviceGraph(checked_arrays(graph), placement, weights, stream, opts) {}

DeviceGraph::DeviceGraph(const GraphArrays& graph, cuda::Placement placement,
                         Span<const float> weights, cuda::StreamHandle stream,
                         DeviceGraphOptions opts)
    : num_nodes_(graph.num_nodes), num_edges_(graph.num_edges), placement_(placement) {
  cuda::require_cuda("DeviceGraph");
  device_ = cuda::current_device();
  TESSERA_EXPECTS(placement != cuda::Placement::kHost, ValueError,
                  "DeviceGraph: placement 'host' is for the CPU twins; use gpu or uva");
  TESSERA_EXPECTS(num_nodes_ >= 0 && graph.indptr != nullptr && graph.indptr[0] == 0 &&
                      graph.indptr[num_nodes_] == num_edges_,
                  ValueError, "DeviceGraph: the offsets of {} rows must run from 0 to {} edges",
                  num_nodes_, num_edges_);
  TESSERA_EXPECTS(num_edges_ == 0 || graph.indices != nullptr, ValueError,
                  "DeviceGraph: {} edges but no neighbor array", num_edges_);
  for (int64_t v = 0; graph.row_keys != nullptr && v < num_nodes_; ++v) {
    TESSERA_EXPECTS(graph.row_keys[v] >= 0 && graph.row_keys[v] < (int64_t{1} << 48), ValueError,
                    "DeviceGraph: row {} is keyed by node {}, outside the 2^48 node IDs of the "
                    "Philox key layout",
                    v, graph.row_keys[v]);
  }
  has_weights_ = weights.data() != nullptr || weights.size() != 0;
  if (has_weights_) validate_weights(graph, weights, "DeviceGraph weights");
  for (int64_t v = 0; v < num_nodes_; ++v)
    max_degree_ = std::max(max_degree_, graph.indptr[v + 1] - graph.indptr[v]);
  // Per-node arrays in device memory when asked (they are read once per frontier node), the
  // per-edge ones where the placement says.
  const cuda::Placement node_place =
      opts.node_arrays_on_device ? cuda::Placement::kGpu : placement_;
  const size_t e8 = static_cast<size_t>(num_edges_) * sizeof(int64_t);
  const size_t n8 = static_cast<size_t>(num_nodes_) * sizeof(int64_t);
  indptr_ = upload(graph.indptr, n8 + sizeof(int64_t), node_place, stream);
  if (graph.row_keys != nullptr) {
    row_keys_ = upload(graph.row_keys, n8, node_place, stream);
  }
  layout_ = cuda::Adjacency::kSplit;
  if (opts.interleave && num_edges_ > 0) {
    // 16 bytes of padding: UVA rows are read in 16-byte pieces that may pass the last edge.
    std::vector<uint64_t> packed = try_pack_adjacency(graph);
    if (!packed.empty()) {
      layout_ = cuda::Adjacency::kPacked;
      adjacency_ = upload(packed.data(), e8, placement_, stream, 16);
    } else {
      const std::vector<int64_t> pairs = interleave_adjacency(graph);
      layout_ = cuda::Adjacency::kPairs;
      adjacency_ = upload(pairs.data(), 2 * e8, placement_, stream, 16);
    }
    cuda::synchronize(stream);  // the host copies go away here
  }
  if (opts.split_arrays || layout_ == cuda::Adjacency::kSplit) {
    indices_ = upload(graph.indices, e8, placement_, stream);
    if (graph.eids != nullptr) {
      eids_ = upload(graph.eids, e8, placement_, stream);
    }
  }
  if (has_weights_ && num_edges_ > 0) {
    weights_ =
        upload(weights.data(), static_cast<size_t>(num_edges_) * sizeof(float), placement_, stream);
    // Formed by the device in either placement (pinned memory is written through UVA).
    prefix_ = Array(static_cast<size_t>(num_edges_) * sizeof(double), placement_);
    row_info_ = Array(static_cast<size_t>(num_nodes_) * 2 * sizeof(int64_t), node_place);
    cuda::weight_row_tables_impl(indptr(), num_nodes_, this->weights(),
                                 static_cast<double*>(prefix_.data()),
                                 static_cast<int64_t*>(row_info_.data()), stream);
  }
  cuda::synchronize(stream);  // the host arrays may go away after the constructor
}

size_t DeviceGraph::bytes() const {
  return indptr_.bytes() + indices_.bytes() + eids_.bytes() + adjacency_.bytes() +
         weights_.bytes() + prefix_.bytes() + row_info_.bytes() + row_keys_.bytes();
}

cuda::GraphView DeviceGraph::view() const {
  cuda::GraphView g;
  g.num_nodes = num_nodes_;
  g.indptr = indptr();
  g.layout = layout_;
  g.indices = indices();
  g.eids = eids();
  if (layout_ == cuda::Adjacency::kPacked)
    g.packed = static_cast<const uint64_t*>(adjacency_.data());
  else if (layout_ == cuda::Adjacency::kPairs)
    g.pairs = static_cast<const int64_t*>(adjacency_.data());
  if (has_weights_) {
    g.weights = weights();
    g.prefix = prefix();
    g.row_info = static_cast<const int64_t*>(row_info_.data());
  }
  g.row_keys = static_cast<const int64_t*>(row_keys_.data());
  g.uva = placement_ == cuda::Placement::kPinnedHost;
  return g;
}

DeviceNeighborSampler::DeviceNeighborSampler(const DeviceGraph& graph, std::vector<int64_t> fanouts,
                                             bool replace, EdgeDir dir, DeviceSamplerOptions opts)
    : graph_(graph),
      fanouts_(std::move(fanouts)),
      replace_(replace),
      dir_(dir),
      mapped_rows_(opts.rows.rows != nullptr) {
  TESSERA_EXPECTS(graph.view().row_keys == nullptr || opts.rows.rows != nullptr, ValueError,
                  "DeviceNeighborSampler: a graph of keyed rows (row_keys) names its neighbors by "
                  "node, not by row: sample it one hop at a time, or map nodes to rows "
                  "(DeviceSamplerOptions::rows)");
  TESSERA_EXPECTS(!fanouts_.empty(), ValueError, "DeviceNeighborSampler: no fanouts given");
  TESSERA_EXPECTS(fanouts_.size() <= 256, ValueError,
                  "DeviceNeighborSampler: {} layers exceed the 256 of the Philox key layout",
                  fanouts_.size());
  for (size_t i = 0; i < fanouts_.size(); ++i)
    TESSERA_EXPECTS(fanouts_[i] >= -1, ValueError,
                    "DeviceNeighborSampler: fanout {} of layer {} is negative (use -1 for all)",
                    fanouts_[i], i);
  const cuda::DeviceGuard guard(graph_.device());
  cuda::BlockSamplerOptions o;
  o.fanouts = fanouts_;
  o.replace = replace_;
  o.max_batches = opts.max_batches;
  o.cuda_graph = opts.cuda_graph;
  o.stage_bytes = opts.stage_bytes;
  o.table = opts.table;
  o.id_space = opts.id_space;
  o.rows = opts.rows;
  engine_ = std::make_unique<cuda::BlockSampler>(graph_.view(), std::move(o));
}

DeviceNeighborSampler::Pending DeviceNeighborSampler::sample_blocks_async(
    const int64_t* d_seeds, const std::vector<int64_t>& seed_offsets,
    const std::vector<RngKey>& keys, cuda::StreamHandle stream, const ExcludeEdges* exclude) const {
  TESSERA_EXPECTS(exclude == nullptr || exclude->empty() || !mapped_rows_, ValueError,
                  "DeviceNeighborSampler: an ExcludeEdges set names rows of the graph, and this "
                  "sampler maps nodes to rows (DeviceSamplerOptions::rows): exclude edges with "
                  "the CPU sampler, or build the set over row numbers of an unmapped graph");
  const cuda::DeviceGuard guard(graph_.device());
  Pending p;
  p.t0_ = now_seconds();
  for (size_t k = 0; k + 1 < seed_offsets.size(); ++k)
    p.seeds_.push_back(seed_offsets[k + 1] - seed_offsets[k]);
  const DeviceExclude ex = upload_exclude(exclude, stream);  // freed in stream order
  p.p_ = engine_->enqueue(d_seeds, seed_offsets, keys, stream, ex.get());
  return p;
}

std::vector<DeviceBlocks> DeviceNeighborSampler::Pending::wait() {
  std::vector<cuda::SampledBatch> batches = p_.wait();
  const double dt = now_seconds() - t0_;
  std::vector<DeviceBlocks> out(batches.size());
  for (size_t k = 0; k < batches.size(); ++k) {
    DeviceBlocks& d = out[k];
    d.blocks = std::move(batches[k].blocks);
    for (const cuda::DeviceBlock& b : d.blocks)
      d.eids.push_back(b.eids);
    d.stats.sampled_edges = batches[k].sampled_edges;
    d.stats.seeds = k < seeds_.size() ? seeds_[k] : 0;
    d.stats.sample_seconds = dt / static_cast<double>(batches.size());
  }
  return out;
}

DeviceBlocks DeviceNeighborSampler::sample_blocks(const int64_t* d_seeds, int64_t n,
                                                  const RngKey& key, cuda::StreamHandle stream,
                                                  const ExcludeEdges* exclude) const {
  std::vector<DeviceBlocks> b = sample_blocks_async(d_seeds, {0, n}, {key}, stream, exclude).wait();
  return std::move(b.front());
}

std::vector<Block> DeviceNeighborSampler::sample_blocks_host(Span<const int64_t> seeds,
                                                             const RngKey& key,
                                                             cuda::StreamHandle stream,
                                                             SampleStats* stats,
                                                             const ExcludeEdges* exclude) const {
  std::unordered_set<int64_t> seen;
  seen.reserve(static_cast<size_t>(seeds.size()));
  for (int64_t i = 0; i < seeds.size(); ++i) {
    const int64_t v = seeds[i];
    TESSERA_EXPECTS(v >= 0 && v < graph_.num_nodes(), IndexError,
                    "sample_blocks: seed {} at position {} is out of range [0, {})", v, i,
                    graph_.num_nodes());
    TESSERA_EXPECTS(seen.insert(v).second, ValueError,
                    "sample_blocks: seed {} is listed twice (seeds become destination nodes)", v);
  }
  const cuda::DeviceGuard guard(graph_.device());
  if (stream == nullptr) stream = thread_stream(graph_.device());
  cuda::ScratchBuffer d_seeds(cuda::scratch_allocator(),
                              static_cast<size_t>(seeds.size()) * sizeof(int64_t), stream);
  if (seeds.size() > 0)
    cuda::copy_async(d_seeds.data(), seeds.data(), static_cast<size_t>(seeds.size()) * 8, stream);
  DeviceBlocks b = sample_blocks(static_cast<const int64_t*>(d_seeds.data()), seeds.size(), key,
                                 stream, exclude);
  if (stats) stats->add(b.stats);
  return download_blocks(b, stream);
}

std::vector<Block> download_blocks(const DeviceBlocks& blocks, cuda::StreamHandle stream) {
  std::vector<Block> out(blocks.blocks.size());
  auto get = [&](std::vector<int64_t>& dst, const int64_t* src, int64_t n) {
    dst.resize(static_cast<size_t>(n));
    if (n > 0) cuda::copy_async(dst.data(), src, static_cast<size_t>(n) * sizeof(int64_t), stream);
  };
  for (size_t l = 0; l < out.size(); ++l) {
    const cuda::DeviceBlock& d = blocks.blocks[l];
    Block& b = out[l];
    b.num_dst = d.num_dst;
    get(b.src_nodes, d.src_nodes_ptr(), d.num_src);
    get(b.src, d.src_ptr(), d.num_edges);
    get(b.dst, d.dst_ptr(), d.num_edges);
    get(b.eids, d.eids_ptr(), d.num_edges);
  }
  cuda::synchronize(stream);
  return out;
}

namespace detail {
namespace {
cuda::DeviceBuffer to_device(Span<const int64_t> v, cuda::StreamHandle stream) {
  cuda::DeviceBuffer b(static_cast<size_t>(v.size()) * sizeof(int64_t));
  if (v.size() > 0) cuda::copy_async(b.data(), v.data(), b.size(), stream);
  return b;
}
void to_host(std::vector<int64_t>& dst, const void* src, int64_t n, cuda::StreamHandle stream) {
  dst.resize(static_cast<size_t>(n));
  if (n > 0) cuda::copy_async(dst.data(), src, static_cast<size_t>(n) * sizeof(int64_t), stream);
}
}  // namespace

void sample_neighbors_cuda(const SamplingGraph& graph, Span<const int64_t> seeds,
                           const SampleOptions& opts, SampledEdges& out) {
  const DeviceGraph& g = *graph.device_graph();
  const cuda::DeviceGuard guard(g.device());
  const cuda::StreamHandle stream = thread_stream(g.device());
  const cuda::DeviceBuffer d_seeds = to_device(seeds, stream);
  const DeviceExclude ex = upload_exclude(opts.exclude, stream);
  const cuda::DeviceSample e = cuda::sample_neighbors_impl(
      g.view(), static_cast<const int64_t*>(d_seeds.data()), seeds.size(), opts.fanout,
      opts.replace, opts.dir == EdgeDir::kIn, opts.key, stream, ex.get());
  to_host(out.src, e.src_ptr(), e.size, stream);
  to_host(out.dst, e.dst_ptr(), e.size, stream);
  to_host(out.eid, e.eid_ptr(), e.size, stream);
  cuda::synchronize(stream);
}

Block to_block_cuda(const SampledEdges& edges, Span<const int64_t> dst_nodes) {
  const cuda::StreamHandle stream = thread_stream(cuda::current_device());
  const cuda::DeviceBuffer s = to_device(edges.src, stream);
  const cuda::DeviceBuffer d = to_device(edges.dst, stream);
  const cuda::DeviceBuffer n = to_device(dst_nodes, stream);
  const cuda::DeviceBlock b = cuda::to_block_impl(
      static_cast<const int64_t*>(s.data()), static_cast<const int64_t*>(d.data()), edges.size(),
      static_cast<const int64_t*>(n.data()), dst_nodes.size(), stream);
  Block out;
  out.num_dst = b.num_dst;
  to_host(out.src_nodes, b.src_nodes_ptr(), b.num_src, stream);
  to_host(out.src, b.src_ptr(), b.num_edges, stream);
  to_host(out.dst, b.dst_ptr(), b.num_edges, stream);
  cuda::synchronize(stream);
  out.eids = edges.eid;  // compaction keeps the edge order
  return out;
}
}  // namespace detail

}  // namespace tessera::ops
