// SPDX-License-Identifier: Apache-2.0
// sample_neighbors: the public entry points, their one validator, and the dispatch to the twin
// of where the SamplingGraph lives: the CPU twin (its driver is here; the row algorithms are in
// sample_rows.cpp, the output sinks in sample_sinks.hpp) or the CUDA twin
// (cuda/src/sample_neighbors.cu, reached through detail::sample_neighbors_cuda).
#include <algorithm>

#include "sample_rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops {

const char* device_name(Device d) {
  return d == Device::kCuda ? "cuda" : "cpu";
}
const char* edge_dir_name(EdgeDir d) {
  return d == EdgeDir::kOut ? "out" : "in";
}

RngKey make_rng_key(uint64_t seed, int64_t epoch, int64_t batch, int64_t layer) {
  constexpr int64_t kMax32 = int64_t{1} << 32;
  TESSERA_EXPECTS(seed < static_cast<uint64_t>(kMax32), ValueError,
                  "seed {} out of range: the Philox key holds a 32-bit seed (< 2^32)", seed);
  TESSERA_EXPECTS(epoch >= 0 && epoch < kMax32, ValueError, "epoch {} out of range [0, 2^32)",
                  epoch);
  TESSERA_EXPECTS(batch >= 0 && batch < kMax32, ValueError, "batch {} out of range [0, 2^32)",
                  batch);
  TESSERA_EXPECTS(layer >= 0 && layer < 256, ValueError, "layer {} out of range [0, 256)", layer);
  RngKey k;
  k.seed = static_cast<uint32_t>(seed);
  k.epoch = static_cast<uint32_t>(epoch);
  k.batch = static_cast<uint32_t>(batch);
  k.layer = static_cast<uint32_t>(layer);
  return k;
}

ExcludeEdges::ExcludeEdges(Span<const int64_t> rows, Span<const int64_t> eids) {
  TESSERA_EXPECTS(rows.size() == eids.size(), ValueError, "ExcludeEdges: {} rows but {} edge IDs",
                  rows.size(), eids.size());
  std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<size_t>(rows.size()));
  for (int64_t i = 0; i < rows.size(); ++i) {
    pairs[i] = {rows[i], eids[i]};
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i == 0 || pairs[i].first != pairs[i - 1].first) {
      rows_.push_back(pairs[i].first);
      offsets_.push_back(static_cast<int64_t>(i));
    }
    eids_.push_back(pairs[i].second);
  }
  offsets_.push_back(static_cast<int64_t>(eids_.size()));
}

std::pair<const int64_t*, const int64_t*> ExcludeEdges::row_eids(int64_t row) const {
  auto it = std::lower_bound(rows_.begin(), rows_.end(), row);
  if (it == rows_.end() || *it != row) {
    return {nullptr, nullptr};
  }
  const size_t r = static_cast<size_t>(it - rows_.begin());
  return {eids_.data() + offsets_[r], eids_.data() + offsets_[r + 1]};
}

namespace detail {

void validate_sample_args(const SamplingGraph& graph, Span<const int64_t> seeds,
                          const SampleOptions& opts) {
  TESSERA_EXPECTS(opts.fanout >= -1, ValueError,
                  "sample_neighbors: fanout {} is negative (use -1 for all neighbors)",
                  opts.fanout);
  TESSERA_EXPECTS(opts.key.layer < 256, ValueError, "sample_neighbors: layer {} not < 256",
                  opts.key.layer);
  TESSERA_EXPECTS(opts.num_threads >= 0, ValueError, "sample_neighbors: num_threads {} < 0",
                  opts.num_threads);
  const int64_t n = graph.num_nodes();
  for (int64_t i = 0; i < seeds.size(); ++i) {
    const int64_t v = seeds[i];
    if (v < 0 || v >= n) {
      TESSERA_FAIL(IndexError, "sample_neighbors: seed node {} at position {} outside [0, {})", v,
                   i, n);
    }
  }
}

void sample_neighbors_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                          const SampleOptions& opts, SampledEdges& out) {
  out.clear();
  SampleOptions o = opts;
  o.key.stream = RngStream::kNeighbor;
  const RowSampler sampler(graph, o);
  const int64_t n = seeds.size();
  const int64_t chunks = sample_chunks(n, o.num_threads);
  if (chunks == 1) {
    sampler.run(seeds.data(), n, out);
    return;
  }
  // Chunks are sampled independently and concatenated in seed order, so the output does not
  // depend on the chunking.
  std::vector<SampledEdges> parts(static_cast<size_t>(chunks));
  parallel_chunks(static_cast<int>(chunks), chunks, [&](int64_t c) {
    const int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
    sampler.run(seeds.data() + lo, hi - lo, parts[c]);
  });
  std::vector<int64_t> offset(static_cast<size_t>(chunks) + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) {
    offset[c + 1] = offset[c] + parts[c].size();
  }
  out.src.resize(static_cast<size_t>(offset[chunks]));
  out.dst.resize(out.src.size());
  out.eid.resize(out.src.size());
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t c = lo; c < hi; ++c) {
      std::copy(parts[c].src.begin(), parts[c].src.end(), out.src.begin() + offset[c]);
      std::copy(parts[c].dst.begin(), parts[c].dst.end(), out.dst.begin() + offset[c]);
      std::copy(parts[c].eid.begin(), parts[c].eid.end(), out.eid.begin() + offset[c]);
    }
  });
}

}  // namespace detail

void sample_neighbors_into(const SamplingGraph& graph, Span<const int64_t> seeds,
                           const SampleOptions& opts, SampledEdges& out) {
  detail::validate_sample_args(graph, seeds, opts);
  if (graph.device() == Device::kCuda) {
    detail::sample_neighbors_cuda(graph, seeds, opts, out);
    return;
  }
  detail::sample_neighbors_cpu(graph, seeds, opts, out);
}

SampledEdges sample_neighbors(const SamplingGraph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts) {
  SampledEdges out;
  sample_neighbors_into(graph, seeds, opts, out);
  return out;
}

SampledEdges sample_neighbors(const Graph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts) {
  return sample_neighbors(SamplingGraph::as_stored(graph), seeds, opts);
}

}  // namespace tessera::ops
