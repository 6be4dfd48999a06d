#include "tessera/ops/device_sampler.hpp"

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

DeviceGraph::Array DeviceGraph::upload(const void* host, size_t bytes,
                                       cuda::StreamHandle stream) const {
  Array a(bytes, placement_);
  if (bytes == 0) return a;
  if (placement_ == cuda::Placement::kGpu)
    cuda::copy_async(a.data(), host, bytes, stream);
  else
    std::memcpy(a.data(), host, bytes);
  return a;
}

DeviceGraph::DeviceGraph(const Graph& graph, cuda::Placement placement, Span<const float> weights,
                         cuda::StreamHandle stream)
    : num_nodes_(graph.num_nodes), num_edges_(graph.num_edges()), placement_(placement) {
  cuda::require_cuda("DeviceGraph");
  device_ = cuda::current_device();
  TESSERA_EXPECTS(placement != cuda::Placement::kHost, ValueError,
                  "DeviceGraph: placement 'host' is for the CPU twins; use gpu or uva");
  TESSERA_EXPECTS(static_cast<int64_t>(graph.indptr.size()) == graph.num_nodes + 1, ValueError,
                  "DeviceGraph: indptr has {} entries for {} nodes", graph.indptr.size(),
                  graph.num_nodes);
  TESSERA_EXPECTS(graph.eids.empty() || graph.eids.size() == graph.indices.size(), ValueError,
                  "DeviceGraph: {} edge IDs for {} edges", graph.eids.size(), graph.indices.size());
  has_weights_ = weights.data() != nullptr || weights.size() != 0;
  if (has_weights_) validate_weights(graph, weights, "DeviceGraph weights");
  const size_t e8 = static_cast<size_t>(num_edges_) * sizeof(int64_t);
  indptr_ = upload(graph.indptr.data(), graph.indptr.size() * sizeof(int64_t), stream);
  indices_ = upload(graph.indices.data(), e8, stream);
  if (!graph.eids.empty()) eids_ = upload(graph.eids.data(), e8, stream);
  if (has_weights_ && num_edges_ > 0) {
    weights_ = upload(weights.data(), static_cast<size_t>(num_edges_) * sizeof(float), stream);
    // Formed by the device in either placement (pinned memory is written through UVA).
    prefix_ = Array(static_cast<size_t>(num_edges_) * sizeof(double), placement_);
    cuda::weight_prefix_sums_impl(indptr(), num_nodes_, this->weights(),
                                  static_cast<double*>(prefix_.data()), stream);
  }
  cuda::synchronize(stream);  // the host arrays may go away after the constructor
}

size_t DeviceGraph::bytes() const {
  return indptr_.bytes() + indices_.bytes() + eids_.bytes() + weights_.bytes() + prefix_.bytes();
}

DeviceNeighborSampler::DeviceNeighborSampler(const DeviceGraph& graph, std::vector<int64_t> fanouts,
                                             bool replace, EdgeDir dir)
    : graph_(graph), fanouts_(std::move(fanouts)), replace_(replace), dir_(dir) {
  TESSERA_EXPECTS(!fanouts_.empty(), ValueError, "DeviceNeighborSampler: no fanouts given");
  TESSERA_EXPECTS(fanouts_.size() <= 256, ValueError,
                  "DeviceNeighborSampler: {} layers exceed the 256 of the Philox key layout",
                  fanouts_.size());
  for (size_t i = 0; i < fanouts_.size(); ++i)
    TESSERA_EXPECTS(fanouts_[i] >= -1, ValueError,
                    "DeviceNeighborSampler: fanout {} of layer {} is negative (use -1 for all)",
                    fanouts_[i], i);
}

DeviceBlocks DeviceNeighborSampler::sample_blocks(const int64_t* d_seeds, int64_t n,
                                                  const RngKey& key, cuda::StreamHandle stream,
                                                  const ExcludeEdges* exclude) const {
  const cuda::DeviceGuard guard(graph_.device());
  const DeviceExclude ex = upload_exclude(exclude, stream);  // once for every hop
  const size_t layers = fanouts_.size();
  DeviceBlocks out;
  out.blocks.resize(layers);
  out.eids.resize(layers);
  out.stats.seeds = n;
  const int64_t* frontier = d_seeds;
  int64_t width = n;
  RngKey k = key;
  for (size_t h = 0; h < layers; ++h) {
    const size_t l = layers - 1 - h;  // GNN layer; the output layer samples first
    k.layer = static_cast<uint32_t>(h);
    const double t0 = now_seconds();
    cuda::DeviceSample e =
        graph_.weighted()
            ? cuda::sample_neighbors_weighted_impl(graph_.indptr(), graph_.indices(), graph_.eids(),
                                                   graph_.weights(), graph_.prefix(), frontier,
                                                   width, fanouts_[l], replace_,
                                                   dir_ == EdgeDir::kIn, k, stream, ex.get())
            : cuda::sample_neighbors_uniform_impl(graph_.indptr(), graph_.indices(), graph_.eids(),
                                                  frontier, width, fanouts_[l], replace_,
                                                  dir_ == EdgeDir::kIn, k, stream, ex.get());
    if (dir_ == EdgeDir::kOut) std::swap(e.src, e.dst);  // messages flow neighbor -> seed
    const double t1 = now_seconds();
    out.blocks[l] = cuda::to_block_impl(e.src_ptr(), e.dst_ptr(), e.size, frontier, width, stream);
    out.eids[l] = std::move(e.eid);
    out.stats.compact_seconds += now_seconds() - t1;
    out.stats.sample_seconds += t1 - t0;
    out.stats.sampled_edges += e.size;
    frontier = out.blocks[l].src_nodes_ptr();
    width = out.blocks[l].num_src;
  }
  return out;
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
  auto get = [&](std::vector<int64_t>& dst, const void* src, int64_t n) {
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
    get(b.eids, blocks.eids[l] ? blocks.eids[l]->data() : nullptr, d.num_edges);
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

void sample_neighbors_cuda(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                           SampledEdges& out) {
  const DeviceGraph g(graph, cuda::Placement::kGpu, opts.weights);
  const cuda::StreamHandle stream = thread_stream(g.device());
  const cuda::DeviceBuffer d_seeds = to_device(seeds, stream);
  const DeviceExclude ex = upload_exclude(opts.exclude, stream);
  const auto* sp = static_cast<const int64_t*>(d_seeds.data());
  const bool in = opts.dir == EdgeDir::kIn;
  const cuda::DeviceSample e =
      g.weighted() ? cuda::sample_neighbors_weighted_impl(
                         g.indptr(), g.indices(), g.eids(), g.weights(), g.prefix(), sp,
                         seeds.size(), opts.fanout, opts.replace, in, opts.key, stream, ex.get())
                   : cuda::sample_neighbors_uniform_impl(g.indptr(), g.indices(), g.eids(), sp,
                                                         seeds.size(), opts.fanout, opts.replace,
                                                         in, opts.key, stream, ex.get());
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
