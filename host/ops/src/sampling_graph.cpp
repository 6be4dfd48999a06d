// SPDX-License-Identifier: Apache-2.0
// SamplingGraph and the layouts it prepares: storage-order weights and their per-row prefix sums,
// the interleaved adjacency, and compaction workspaces lent from a pool.
#include "tessera/ops/sampling_graph.hpp"

#include <atomic>
#include <cmath>
#include <mutex>
#include <utility>

#include "huge_pages.hpp"
#include "id_map.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/device_sampler.hpp"

namespace tessera::ops {

namespace {

// weight_prefix_sums of weights already checked.
std::vector<double> prefix_sums(const GraphArrays& graph, Span<const float> weights) {
  std::vector<double> out(static_cast<size_t>(graph.num_edges));
  const int64_t* indptr = graph.indptr;
  parallel_for(0, graph.num_nodes, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      double total = 0;  // the same sequential sum as the per-row path
      for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
        total += weights[k];
        out[k] = total;
      }
    }
  });
  return out;
}

}  // namespace

GraphArrays::GraphArrays(const Graph& g)
    : num_nodes(g.num_nodes),
      num_edges(g.num_edges()),
      indptr(g.indptr.data()),
      indices(g.indices.data()),
      eids(g.eids.empty() ? nullptr : g.eids.data()) {}

struct SamplingGraph::Pool {
  std::mutex mu;
  std::vector<std::unique_ptr<CompactWorkspace>> idle;
  int64_t num_nodes = 0;
};

SamplingGraphOptions SamplingGraphOptions::as_stored(Span<const float> weights) {
  SamplingGraphOptions o;
  o.weights = weights;
  o.interleave = false;
  o.weight_prefix = false;
  o.check_weights = false;
  return o;
}

namespace {

// A Graph's structure, checked before its arrays are borrowed: indptr of num_nodes + 1 entries,
// and one edge ID per edge when it has them.
const Graph& checked_graph(const Graph& g) {
  TESSERA_EXPECTS(static_cast<int64_t>(g.indptr.size()) == g.num_nodes + 1, ValueError,
                  "SamplingGraph: graph indptr has {} entries for {} nodes", g.indptr.size(),
                  g.num_nodes);
  TESSERA_EXPECTS(g.eids.empty() || g.eids.size() == g.indices.size(), ValueError,
                  "SamplingGraph: graph has {} edge IDs for {} edges", g.eids.size(),
                  g.indices.size());
  return g;
}

}  // namespace

SamplingGraph::SamplingGraph(const Graph& graph, SamplingGraphOptions opts)
    : graph_(&checked_graph(graph)),
      arrays_(graph),
      opts_(opts),
      device_(opts.device),
      weights_(opts.weights) {
  prepare();
}

SamplingGraph::SamplingGraph(const GraphArrays& arrays, SamplingGraphOptions opts)
    : arrays_(arrays), opts_(opts), device_(opts.device), weights_(opts.weights) {
  TESSERA_EXPECTS(device_ == Device::kCpu, ValueError,
                  "SamplingGraph: borrowed arrays are sampled on the CPU (a DeviceGraph places a "
                  "Graph)");
  TESSERA_EXPECTS(arrays.num_nodes >= 0 && arrays.num_edges >= 0 && arrays.indptr != nullptr &&
                      (arrays.num_edges == 0 || arrays.indices != nullptr),
                  ValueError, "SamplingGraph: borrowed arrays of {} rows and {} edges lack {}",
                  arrays.num_nodes, arrays.num_edges,
                  arrays.indptr == nullptr ? "indptr" : "indices");
  TESSERA_EXPECTS(arrays.indptr[0] == 0 && arrays.indptr[arrays.num_nodes] == arrays.num_edges,
                  ValueError,
                  "SamplingGraph: borrowed indptr runs from {} to {}, expected 0 to {} edges",
                  arrays.indptr[0], arrays.indptr[arrays.num_nodes], arrays.num_edges);
  if (arrays.row_keys != nullptr) {
    parallel_for(0, arrays.num_nodes, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
      for (int64_t v = lo; v < hi; ++v) {
        TESSERA_EXPECTS(static_cast<uint64_t>(arrays.row_keys[v]) < (uint64_t{1} << 48), ValueError,
                        "SamplingGraph: row {}'s key {} is outside the 2^48 node IDs of the "
                        "Philox key layout",
                        v, arrays.row_keys[v]);  // parallel_for rethrows it here
      }
    });
  }
  prepare();
}

SamplingGraph::SamplingGraph(const Graph& graph, std::vector<float> weights,
                             SamplingGraphOptions opts)
    : graph_(&checked_graph(graph)),
      arrays_(graph),
      opts_(opts),
      device_(opts.device),
      owned_weights_(std::move(weights)) {
  TESSERA_EXPECTS(opts.weights.empty(), ValueError,
                  "SamplingGraph: weights given twice (as a vector and in the options)");
  weights_ = owned_weights_;
  opts_.weights = weights_;
  prepare();
}

SamplingGraph SamplingGraph::as_stored(const Graph& graph, Span<const float> weights) {
  return SamplingGraph(graph, SamplingGraphOptions::as_stored(weights));
}

SamplingGraph::~SamplingGraph() = default;
SamplingGraph::SamplingGraph(SamplingGraph&&) noexcept = default;
SamplingGraph& SamplingGraph::operator=(SamplingGraph&&) noexcept = default;

const Graph& SamplingGraph::graph() const {
  TESSERA_EXPECTS(graph_ != nullptr, ValueError,
                  "SamplingGraph: built over borrowed arrays, it has no Graph (use arrays())");
  return *graph_;
}

void SamplingGraph::prepare() {
  const GraphArrays& g = arrays_;
  TESSERA_EXPECTS(g.num_nodes < (int64_t{1} << 48), ValueError,
                  "SamplingGraph: {} nodes exceed the 2^48 node IDs of the Philox key layout",
                  g.num_nodes);
  TESSERA_EXPECTS(weights_.empty() || weights_.size() == g.num_edges, ValueError,
                  "SamplingGraph: {} weights for a graph with {} edges (one per edge, in storage "
                  "order)",
                  weights_.size(), g.num_edges);
  weighted_ = !weights_.empty();
  pool_ = std::make_unique<Pool>();
  pool_->num_nodes = g.num_nodes;
  if (device_ == Device::kCuda) {  // DeviceGraph checks every weight (NotCompiledError first)
    DeviceGraphOptions go;
    go.split_arrays = false;  // the samplers read the interleaved adjacency only
    device_graph_ = std::make_unique<DeviceGraph>(*graph_, opts_.placement, weights_, nullptr, go);
    weights_checked_ = weighted_;
    return;
  }
  if (weighted_ && (opts_.check_weights || opts_.weight_prefix)) {
    validate_weights(g, weights_, "SamplingGraph weights");
    weights_checked_ = true;
    if (opts_.weight_prefix) {
      prefix_ = prefix_sums(g, weights_);
    }
  }
  if (opts_.interleave && g.num_edges > 0) {
    if (opts_.packed) {
      packed_ = try_pack_adjacency(g);
    }
    if (packed_.empty()) {
      pairs_ = interleave_adjacency(g);
    }
  }
}

size_t SamplingGraph::prepared_bytes() const {
  return owned_weights_.size() * sizeof(float) + prefix_.size() * sizeof(double) +
         packed_.size() * sizeof(uint64_t) + pairs_.size() * sizeof(int64_t);
}

SamplingGraph::WorkspaceLease::WorkspaceLease(Pool* pool, std::unique_ptr<CompactWorkspace> ws)
    : pool_(pool), ws_(std::move(ws)) {}

SamplingGraph::WorkspaceLease::WorkspaceLease(WorkspaceLease&& o) noexcept
    : pool_(o.pool_), ws_(std::move(o.ws_)) {}

SamplingGraph::WorkspaceLease::~WorkspaceLease() {
  if (!ws_) {
    return;
  }
  std::lock_guard<std::mutex> lock(pool_->mu);
  try {
    pool_->idle.push_back(std::move(ws_));
  } catch (...) {  // out of memory: the workspace is freed instead of kept
  }
}

SamplingGraph::WorkspaceLease SamplingGraph::lend_workspace() const {
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    if (!pool_->idle.empty()) {
      std::unique_ptr<CompactWorkspace> ws = std::move(pool_->idle.back());
      pool_->idle.pop_back();
      return WorkspaceLease(pool_.get(), std::move(ws));
    }
  }
  auto ws = std::make_unique<CompactWorkspace>();
  ws->map().use_dense(pool_->num_nodes);  // hashing only above IdMap::kMaxDense nodes
  return WorkspaceLease(pool_.get(), std::move(ws));
}

std::vector<float> weights_in_storage_order(const GraphArrays& graph, Span<const float> by_eid) {
  const int64_t m = graph.num_edges;
  TESSERA_EXPECTS(m == 0 || by_eid.size() > 0, ValueError,
                  "weights_in_storage_order: no weights for a graph with {} edges", m);
  std::vector<float> out(static_cast<size_t>(m));
  const uint64_t n = static_cast<uint64_t>(by_eid.size());
  parallel_for(0, m, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t k = lo; k < hi; ++k) {
      out[k] = by_eid[static_cast<int64_t>(static_cast<uint64_t>(graph.eid(k)) % n)];
    }
  });
  return out;
}

std::vector<double> weight_prefix_sums(const GraphArrays& graph, Span<const float> weights) {
  validate_weights(graph, weights, "weight_prefix_sums");
  return prefix_sums(graph, weights);
}

void detail::throw_bad_weight(double x, const std::string& where) {
  const auto w = static_cast<float>(x);
  TESSERA_EXPECTS(x >= 0 && std::isfinite(x), ValueError, "{} is negative or not finite", where);
  TESSERA_EXPECTS(std::isfinite(w), ValueError, "{} overflows float32", where);
  throw ValueError(fmt::format(
      "{} is below float32's smallest normal number ({:g}) and not a float32: the samplers "
      "draw by float32 weights, so it would be drawn as zero or without precision; rescale "
      "the weights",
      where, std::numeric_limits<float>::min()));
}

void validate_weights(const GraphArrays& graph, Span<const float> weights, const char* what) {
  TESSERA_EXPECTS(weights.size() == graph.num_edges, ValueError,
                  "{}: {} weights for a graph with {} edges (one per edge, in storage order)", what,
                  weights.size(), graph.num_edges);
  for (int64_t k = 0; k < weights.size(); ++k) {
    const float w = weights[k];
    TESSERA_EXPECTS(std::isfinite(w) && w >= 0, ValueError,
                    "{}: weight {} at storage position {} is negative or not finite", what, w, k);
  }
}

std::vector<int64_t> interleave_adjacency(const GraphArrays& graph) {
  const int64_t m = graph.num_edges;
  std::vector<int64_t> pairs;
  pairs.reserve(static_cast<size_t>(2 * m));
  detail::advise_huge_range(pairs.data(),
                            static_cast<size_t>(2 * m) * sizeof(int64_t));  // before first touch
  pairs.resize(static_cast<size_t>(2 * m));
  for (int64_t k = 0; k < m; ++k) {
    pairs[2 * k] = graph.indices[k];
    pairs[2 * k + 1] = graph.eid(k);
  }
  return pairs;
}

bool can_pack_adjacency(const GraphArrays& graph) {
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  if (static_cast<uint64_t>(graph.num_nodes) > kLimit) {
    return false;
  }
  // A Graph's neighbors are below num_nodes; borrowed arrays' need not be (their rows may be
  // numbered apart from their neighbors' IDs): each is checked.
  for (int64_t k = 0; k < graph.num_edges; ++k) {
    if (static_cast<uint64_t>(graph.indices[k]) >= kLimit ||
        static_cast<uint64_t>(graph.eid(k)) >= kLimit) {
      return false;  // also rejects IDs < 0
    }
  }
  return true;
}

std::vector<uint64_t> try_pack_adjacency(const GraphArrays& graph) {
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  if (static_cast<uint64_t>(graph.num_nodes) > kLimit) {
    return {};
  }
  const int64_t m = graph.num_edges;
  std::vector<uint64_t> packed;
  packed.reserve(static_cast<size_t>(m));
  detail::advise_huge_range(packed.data(),
                            static_cast<size_t>(m) * sizeof(uint64_t));  // before first touch
  packed.resize(static_cast<size_t>(m));
  std::atomic<bool> fits{true};
  parallel_for(0, m, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    bool ok = true;
    for (int64_t k = lo; k < hi; ++k) {
      const auto e = static_cast<uint64_t>(graph.eid(k));  // an ID < 0 wraps above the limit
      const auto u = static_cast<uint64_t>(graph.indices[k]);
      ok &= e < kLimit && u < kLimit;
      packed[k] = e << 32 | u;
    }
    if (!ok) {
      fits.store(false, std::memory_order_relaxed);
    }
  });
  if (!fits.load()) {
    return {};
  }
  return packed;
}

std::vector<uint64_t> pack_adjacency(const GraphArrays& graph) {
  std::vector<uint64_t> packed = try_pack_adjacency(graph);
  TESSERA_EXPECTS(static_cast<int64_t>(packed.size()) == graph.num_edges, ValueError,
                  "pack_adjacency: the graph has {} nodes and {} edges; a node or edge ID does not "
                  "fit in 32 bits (use interleave_adjacency)",
                  graph.num_nodes, graph.num_edges);
  return packed;
}

}  // namespace tessera::ops
