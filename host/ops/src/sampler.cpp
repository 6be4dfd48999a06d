// SPDX-License-Identifier: Apache-2.0
#include "tessera/ops/sampler.hpp"

#include <algorithm>
#include <limits>

#include "id_map.hpp"
#include "sample_block.hpp"
#include "tessera/core/batches.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/ops/device_sampler.hpp"

namespace tessera::ops {

namespace {

// The options, checked once (ValueError), before anything is built.
NeighborSamplerOptions validated(NeighborSamplerOptions opts) {
  TESSERA_EXPECTS(!opts.fanouts.empty(), ValueError, "NeighborSampler: no fanouts given");
  TESSERA_EXPECTS(opts.fanouts.size() <= 256, ValueError,
                  "NeighborSampler: {} layers exceed the 256 of the Philox key layout",
                  opts.fanouts.size());
  for (size_t i = 0; i < opts.fanouts.size(); ++i) {
    TESSERA_EXPECTS(opts.fanouts[i] >= -1, ValueError,
                    "NeighborSampler: fanout {} of layer {} is negative (use -1 for all)",
                    opts.fanouts[i], i);
  }
  TESSERA_EXPECTS(opts.num_threads >= 0, ValueError, "NeighborSampler: num_threads {} < 0",
                  opts.num_threads);
  return opts;
}

}  // namespace

NeighborSampler::NeighborSampler(std::shared_ptr<const SamplingGraph> graph,
                                 NeighborSamplerOptions opts)
    : opts_(validated(std::move(opts))), graph_(std::move(graph)) {
  TESSERA_EXPECTS(graph_ != nullptr, ValueError, "NeighborSampler: no graph given");
  TESSERA_EXPECTS(!graph_->borrowed(), ValueError,
                  "NeighborSampler: the graph is built over borrowed arrays (GraphArrays), whose "
                  "neighbor IDs need not be its row numbers, so blocks could mix the two; sample "
                  "it one layer at a time with sample_neighbors");
  if (graph_->device() == Device::kCuda) {
    dev_sampler_ = std::make_shared<const DeviceNeighborSampler>(
        *graph_->device_graph(), opts_.fanouts, opts_.replace, opts_.dir);
  }
}

NeighborSampler::NeighborSampler(const SamplingGraph& graph, NeighborSamplerOptions opts)
    : NeighborSampler(
          std::shared_ptr<const SamplingGraph>(std::shared_ptr<const SamplingGraph>(), &graph),
          std::move(opts)) {}

// The options are checked before the graph is prepared (which may take a while).
NeighborSampler::NeighborSampler(const Graph& graph, const NeighborSamplerOptions& opts,
                                 const SamplingGraphOptions& prep)
    : NeighborSampler((validated(opts), std::make_shared<const SamplingGraph>(graph, prep)), opts) {
}

std::vector<Block> NeighborSampler::sample_blocks(Span<const int64_t> seeds, const RngKey& key,
                                                  const ExcludeEdges* exclude, CompactWorkspace* ws,
                                                  SampleStats* stats) const {
  if (dev_sampler_) return dev_sampler_->sample_blocks_host(seeds, key, nullptr, stats, exclude);
  if (ws) {
    // Sampled IDs are < num_nodes: compact over a direct-mapped table when the graph is small
    // enough (4 bytes per node, kept in the caller's workspace); otherwise hashing.
    ws->map().use_dense(graph_->num_nodes());
    return sample_blocks_cpu(seeds, key, exclude, *ws, stats);
  }
  const SamplingGraph::WorkspaceLease lease = graph_->lend_workspace();
  return sample_blocks_cpu(seeds, key, exclude, *lease, stats);
}

std::vector<Block> NeighborSampler::sample_blocks_cpu(Span<const int64_t> seeds, const RngKey& key,
                                                      const ExcludeEdges* exclude,
                                                      CompactWorkspace& ws,
                                                      SampleStats* stats) const {
  const int64_t layers = static_cast<int64_t>(opts_.fanouts.size());
  std::vector<Block> blocks(static_cast<size_t>(layers));
  SampleOptions so;
  so.replace = opts_.replace;
  so.dir = opts_.dir;
  so.exclude = exclude;
  so.num_threads = opts_.num_threads;
  so.key = key;
  SampleStats st;
  st.seeds = seeds.size();
  Span<const int64_t> frontier = seeds;
  SampledEdges& edges = ws.edges();
  for (int64_t h = 0; h < layers; ++h) {
    const int64_t l = layers - 1 - h;  // GNN layer; the output layer samples first
    so.fanout = opts_.fanouts[static_cast<size_t>(l)];
    so.key.layer = static_cast<uint32_t>(h);
    const double t0 = now_seconds();
    Block& b = blocks[static_cast<size_t>(l)];
    double share = 0;  // of this hop's time, compacting
    if (!detail::sample_block_cpu(*graph_, frontier, so, ws.map(), b, share)) {
      sample_neighbors_into(*graph_, frontier, so, edges);
      if (opts_.dir == EdgeDir::kOut) edges.src.swap(edges.dst);  // messages: neighbor -> seed
      const double t1 = now_seconds();
      b = to_block(edges, frontier, &ws);
      const double t2 = now_seconds();
      share = (t2 - t1) / std::max(t2 - t0, 1e-12);
    }
    const double dt = now_seconds() - t0;
    st.compact_seconds += dt * share;
    st.sample_seconds += dt * (1 - share);
    st.sampled_edges += b.num_edges();
    frontier = Span<const int64_t>(b.src_nodes.data(), b.num_src());
  }
  if (stats) stats->add(st);
  return blocks;
}

void uniform_negatives(int64_t num_nodes, Span<const int64_t> pos_src, Span<const int64_t> pos_eids,
                       int64_t k, const RngKey& key, std::vector<int64_t>& neg_src,
                       std::vector<int64_t>& neg_dst) {
  TESSERA_EXPECTS(k >= 0, ValueError, "uniform_negatives: k = {} is negative", k);
  TESSERA_EXPECTS(pos_src.size() == pos_eids.size(), ValueError,
                  "uniform_negatives: {} sources but {} edge IDs", pos_src.size(), pos_eids.size());
  TESSERA_EXPECTS(num_nodes > 0 || pos_src.empty() || k == 0, ValueError,
                  "uniform_negatives: the graph has no nodes");
  TESSERA_EXPECTS(k <= 0 || pos_src.size() <= std::numeric_limits<int64_t>::max() / k, ValueError,
                  "uniform_negatives: {} negatives for each of {} edges overflow", k,
                  pos_src.size());
  RngKey kk = key;
  kk.layer = 0;
  kk.stream = RngStream::kNegative;
  neg_src.resize(static_cast<size_t>(pos_src.size() * k));
  neg_dst.resize(neg_src.size());
  for (int64_t i = 0; i < pos_src.size(); ++i) {
    TESSERA_EXPECTS(pos_eids[i] >= 0, IndexError, "uniform_negatives: edge ID {} < 0", pos_eids[i]);
    for (int64_t j = 0; j < k; ++j) {
      neg_src[i * k + j] = pos_src[i];
      neg_dst[i * k + j] = static_cast<int64_t>(bounded_u64(
          philox_u64(philox_draw(kk, static_cast<uint64_t>(pos_eids[i]), static_cast<uint32_t>(j))),
          static_cast<uint64_t>(num_nodes)));
    }
  }
}

std::vector<int64_t> philox_permutation(int64_t n, uint32_t seed, uint32_t epoch, RngStream stream,
                                        uint32_t batch, uint32_t layer) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    p[i] = i;
  RngKey key;
  key.seed = seed;
  key.epoch = epoch;
  key.batch = batch;
  key.layer = layer;
  key.stream = stream;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(bounded_u64(
        philox_u64(philox_draw(key, static_cast<uint64_t>(i), 0)), static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return p;
}

ClusterGcnSampler::ClusterGcnSampler(const Graph& graph, std::vector<int64_t> part_of_node,
                                     int64_t parts_per_batch, uint64_t seed, int64_t rank)
    : graph_(graph), parts_per_batch_(parts_per_batch) {
  const int64_t n = graph.num_nodes;
  TESSERA_EXPECTS(static_cast<int64_t>(part_of_node.size()) == n, ValueError,
                  "ClusterGcnSampler: part_of_node has {} entries for {} nodes",
                  part_of_node.size(), n);
  TESSERA_EXPECTS(parts_per_batch >= 1, ValueError, "ClusterGcnSampler: parts_per_batch {} < 1",
                  parts_per_batch);
  seed_ = make_rng_key(seed, 0, 0, 0).seed;
  TESSERA_EXPECTS(rank >= 0 && rank <= int64_t{0xFFFFFFFF}, ValueError,
                  "ClusterGcnSampler: rank {} outside [0, 2^32)", rank);
  rank_ = static_cast<uint32_t>(rank);
  for (int64_t v = 0; v < n; ++v) {
    // Parts are numbered 0..P-1 with no part empty, so P <= n: a larger part ID (which would
    // also overflow part + 1 at INT64_MAX) is a mistake, not a request for empty parts.
    TESSERA_EXPECTS(part_of_node[v] >= 0 && part_of_node[v] < n, IndexError,
                    "ClusterGcnSampler: node {} has part {} outside [0, {}) (parts are numbered "
                    "from 0, none empty)",
                    v, part_of_node[v], n);
    num_parts_ = std::max(num_parts_, part_of_node[v] + 1);
  }
  part_ptr_.assign(static_cast<size_t>(num_parts_) + 1, 0);
  for (int64_t v = 0; v < n; ++v)
    ++part_ptr_[part_of_node[v] + 1];
  for (int64_t p = 0; p < num_parts_; ++p) {
    TESSERA_EXPECTS(part_ptr_[p + 1] > 0, ValueError, "ClusterGcnSampler: part {} has no nodes", p);
    part_ptr_[p + 1] += part_ptr_[p];
  }
  part_nodes_.resize(static_cast<size_t>(n));
  std::vector<int64_t> pos(part_ptr_.begin(), part_ptr_.end() - 1);
  for (int64_t v = 0; v < n; ++v)
    part_nodes_[pos[part_of_node[v]]++] = v;
}

int64_t ClusterGcnSampler::num_batches() const {
  return ceil_div(num_parts_, parts_per_batch_);
}

std::vector<int64_t> ClusterGcnSampler::part_order(int64_t epoch) const {
  const RngKey k = make_rng_key(seed_, epoch, 0, 0);
  return philox_permutation(num_parts_, k.seed, k.epoch, RngStream::kCluster, rank_);
}

std::vector<int64_t> ClusterGcnSampler::batch_parts(int64_t epoch, int64_t batch) const {
  TESSERA_EXPECTS(batch >= 0 && batch < num_batches(), IndexError,
                  "ClusterGcnSampler: batch {} outside [0, {})", batch, num_batches());
  const auto order = part_order(epoch);
  const int64_t lo = batch * parts_per_batch_;  // batch < num_batches: lo < num_parts
  const int64_t hi = clipped_end(lo, parts_per_batch_, num_parts_);
  return {order.begin() + lo, order.begin() + hi};
}

Subgraph ClusterGcnSampler::sample(int64_t epoch, int64_t batch, int num_threads) const {
  std::vector<int64_t> nodes;
  for (int64_t p : batch_parts(epoch, batch))
    nodes.insert(nodes.end(), part_nodes_.begin() + part_ptr_[p],
                 part_nodes_.begin() + part_ptr_[p + 1]);
  return induced_subgraph(graph_, nodes, num_threads);
}

std::vector<int64_t> random_clustering(int64_t num_nodes, int64_t num_parts, uint64_t seed,
                                       int64_t epoch, int64_t rank) {
  TESSERA_EXPECTS(num_parts >= 1 && num_parts <= num_nodes, ValueError,
                  "random_clustering: num_parts {} outside [1, num_nodes = {}]", num_parts,
                  num_nodes);
  TESSERA_EXPECTS(rank >= 0 && rank <= int64_t{0xFFFFFFFF}, ValueError,
                  "random_clustering: rank {} outside [0, 2^32)", rank);
  const RngKey k = make_rng_key(seed, epoch, rank, 0);  // validates seed and epoch
  const auto perm =
      philox_permutation(num_nodes, k.seed, k.epoch, RngStream::kCluster, k.batch, /*layer=*/1);
  std::vector<int64_t> part(static_cast<size_t>(num_nodes));
  for (int64_t i = 0; i < num_nodes; ++i) {
    part[perm[i]] = i % num_parts;
  }
  return part;
}

}  // namespace tessera::ops
