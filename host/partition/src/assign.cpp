// SPDX-License-Identifier: Apache-2.0
// Node assignment: METIS k-way (multi-constraint) and seeded random.
#include <metis.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <numeric>

#include "internal.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera {

static_assert(sizeof(idx_t) == sizeof(int32_t),
              "Tessera is built against METIS with 32-bit idx_t (Debian's libmetis)");

PartMethod parse_part_method(const std::string& s) {
  if (s == "metis") {
    return PartMethod::kMetis;
  }
  if (s == "random") {
    return PartMethod::kRandom;
  }
  TESSERA_FAIL(ValueError, "unknown partition method '{}' (expected metis or random)", s);
}

const char* part_method_name(PartMethod m) {
  return m == PartMethod::kMetis ? "metis" : "random";
}

NodeOrder parse_node_order(const std::string& s) {
  if (s == "original") {
    return NodeOrder::kOriginal;
  }
  if (s == "degree") {
    return NodeOrder::kDegree;
  }
  TESSERA_FAIL(ValueError, "unknown node order '{}' (expected original or degree)", s);
}

const char* node_order_name(NodeOrder o) {
  return o == NodeOrder::kOriginal ? "original" : "degree";
}

namespace {

// Calls f(u) for every symmetric neighbor u != v of v, in increasing order, once each: the
// merge of v's in-neighbors (CSC row) and out-neighbors (CSR row), both sorted.
template <typename F>
void for_each_sym_neighbor(const Graph& csc, const Graph& csr, int64_t v, F&& f) {
  int64_t a = csc.indptr[v], ae = csc.indptr[v + 1];
  int64_t b = csr.indptr[v], be = csr.indptr[v + 1];
  int64_t last = -1;
  while (a < ae || b < be) {
    int64_t u;
    if (b >= be || (a < ae && csc.indices[a] <= csr.indices[b])) {
      u = csc.indices[a++];
    } else {
      u = csr.indices[b++];
    }
    if (u == v || u == last) {
      continue;
    }
    last = u;
    f(u);
  }
}

// CSR with only indptr/indices (no eids needed for adjacency).
Graph out_adjacency(const Graph& csc) {
  Graph t = transpose(csc);
  std::vector<int64_t>().swap(t.eids);
  return t;
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void note_empty_parts(Assignment& a) {
  std::vector<int64_t> cnt(static_cast<size_t>(a.num_parts), 0);
  for (int32_t p : a.part) {
    ++cnt[p];
  }
  int64_t empty = 0;
  for (int64_t c : cnt) {
    empty += c == 0;
  }
  if (empty > 0) {
    a.warnings.push_back(
        fmt::format("{} of {} partitions are empty ({} nodes)", empty, a.num_parts, a.part.size()));
  }
}

}  // namespace

void check_metis_limits(int64_t num_nodes, int64_t adj_entries) {
  constexpr int64_t kMax = INT32_MAX;
  TESSERA_EXPECTS(num_nodes < kMax, ValueError,
                  "graph has {} nodes, more than METIS's 32-bit indices can address ({}); use "
                  "--method random",
                  num_nodes, kMax - 1);
  TESSERA_EXPECTS(adj_entries < kMax, ValueError,
                  "graph has {} symmetric adjacency entries (2 x undirected edges), more than "
                  "METIS's 32-bit indices can address ({}); use --method random",
                  adj_entries, kMax - 1);
}

namespace {

// The symmetric neighbors of v (u != v, once each) in the order METIS's own graph files list
// them: first v's in-neighbors by edge ID (for a METIS .graph input, read_metis makes line v's
// entries the in-edges of v, so this is the file's line), then out-neighbors that are not also
// in-neighbors, by edge ID. Adjacency order steers METIS's
// matching, so keeping the file order makes results agree with gpmetis on the same file.
void ordered_sym_row(const Graph& csc, const Graph& csr, int64_t v, int64_t eid_space,
                     std::vector<std::pair<int64_t, int64_t>>& buf) {
  // Merge the two rows (both sorted by (neighbor, edge ID)); the first copy of each neighbor
  // carries its smallest key (in-edges win ties), then order by key.
  buf.clear();
  int64_t a = csc.indptr[v], ae = csc.indptr[v + 1];
  int64_t b = csr.indptr[v], be = csr.indptr[v + 1];
  int64_t last = -1;
  while (a < ae || b < be) {
    int64_t u, key;
    if (b >= be || (a < ae && csc.indices[a] <= csr.indices[b])) {
      u = csc.indices[a];
      key = csc.eid(a++);
    } else {
      u = csr.indices[b];
      key = eid_space + csr.eid(b++);
    }
    if (u == v || u == last) {
      continue;
    }
    last = u;
    buf.emplace_back(key, u);
  }
  if (!std::is_sorted(buf.begin(), buf.end())) {
    std::sort(buf.begin(), buf.end());
  }
}

}  // namespace

namespace {

// True if `g` already is the adjacency of a simple undirected graph: no self loops, every row
// strictly increasing (no duplicates), and u in row v exactly when v is in row u (what finalize
// produces with symmetrize + drop_self_loops + dedup, and what a METIS .graph file holds).
// Exact and cheaper than a transpose: with rows sorted, the entries u < v of row v ("lower")
// are visited for v = 0, 1, ... and must consume the entries of row u above u ("upper") in
// order, all of them.
bool is_symmetric_simple(const Graph& g) {
  const int64_t n = g.num_nodes;
  std::vector<int64_t> upper(static_cast<size_t>(n));
  std::atomic<bool> ok{true};
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      const int64_t b = g.indptr[v], e = g.indptr[v + 1];
      int64_t up = e;
      for (int64_t k = b; k < e; ++k) {
        const int64_t u = g.indices[k];
        if (u == v || (k > b && g.indices[k - 1] >= u)) {
          ok.store(false, std::memory_order_relaxed);
          return;
        }
        if (u > v && up == e) up = k;
      }
      upper[v] = up;
    }
  });
  if (!ok.load()) return false;
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const int64_t u = g.indices[k];
      if (u > v) break;
      int64_t& c = upper[u];
      if (c >= g.indptr[u + 1] || g.indices[c] != v) return false;
      ++c;
    }
  }
  for (int64_t u = 0; u < n; ++u) {
    if (upper[u] != g.indptr[u + 1]) return false;
  }
  return true;
}

// symmetric_adjacency for a symmetric simple CSC. The general merge then takes every neighbor
// from the CSC row (in-edges win ties and the out-neighbors are the same set), keyed by its edge
// ID, so the METIS row is the CSC row ordered by (edge ID, neighbor): no transpose needed.
SymAdjacency symmetric_adjacency_simple(const Graph& csc) {
  const int64_t n = csc.num_nodes, m = csc.num_edges();
  check_metis_limits(n, m);
  SymAdjacency adj;
  adj.xadj.resize(static_cast<size_t>(n) + 1);
  adj.adjncy.resize(static_cast<size_t>(m));
  parallel_for(0, n + 1, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      adj.xadj[v] = static_cast<int32_t>(csc.indptr[v]);
    }
  });
  // Rows are sorted as single 64-bit keys (edge ID above the neighbor's bits) when the edge
  // IDs fit, which orders them exactly like (edge ID, neighbor) pairs, at half the memory
  // traffic; otherwise as pairs.
  int nbits = 1;
  while ((int64_t{1} << nbits) < n) {
    ++nbits;
  }
  const uint64_t max_key_eid = ~uint64_t{0} >> nbits;
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t) {
    std::vector<std::pair<int64_t, int64_t>> buf;
    std::vector<uint64_t> keys;
    for (int64_t v = lo; v < hi; ++v) {
      const int64_t b = csc.indptr[v], e = csc.indptr[v + 1];
      bool sorted = true, packable = true;
      for (int64_t k = b; k < e; ++k) {
        const int64_t id = csc.eid(k);
        packable = packable && id >= 0 && static_cast<uint64_t>(id) <= max_key_eid;
        sorted = sorted && (k == b || csc.eid(k - 1) < id);
      }
      if (sorted) {
        for (int64_t k = b; k < e; ++k) {
          adj.adjncy[k] = static_cast<int32_t>(csc.indices[k]);
        }
        continue;
      }
      if (packable) {
        keys.resize(static_cast<size_t>(e - b));
        for (int64_t k = b; k < e; ++k) {
          keys[k - b] =
              (static_cast<uint64_t>(csc.eid(k)) << nbits) | static_cast<uint64_t>(csc.indices[k]);
        }
        std::sort(keys.begin(), keys.end());
        const uint64_t mask = (uint64_t{1} << nbits) - 1;
        for (int64_t k = b; k < e; ++k) {
          adj.adjncy[k] = static_cast<int32_t>(keys[k - b] & mask);
        }
        continue;
      }
      buf.clear();
      for (int64_t k = b; k < e; ++k) {
        buf.emplace_back(csc.eid(k), csc.indices[k]);
      }
      std::sort(buf.begin(), buf.end());
      for (int64_t k = b; k < e; ++k) {
        adj.adjncy[k] = static_cast<int32_t>(buf[k - b].second);
      }
    }
  });
  return adj;
}

}  // namespace

SymAdjacency symmetric_adjacency(const Graph& csc) {
  return detail::symmetric_adjacency(csc, false);
}

SymAdjacency detail::symmetric_adjacency(const Graph& csc, bool known_simple) {
  const int64_t n = csc.num_nodes;
  check_metis_limits(n, 0);
  if (known_simple || is_symmetric_simple(csc)) {
    return symmetric_adjacency_simple(csc);
  }
  const Graph csr = transpose(csc);
  int64_t eid_space = 0;
  for (int64_t k = 0; k < csc.num_edges(); ++k) {
    eid_space = std::max(eid_space, csc.eid(k) + 1);
  }
  std::vector<int64_t> deg(static_cast<size_t>(n) + 1, 0);
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      int64_t d = 0;
      for_each_sym_neighbor(csc, csr, v, [&](int64_t) { ++d; });
      deg[v + 1] = d;
    }
  });
  for (int64_t v = 0; v < n; ++v) {
    deg[v + 1] += deg[v];
  }
  check_metis_limits(n, deg[n]);
  SymAdjacency adj;
  adj.xadj.resize(static_cast<size_t>(n) + 1);
  for (int64_t v = 0; v <= n; ++v) {
    adj.xadj[v] = static_cast<int32_t>(deg[v]);
  }
  adj.adjncy.resize(static_cast<size_t>(deg[n]));
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t) {
    std::vector<std::pair<int64_t, int64_t>> buf;
    for (int64_t v = lo; v < hi; ++v) {
      ordered_sym_row(csc, csr, v, eid_space, buf);
      TESSERA_ASSERT(static_cast<int64_t>(buf.size()) == deg[v + 1] - deg[v],
                     "row {}: {} neighbors, counted {}", v, buf.size(), deg[v + 1] - deg[v]);
      for (size_t i = 0; i < buf.size(); ++i) {
        adj.adjncy[deg[v] + static_cast<int64_t>(i)] = static_cast<int32_t>(buf[i].second);
      }
    }
  });
  return adj;
}

SymmetricCut symmetric_cut(const Graph& csc, const std::vector<int32_t>& part) {
  const int64_t n = csc.num_nodes;
  const Graph csr = out_adjacency(csc);
  const auto chunks = static_cast<size_t>(std::max(1, num_threads()));
  std::vector<int64_t> cut_part(chunks, 0), all_part(chunks, 0);
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t c) {
    int64_t cut = 0, all = 0;
    for (int64_t v = lo; v < hi; ++v) {
      for_each_sym_neighbor(csc, csr, v, [&](int64_t u) {
        cut += part[u] != part[v];
        ++all;
      });
    }
    cut_part[c] = cut;
    all_part[c] = all;
  });
  SymmetricCut r;
  r.cut = std::accumulate(cut_part.begin(), cut_part.end(), int64_t{0}) / 2;
  r.undirected_edges = std::accumulate(all_part.begin(), all_part.end(), int64_t{0}) / 2;
  return r;
}

int64_t symmetric_edge_cut(const Graph& csc, const std::vector<int32_t>& part) {
  return symmetric_cut(csc, part).cut;
}

int64_t directed_edge_cut(const Graph& csc, const std::vector<int32_t>& part) {
  int64_t cut = 0;
  for (int64_t v = 0; v < csc.num_nodes; ++v) {
    for (int64_t k = csc.indptr[v]; k < csc.indptr[v + 1]; ++k) {
      cut += part[csc.indices[k]] != part[v];
    }
  }
  return cut;
}

std::vector<int32_t> balance_weights(const Dataset& ds, const PartitionOptions& opts,
                                     std::vector<std::string>* names) {
  const int64_t n = ds.num_nodes;
  std::vector<std::vector<int32_t>> cols;
  std::vector<std::string> col_names;
  if (!opts.balance_masks.empty() || !opts.balance_sets.empty()) {
    std::vector<uint8_t> in_any(static_cast<size_t>(n), 0);
    for (const std::string& spec : opts.balance_masks) {
      std::string name = spec;
      int64_t col = 0;
      const auto colon = spec.rfind(':');
      if (colon != std::string::npos) {
        name = spec.substr(0, colon);
        bool ok = colon + 1 < spec.size();
        for (size_t i = colon + 1; i < spec.size(); ++i) {
          ok = ok && spec[i] >= '0' && spec[i] <= '9';
        }
        TESSERA_EXPECTS(ok && spec.size() - colon - 1 < 10, ValueError,
                        "--balance-mask '{}': expected NAME or NAME:COLUMN", spec);
        col = std::stoll(spec.substr(colon + 1));
      }
      auto it = ds.ndata.find(name);
      if (it == ds.ndata.end()) {
        std::string have;
        for (const auto& [k, a] : ds.ndata) {
          have += (have.empty() ? "" : ", ") + k;
        }
        TESSERA_FAIL(ValueError,
                     "--balance-mask '{}': the dataset has no node array '{}' (it has: {})", spec,
                     name, have.empty() ? "none" : have);
      }
      const Array& m = it->second;
      TESSERA_EXPECTS(m.dtype() == DType::kBool || dtype_is_integer(m.dtype()), TypeError,
                      "--balance-mask '{}': node array '{}' must be bool or integer, got {}", spec,
                      name, dtype_name(m.dtype()));
      TESSERA_EXPECTS(m.ndim() == 1 || m.ndim() == 2, ValueError,
                      "--balance-mask '{}': node array '{}' must have shape [N] or [N, S], got {}",
                      spec, name, m.shape_str());
      const int64_t ncol = m.ndim() == 2 ? m.dim(1) : 1;
      TESSERA_EXPECTS(col >= 0 && col < ncol, IndexError,
                      "--balance-mask '{}': column {} outside [0, {}) of '{}' (shape {})", spec,
                      col, ncol, name, m.shape_str());
      const std::vector<int64_t> vals = m.to_int64_vector(name);
      std::vector<int32_t> w(static_cast<size_t>(n));
      for (int64_t v = 0; v < n; ++v) {
        const int64_t x = vals[v * ncol + col];
        // A mask, not a type array: label's classes or a feature column would be balanced as
        // "nonzero", one set, which is not what DGL does with a type array.
        TESSERA_EXPECTS(x == 0 || x == 1, ValueError,
                        "--balance-mask '{}': node {} holds {} in '{}'; a mask holds 0 or 1 (to "
                        "balance each class of a label, give one mask per class)",
                        spec, v, x, name);
        w[v] = x != 0;
        in_any[v] |= static_cast<uint8_t>(w[v]);
      }
      cols.push_back(std::move(w));
      col_names.push_back(spec);
    }
    for (const auto& [name, set] : opts.balance_sets) {
      TESSERA_EXPECTS(static_cast<int64_t>(set.size()) == n, ValueError,
                      "balance set '{}': {} entries for the {} nodes of {}", name, set.size(), n,
                      ds.name);
      std::vector<int32_t> w(static_cast<size_t>(n));
      for (int64_t v = 0; v < n; ++v) {
        w[v] = set[v] != 0;
        in_any[v] |= static_cast<uint8_t>(w[v]);
      }
      cols.push_back(std::move(w));
      col_names.push_back(name);
    }
    std::vector<int32_t> rest(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) {
      rest[v] = !in_any[v];
    }
    cols.push_back(std::move(rest));
    col_names.push_back("(no mask)");
  }
  if (opts.balance_edges) {
    std::vector<int32_t> w(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) {
      const int64_t d = ds.graph.degree(v);
      TESSERA_EXPECTS(d < INT32_MAX, ValueError,
                      "node {} has in-degree {}, beyond METIS's 32-bit weights; use --method "
                      "random",
                      v, d);
      w[v] = static_cast<int32_t>(d);
    }
    cols.push_back(std::move(w));
    col_names.push_back("in_degree");
  }
  if (cols.empty()) {
    // Vertex weights from the input (a METIS .graph file with fmt 1x): used as they are, as
    // gpmetis would, unless other balance constraints were asked for.
    auto it = ds.ndata.find("node_weight");
    if (it != ds.ndata.end() && dtype_is_integer(it->second.dtype()) &&
        (it->second.ndim() == 1 || it->second.ndim() == 2)) {
      const Array& a = it->second;
      const int64_t nc = a.ndim() == 2 ? a.dim(1) : 1;
      const std::vector<int64_t> vals = a.to_int64_vector("node_weight");
      for (int64_t c = 0; c < nc; ++c) {
        std::vector<int32_t> w(static_cast<size_t>(n));
        for (int64_t v = 0; v < n; ++v) {
          const int64_t x = vals[v * nc + c];
          TESSERA_EXPECTS(x >= 0 && x < INT32_MAX, ValueError,
                          "node_weight[{}, {}] = {} is not a METIS vertex weight (0 <= w < 2^31)",
                          v, c, x);
          w[v] = static_cast<int32_t>(x);
        }
        cols.push_back(std::move(w));
        col_names.push_back(nc == 1 ? "node_weight" : fmt::format("node_weight:{}", c));
      }
    }
  }
  // METIS divides by each constraint's total: drop constraints nobody carries.
  std::vector<size_t> keep;
  for (size_t c = 0; c < cols.size(); ++c) {
    int64_t total = 0;
    for (int32_t x : cols[c]) {
      total += x;
    }
    TESSERA_EXPECTS(total < INT32_MAX, ValueError,
                    "balance constraint '{}' sums to {}, beyond METIS's 32-bit weights; use "
                    "--method random",
                    col_names[c], total);
    if (total > 0) {
      keep.push_back(c);
    }
  }
  names->clear();
  if (keep.empty()) {
    return {};
  }
  const size_t ncon = keep.size();
  std::vector<int32_t> out(static_cast<size_t>(n) * ncon);
  for (size_t j = 0; j < ncon; ++j) {
    names->push_back(col_names[keep[j]]);
    const auto& col = cols[keep[j]];
    for (int64_t v = 0; v < n; ++v) {
      out[v * ncon + j] = col[v];
    }
  }
  return out;
}

Assignment assign_random(int64_t num_nodes, int64_t num_parts, uint64_t seed) {
  TESSERA_EXPECTS(num_parts >= 1, ValueError, "number of partitions must be >= 1, got {}",
                  num_parts);
  Assignment a;
  a.num_parts = num_parts;
  a.part.resize(static_cast<size_t>(num_nodes));
  std::vector<int64_t> perm(static_cast<size_t>(num_nodes));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  uint64_t state = seed;
  for (int64_t i = num_nodes - 1; i > 0; --i) {
    // Lemire's multiply-shift: j uniform in [0, i] up to a negligible bias.
    const uint64_t r = splitmix64(state);
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(perm[i], perm[j]);
  }
  for (int64_t i = 0; i < num_nodes; ++i) {
    a.part[perm[i]] = static_cast<int32_t>(i % num_parts);
  }
  note_empty_parts(a);
  return a;
}

Assignment assign_metis(const Graph& csc, int64_t num_parts, const std::vector<int32_t>& vwgt,
                        int ncon, const PartitionOptions& opts, PhaseTimer* timer) {
  return detail::assign_metis(csc, num_parts, vwgt, ncon, opts, timer, false);
}

bool detail::built_symmetric_simple(const Dataset& ds) {
  return ds.build.symmetrize && ds.build.drop_self_loops && ds.build.deduplicate;
}

Assignment detail::assign_metis(const Graph& csc, int64_t num_parts,
                                const std::vector<int32_t>& vwgt, int ncon,
                                const PartitionOptions& opts, PhaseTimer* timer, bool known_simple,
                                const MetisHooks* hooks) {
  const int64_t n = csc.num_nodes;
  TESSERA_EXPECTS(num_parts >= 1 && num_parts < INT32_MAX, ValueError,
                  "number of partitions must be in [1, 2^31), got {}", num_parts);
  Assignment a;
  a.num_parts = num_parts;
  a.part.assign(static_cast<size_t>(n), 0);
  if (num_parts == 1 || n == 0) {
    if (n == 0 && num_parts > 1) {
      note_empty_parts(a);
    }
    return a;
  }
  if (num_parts >= n) {
    // METIS cannot split N nodes into more than N non-empty parts (and may misbehave trying).
    for (int64_t v = 0; v < n; ++v) {
      a.part[v] = static_cast<int32_t>(v);
    }
    a.warnings.push_back(fmt::format(
        "{} partitions for {} nodes: METIS skipped, node v goes to partition v", num_parts, n));
    note_empty_parts(a);
    return a;
  }
  SymAdjacency adj = detail::symmetric_adjacency(csc, known_simple);
  if (adj.adjncy.empty()) {
    adj.adjncy.push_back(0);  // METIS reads the pointer even when unused
  }
  TESSERA_ASSERT(vwgt.empty() || static_cast<int64_t>(vwgt.size()) == n * ncon,
                 "vertex weights: {} entries for {} nodes x {} constraints", vwgt.size(), n, ncon);
  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t nc = vwgt.empty() ? 1 : ncon;
  idx_t np = static_cast<idx_t>(num_parts);
  idx_t objval = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_NUMBERING] = 0;
  if (opts.seed >= 0) {
    options[METIS_OPTION_SEED] = static_cast<idx_t>(opts.seed);
  }
  if (opts.ufactor >= 0) {
    options[METIS_OPTION_UFACTOR] = opts.ufactor;
  }
  std::vector<idx_t> w(vwgt.begin(), vwgt.end());
  std::vector<idx_t> part(static_cast<size_t>(n), 0);
  if (hooks != nullptr && hooks->before) {
    if (timer != nullptr) {
      timer->begin("spill CSR");
    }
    hooks->before();  // from here until hooks->after, `csc` may be empty: METIS reads `adj`
  }
  if (timer != nullptr) {
    timer->begin("METIS");
  }
  int rc = METIS_OK;
  {
    // METIS reports nothing while it works (minutes on large graphs): say that it still does.
    const Heartbeat heartbeat("METIS");
    rc = METIS_PartGraphKway(&nvtxs, &nc, adj.xadj.data(), adj.adjncy.data(),
                             w.empty() ? nullptr : w.data(), nullptr, nullptr, &np, nullptr,
                             nullptr, options, &objval, part.data());
  }
  if (hooks != nullptr && hooks->after) {
    if (timer != nullptr) {
      timer->begin("reload CSR");
    }
    hooks->after();
  }
  TESSERA_EXPECTS(rc == METIS_OK, ValueError,
                  "METIS_PartGraphKway failed ({}) on {} nodes, {} adjacency entries, {} parts, "
                  "{} constraints",
                  rc == METIS_ERROR_INPUT    ? "METIS_ERROR_INPUT"
                  : rc == METIS_ERROR_MEMORY ? "METIS_ERROR_MEMORY"
                                             : "METIS_ERROR",
                  n, adj.xadj[n], num_parts, nc);
  for (int64_t v = 0; v < n; ++v) {
    TESSERA_ASSERT(part[v] >= 0 && part[v] < np, "METIS returned partition {} for node {}", part[v],
                   v);
    a.part[v] = part[v];
  }
  a.metis_objval = objval;
  a.metis_adj_entries = adj.xadj[n];
  note_empty_parts(a);
  return a;
}

void check_partition_options(const PartitionOptions& opts) {
  TESSERA_EXPECTS(opts.num_parts >= 1 && opts.num_parts < INT32_MAX, ValueError,
                  "--parts must be in [1, 2^31), got {}", opts.num_parts);
  TESSERA_EXPECTS(opts.halo_hops >= 0, ValueError, "--halo-hops must be >= 0, got {}",
                  opts.halo_hops);
  TESSERA_EXPECTS(opts.ufactor == -1 || (opts.ufactor >= 1 && opts.ufactor <= kMaxUfactor),
                  ValueError,
                  "--ufactor must be in [1, {}] (allowed imbalance in 1/1000), or unset for "
                  "METIS's default, got {}",
                  kMaxUfactor, opts.ufactor);
  TESSERA_EXPECTS(opts.seed >= -1, ValueError,
                  "--seed must be >= 0 (or unset for the default), got {}", opts.seed);
  // METIS keeps its seed in 32 bits: seeds 2^32 apart would give the same partitioning.
  TESSERA_EXPECTS(opts.method != PartMethod::kMetis || opts.seed <= INT32_MAX, ValueError,
                  "--seed must be below 2^31 with --method metis (METIS's seed is a 32-bit "
                  "integer), got {}",
                  opts.seed);
}

Assignment assign_parts(const Dataset& ds, const PartitionOptions& opts) {
  TESSERA_EXPECTS(ds.finalized, ValueError, "{}: dataset is not finalized (no CSC built)", ds.name);
  check_partition_options(opts);
  if (opts.method == PartMethod::kRandom) {
    return assign_random(ds.num_nodes, opts.num_parts,
                         static_cast<uint64_t>(opts.seed < 0 ? 0 : opts.seed));
  }
  std::vector<std::string> names;
  const std::vector<int32_t> w = balance_weights(ds, opts, &names);
  Assignment a = detail::assign_metis(ds.graph, opts.num_parts, w, static_cast<int>(names.size()),
                                      opts, nullptr, detail::built_symmetric_simple(ds));
  a.constraints = names;
  return a;
}

}  // namespace tessera
