// SPDX-License-Identifier: Apache-2.0
#include "tessera/ops/block.hpp"

#include <algorithm>

#include "id_map.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/device_sampler.hpp"

namespace tessera::ops {

CompactWorkspace::CompactWorkspace() : map_(std::make_unique<detail::IdMap>()) {}
CompactWorkspace::~CompactWorkspace() = default;
CompactWorkspace::CompactWorkspace(CompactWorkspace&&) noexcept = default;
CompactWorkspace& CompactWorkspace::operator=(CompactWorkspace&&) noexcept = default;

namespace detail {

void validate_to_block_args(const SampledEdges& edges, Span<const int64_t> dst_nodes) {
  TESSERA_EXPECTS(edges.src.size() == edges.dst.size() && edges.src.size() == edges.eid.size(),
                  ValueError, "to_block: edge arrays differ in length (src {}, dst {}, eid {})",
                  edges.src.size(), edges.dst.size(), edges.eid.size());
  for (int64_t i = 0; i < dst_nodes.size(); ++i)
    TESSERA_EXPECTS(dst_nodes[i] >= 0, IndexError, "to_block: destination node {} at {} < 0",
                    dst_nodes[i], i);
  // Negative IDs would meet the tables' empty-slot and "no destination yet" marks (-1) and come
  // out as wrong local IDs instead of an error.
  const auto num_edges = static_cast<int64_t>(edges.src.size());
  for (int64_t i = 0; i < num_edges; ++i) {
    if ((edges.src[i] | edges.dst[i]) < 0) {
      TESSERA_FAIL(IndexError, "to_block: edge {} ({} -> {}) has a negative node ID", i,
                   edges.src[i], edges.dst[i]);
    }
  }
}

void validate_induced_subgraph_args(const Graph& graph, Span<const int64_t> nodes) {
  const int64_t n = graph.num_nodes;
  TESSERA_EXPECTS(static_cast<int64_t>(graph.indptr.size()) == n + 1, ValueError,
                  "induced_subgraph: graph indptr has {} entries for {} nodes", graph.indptr.size(),
                  n);
  for (int64_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] < 0 || nodes[i] >= n)
      TESSERA_FAIL(IndexError, "induced_subgraph: node {} at position {} outside [0, {})", nodes[i],
                   i, n);
}

namespace {

// to_block over the direct-mapped table (every ID < map.dense_size()): one random access per
// edge. Same output and errors as the hash path.
void to_block_dense(const SampledEdges& edges, Span<const int64_t> dst_nodes, uint32_t* tag,
                    uint64_t n, uint32_t base, Block& out) {
  const int64_t nd = dst_nodes.size(), m = edges.size();
  out.num_dst = nd;
  out.src_nodes.clear();
  out.src_nodes.reserve(static_cast<size_t>(nd + m));
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t v = dst_nodes[i];
    TESSERA_EXPECTS(tag[v] <= base, ValueError, "to_block: destination node {} is listed twice", v);
    tag[v] = base + 1 + static_cast<uint32_t>(i);
    out.src_nodes.push_back(v);
  }
  out.src.resize(static_cast<size_t>(m));
  out.dst.resize(static_cast<size_t>(m));
  out.eids.assign(edges.eid.begin(), edges.eid.end());
  const int64_t* src = edges.src.data();
  const int64_t* dst = edges.dst.data();
  int64_t* osrc = out.src.data();
  int64_t* odst = out.dst.data();
  int64_t last_dst = -1, last_local = -1;
  int64_t next = nd;
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < m; ++i) {
    if (i + kAhead < m) __builtin_prefetch(&tag[src[i + kAhead]]);
    const int64_t d = dst[i];
    if (d != last_dst) {
      const uint32_t t = static_cast<uint64_t>(d) < n ? tag[d] : 0;
      last_local = t > base ? static_cast<int64_t>(t - base - 1) : -1;
      if (last_local < 0 || last_local >= nd) {
        TESSERA_FAIL(ValueError,
                     "to_block: edge {} ({} -> {}) ends at a node that is not a destination node",
                     i, src[i], d);
      }
      last_dst = d;
    }
    odst[i] = last_local;
    const int64_t s = src[i];
    const uint32_t t = tag[s];
    if (t > base) {
      osrc[i] = static_cast<int64_t>(t - base - 1);
    } else {
      tag[s] = base + 1 + static_cast<uint32_t>(next);
      out.src_nodes.push_back(s);
      osrc[i] = next++;
    }
  }
}

}  // namespace

void to_block_cpu(const SampledEdges& edges, Span<const int64_t> dst_nodes, IdMap& map,
                  Block& out) {
  const int64_t nd = dst_nodes.size(), m = edges.size();
  if (map.dense_size() > 0) {
    // Every ID must be covered by the table (a streaming scan, cheap next to the random
    // accesses); otherwise fall back to hashing.
    const uint64_t n = static_cast<uint64_t>(map.dense_size());
    uint64_t hi = 0;
    for (int64_t i = 0; i < nd; ++i)
      hi = std::max(hi, static_cast<uint64_t>(dst_nodes[i]));
    for (int64_t i = 0; i < m; ++i)
      hi = std::max(hi, static_cast<uint64_t>(edges.src[i]));
    uint32_t base = 0;
    if (hi < n && map.dense_begin(nd + m, base)) {
      to_block_dense(edges, dst_nodes, map.dense_tags(), n, base, out);
      return;
    }
  }
  map.reset(nd + m);
  out.num_dst = nd;
  out.src_nodes.clear();
  out.src_nodes.reserve(static_cast<size_t>(nd + m / 2));
  bool inserted;
  for (int64_t i = 0; i < nd; ++i) {
    map.find_or_insert(dst_nodes[i], i, inserted);
    TESSERA_EXPECTS(inserted, ValueError, "to_block: destination node {} is listed twice",
                    dst_nodes[i]);
    out.src_nodes.push_back(dst_nodes[i]);
  }
  out.src.resize(static_cast<size_t>(m));
  out.dst.resize(static_cast<size_t>(m));
  out.eids.assign(edges.eid.begin(), edges.eid.end());
  // Destinations of sampled edges come in runs (grouped by seed): look a run up once.
  int64_t last_dst = -1, last_local = -1;
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < m; ++i) {
    if (i + kAhead < m) map.prefetch(edges.src[i + kAhead]);
    const int64_t d = edges.dst[i];
    if (d != last_dst) {
      last_local = map.find(d);
      TESSERA_EXPECTS(last_local >= 0 && last_local < nd, ValueError,
                      "to_block: edge {} ({} -> {}) ends at a node that is not a destination node",
                      i, edges.src[i], d);
      last_dst = d;
    }
    out.dst[i] = last_local;
    const int64_t next = static_cast<int64_t>(out.src_nodes.size());
    const int64_t s = map.find_or_insert(edges.src[i], next, inserted);
    if (inserted) out.src_nodes.push_back(edges.src[i]);
    out.src[i] = s;
  }
}

}  // namespace detail

Block to_block(const SampledEdges& edges, Span<const int64_t> dst_nodes, CompactWorkspace* ws,
               Device device) {
  detail::validate_to_block_args(edges, dst_nodes);
  if (device == Device::kCuda) {
    cuda::require_cuda("to_block");
    return detail::to_block_cuda(edges, dst_nodes);
  }
  CompactWorkspace local;
  Block out;
  detail::to_block_cpu(edges, dst_nodes, (ws ? *ws : local).map(), out);
  return out;
}

Subgraph induced_subgraph(const Graph& graph, Span<const int64_t> nodes, int num_threads_arg,
                          Device device) {
  detail::validate_induced_subgraph_args(graph, nodes);
  if (device == Device::kCuda) {
    cuda::require_cuda("induced_subgraph");
    TESSERA_FAIL(NotCompiledError, "induced_subgraph: the CUDA twin is not implemented yet");
  }
  const int64_t k = nodes.size();
  detail::IdMap map;
  map.reset(k);
  bool inserted;
  for (int64_t i = 0; i < k; ++i) {
    map.find_or_insert(nodes[i], i, inserted);
    TESSERA_EXPECTS(inserted, ValueError, "induced_subgraph: node {} is listed twice", nodes[i]);
  }
  Subgraph sg;
  sg.nodes = nodes.to_vector();
  Graph& out = sg.graph;
  out.num_nodes = k;
  out.indptr.assign(static_cast<size_t>(k) + 1, 0);
  // Two passes (count, fill) over rows in parallel; the map is only read.
  const int threads = num_threads_arg == 0 ? num_threads() : num_threads_arg;
  auto for_rows = [&](auto&& f) {
    parallel_for_threads(threads, 0, k, 512, [&](int64_t lo, int64_t hi, int64_t) { f(lo, hi); });
  };
  for_rows([&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t v = nodes[i];
      int64_t c = 0;
      for (int64_t p = graph.indptr[v]; p < graph.indptr[v + 1]; ++p)
        c += map.find(graph.indices[p]) >= 0;
      out.indptr[i + 1] = c;
    }
  });
  for (int64_t i = 0; i < k; ++i)
    out.indptr[i + 1] += out.indptr[i];
  out.indices.resize(static_cast<size_t>(out.indptr[k]));
  out.eids.resize(out.indices.size());
  for_rows([&](int64_t lo, int64_t hi) {
    std::vector<std::pair<int64_t, int64_t>> buf;
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t v = nodes[i];
      buf.clear();
      for (int64_t p = graph.indptr[v]; p < graph.indptr[v + 1]; ++p) {
        const int64_t l = map.find(graph.indices[p]);
        if (l >= 0) buf.push_back({l, graph.eid(p)});
      }
      std::sort(buf.begin(), buf.end());
      int64_t w = out.indptr[i];
      for (const auto& [l, e] : buf) {
        out.indices[w] = l;
        out.eids[w] = e;
        ++w;
      }
    }
  });
  return sg;
}

}  // namespace tessera::ops
