// SPDX-License-Identifier: Apache-2.0
#include "sample_block.hpp"

#include <x86intrin.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "id_map.hpp"
#include "sample_rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera::ops::detail {

namespace {

// The block's destination side: the seeds take local IDs 0..n-1 (their tags set), in order.
void tag_seeds(Span<const int64_t> seeds, uint32_t* tag, uint32_t base, Block& out) {
  for (int64_t i = 0; i < seeds.size(); ++i) {
    const int64_t v = seeds[i];
    TESSERA_EXPECTS(tag[v] <= base, ValueError,
                    "sample_blocks: seed {} is listed twice (seeds become destination nodes)", v);
    tag[v] = base + 1 + static_cast<uint32_t>(i);
    out.src_nodes.push_back(v);
  }
}

// A piece of a hop: its edges (sources global, destinations local), sampled by any thread.
struct Piece {
  SampledEdges edges;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

// Appends `piece` to the block's edges, compacting each source over the tags as BlockSink does
// (compact_source, in edge order: the same local IDs as one thread gives) in place in the piece,
// then copying its three arrays to the ends of the block's: no zero-fill ahead of the copies,
// which the calling thread, the only one compacting, would pay alone. The block's arrays were
// reserved for the hop's edge guess. The tags are prefetched a few edges ahead: these sources
// were not written here.
void append_compacted(SampledEdges& piece, uint32_t* tag, uint64_t num_nodes, uint32_t base,
                      int64_t& num_src, Block& out) {
  const int64_t m = piece.size();
  if (m == 0) {
    return;
  }
  if (num_src + m > out.num_src()) {
    out.src_nodes.resize(static_cast<size_t>(num_src + std::max<int64_t>(m, 4096)));
  }
  int64_t* src = piece.src.data();
  int64_t* nodes = out.src_nodes.data();
  int64_t next = num_src;
  constexpr int64_t kAhead = 16;
  for (int64_t q = 0; q < m; ++q) {
    if (q + kAhead < m && static_cast<uint64_t>(src[q + kAhead]) < num_nodes) {
      prefetch_l1(&tag[src[q + kAhead]]);
    }
    const int64_t s = src[q];
    if (static_cast<uint64_t>(s) >= num_nodes) {
      TESSERA_FAIL(IndexError, "sample_blocks: sampled neighbor {} is outside [0, {}) (edge ID {})",
                   s, num_nodes, piece.eid[q]);
    }
    src[q] = compact_source(tag, base, nodes, next, s);
  }
  num_src = next;
  out.src.insert(out.src.end(), piece.src.begin(), piece.src.end());
  out.dst.insert(out.dst.end(), piece.dst.begin(), piece.dst.end());
  out.eids.insert(out.eids.end(), piece.eid.begin(), piece.eid.end());
}

// A hop over `threads` threads: the seeds are cut into pieces of kPiece seeds, which every
// thread takes in turn and samples into the piece's own edges (ChunkSink); the calling thread
// also appends the pieces to the block in order, compacting them, and samples a piece itself
// whenever the next one to append is not done yet. Returns the calling thread's ticks spent
// compacting. Every seed's edges depend only on (key, seed) and the sources are compacted in
// edge order, so the block is the one-thread block, bit for bit.
uint64_t sample_block_threads(const RowSampler& sampler, Span<const int64_t> seeds, int64_t threads,
                              uint32_t* tag, uint64_t num_nodes, uint32_t base, Block& out) {
  const int64_t n = seeds.size();
  const int64_t np = (n + kPiece - 1) / kPiece;
  std::unique_ptr<Piece[]> pieces(new Piece[static_cast<size_t>(np)]);
  std::atomic<int64_t> claim{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // with `ready`: the calling thread sleeps until the piece it appends next is done
  std::condition_variable ready;
  auto sample = [&](int64_t i) {
    Piece& p = pieces[i];
    try {
      const int64_t lo = i * kPiece, hi = std::min(n, lo + kPiece);
      const int64_t guess = (hi - lo) * std::min<int64_t>(sampler.o.fanout, 32);
      p.edges.src.reserve(static_cast<size_t>(guess));
      p.edges.dst.reserve(static_cast<size_t>(guess));
      p.edges.eid.reserve(static_cast<size_t>(guess));
      RowScratch s;
      ChunkSink sink{p.edges, lo};
      sampler.run_uniform(seeds.data() + lo, hi - lo, sink, s);
    } catch (...) {
      p.error = std::current_exception();
    }
    {
      const std::lock_guard<std::mutex> lock(mu);
      p.done.store(true, std::memory_order_release);
    }
    ready.notify_all();
  };
  auto work = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t i = claim.fetch_add(1);
      if (i >= np) {
        return;
      }
      sample(i);
    }
  };
  // The helpers are threads-1 chunks of one pool job, each taking pieces until none is left;
  // they are stopped and waited for however this function ends (an IndexError while compacting
  // included).
  struct Helpers {
    std::atomic<bool>& stop;
    PoolJob job;
    ~Helpers() {
      stop.store(true);
      job.wait();
    }
  } helpers{stop, PoolJob(
                      threads - 1, static_cast<int>(threads - 1),
                      [](void* w, int64_t) { (*static_cast<decltype(work)*>(w))(); }, &work)};
  int64_t num_src = n;
  uint64_t ticks = 0;
  for (int64_t a = 0; a < np; ++a) {
    Piece& p = pieces[a];
    while (!p.done.load(std::memory_order_acquire)) {
      const int64_t i = claim.fetch_add(1);
      if (i < np) {
        sample(i);
      } else {  // every piece is taken: wait for the helper that has this one
        std::unique_lock<std::mutex> lock(mu);
        ready.wait(lock, [&] { return p.done.load(std::memory_order_acquire); });
      }
    }
    if (p.error) {
      std::rethrow_exception(p.error);
    }
    const uint64_t t0 = __rdtsc();
    append_compacted(p.edges, tag, num_nodes, base, num_src, out);
    ticks += __rdtsc() - t0;
    p.edges = SampledEdges{};  // its memory goes back while the rest is appended
  }
  out.src_nodes.resize(static_cast<size_t>(num_src));
  return ticks;
}

}  // namespace

bool sample_block_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                      const SampleOptions& opts, IdMap& map, Block& out, double& compact_share) {
  const int64_t n = seeds.size(), nn = graph.num_nodes(), fan = opts.fanout;
  if (graph.device() != Device::kCpu || graph.weighted() || fan < 0 ||
      (opts.exclude && !opts.exclude->empty()) || map.dense_size() < nn) {
    return false;
  }
  validate_sample_args(graph, seeds, opts);
  // Edges: at most fanout per seed (and, without replacement, at most the graph's); locals: the
  // seeds and at most one new source per edge, and never more than the graph's nodes.
  const int64_t max_edges = fan == 0 || n == 0 ? 0
                            : fan > (std::numeric_limits<int64_t>::max() / 2) / n
                                ? std::numeric_limits<int64_t>::max() / 2
                                : n * fan;
  const int64_t edge_cap = opts.replace ? max_edges : std::min(max_edges, graph.num_edges());
  const int64_t cap = std::min(nn, n + edge_cap);
  uint32_t base = 0;
  if (!map.dense_begin(cap, base)) {
    return false;
  }
  uint32_t* tag = map.dense_tags();
  out.num_dst = n;
  // A first guess for the arrays (they grow in steps beyond it): a fanout far above the typical
  // degree must not reserve n * fanout.
  const int64_t guess = std::min(edge_cap, n * std::min<int64_t>(fan, 32) + 4096);
  out.src_nodes.clear();
  out.src_nodes.reserve(static_cast<size_t>(std::min(cap, n + guess)));
  tag_seeds(seeds, tag, base, out);
  for (auto* a : {&out.src, &out.dst, &out.eids}) {
    a->clear();
    a->reserve(static_cast<size_t>(guess));
  }
  SampleOptions o = opts;
  o.key.stream = RngStream::kNeighbor;
  const RowSampler sampler(graph, o);
  // A hop of few edges runs in one thread: a pool thread wakes 20-30 us after it is asked
  // for, when most of such a hop is done (tolokers, 1024 seeds, fanout 5: 61 us in one
  // thread, 77 us split over two).
  const int64_t threads = guess < kThreadedMinEdges ? 1 : sample_chunks(n, o.num_threads);
  const uint64_t t0 = __rdtsc();
  uint64_t compact_ticks = 0;
  if (threads == 1) {
    BlockSink sink{out, tag, static_cast<uint64_t>(nn), base, n};
    RowScratch s;
    sampler.run_uniform(seeds.data(), n, sink, s);
    compact_ticks = sink.compact_ticks;
  } else {
    compact_ticks =
        sample_block_threads(sampler, seeds, threads, tag, static_cast<uint64_t>(nn), base, out);
  }
  const uint64_t ticks = __rdtsc() - t0;
  compact_share = ticks > 0 ? static_cast<double>(compact_ticks) / static_cast<double>(ticks) : 0;
  map.dense_end(base, out.num_src());
  return true;
}

}  // namespace tessera::ops::detail
