// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera::dist {

namespace detail {

namespace {

// The edge data `name` as one weight for each of `m` stored edges whose global new edge IDs are
// `eids` (validated: ValueError naming the feature when it is absent, not float32 / float64,
// not one value per edge of this rank, or a weight is negative or not finite).
std::vector<float> weights_in_order(const SampleGraph& sg, const std::string& name,
                                    const int64_t* eids, int64_t m) {
  auto it = sg.edata.find(name);
  if (it == sg.edata.end()) {
    std::string names;
    for (const auto& [k, v] : sg.edata) {
      names += (names.empty() ? "" : ", ") + k;
    }
    TESSERA_FAIL(ValueError,
                 "sample_neighbors: DistGraph '{}' has no edge data '{}' to sample weighted by "
                 "(it has: {})",
                 sg.graph_name, name, names.empty() ? "none" : names);
  }
  const Array& a = it->second;
  const int64_t mine = sg.arrays.num_edges;
  TESSERA_EXPECTS(a.dtype() == DType::kFloat32 || a.dtype() == DType::kFloat64, TypeError,
                  "sample_neighbors: edge data '{}' of DistGraph '{}' must be float32 or float64 "
                  "to be used as weights, got {}",
                  name, sg.graph_name, dtype_name(a.dtype()));
  TESSERA_EXPECTS((a.ndim() == 1 || (a.ndim() == 2 && a.dim(1) == 1)) && a.rows() == mine,
                  ValueError,
                  "sample_neighbors: edge data '{}' of DistGraph '{}' has shape {} on this rank, "
                  "expected one weight per edge ([{}] or [{}, 1])",
                  name, sg.graph_name, a.shape_str(), mine, mine);
  // Stored edge q is edge eids[q]: its weight is row eids[q] - elo of the feature.
  std::vector<float> w(static_cast<size_t>(m));
  for (int64_t q = 0; q < m; ++q) {
    const int64_t e = eids[q], r = e - sg.elo;
    TESSERA_ASSERT(r >= 0 && r < mine, "edge {} outside this rank's edge range", e);
    const double x = a.dtype() == DType::kFloat32 ? a.data<float>()[r] : a.data<double>()[r];
    w[q] = ops::sampling_weight(x, [&] {
      return fmt::format(
          "sample_neighbors: weight {} of edge ID {} in edge data '{}' of DistGraph '{}'", x, e,
          name, sg.graph_name);
    });
  }
  return w;
}

}  // namespace

std::shared_ptr<const EdgeWeights> edge_weights(const SampleGraph& sg, const std::string& name) {
  std::lock_guard<std::mutex> lk(sg.weights_mu);
  auto hit = sg.weights.find(name);
  if (hit != sg.weights.end()) {
    return hit->second;
  }
  auto ew = std::make_shared<EdgeWeights>();
  ew->w = weights_in_order(sg, name, sg.arrays.eids, sg.arrays.num_edges);
  ops::SamplingGraphOptions prep;  // the prefix sums; the rows are read as stored
  prep.weights = ew->w;
  prep.interleave = false;
  ew->graph = std::make_unique<ops::SamplingGraph>(sg.arrays, prep);
  sg.weights.emplace(name, ew);
  return ew;
}

std::vector<float> placed_weights(const SampleGraph& sg, const std::string& name) {
  {
    std::lock_guard<std::mutex> lk(sg.weights_mu);
    auto hit = sg.weights.find(name);
    if (hit != sg.weights.end()) {
      return hit->second->w;  // built by the CPU path already
    }
  }
  return weights_in_order(sg, name, sg.arrays.eids, sg.arrays.num_edges);
}

ops::GraphArrays SampleGraph::placed_arrays(std::vector<int64_t>& renamed) const {
  ops::GraphArrays a = arrays;
  if (local_nid != nullptr) {
    renamed.resize(static_cast<size_t>(arrays.num_edges));
    parallel_for(0, arrays.num_edges, 1 << 16, [&](int64_t k0, int64_t k1, int64_t) {
      for (int64_t k = k0; k < k1; ++k) {
        renamed[k] = neighbor(k);
      }
    });
    a.indices = renamed.data();
  }
  return a;
}

UniqueSeeds unique_seeds(const SampleGraph& sg, const int64_t* ids, int64_t n, int from, int me) {
  UniqueSeeds u;
  u.slot.resize(static_cast<size_t>(n));
  std::unordered_map<int64_t, int64_t> seen;
  seen.reserve(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = ids[i];
    if (v < sg.lo || v >= sg.hi) {
      TESSERA_FAIL(IndexError,
                   "sample_neighbors: node {} asked by rank {} is not owned by rank {} "
                   "(it owns [{}, {}))",
                   v, from, me, sg.lo, sg.hi);
    }
    auto [it, fresh] = seen.emplace(v, static_cast<int64_t>(u.ids.size()));
    if (fresh) {
      u.ids.push_back(v);
      u.rows.push_back(v - sg.lo);
    }
    u.slot[i] = it->second;
  }
  return u;
}

OwnedSample expand_unique(const UniqueSeeds& u, const std::vector<int64_t>& keys,
                          const std::vector<int64_t>& dst, const std::vector<int64_t>& src,
                          const std::vector<int64_t>& eid) {
  // Edges come grouped by seed in order; the seeds are distinct, so dst delimits the groups.
  const int64_t nu = static_cast<int64_t>(u.ids.size());
  const auto m = static_cast<int64_t>(dst.size());
  std::vector<int64_t> ubegin(static_cast<size_t>(nu) + 1);
  int64_t q = 0;
  for (int64_t j = 0; j < nu; ++j) {
    ubegin[j] = q;
    while (q < m && dst[q] == keys[j]) {
      ++q;
    }
  }
  ubegin[nu] = q;
  TESSERA_ASSERT(q == m, "sampled edges not grouped by seed");
  const auto n = static_cast<int64_t>(u.slot.size());
  OwnedSample out;
  out.counts.resize(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    out.counts[i] = ubegin[u.slot[i] + 1] - ubegin[u.slot[i]];
    total += out.counts[i];
  }
  out.src.reserve(static_cast<size_t>(total));
  out.eid.reserve(static_cast<size_t>(total));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = ubegin[u.slot[i]], en = ubegin[u.slot[i] + 1];
    out.src.insert(out.src.end(), src.begin() + b, src.begin() + en);
    out.eid.insert(out.eid.end(), eid.begin() + b, eid.begin() + en);
  }
  return out;
}

OwnedSample sample_owned(const SampleGraph& sg, const int64_t* ids, int64_t n, int64_t fanout,
                         bool replace, const EdgeWeights* weights, const RngKey& key, int from,
                         int me) {
  // The sample of a node depends only on (key, node): sample each distinct seed once, by its
  // row (new ID - lo; the row's key is the node's original ID).
  const UniqueSeeds u = unique_seeds(sg, ids, n, from, me);
  ops::SampleOptions o;
  o.fanout = fanout;
  o.replace = replace;
  o.key = key;
  o.num_threads = 1;
  // Weighted: the rows with their weights in storage order (as the unpartitioned graph's
  // weights of these rows), prepared once; else the rows as stored.
  ops::SampledEdges e = ops::sample_neighbors(weights ? *weights->graph : *sg.rows, u.rows, o);
  // Local neighbor IDs (a halo partition sampled in place) renamed to new IDs.
  if (sg.local_nid) {
    for (auto& s : e.src) {
      s = sg.local_nid[s];
    }
  }
  return expand_unique(u, u.rows, e.dst, e.src, e.eid);
}

transport::Bytes serve_sample(RuntimeState& st, int from, transport::ByteView payload) {
  auto lk = st.serving(from);
  Reader r(payload, "sample");
  const auto sg = st.graph(r.get<uint64_t>(), from);
  RngKey key;
  key.seed = r.get<uint32_t>();
  key.epoch = r.get<uint32_t>();
  key.batch = r.get<uint32_t>();
  key.layer = r.get<uint32_t>();
  const int64_t fanout = r.get<int64_t>();
  const bool replace = r.get<uint8_t>() != 0;
  const uint32_t name_len = r.get<uint32_t>();
  const auto* name_bytes = reinterpret_cast<const char*>(r.take(name_len));
  const std::string weights_name(name_bytes, name_len);
  const uint64_t n = r.get<uint64_t>();
  TESSERA_EXPECTS(r.left() == n * 8, ValueError, "dist: malformed sample message from rank {}",
                  from);
  std::vector<int64_t> ids(n);
  if (n) {
    std::memcpy(ids.data(), r.take(n * 8), n * 8);
  }
  const auto weights = weights_name.empty() ? nullptr : edge_weights(*sg, weights_name);
  const OwnedSample s = sample_owned(*sg, ids.data(), static_cast<int64_t>(n), fanout, replace,
                                     weights.get(), key, from, st.rank);
  Writer w;
  w.buf.reserve(8 * (n + 2 * s.src.size()));
  w.put_bytes(s.counts.data(), 8 * s.counts.size());
  w.put_bytes(s.src.data(), 8 * s.src.size());
  w.put_bytes(s.eid.data(), 8 * s.eid.size());
  return std::move(w.buf);
}

}  // namespace detail

ops::SampledEdges sample_neighbors(const DistGraph& g, ops::Span<const int64_t> seeds,
                                   const DistSampleOptions& opts) {
  auto& gs = g.state();
  // Weighted: the name is checked (and this rank's weights built) before any request goes out.
  const auto weights =
      opts.weights_name.empty() ? nullptr : detail::edge_weights(*gs.sg, opts.weights_name);
  const int me = gs.rt->state().t->rank();
  return detail::sample_neighbors_with(g, seeds, opts, [&](const int64_t* ids, int64_t k) {
    return detail::sample_owned(*gs.sg, ids, k, opts.fanout, opts.replace, weights.get(), opts.key,
                                me, me);
  });
}

namespace detail {

ops::SampledEdges sample_neighbors_with(const DistGraph& g, ops::Span<const int64_t> seeds,
                                        const DistSampleOptions& opts, const LocalSampler& local) {
  auto& gs = g.state();
  auto& t = *gs.rt->state().t;
  const int world = t.world_size(), me = t.rank();
  const int64_t n = seeds.size(), nn = g.num_nodes();
  TESSERA_EXPECTS(opts.fanout >= -1, ValueError,
                  "sample_neighbors: fanout {} is negative (use -1 for all neighbors)",
                  opts.fanout);
  TESSERA_EXPECTS(opts.key.layer < 256, ValueError, "sample_neighbors: layer {} not < 256",
                  opts.key.layer);
  const auto& off = gs.book.node_offsets();
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(world));
  std::vector<int> owner(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = seeds[i];
    if (v < 0 || v >= nn) {
      TESSERA_FAIL(IndexError, "sample_neighbors: seed node {} at position {} outside [0, {})", v,
                   i, nn);
    }
    const int p = static_cast<int>(std::upper_bound(off.begin(), off.end(), v) - off.begin()) - 1;
    owner[i] = p;
    pos[p].push_back(i);
  }
  // One batched request per remote owner, in flight while this rank samples its own nodes.
  std::vector<transport::PendingResponse> pending(static_cast<size_t>(world));
  std::vector<detail::OwnedSample> res(static_cast<size_t>(world));
  try {
    for (int p = 0; p < world; ++p) {
      if (p == me || pos[p].empty()) {
        continue;
      }
      detail::Writer w;
      w.put<uint64_t>(gs.id);
      w.put<uint32_t>(opts.key.seed);
      w.put<uint32_t>(opts.key.epoch);
      w.put<uint32_t>(opts.key.batch);
      w.put<uint32_t>(opts.key.layer);
      w.put<int64_t>(opts.fanout);
      w.put<uint8_t>(opts.replace ? 1 : 0);
      w.put<uint32_t>(static_cast<uint32_t>(opts.weights_name.size()));
      w.put_bytes(opts.weights_name.data(), opts.weights_name.size());
      w.put<uint64_t>(pos[p].size());
      for (int64_t i : pos[p]) {
        w.put<int64_t>(seeds[i]);
      }
      pending[p] = t.request_async(p, detail::kMsgSample, transport::ByteView(w.buf));
    }
    if (!pos[me].empty()) {
      std::vector<int64_t> ids(pos[me].size());
      for (size_t k = 0; k < ids.size(); ++k) {
        ids[k] = seeds[pos[me][k]];
      }
      res[me] = local(ids.data(), static_cast<int64_t>(ids.size()));
    }
    for (int p = 0; p < world; ++p) {
      if (!pending[p].valid()) {
        continue;
      }
      const transport::Bytes b = pending[p].wait();
      const size_t k = pos[p].size();
      TESSERA_EXPECTS(b.size() >= 8 * k && (b.size() - 8 * k) % 16 == 0, ValueError,
                      "sample_neighbors: malformed answer of {} bytes from rank {}", b.size(), p);
      auto& r = res[p];
      const size_t e = (b.size() - 8 * k) / 16;
      r.counts.resize(k);
      r.src.resize(e);
      r.eid.resize(e);
      std::memcpy(r.counts.data(), b.data(), 8 * k);
      if (e) {
        std::memcpy(r.src.data(), b.data() + 8 * k, 8 * e);
        std::memcpy(r.eid.data(), b.data() + 8 * k + 8 * e, 8 * e);
      }
    }
  } catch (const transport::PeerLostError&) {
    detail::rethrow_with_context(
        fmt::format("sample_neighbors of {} seeds (layer {})", n, opts.key.layer));
  } catch (const transport::TimeoutError&) {
    detail::rethrow_with_context(
        fmt::format("sample_neighbors of {} seeds (layer {})", n, opts.key.layer));
  } catch (const transport::RemoteError&) {
    detail::rethrow_with_context(
        fmt::format("sample_neighbors of {} seeds (layer {})", n, opts.key.layer));
  }
  // Reassemble in seed order.
  std::vector<std::vector<int64_t>> begin(static_cast<size_t>(world));
  int64_t total = 0;
  for (int p = 0; p < world; ++p) {
    begin[p].resize(res[p].counts.size() + 1);
    int64_t q = 0;
    for (size_t k = 0; k < res[p].counts.size(); ++k) {
      begin[p][k] = q;
      q += res[p].counts[k];
    }
    begin[p][res[p].counts.size()] = q;
    TESSERA_EXPECTS(q == static_cast<int64_t>(res[p].src.size()), ValueError,
                    "sample_neighbors: rank {} answered counts that do not add up", p);
    total += q;
  }
  ops::SampledEdges out;
  out.src.reserve(static_cast<size_t>(total));
  out.dst.reserve(static_cast<size_t>(total));
  out.eid.reserve(static_cast<size_t>(total));
  std::vector<size_t> next(static_cast<size_t>(world), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int p = owner[i];
    const size_t k = next[p]++;
    const int64_t b = begin[p][k], e = begin[p][k + 1];
    out.src.insert(out.src.end(), res[p].src.begin() + b, res[p].src.begin() + e);
    out.eid.insert(out.eid.end(), res[p].eid.begin() + b, res[p].eid.begin() + e);
    out.dst.insert(out.dst.end(), static_cast<size_t>(e - b), seeds[i]);
  }
  return out;
}

}  // namespace detail

DistNeighborSampler::DistNeighborSampler(const DistGraph& g, std::vector<int64_t> fanouts,
                                         bool replace, std::string weights_name)
    : g_(g),
      fanouts_(std::move(fanouts)),
      replace_(replace),
      weights_name_(std::move(weights_name)) {
  TESSERA_EXPECTS(!fanouts_.empty(), ValueError, "DistNeighborSampler: no fanouts given");
  TESSERA_EXPECTS(fanouts_.size() <= 256, ValueError,
                  "DistNeighborSampler: {} layers exceed the 256 of the Philox key layout",
                  fanouts_.size());
  for (size_t i = 0; i < fanouts_.size(); ++i) {
    TESSERA_EXPECTS(fanouts_[i] >= -1, ValueError,
                    "DistNeighborSampler: fanout {} of layer {} is negative (use -1 for all)",
                    fanouts_[i], i);
  }
  if (!weights_name_.empty()) {
    detail::edge_weights(*g_.state().sg, weights_name_);  // this rank's rows, checked once
  }
}

std::vector<ops::Block> DistNeighborSampler::sample_blocks(
    ops::Span<const int64_t> seeds, const RngKey& key,
    ops::Span<const int64_t> exclude_eids) const {
  std::vector<int64_t> excluded(exclude_eids.begin(), exclude_eids.end());
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  const int64_t layers = static_cast<int64_t>(fanouts_.size());
  std::vector<ops::Block> blocks(static_cast<size_t>(layers));
  ops::CompactWorkspace ws;
  DistSampleOptions so;
  so.replace = replace_;
  so.weights_name = weights_name_;
  so.key = key;
  ops::Span<const int64_t> frontier = seeds;
  for (int64_t h = 0; h < layers; ++h) {
    const int64_t l = layers - 1 - h;  // the output layer samples first, as ops::NeighborSampler
    so.fanout = fanouts_[static_cast<size_t>(l)];
    so.key.layer = static_cast<uint32_t>(h);
    ops::SampledEdges edges = sample_neighbors(g_, frontier, so);
    if (!excluded.empty()) {  // post-filter (see the header), order kept
      size_t q = 0;
      for (size_t k = 0; k < edges.eid.size(); ++k) {
        if (std::binary_search(excluded.begin(), excluded.end(), edges.eid[k])) continue;
        edges.src[q] = edges.src[k];
        edges.dst[q] = edges.dst[k];
        edges.eid[q] = edges.eid[k];
        ++q;
      }
      edges.src.resize(q);
      edges.dst.resize(q);
      edges.eid.resize(q);
    }
    ops::Block& b = blocks[static_cast<size_t>(l)];
    b = ops::to_block(edges, frontier, &ws);
    frontier = ops::Span<const int64_t>(b.src_nodes.data(), b.num_src());
  }
  return blocks;
}

}  // namespace tessera::dist
