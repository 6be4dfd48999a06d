#include "sample_block.hpp"

#include <x86intrin.h>

#include <limits>

#include "id_map.hpp"
#include "sample_rows.hpp"
#include "tessera/core/error.hpp"

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

}  // namespace

bool sample_block_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                      const SampleOptions& opts, IdMap& map, Block& out, double& compact_share) {
  const int64_t n = seeds.size(), nn = graph.num_nodes(), fan = opts.fanout;
  if (graph.device() != Device::kCpu || graph.weighted() || fan < 0 ||
      (opts.exclude && !opts.exclude->empty()) || map.dense_size() < nn ||
      sample_chunks(n, opts.num_threads) != 1) {
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
  BlockSink sink{out, tag, static_cast<uint64_t>(nn), base, n};
  RowScratch s;
  const uint64_t t0 = __rdtsc();
  sampler.run_uniform(seeds.data(), n, sink, s);
  const uint64_t ticks = __rdtsc() - t0;
  compact_share =
      ticks > 0 ? static_cast<double>(sink.compact_ticks) / static_cast<double>(ticks) : 0;
  map.dense_end(base, out.num_src());
  return true;
}

}  // namespace tessera::ops::detail
