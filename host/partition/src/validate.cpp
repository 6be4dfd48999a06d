// validate_partitions: every partition contract of docs/design.md, checked from the files on disk.
#include "tessera/partition/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/format.hpp"

namespace tessera {

namespace {

class Reporter {
 public:
  explicit Reporter(ValidationReport& r, int64_t max) : r_(r), max_(max) {}
  template <typename... Args>
  void add(fmt::format_string<Args...> f, Args&&... args) {
    ++r_.num_errors;
    if (static_cast<int64_t>(r_.errors.size()) < max_) {
      r_.errors.push_back(fmt::format(f, std::forward<Args>(args)...));
    }
  }
  int64_t count() const { return r_.num_errors; }

 private:
  ValidationReport& r_;
  int64_t max_;
};

// What a partition's graph file must look like: dtype and shape from the config's counts.
struct Expected {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// Files of partition p checked for presence, size, checksum, and dtype/shape against both the
// config and what the counts imply. Returns false if any is unusable.
bool check_files(const PartitionConfig& c, int64_t p, const ValidateOptions& opts, Reporter& R) {
  const PartInfo& info = c.parts[p];
  const std::filesystem::path dir = c.dir / info.dir;
  const std::string pn = fmt::format("partition {}", p);
  if (!std::filesystem::is_directory(dir)) {
    R.add("{}: folder {} is missing", pn, dir.string());
    return false;
  }
  const int64_t nl = info.num_nodes, ml = info.num_edges;
  std::vector<Expected> want = {
      {"indptr.npy", DType::kInt64, {nl + 1}}, {"indices.npy", DType::kInt64, {ml}},
      {"eid.npy", DType::kInt64, {ml}},        {"nid.npy", DType::kInt64, {nl}},
      {"inner_node.npy", DType::kBool, {nl}},  {"inner_edge.npy", DType::kBool, {ml}},
      {"orig_nid.npy", DType::kInt64, {nl}},   {"orig_eid.npy", DType::kInt64, {ml}}};
  for (const auto& s : c.ndata) {
    std::vector<int64_t> shape = s.shape;
    shape[0] = info.num_inner_nodes;
    want.push_back({s.file, s.dtype, shape});
  }
  for (const auto& s : c.edata) {
    std::vector<int64_t> shape = s.shape;
    shape[0] = info.num_inner_edges;
    want.push_back({s.file, s.dtype, shape});
  }
  bool ok = true;
  std::set<std::string> wanted;
  for (const auto& w : want) {
    wanted.insert(w.name);
    const std::string fname = (std::filesystem::path(info.dir) / w.name).string();
    const PartFile* pf = info.file(w.name);
    if (pf == nullptr) {
      R.add("{}: the config does not list file {}", pn, fname);
      ok = false;
      continue;
    }
    const std::filesystem::path fp = dir / w.name;
    if (!std::filesystem::is_regular_file(fp)) {
      R.add("{}: file {} is missing", pn, fname);
      ok = false;
      continue;
    }
    if (pf->dtype != w.dtype || pf->shape != w.shape) {
      R.add("{}: the config lists {} as {} {}, but the counts imply {} {}", pn, fname,
            dtype_name(pf->dtype), shape_string(pf->shape), dtype_name(w.dtype),
            shape_string(w.shape));
      ok = false;
    }
    const auto bytes = static_cast<int64_t>(std::filesystem::file_size(fp));
    if (bytes != pf->bytes) {
      R.add(
          "{}: {} has {} bytes but the config lists {} (corrupted, or from another "
          "partitioning)",
          pn, fname, bytes, pf->bytes);
      ok = false;
      continue;
    }
    if (opts.verify_checksums) {
      const uint32_t crc = file_crc32(fp);
      if (crc != pf->crc32) {
        R.add(
            "{}: {} has checksum {} but the config lists {} (corrupted, or from another "
            "partitioning)",
            pn, fname, crc32_hex(crc), crc32_hex(pf->crc32));
        ok = false;
        continue;
      }
    }
    try {
      const NpyHeader h = read_npy_header(fp);
      if (h.dtype != pf->dtype || h.shape != pf->shape) {
        R.add("{}: {} holds {} {} but the config lists {} {}", pn, fname, dtype_name(h.dtype),
              shape_string(h.shape), dtype_name(pf->dtype), shape_string(pf->shape));
        ok = false;
      }
    } catch (const Error& e) {
      R.add("{}: {}", pn, e.what());
      ok = false;
    }
  }
  for (const auto& ent : std::filesystem::directory_iterator(dir)) {
    if (!info.file(ent.path().filename().string())) {
      R.add("{}: {} is not listed in the config (from another partitioning?)", pn,
            (std::filesystem::path(info.dir) / ent.path().filename()).string());
    }
  }
  for (const auto& f : info.files) {
    if (!wanted.count(f.name)) {
      R.add("{}: the config lists {} which is not part of the format or the schema", pn,
            (std::filesystem::path(info.dir) / f.name).string());
    }
  }
  return ok;
}

}  // namespace

ValidationReport validate_partitions(const std::filesystem::path& config_json,
                                     const Dataset* original, const ValidateOptions& opts) {
  const PartitionConfig c = load_partition_config(config_json);
  ValidationReport report;
  Reporter R(report, opts.max_errors);
  const int64_t N = c.num_nodes, E = c.num_edges, P = c.num_parts, K = c.halo_hops;

  // ---- config-level consistency --------------------------------------------------------
  if (c.local_indices != (K > 0)) {
    R.add("{}: local_indices is {} but halo_hops is {}", c.path.string(), c.local_indices, K);
  }
  if (c.json.contains("node_map") && c.json["node_map"].contains("_N") &&
      c.json["node_map"]["_N"] != c.json["node_ranges"]) {
    R.add("{}: node_map._N differs from node_ranges", c.path.string());
  }
  for (const auto& s : c.edata) {
    if (s.shape[0] != E) {
      R.add("{}: edata_schema.{}.shape[0] is {}, expected num_edges = {}", c.path.string(), s.name,
            s.shape[0], E);
    }
  }
  if (original != nullptr) {
    if (original->num_nodes != N) {
      R.add("dataset {} has {} nodes but the config says {} (another graph?)", original->name,
            original->num_nodes, N);
    }
    if (original->graph.num_edges() != E) {
      R.add(
          "dataset {} has {} edges but the config says {} (another graph, or other build "
          "options: symmetrize={}, drop_self_loops={}, deduplicate={})",
          original->name, original->graph.num_edges(), E, c.build.symmetrize,
          c.build.drop_self_loops, c.build.deduplicate);
    }
    if (original->num_input_edges != c.num_input_edges) {
      R.add("dataset {} has {} input edges but the config says {}", original->name,
            original->num_input_edges, c.num_input_edges);
    }
    if (R.count() > 0) {
      report.summary = "the dataset does not match the config; nothing else checked";
      return report;
    }
  }

  // ---- files, then per-partition structure ----------------------------------------------
  std::vector<int64_t> old_of_new(static_cast<size_t>(N), -1),
      new_of_old(static_cast<size_t>(N), -1);
  std::vector<int64_t> e_src(static_cast<size_t>(E), -1), e_dst(static_cast<size_t>(E), -1),
      e_orig(static_cast<size_t>(E), -1);
  const int64_t eid_space = c.build.symmetrize ? 2 * c.num_input_edges : c.num_input_edges;
  std::vector<uint8_t> orig_eid_seen(static_cast<size_t>(std::max<int64_t>(eid_space, 0)), 0);
  struct HaloEdge {
    int64_t eid, src, dst, orig;
  };
  std::vector<std::vector<int64_t>> halo_nodes(static_cast<size_t>(P));
  std::vector<std::vector<int64_t>> halo_orig(static_cast<size_t>(P));
  std::vector<std::vector<HaloEdge>> halo_edges(static_cast<size_t>(P));
  std::vector<bool> part_ok(static_cast<size_t>(P), false);

  for (int64_t p = 0; p < P; ++p) {
    if (!check_files(c, p, opts, R)) {
      continue;
    }
    LocalPartition L;
    try {
      L = load_partition(c, p, {/*mmap=*/true, /*verify_checksums=*/false});
    } catch (const Error& e) {
      R.add("partition {}: {}", p, e.what());
      continue;
    }
    const std::string pd = c.parts[p].dir;
    const int64_t s = c.node_offsets[p], e = c.node_offsets[p + 1];
    const int64_t es = c.edge_offsets[p], ee = c.edge_offsets[p + 1];
    const int64_t ni = e - s, nl = L.num_nodes(), ml = L.num_edges();
    const auto* indptr = L.indptr.data<int64_t>();
    const auto* indices = L.indices.data<int64_t>();
    const auto* eid = L.eid.data<int64_t>();
    const auto* nid = L.nid.data<int64_t>();
    const auto* inner_node = L.inner_node.data<uint8_t>();
    const auto* inner_edge = L.inner_edge.data<uint8_t>();
    const auto* onid = L.orig_nid.data<int64_t>();
    const auto* oeid = L.orig_eid.data<int64_t>();
    const int64_t before = R.count();

    // Local CSC shape.
    if (indptr[0] != 0) {
      R.add("partition {}: {}/indptr.npy[0] is {}, expected 0", p, pd, indptr[0]);
    }
    for (int64_t i = 0; i < nl; ++i) {
      if (indptr[i] > indptr[i + 1]) {
        R.add("partition {}: {}/indptr.npy decreases at local node {}", p, pd, i);
        break;
      }
    }
    if (indptr[nl] != ml) {
      R.add("partition {}: {}/indptr.npy ends at {} but there are {} edges", p, pd, indptr[nl], ml);
    }
    if (R.count() > before) {
      continue;
    }
    const int64_t bound = c.local_indices ? nl : N;
    for (int64_t k = 0; k < ml; ++k) {
      if (indices[k] < 0 || indices[k] >= bound) {
        R.add("partition {}: {}/indices.npy[{}] = {} outside [0, {})", p, pd, k, indices[k], bound);
        break;
      }
    }
    // Rows sorted by (source, edge ID), as the format promises.
    for (int64_t i = 0; i < nl && R.count() == before; ++i) {
      for (int64_t k = indptr[i] + 1; k < indptr[i + 1]; ++k) {
        if (indices[k - 1] > indices[k] || (indices[k - 1] == indices[k] && eid[k - 1] >= eid[k])) {
          R.add("partition {}: {}/indices.npy row {} is not sorted by (source, edge ID) at {}", p,
                pd, i, k);
          break;
        }
      }
    }
    // Owned nodes: the first ni local nodes are exactly node_ranges[p], marked inner.
    for (int64_t i = 0; i < nl; ++i) {
      const bool inner = i < ni;
      if (inner && nid[i] != s + i) {
        R.add("partition {}: {}/nid.npy[{}] = {}, but partition {} owns [{}, {}) in order", p, pd,
              i, nid[i], p, s, e);
        break;
      }
      if ((inner_node[i] != 0) != inner) {
        R.add("partition {}: {}/inner_node.npy[{}] is {}, expected {} (inner nodes first)", p, pd,
              i, inner_node[i] != 0, inner);
        break;
      }
      if (!inner) {
        if (nid[i] < 0 || nid[i] >= N || (nid[i] >= s && nid[i] < e)) {
          R.add(
              "partition {}: {}/nid.npy[{}] = {} is a halo node but owned here or outside [0, {})",
              p, pd, i, nid[i], N);
          break;
        }
        if (i > ni && nid[i] <= nid[i - 1]) {
          R.add("partition {}: {}/nid.npy halo nodes not strictly increasing at {}", p, pd, i);
          break;
        }
      }
    }
    if (R.count() > before) {
      continue;
    }
    // Relabelling: orig_nid of owned nodes.
    for (int64_t i = 0; i < ni; ++i) {
      const int64_t o = onid[i];
      if (o < 0 || o >= N) {
        R.add("partition {}: {}/orig_nid.npy[{}] = {} outside [0, {})", p, pd, i, o, N);
        break;
      }
      if (new_of_old[o] >= 0) {
        R.add(
            "partition {}: {}/orig_nid.npy[{}] = {} is also the original of node {} (not a "
            "bijection)",
            p, pd, i, o, new_of_old[o]);
        break;
      }
      new_of_old[o] = s + i;
      old_of_new[s + i] = o;
    }
    // Numbering within the partition, as the config's node_order says: original IDs increasing,
    // or in-degree (the length of an inner node's row) non-increasing with ties in ID order.
    const bool by_degree = c.node_order == "degree";
    for (int64_t i = 1; i < ni && R.count() == before; ++i) {
      const int64_t d0 = indptr[i] - indptr[i - 1], d1 = indptr[i + 1] - indptr[i];
      if (by_degree ? d0 < d1 || (d0 == d1 && onid[i - 1] > onid[i]) : onid[i - 1] > onid[i]) {
        R.add(
            "partition {}: local nodes {} and {} (original IDs {} and {}, in-degrees {} and {}) "
            "are out of node_order \"{}\"",
            p, i - 1, i, onid[i - 1], onid[i], d0, d1, c.node_order);
      }
    }
    for (int64_t i = ni; i < nl; ++i) {
      halo_nodes[p].push_back(nid[i]);
      halo_orig[p].push_back(onid[i]);
    }
    // Edges: rows of inner nodes hold inner edges with IDs in edge_ranges[p]; rows of halo
    // nodes hold halo edges (only for halo_hops >= 2).
    int64_t inner_count = 0;
    for (int64_t i = 0; i < nl && R.count() == before; ++i) {
      for (int64_t k = indptr[i]; k < indptr[i + 1]; ++k) {
        const int64_t g = eid[k];
        const int64_t src = c.local_indices ? nid[indices[k]] : indices[k];
        if (i < ni) {
          if (!inner_edge[k]) {
            R.add("partition {}: {}/inner_edge.npy[{}] is false for an in-edge of owned node {}", p,
                  pd, k, s + i);
            break;
          }
          if (g < es || g >= ee) {
            R.add("partition {}: {}/eid.npy[{}] = {} outside its edge range [{}, {})", p, pd, k, g,
                  es, ee);
            break;
          }
          if (e_dst[g] >= 0) {
            R.add("partition {}: edge {} ({}/eid.npy[{}]) is stored twice as an inner edge", p, g,
                  pd, k);
            break;
          }
          const int64_t o = oeid[k];
          if (o < 0 || o >= eid_space || orig_eid_seen[o]) {
            R.add("partition {}: {}/orig_eid.npy[{}] = {} is outside [0, {}) or repeated", p, pd, k,
                  o, eid_space);
            break;
          }
          orig_eid_seen[o] = 1;
          e_src[g] = src;
          e_dst[g] = s + i;
          e_orig[g] = o;
          ++inner_count;
        } else {
          if (inner_edge[k]) {
            R.add("partition {}: {}/inner_edge.npy[{}] is true for an in-edge of halo node {}", p,
                  pd, k, nid[i]);
            break;
          }
          if (g < 0 || g >= E || (g >= es && g < ee)) {
            R.add(
                "partition {}: {}/eid.npy[{}] = {} of a halo edge is owned here or outside [0, "
                "{})",
                p, pd, k, g, E);
            break;
          }
          halo_edges[p].push_back({g, src, nid[i], oeid[k]});
        }
      }
    }
    if (R.count() == before && inner_count != ee - es) {
      R.add("partition {}: {} inner edges stored but edge_ranges[{}] holds {}", p, inner_count, p,
            ee - es);
    }
    if (R.count() > before) {
      continue;
    }

    // Features and labels moved with their nodes and edges.
    if (original != nullptr) {
      for (const auto& sch : c.ndata) {
        auto it = original->ndata.find(sch.name);
        if (it == original->ndata.end()) {
          R.add("partition {}: node data '{}' is not in dataset {}", p, sch.name, original->name);
          continue;
        }
        const Array& src = it->second;
        const Array& got = L.ndata.at(sch.name);
        if (src.dtype() != got.dtype() || src.row_bytes() != got.row_bytes()) {
          R.add("partition {}: {}/{} is {} with rows of {} bytes; dataset has {} with {}", p, pd,
                sch.file, dtype_name(got.dtype()), got.row_bytes(), dtype_name(src.dtype()),
                src.row_bytes());
          continue;
        }
        const size_t rb = src.row_bytes();
        for (int64_t i = 0; i < ni; ++i) {
          const auto* a = static_cast<const char*>(got.raw()) + i * rb;
          const auto* b = static_cast<const char*>(src.raw()) + onid[i] * rb;
          if (std::memcmp(a, b, rb) != 0) {
            R.add("partition {}: {}/{} row {} (node {}) differs from dataset row {} of '{}'", p, pd,
                  sch.file, i, s + i, onid[i], sch.name);
            break;
          }
        }
      }
      for (const auto& sch : c.edata) {
        auto it = original->edata.find(sch.name);
        if (it == original->edata.end()) {
          R.add("partition {}: edge data '{}' is not in dataset {}", p, sch.name, original->name);
          continue;
        }
        const Array& src = it->second;
        const Array& got = L.edata.at(sch.name);
        if (src.dtype() != got.dtype() || src.row_bytes() != got.row_bytes()) {
          R.add("partition {}: {}/{} dtype or row size differs from dataset '{}'", p, pd, sch.file,
                sch.name);
          continue;
        }
        const size_t rb = src.row_bytes();
        for (int64_t j = 0; j < ee - es; ++j) {
          const int64_t row = e_orig[es + j] % c.num_input_edges;
          const auto* a = static_cast<const char*>(got.raw()) + j * rb;
          const auto* b = static_cast<const char*>(src.raw()) + row * rb;
          if (std::memcmp(a, b, rb) != 0) {
            R.add("partition {}: {}/{} row {} (edge {}) differs from dataset row {} of '{}'", p, pd,
                  sch.file, j, es + j, row, sch.name);
            break;
          }
        }
      }
    }
    part_ok[p] = R.count() == before;
  }
  const bool all_ok = std::all_of(part_ok.begin(), part_ok.end(), [](bool b) { return b; });

  // ---- global contracts ------------------------------------------------------------------
  if (all_ok) {
    for (int64_t v = 0; v < N; ++v) {
      if (old_of_new[v] < 0) {
        R.add("node {} is owned by no partition (orig_nid has no entry)", v);
        break;
      }
    }
    for (int64_t g = 0; g < E; ++g) {
      if (e_dst[g] < 0) {
        R.add("edge {} is stored in no partition as an inner edge", g);
        break;
      }
    }
  }
  if (all_ok && R.count() == 0) {
    // Halo nodes carry the orig_nid of their owner; halo edges match the owner's copy.
    for (int64_t p = 0; p < P; ++p) {
      for (size_t i = 0; i < halo_nodes[p].size(); ++i) {
        if (old_of_new[halo_nodes[p][i]] != halo_orig[p][i]) {
          R.add("partition {}: halo node {} has orig_nid {} but its owner says {}", p,
                halo_nodes[p][i], halo_orig[p][i], old_of_new[halo_nodes[p][i]]);
          break;
        }
      }
      for (const auto& h : halo_edges[p]) {
        if (e_src[h.eid] != h.src || e_dst[h.eid] != h.dst || e_orig[h.eid] != h.orig) {
          R.add(
              "partition {}: halo edge {} ({} -> {}, orig {}) differs from its owner's copy ({} "
              "-> {}, orig {})",
              p, h.eid, h.src, h.dst, h.orig, e_src[h.eid], e_dst[h.eid], e_orig[h.eid]);
          break;
        }
      }
    }
    // Halo nodes are exactly the k-hop in-neighbors not owned; halo edges exactly the in-edges
    // of halo nodes within k - 1 hops. Recomputed from the inner edges of all partitions.
    std::vector<int64_t> indptr(static_cast<size_t>(N) + 1, 0), src(static_cast<size_t>(E)),
        eids(static_cast<size_t>(E));
    for (int64_t g = 0; g < E; ++g) {
      ++indptr[e_dst[g] + 1];
    }
    for (int64_t v = 0; v < N; ++v) {
      indptr[v + 1] += indptr[v];
    }
    {
      std::vector<int64_t> pos(indptr.begin(), indptr.end() - 1);
      for (int64_t g = 0; g < E; ++g) {
        const int64_t k = pos[e_dst[g]]++;
        src[k] = e_src[g];
        eids[k] = g;
      }
    }
    std::vector<int32_t> dist(static_cast<size_t>(N), -1);
    for (int64_t p = 0; p < P && K > 0; ++p) {
      const int64_t s = c.node_offsets[p], e = c.node_offsets[p + 1];
      std::vector<int64_t> touched, frontier, next, expect_halo;
      for (int64_t v = s; v < e; ++v) {
        dist[v] = 0;
      }
      for (int hop = 1; hop <= K; ++hop) {
        next.clear();
        auto expand = [&](int64_t v) {
          for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
            if (dist[src[k]] < 0) {
              dist[src[k]] = hop;
              next.push_back(src[k]);
            }
          }
        };
        if (hop == 1) {
          for (int64_t v = s; v < e; ++v) {
            expand(v);
          }
        } else {
          for (int64_t v : frontier) {
            expand(v);
          }
        }
        expect_halo.insert(expect_halo.end(), next.begin(), next.end());
        frontier.swap(next);
      }
      std::sort(expect_halo.begin(), expect_halo.end());
      if (expect_halo != halo_nodes[p]) {
        std::vector<int64_t> missing, extra;
        std::set_difference(expect_halo.begin(), expect_halo.end(), halo_nodes[p].begin(),
                            halo_nodes[p].end(), std::back_inserter(missing));
        std::set_difference(halo_nodes[p].begin(), halo_nodes[p].end(), expect_halo.begin(),
                            expect_halo.end(), std::back_inserter(extra));
        R.add(
            "partition {}: halo nodes are not the {}-hop in-neighbors not owned: {} missing "
            "(first {}), {} extra (first {})",
            p, K, missing.size(), missing.empty() ? -1 : missing[0], extra.size(),
            extra.empty() ? -1 : extra[0]);
      }
      std::vector<int64_t> expect_edges, got_edges;
      for (int64_t h : expect_halo) {
        if (dist[h] <= K - 1) {
          for (int64_t k = indptr[h]; k < indptr[h + 1]; ++k) {
            expect_edges.push_back(eids[k]);
          }
        }
      }
      for (const auto& h : halo_edges[p]) {
        got_edges.push_back(h.eid);
      }
      std::sort(expect_edges.begin(), expect_edges.end());
      std::sort(got_edges.begin(), got_edges.end());
      if (expect_edges != got_edges) {
        R.add(
            "partition {}: halo edges are not the in-edges of halo nodes within {} hops: "
            "expected {}, stored {}",
            p, K - 1, expect_edges.size(), got_edges.size());
      }
      for (int64_t v = s; v < e; ++v) {
        dist[v] = -1;
      }
      for (int64_t h : expect_halo) {
        dist[h] = -1;
      }
    }
    // With the dataset: every edge keeps its endpoints through the relabelling.
    if (original != nullptr) {
      const Graph& og = original->graph;
      std::vector<int64_t> osrc(static_cast<size_t>(eid_space), -1),
          odst(static_cast<size_t>(eid_space), -1);
      for (int64_t v = 0; v < og.num_nodes; ++v) {
        for (int64_t k = og.indptr[v]; k < og.indptr[v + 1]; ++k) {
          const int64_t o = og.eid(k);
          if (o >= 0 && o < eid_space) {
            osrc[o] = og.indices[k];
            odst[o] = v;
          }
        }
      }
      for (int64_t g = 0; g < E; ++g) {
        const int64_t o = e_orig[g];
        if (osrc[o] != old_of_new[e_src[g]] || odst[o] != old_of_new[e_dst[g]]) {
          R.add(
              "edge {} (orig_eid {}) joins original nodes {} -> {}, but the dataset's edge {} "
              "is {} -> {}",
              g, o, old_of_new[e_src[g]], old_of_new[e_dst[g]], o, osrc[o], odst[o]);
          break;
        }
      }
      for (const auto& kv : original->ndata) {
        const std::string& k = kv.first;
        const bool listed = std::any_of(c.ndata.begin(), c.ndata.end(),
                                        [&](const ArraySchema& s) { return s.name == k; });
        if (!listed) {
          R.add("dataset node data '{}' is missing from the partitioning", k);
        }
      }
      for (const auto& kv : original->edata) {
        const std::string& k = kv.first;
        const bool listed = std::any_of(c.edata.begin(), c.edata.end(),
                                        [&](const ArraySchema& s) { return s.name == k; });
        if (!listed) {
          R.add("dataset edge data '{}' is missing from the partitioning", k);
        }
      }
    }
  }

  std::string s = fmt::format("{}: {} nodes, {} edges, {} partitions ({}, halo {})\n", c.graph_name,
                              N, E, P, c.part_method, K);
  for (int64_t p = 0; p < P; ++p) {
    s += fmt::format(
        "  part {}: {} nodes [{}, {}), {} edges [{}, {}), {} halo nodes, {} local "
        "edges\n",
        p, c.node_offsets[p + 1] - c.node_offsets[p], c.node_offsets[p], c.node_offsets[p + 1],
        c.edge_offsets[p + 1] - c.edge_offsets[p], c.edge_offsets[p], c.edge_offsets[p + 1],
        c.parts[p].num_nodes - c.parts[p].num_inner_nodes, c.parts[p].num_edges);
  }
  s += fmt::format("checked: files{}, ownership, relabelling, edges, halo{}\n",
                   opts.verify_checksums ? " + checksums" : "",
                   original ? ", structure and features against the dataset" : "");
  report.summary = s;
  return report;
}

}  // namespace tessera
