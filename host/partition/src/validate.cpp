// SPDX-License-Identifier: Apache-2.0
// validate_partitions: every partition contract of docs/design.md, checked from the files on disk.
#include "tessera/partition/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
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
  const std::vector<ExpectedFile> want = expected_partition_files(c, p);
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

// What the partitions say about the whole graph, gathered while each partition is checked and
// then held to the global contracts.
struct HaloEdge {
  int64_t eid, src, dst, orig;
};
struct Whole {
  explicit Whole(const PartitionConfig& c)
      : eid_space(c.build.symmetrize ? 2 * c.num_input_edges : c.num_input_edges),
        old_of_new(static_cast<size_t>(c.num_nodes), -1),
        new_of_old(static_cast<size_t>(c.num_nodes), -1),
        e_src(static_cast<size_t>(c.num_edges), -1),
        e_dst(static_cast<size_t>(c.num_edges), -1),
        e_orig(static_cast<size_t>(c.num_edges), -1),
        orig_eid_seen(static_cast<size_t>(std::max<int64_t>(eid_space, 0)), 0),
        halo_nodes(static_cast<size_t>(c.num_parts)),
        halo_orig(static_cast<size_t>(c.num_parts)),
        halo_edges(static_cast<size_t>(c.num_parts)) {}
  int64_t eid_space;                            // original edge IDs (doubled when symmetrized)
  std::vector<int64_t> old_of_new, new_of_old;  // the owners' orig_nid, both ways
  std::vector<int64_t> e_src, e_dst, e_orig;    // each inner edge by new edge ID
  std::vector<uint8_t> orig_eid_seen;
  std::vector<std::vector<int64_t>> halo_nodes, halo_orig;  // per partition, as stored
  std::vector<std::vector<HaloEdge>> halo_edges;
};

// One loaded partition: its ranges and the arrays of its files.
struct PartView {
  PartView(const PartitionConfig& c, int64_t p, const LocalPartition& L, int64_t errors_before)
      : p(p),
        pd(c.parts[p].dir),
        s(c.node_offsets[p]),
        e(c.node_offsets[p + 1]),
        es(c.edge_offsets[p]),
        ee(c.edge_offsets[p + 1]),
        ni(e - s),
        nl(L.num_nodes()),
        ml(L.num_edges()),
        indptr(L.indptr.data<int64_t>()),
        indices(L.indices.data<int64_t>()),
        eid(L.eid.data<int64_t>()),
        nid(L.nid.data<int64_t>()),
        inner_node(L.inner_node.data<uint8_t>()),
        inner_edge(L.inner_edge.data<uint8_t>()),
        onid(L.orig_nid.data<int64_t>()),
        oeid(L.orig_eid.data<int64_t>()),
        before(errors_before) {}
  int64_t p;
  std::string pd;      // the partition's folder, as the config names it
  int64_t s, e;        // owned node range [s, e)
  int64_t es, ee;      // owned (inner) edge range [es, ee)
  int64_t ni, nl, ml;  // owned nodes, local nodes, local edges
  const int64_t *indptr, *indices, *eid, *nid;
  const uint8_t *inner_node, *inner_edge;
  const int64_t *onid, *oeid;
  int64_t before;  // violations reported before this partition's structure was checked
};

// ---- the config and the dataset -----------------------------------------------------------

void check_config(const PartitionConfig& c, Reporter& R) {
  // DGL's readers take the ranges from these maps: they must say what Tessera's readers use.
  for (const auto& [map, key, ranges] :
       {std::tuple{"node_map", "_N", "node_ranges"}, std::tuple{"edge_map", "_E", "edge_ranges"}}) {
    if (c.json.contains(map) && c.json[map].contains(key) && c.json[map][key] != c.json[ranges]) {
      R.add("{}: {}.{} differs from {}", c.path.string(), map, key, ranges);
    }
  }
  for (const auto& s : c.edata) {
    if (s.shape[0] != c.num_edges) {
      R.add("{}: edata_schema.{}.shape[0] is {}, expected num_edges = {}", c.path.string(), s.name,
            s.shape[0], c.num_edges);
    }
  }
}

void check_dataset_matches(const PartitionConfig& c, const Dataset& original, Reporter& R) {
  if (original.num_nodes != c.num_nodes) {
    R.add("dataset {} has {} nodes but the config says {} (another graph?)", original.name,
          original.num_nodes, c.num_nodes);
  }
  if (original.graph.num_edges() != c.num_edges) {
    R.add(
        "dataset {} has {} edges but the config says {} (another graph, or other build "
        "options: symmetrize={}, drop_self_loops={}, deduplicate={})",
        original.name, original.graph.num_edges(), c.num_edges, c.build.symmetrize,
        c.build.drop_self_loops, c.build.deduplicate);
  }
  if (original.num_input_edges != c.num_input_edges) {
    R.add("dataset {} has {} input edges but the config says {}", original.name,
          original.num_input_edges, c.num_input_edges);
  }
}

// ---- one partition's structure ------------------------------------------------------------

// indptr starts at 0, never decreases and ends at the edge count; false if it cannot be walked.
bool check_indptr(const PartView& v, Reporter& R) {
  if (v.indptr[0] != 0) {
    R.add("partition {}: {}/indptr.npy[0] is {}, expected 0", v.p, v.pd, v.indptr[0]);
  }
  for (int64_t i = 0; i < v.nl; ++i) {
    if (v.indptr[i] > v.indptr[i + 1]) {
      R.add("partition {}: {}/indptr.npy decreases at local node {}", v.p, v.pd, i);
      break;
    }
  }
  if (v.indptr[v.nl] != v.ml) {
    R.add("partition {}: {}/indptr.npy ends at {} but there are {} edges", v.p, v.pd,
          v.indptr[v.nl], v.ml);
  }
  return R.count() == v.before;
}

// Whether (original source a, original edge ID ea) may not precede (b, eb) in a version 2 row:
// the sampling order, with a repeated pair (a multi-edge) ordered by its edge IDs.
bool out_of_original_order(int64_t a, int64_t ea, int64_t b, int64_t eb) {
  return a > b || (a == b && ea >= eb);
}

// Sources in range, and each row in the order its format version promises: version 2, the
// unpartitioned graph's order, (original source, original edge ID), with consecutive new edge
// IDs along it (edge IDs are positions in that order); version 1, (stored source, edge ID). The
// original ID of a global source (local_indices false) is known only once every partition is read:
// check_row_order_globally.
void check_indices(const PartitionConfig& c, const PartView& v, Reporter& R) {
  const int64_t bound = c.local_indices ? v.nl : c.num_nodes;
  for (int64_t k = 0; k < v.ml; ++k) {
    if (v.indices[k] < 0 || v.indices[k] >= bound) {
      R.add("partition {}: {}/indices.npy[{}] = {} outside [0, {})", v.p, v.pd, k, v.indices[k],
            bound);
      return;
    }
  }
  const bool v1 = c.format_version < 2;
  for (int64_t i = 0; i < v.nl && R.count() == v.before; ++i) {
    for (int64_t k = v.indptr[i] + 1; k < v.indptr[i + 1]; ++k) {
      if (v1) {
        if (v.indices[k - 1] > v.indices[k] ||
            (v.indices[k - 1] == v.indices[k] && v.eid[k - 1] >= v.eid[k])) {
          R.add("partition {}: {}/indices.npy row {} is not sorted by (source, edge ID) at {}", v.p,
                v.pd, i, k);
          break;
        }
        continue;
      }
      if (v.eid[k] != v.eid[k - 1] + 1) {
        R.add("partition {}: {}/eid.npy row {} is not consecutive at {} ({} after {})", v.p, v.pd,
              i, k, v.eid[k], v.eid[k - 1]);
        break;
      }
      if (!c.local_indices) {
        continue;
      }
      const int64_t a = v.onid[v.indices[k - 1]], b = v.onid[v.indices[k]];
      if (out_of_original_order(a, v.oeid[k - 1], b, v.oeid[k])) {
        R.add(
            "partition {}: {} row {} is not in the original order (original source, original "
            "edge ID) at {}: ({}, {}) before ({}, {})",
            v.p, v.pd, i, k, a, v.oeid[k - 1], b, v.oeid[k]);
        break;
      }
    }
  }
}

// Format version 2 without local IDs: each row of inner edges, read in edge-ID order (which
// check_indices found to be the stored order: consecutive IDs along each row), in the original
// order.
void check_row_order_globally(const PartitionConfig& c, const Whole& W, Reporter& R) {
  if (c.format_version < 2 || c.local_indices) {
    return;
  }
  for (int64_t g = 1; g < c.num_edges; ++g) {
    if (W.e_dst[g] != W.e_dst[g - 1]) {
      continue;
    }
    const int64_t a = W.old_of_new[W.e_src[g - 1]], b = W.old_of_new[W.e_src[g]];
    if (out_of_original_order(a, W.e_orig[g - 1], b, W.e_orig[g])) {
      R.add(
          "edges {} and {} (into node {}) are not in the original order (original source, "
          "original edge ID): ({}, {}) before ({}, {})",
          g - 1, g, W.e_dst[g], a, W.e_orig[g - 1], b, W.e_orig[g]);
      return;
    }
  }
}

// The first ni local nodes are exactly node_ranges[p], marked inner; halo nodes follow, owned
// elsewhere, in increasing ID order.
void check_owned_nodes(const PartitionConfig& c, const PartView& v, Reporter& R) {
  for (int64_t i = 0; i < v.nl; ++i) {
    const bool inner = i < v.ni;
    if (inner && v.nid[i] != v.s + i) {
      R.add("partition {}: {}/nid.npy[{}] = {}, but partition {} owns [{}, {}) in order", v.p, v.pd,
            i, v.nid[i], v.p, v.s, v.e);
      break;
    }
    if ((v.inner_node[i] != 0) != inner) {
      R.add("partition {}: {}/inner_node.npy[{}] is {}, expected {} (inner nodes first)", v.p, v.pd,
            i, v.inner_node[i] != 0, inner);
      break;
    }
    if (!inner) {
      if (v.nid[i] < 0 || v.nid[i] >= c.num_nodes || (v.nid[i] >= v.s && v.nid[i] < v.e)) {
        R.add("partition {}: {}/nid.npy[{}] = {} is a halo node but owned here or outside [0, {})",
              v.p, v.pd, i, v.nid[i], c.num_nodes);
        break;
      }
      if (i > v.ni && v.nid[i] <= v.nid[i - 1]) {
        R.add("partition {}: {}/nid.npy halo nodes not strictly increasing at {}", v.p, v.pd, i);
        break;
      }
    }
  }
}

// orig_nid of the owned nodes: in range and never the original of two nodes (a bijection once
// every partition is in).
void check_relabelling(const PartitionConfig& c, const PartView& v, Whole& W, Reporter& R) {
  for (int64_t i = 0; i < v.ni; ++i) {
    const int64_t o = v.onid[i];
    if (o < 0 || o >= c.num_nodes) {
      R.add("partition {}: {}/orig_nid.npy[{}] = {} outside [0, {})", v.p, v.pd, i, o, c.num_nodes);
      break;
    }
    if (W.new_of_old[o] >= 0) {
      R.add(
          "partition {}: {}/orig_nid.npy[{}] = {} is also the original of node {} (not a "
          "bijection)",
          v.p, v.pd, i, o, W.new_of_old[o]);
      break;
    }
    W.new_of_old[o] = v.s + i;
    W.old_of_new[v.s + i] = o;
  }
}

// Numbering within the partition, as the config's node_order says: original IDs increasing, or
// in-degree (the length of an inner node's row) non-increasing with ties in ID order.
void check_node_order(const PartitionConfig& c, const PartView& v, Reporter& R) {
  const bool by_degree = c.node_order == "degree";
  for (int64_t i = 1; i < v.ni && R.count() == v.before; ++i) {
    const int64_t d0 = v.indptr[i] - v.indptr[i - 1], d1 = v.indptr[i + 1] - v.indptr[i];
    if (by_degree ? d0 < d1 || (d0 == d1 && v.onid[i - 1] > v.onid[i])
                  : v.onid[i - 1] > v.onid[i]) {
      R.add(
          "partition {}: local nodes {} and {} (original IDs {} and {}, in-degrees {} and {}) "
          "are out of node_order \"{}\"",
          v.p, i - 1, i, v.onid[i - 1], v.onid[i], d0, d1, c.node_order);
    }
  }
}

void collect_halo_nodes(const PartView& v, Whole& W) {
  for (int64_t i = v.ni; i < v.nl; ++i) {
    W.halo_nodes[v.p].push_back(v.nid[i]);
    W.halo_orig[v.p].push_back(v.onid[i]);
  }
}

// Rows of inner nodes hold inner edges with IDs in edge_ranges[p], each stored once and with an
// original ID seen once; rows of halo nodes hold halo edges (only for halo_hops >= 2), owned
// elsewhere. Records both for the global contracts.
void check_edges(const PartitionConfig& c, const PartView& v, Whole& W, Reporter& R) {
  int64_t inner_count = 0;
  for (int64_t i = 0; i < v.nl && R.count() == v.before; ++i) {
    for (int64_t k = v.indptr[i]; k < v.indptr[i + 1]; ++k) {
      const int64_t g = v.eid[k];
      const int64_t src = c.local_indices ? v.nid[v.indices[k]] : v.indices[k];
      if (i < v.ni) {
        if (!v.inner_edge[k]) {
          R.add("partition {}: {}/inner_edge.npy[{}] is false for an in-edge of owned node {}", v.p,
                v.pd, k, v.s + i);
          break;
        }
        if (g < v.es || g >= v.ee) {
          R.add("partition {}: {}/eid.npy[{}] = {} outside its edge range [{}, {})", v.p, v.pd, k,
                g, v.es, v.ee);
          break;
        }
        if (W.e_dst[g] >= 0) {
          R.add("partition {}: edge {} ({}/eid.npy[{}]) is stored twice as an inner edge", v.p, g,
                v.pd, k);
          break;
        }
        const int64_t o = v.oeid[k];
        if (o < 0 || o >= W.eid_space || W.orig_eid_seen[o]) {
          R.add("partition {}: {}/orig_eid.npy[{}] = {} is outside [0, {}) or repeated", v.p, v.pd,
                k, o, W.eid_space);
          break;
        }
        W.orig_eid_seen[o] = 1;
        W.e_src[g] = src;
        W.e_dst[g] = v.s + i;
        W.e_orig[g] = o;
        ++inner_count;
      } else {
        if (v.inner_edge[k]) {
          R.add("partition {}: {}/inner_edge.npy[{}] is true for an in-edge of halo node {}", v.p,
                v.pd, k, v.nid[i]);
          break;
        }
        if (g < 0 || g >= c.num_edges || (g >= v.es && g < v.ee)) {
          R.add(
              "partition {}: {}/eid.npy[{}] = {} of a halo edge is owned here or outside [0, "
              "{})",
              v.p, v.pd, k, g, c.num_edges);
          break;
        }
        W.halo_edges[v.p].push_back({g, src, v.nid[i], v.oeid[k]});
      }
    }
  }
  if (R.count() == v.before && inner_count != v.ee - v.es) {
    R.add("partition {}: {} inner edges stored but edge_ranges[{}] holds {}", v.p, inner_count, v.p,
          v.ee - v.es);
  }
}

// Node data (features, labels, masks) moved with their nodes: row i is the dataset's row of
// orig_nid[i].
void check_node_data(const PartitionConfig& c, const PartView& v, const LocalPartition& L,
                     const Dataset& original, Reporter& R) {
  for (const auto& sch : c.ndata) {
    auto it = original.ndata.find(sch.name);
    if (it == original.ndata.end()) {
      R.add("partition {}: node data '{}' is not in dataset {}", v.p, sch.name, original.name);
      continue;
    }
    const Array& src = it->second;
    const Array& got = L.ndata.at(sch.name);
    if (src.dtype() != got.dtype() || src.row_bytes() != got.row_bytes()) {
      R.add("partition {}: {}/{} is {} with rows of {} bytes; dataset has {} with {}", v.p, v.pd,
            sch.file, dtype_name(got.dtype()), got.row_bytes(), dtype_name(src.dtype()),
            src.row_bytes());
      continue;
    }
    const size_t rb = src.row_bytes();
    for (int64_t i = 0; i < v.ni; ++i) {
      const auto* a = static_cast<const char*>(got.raw()) + i * rb;
      const auto* b = static_cast<const char*>(src.raw()) + v.onid[i] * rb;
      if (std::memcmp(a, b, rb) != 0) {
        R.add("partition {}: {}/{} row {} (node {}) differs from dataset row {} of '{}'", v.p, v.pd,
              sch.file, i, v.s + i, v.onid[i], sch.name);
        break;
      }
    }
  }
}

// Edge data moved with their edges: row j is the dataset's row of the input edge that inner
// edge es + j came from (orig_eid mod num_input_edges: a reverse edge shares its input's row).
void check_edge_data(const PartitionConfig& c, const PartView& v, const LocalPartition& L,
                     const Dataset& original, const Whole& W, Reporter& R) {
  for (const auto& sch : c.edata) {
    auto it = original.edata.find(sch.name);
    if (it == original.edata.end()) {
      R.add("partition {}: edge data '{}' is not in dataset {}", v.p, sch.name, original.name);
      continue;
    }
    const Array& src = it->second;
    const Array& got = L.edata.at(sch.name);
    if (src.dtype() != got.dtype() || src.row_bytes() != got.row_bytes()) {
      R.add("partition {}: {}/{} dtype or row size differs from dataset '{}'", v.p, v.pd, sch.file,
            sch.name);
      continue;
    }
    const size_t rb = src.row_bytes();
    for (int64_t j = 0; j < v.ee - v.es; ++j) {
      const int64_t row = W.e_orig[v.es + j] % c.num_input_edges;
      const auto* a = static_cast<const char*>(got.raw()) + j * rb;
      const auto* b = static_cast<const char*>(src.raw()) + row * rb;
      if (std::memcmp(a, b, rb) != 0) {
        R.add("partition {}: {}/{} row {} (edge {}) differs from dataset row {} of '{}'", v.p, v.pd,
              sch.file, j, v.es + j, row, sch.name);
        break;
      }
    }
  }
}

// Every contract of partition p that it can be held to alone, in an order where each check
// may rely on the ones before; true if it holds them all.
bool check_partition(const PartitionConfig& c, int64_t p, const Dataset* original,
                     const ValidateOptions& opts, Whole& W, Reporter& R) {
  if (!check_files(c, p, opts, R)) {
    return false;
  }
  LocalPartition L;
  try {
    L = load_partition(c, p, {/*mmap=*/true, /*verify_checksums=*/false});
  } catch (const Error& e) {
    R.add("partition {}: {}", p, e.what());
    return false;
  }
  const PartView v(c, p, L, R.count());
  if (!check_indptr(v, R)) {
    return false;
  }
  check_indices(c, v, R);
  check_owned_nodes(c, v, R);
  if (R.count() > v.before) {
    return false;
  }
  check_relabelling(c, v, W, R);
  check_node_order(c, v, R);
  collect_halo_nodes(v, W);
  check_edges(c, v, W, R);
  if (R.count() > v.before) {
    return false;
  }
  if (original != nullptr) {
    check_node_data(c, v, L, *original, R);
    check_edge_data(c, v, L, *original, W, R);
  }
  return R.count() == v.before;
}

// ---- the whole partitioning ---------------------------------------------------------------

// Every node is owned by a partition and every edge stored as an inner edge somewhere.
void check_everything_owned(const PartitionConfig& c, const Whole& W, Reporter& R) {
  for (int64_t v = 0; v < c.num_nodes; ++v) {
    if (W.old_of_new[v] < 0) {
      R.add("node {} is owned by no partition (orig_nid has no entry)", v);
      break;
    }
  }
  for (int64_t g = 0; g < c.num_edges; ++g) {
    if (W.e_dst[g] < 0) {
      R.add("edge {} is stored in no partition as an inner edge", g);
      break;
    }
  }
}

// Halo nodes carry the orig_nid of their owner; halo edges match the owner's copy.
void check_halo_copies(const PartitionConfig& c, const Whole& W, Reporter& R) {
  for (int64_t p = 0; p < c.num_parts; ++p) {
    for (size_t i = 0; i < W.halo_nodes[p].size(); ++i) {
      if (W.old_of_new[W.halo_nodes[p][i]] != W.halo_orig[p][i]) {
        R.add("partition {}: halo node {} has orig_nid {} but its owner says {}", p,
              W.halo_nodes[p][i], W.halo_orig[p][i], W.old_of_new[W.halo_nodes[p][i]]);
        break;
      }
    }
    for (const auto& h : W.halo_edges[p]) {
      if (W.e_src[h.eid] != h.src || W.e_dst[h.eid] != h.dst || W.e_orig[h.eid] != h.orig) {
        R.add(
            "partition {}: halo edge {} ({} -> {}, orig {}) differs from its owner's copy ({} "
            "-> {}, orig {})",
            p, h.eid, h.src, h.dst, h.orig, W.e_src[h.eid], W.e_dst[h.eid], W.e_orig[h.eid]);
        break;
      }
    }
  }
}

// The in-edges of every node over new IDs (a CSC), built from the inner edges of all partitions.
struct InEdges {
  std::vector<int64_t> indptr, src, eids;
};
InEdges in_edges_of_inner_edges(const PartitionConfig& c, const Whole& W) {
  const int64_t N = c.num_nodes, E = c.num_edges;
  InEdges g{std::vector<int64_t>(static_cast<size_t>(N) + 1, 0),
            std::vector<int64_t>(static_cast<size_t>(E)),
            std::vector<int64_t>(static_cast<size_t>(E))};
  for (int64_t e = 0; e < E; ++e) {
    ++g.indptr[W.e_dst[e] + 1];
  }
  for (int64_t v = 0; v < N; ++v) {
    g.indptr[v + 1] += g.indptr[v];
  }
  std::vector<int64_t> pos(g.indptr.begin(), g.indptr.end() - 1);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t k = pos[W.e_dst[e]]++;
    g.src[k] = W.e_src[e];
    g.eids[k] = e;
  }
  return g;
}

// Halo nodes are exactly the k-hop in-neighbors not owned; halo edges exactly the in-edges of
// halo nodes within k - 1 hops. Recomputed from the inner edges of all partitions.
void check_halo_is_k_hop(const PartitionConfig& c, const Whole& W, Reporter& R) {
  const int64_t N = c.num_nodes, K = c.halo_hops;
  const InEdges in = in_edges_of_inner_edges(c, W);
  const std::vector<int64_t>& indptr = in.indptr;
  const std::vector<int64_t>& src = in.src;
  const std::vector<int64_t>& eids = in.eids;
  std::vector<int32_t> dist(static_cast<size_t>(N), -1);
  for (int64_t p = 0; p < c.num_parts && K > 0; ++p) {
    const int64_t s = c.node_offsets[p], e = c.node_offsets[p + 1];
    std::vector<int64_t> frontier, next, expect_halo;
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
      if (frontier.empty()) {
        break;  // no node further out: the remaining hops add nothing
      }
    }
    std::sort(expect_halo.begin(), expect_halo.end());
    const std::vector<int64_t>& halo = W.halo_nodes[p];
    if (expect_halo != halo) {
      std::vector<int64_t> missing, extra;
      std::set_difference(expect_halo.begin(), expect_halo.end(), halo.begin(), halo.end(),
                          std::back_inserter(missing));
      std::set_difference(halo.begin(), halo.end(), expect_halo.begin(), expect_halo.end(),
                          std::back_inserter(extra));
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
    for (const auto& h : W.halo_edges[p]) {
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
}

// Every edge keeps its endpoints through the relabelling: new edge g joins the new IDs of the
// dataset's edge orig_eid[g].
void check_endpoints_against_dataset(const PartitionConfig& c, const Dataset& original,
                                     const Whole& W, Reporter& R) {
  const Graph& og = original.graph;
  std::vector<int64_t> osrc(static_cast<size_t>(W.eid_space), -1),
      odst(static_cast<size_t>(W.eid_space), -1);
  for (int64_t v = 0; v < og.num_nodes; ++v) {
    for (int64_t k = og.indptr[v]; k < og.indptr[v + 1]; ++k) {
      const int64_t o = og.eid(k);
      if (o >= 0 && o < W.eid_space) {
        osrc[o] = og.indices[k];
        odst[o] = v;
      }
    }
  }
  for (int64_t g = 0; g < c.num_edges; ++g) {
    const int64_t o = W.e_orig[g];
    if (osrc[o] != W.old_of_new[W.e_src[g]] || odst[o] != W.old_of_new[W.e_dst[g]]) {
      R.add(
          "edge {} (orig_eid {}) joins original nodes {} -> {}, but the dataset's edge {} "
          "is {} -> {}",
          g, o, W.old_of_new[W.e_src[g]], W.old_of_new[W.e_dst[g]], o, osrc[o], odst[o]);
      break;
    }
  }
}

// Every node and edge array of the dataset is in the partitioning.
void check_dataset_data_listed(const PartitionConfig& c, const Dataset& original, Reporter& R) {
  for (const auto& kv : original.ndata) {
    const std::string& k = kv.first;
    const bool listed = std::any_of(c.ndata.begin(), c.ndata.end(),
                                    [&](const ArraySchema& s) { return s.name == k; });
    if (!listed) {
      R.add("dataset node data '{}' is missing from the partitioning", k);
    }
  }
  for (const auto& kv : original.edata) {
    const std::string& k = kv.first;
    const bool listed = std::any_of(c.edata.begin(), c.edata.end(),
                                    [&](const ArraySchema& s) { return s.name == k; });
    if (!listed) {
      R.add("dataset edge data '{}' is missing from the partitioning", k);
    }
  }
}

std::string summary_of(const PartitionConfig& c, const ValidateOptions& opts, bool with_dataset) {
  std::string s = fmt::format("{}: {} nodes, {} edges, {} partitions ({}, halo {})\n", c.graph_name,
                              c.num_nodes, c.num_edges, c.num_parts, c.part_method, c.halo_hops);
  for (int64_t p = 0; p < c.num_parts; ++p) {
    s += fmt::format(
        "  part {}: {} nodes [{}, {}), {} edges [{}, {}), {} halo nodes, {} local "
        "edges\n",
        p, c.node_offsets[p + 1] - c.node_offsets[p], c.node_offsets[p], c.node_offsets[p + 1],
        c.edge_offsets[p + 1] - c.edge_offsets[p], c.edge_offsets[p], c.edge_offsets[p + 1],
        c.parts[p].num_nodes - c.parts[p].num_inner_nodes, c.parts[p].num_edges);
  }
  s += fmt::format("checked: files{}, ownership, relabelling, edges, halo{}\n",
                   opts.verify_checksums ? " + checksums" : "",
                   with_dataset ? ", structure and features against the dataset" : "");
  return s;
}

}  // namespace

ValidationReport validate_partitions(const std::filesystem::path& config_json,
                                     const Dataset* original, const ValidateOptions& opts) {
  const PartitionConfig c = load_partition_config(config_json);
  ValidationReport report;
  Reporter R(report, opts.max_errors);

  check_config(c, R);
  if (original != nullptr) {
    check_dataset_matches(c, *original, R);
    if (R.count() > 0) {
      report.summary = "the dataset does not match the config; nothing else checked";
      return report;
    }
  }

  Whole W(c);
  bool all_ok = true;
  {
    // Each partition's files (checksums, arrays, contracts), then the whole-graph checks.
    Progress progress("validating partitions", c.num_parts, "parts");
    for (int64_t p = 0; p < c.num_parts; ++p) {
      all_ok = check_partition(c, p, original, opts, W, R) && all_ok;
      progress.update(p + 1);
    }
    progress.done();
  }
  if (all_ok) {
    check_everything_owned(c, W, R);
  }
  if (all_ok && R.count() == 0) {
    Progress progress("whole-graph checks", original != nullptr ? 5 : 3, "checks");
    check_halo_copies(c, W, R);
    progress.update(1);
    check_row_order_globally(c, W, R);
    progress.update(2);
    check_halo_is_k_hop(c, W, R);
    progress.update(3);
    if (original != nullptr) {
      check_endpoints_against_dataset(c, *original, W, R);
      progress.update(4);
      check_dataset_data_listed(c, *original, R);
      progress.update(5);
    }
    progress.done();
  }

  report.summary = summary_of(c, opts, original != nullptr);
  return report;
}

}  // namespace tessera
