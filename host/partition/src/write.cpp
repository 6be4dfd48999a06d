// SPDX-License-Identifier: Apache-2.0
// partition_dataset: assignment, relabelling, halo, and the atomic write of the on-disk format.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>

#include "internal.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera {

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

PartFile write_file(const std::filesystem::path& dir, const std::string& name, DType t,
                    std::vector<int64_t> shape, const void* data) {
  const std::filesystem::path path = dir / name;
  write_npy(path, t, shape, data);
  PartFile f;
  f.name = name;
  f.bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  // Checksum: the (small) header read back from the file, then the data from memory, rather
  // than reading the whole file again.
  size_t data_bytes = dtype_size(t);
  for (int64_t d : shape) {
    data_bytes *= static_cast<size_t>(d);
  }
  TESSERA_ASSERT(static_cast<size_t>(f.bytes) >= data_bytes, "{}: {} bytes on disk, {} of data",
                 path.string(), f.bytes, data_bytes);
  std::string head(static_cast<size_t>(f.bytes) - data_bytes, '\0');
  {
    std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(path.c_str(), "rb"), &std::fclose);
    TESSERA_EXPECTS(
        in != nullptr && std::fread(head.data(), 1, head.size(), in.get()) == head.size(), IOError,
        "cannot read back {} to checksum it", path.string());
  }
  f.crc32 = crc32_update(crc32_update(0, head.data(), head.size()), data, data_bytes);
  f.dtype = t;
  f.shape = std::move(shape);
  return f;
}

PartFile write_i64(const std::filesystem::path& dir, const std::string& name,
                   const std::vector<int64_t>& v) {
  return write_file(dir, name, DType::kInt64, {static_cast<int64_t>(v.size())}, v.data());
}

PartFile write_bool(const std::filesystem::path& dir, const std::string& name,
                    const std::vector<uint8_t>& v) {
  return write_file(dir, name, DType::kBool, {static_cast<int64_t>(v.size())}, v.data());
}

double max_over_mean(const std::vector<double>& v) {
  if (v.empty()) {
    return 1.0;
  }
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  if (sum <= 0) {
    return 1.0;
  }
  return *std::max_element(v.begin(), v.end()) / (sum / static_cast<double>(v.size()));
}

}  // namespace

double PartitionStats::node_balance() const {
  std::vector<double> v;
  for (const auto& p : parts) {
    v.push_back(static_cast<double>(p.inner_nodes));
  }
  return max_over_mean(v);
}

double PartitionStats::edge_balance() const {
  std::vector<double> v;
  for (const auto& p : parts) {
    v.push_back(static_cast<double>(p.inner_edges));
  }
  return max_over_mean(v);
}

double PartitionStats::constraint_balance(size_t c) const {
  std::vector<double> v;
  for (const auto& p : parts) {
    v.push_back(c < p.constraint_weights.size() ? static_cast<double>(p.constraint_weights[c])
                                                : 0.0);
  }
  return max_over_mean(v);
}

nlohmann::json PartitionStats::to_json() const {
  using json = nlohmann::json;
  json j;
  j["graph_name"] = graph_name;
  j["method"] = method;
  j["num_nodes"] = num_nodes;
  j["num_edges"] = num_edges;
  j["num_parts"] = num_parts;
  j["halo_hops"] = halo_hops;
  json ph = json::array();
  double total = 0;
  for (const auto& p : phases) {
    ph.push_back({{"name", p.name}, {"seconds", p.seconds}, {"peak_rss_bytes", p.peak_rss}});
    total += p.seconds;
  }
  j["phases"] = ph;
  j["total_seconds"] = total;
  j["peak_rss_bytes"] = peak_rss_bytes;
  j["feature_bytes"] = feature_bytes;
  j["edge_cut"] = edge_cut;
  j["undirected_edges"] = undirected_edges;
  j["edge_cut_fraction"] =
      undirected_edges > 0 ? static_cast<double>(edge_cut) / static_cast<double>(undirected_edges)
                           : 0.0;
  j["cut_edges"] = cut_edges;
  j["cut_edges_fraction"] =
      num_edges > 0 ? static_cast<double>(cut_edges) / static_cast<double>(num_edges) : 0.0;
  j["metis_objval"] = metis_objval;
  j["constraints"] = constraints;
  json parts_j = json::array();
  for (const auto& p : parts) {
    json pj = {{"inner_nodes", p.inner_nodes},
               {"inner_edges", p.inner_edges},
               {"halo_nodes", p.halo_nodes},
               {"local_edges", p.local_edges}};
    json cw = json::object();
    for (size_t c = 0; c < constraints.size() && c < p.constraint_weights.size(); ++c) {
      cw[constraints[c]] = p.constraint_weights[c];
    }
    pj["constraint_weights"] = cw;
    parts_j.push_back(pj);
  }
  j["parts"] = parts_j;
  json bal = {{"nodes", node_balance()}, {"edges", edge_balance()}};
  for (size_t c = 0; c < constraints.size(); ++c) {
    bal[constraints[c]] = constraint_balance(c);
  }
  j["balance"] = bal;
  j["warnings"] = warnings;
  j["config"] = config_path.string();
  return j;
}

std::string PartitionStats::summary() const {
  std::string s = fmt::format("partitioned {}: {} nodes, {} edges into {} parts ({}, halo {})\n",
                              graph_name, num_nodes, num_edges, num_parts, method, halo_hops);
  s += fmt::format("{:>6} {:>12} {:>12} {:>12} {:>12}", "part", "nodes", "edges", "halo nodes",
                   "local edges");
  for (const auto& c : constraints) {
    s += fmt::format(" {:>12}", c.size() > 12 ? c.substr(0, 12) : c);
  }
  s += "\n";
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto& q = parts[p];
    s += fmt::format("{:>6} {:>12} {:>12} {:>12} {:>12}", p, q.inner_nodes, q.inner_edges,
                     q.halo_nodes, q.local_edges);
    for (size_t c = 0; c < constraints.size(); ++c) {
      s += fmt::format(" {:>12}", c < q.constraint_weights.size() ? q.constraint_weights[c] : 0);
    }
    s += "\n";
  }
  const double frac = undirected_edges > 0 ? 100.0 * static_cast<double>(edge_cut) /
                                                 static_cast<double>(undirected_edges)
                                           : 0.0;
  s += fmt::format("edge cut: {} of {} undirected edges ({:.2f}%)", edge_cut, undirected_edges,
                   frac);
  if (metis_objval >= 0) {
    s += fmt::format("; METIS objective {}", metis_objval);
  }
  s += fmt::format("; stored edges crossing partitions: {} of {}\n", cut_edges, num_edges);
  s +=
      fmt::format("balance (max/mean): nodes {:.3f}, edges {:.3f}", node_balance(), edge_balance());
  for (size_t c = 0; c < constraints.size(); ++c) {
    s += fmt::format(", {} {:.3f}", constraints[c], constraint_balance(c));
  }
  s += "\n";
  for (const auto& w : warnings) {
    s += fmt::format("warning: {}\n", w);
  }
  if (!config_path.empty()) {
    s += fmt::format("config: {}\n", config_path.string());
  }
  return s;
}

namespace {

// The arguments of a partitioning run, checked before any work.
void check_partition_inputs(const Dataset& ds, const PartitionOptions& opts,
                            const WriteOptions& out) {
  TESSERA_EXPECTS(ds.finalized, ValueError, "{}: dataset is not finalized (no CSC built)", ds.name);
  check_partition_options(opts);  // what tessera partition checks too (METIS's 32-bit seed, ...)
  TESSERA_EXPECTS(valid_name(out.name), ValueError,
                  "--name '{}': use letters, digits, '_', '-' and '.' only", out.name);
  TESSERA_EXPECTS(!out.out_dir.empty(), ValueError, "--out: empty output folder");
  for (const auto& [k, a] : ds.ndata) {
    TESSERA_EXPECTS(valid_name(k), ValueError, "{}: node array name '{}' cannot be a file name",
                    ds.name, k);
  }
  for (const auto& [k, a] : ds.edata) {
    TESSERA_EXPECTS(valid_name(k), ValueError, "{}: edge array name '{}' cannot be a file name",
                    ds.name, k);
  }
  TESSERA_EXPECTS(ds.graph.num_nodes == ds.num_nodes, ValueError,
                  "{}: graph has {} nodes but the dataset says {}", ds.name, ds.graph.num_nodes,
                  ds.num_nodes);
}

// The partition of every node, by METIS or at random, with the balance weights it used (`w`,
// `ncon` per node, named by a.constraints). `spill` / `spilled` as partition_impl takes them:
// the CSC is parked beside `dir` while METIS runs.
Assignment assign_parts(const Dataset& ds, Graph* spill,
                        std::unique_ptr<detail::SpilledArrays>* spilled,
                        const PartitionOptions& opts, const AtomicDir& dir, PhaseTimer& timer,
                        std::vector<int32_t>& w) {
  std::vector<std::string> cnames;
  w = balance_weights(ds, opts, &cnames);
  detail::MetisHooks hooks;
  // Beside the temporary output folder, not in it: the spill file outlives partition_impl (the
  // caller reads it back last), and on NFS an open unlinked file would keep the folder's
  // removal after a failure from succeeding.
  const std::filesystem::path spill_dir = dir.path().parent_path();
  if (spill != nullptr) {
    hooks.before = [&] {
      *spilled = std::make_unique<detail::SpilledArrays>(
          spill_dir, std::vector<std::vector<int64_t>*>{&spill->indices, &spill->eids});
    };
    hooks.after = [&] {
      if (*spilled != nullptr) {
        (*spilled)->restore();
      }
    };
  }
  const int64_t P = opts.num_parts;
  Assignment a =
      opts.method == PartMethod::kMetis
          ? detail::assign_metis(ds.graph, P, w, static_cast<int>(cnames.size()), opts, &timer,
                                 detail::built_symmetric_simple(ds),
                                 spill != nullptr ? &hooks : nullptr)
          : assign_random(ds.num_nodes, P, static_cast<uint64_t>(opts.seed < 0 ? 0 : opts.seed));
  a.constraints = cnames;
  return a;
}

// The cut of the assignment (METIS's objective when it ran, else counted) and each part's
// constraint weights, into `st`.
void count_cut(const Graph& g, const Assignment& a, const std::vector<int32_t>& w,
               PartitionStats& st) {
  if (a.metis_objval >= 0) {
    // METIS's objective is the cut of the symmetric simple graph it was given (checked against
    // symmetric_cut in the tests); no need to walk the graph again.
    st.edge_cut = a.metis_objval;
    st.undirected_edges = a.metis_adj_entries / 2;
  } else {
    const SymmetricCut cut = symmetric_cut(g, a.part);
    st.edge_cut = cut.cut;
    st.undirected_edges = cut.undirected_edges;
  }
  st.cut_edges = directed_edge_cut(g, a.part);
  const auto ncon = static_cast<int64_t>(a.constraints.size());
  st.parts.resize(static_cast<size_t>(st.num_parts));
  for (auto& p : st.parts) {
    p.constraint_weights.assign(static_cast<size_t>(ncon), 0);
  }
  for (int64_t v = 0; v < g.num_nodes && ncon > 0; ++v) {
    for (int64_t c = 0; c < ncon; ++c) {
      st.parts[a.part[v]].constraint_weights[c] += w[v * ncon + c];
    }
  }
}

// The config of the partitioning, its parts still to be written.
PartitionConfig make_config(const Dataset& ds, const PartitionOptions& opts,
                            const PartitionStats& st, const Relabelled& r) {
  PartitionConfig c;
  c.graph_name = st.graph_name;  // DGL: the config file and graph_name agree
  c.num_nodes = st.num_nodes;
  c.num_edges = st.num_edges;  // the graph is parked by now with low_memory
  c.num_input_edges = ds.num_input_edges;
  c.num_parts = opts.num_parts;
  c.part_method = part_method_name(opts.method);
  c.halo_hops = opts.halo_hops;
  c.node_order = node_order_name(opts.node_order);
  c.local_indices = opts.halo_hops > 0;
  c.build = ds.build;
  c.node_offsets = r.node_offsets;
  c.edge_offsets = r.edge_offsets;
  for (const auto& [k, arr] : ds.ndata) {
    c.ndata.push_back({k, arr.dtype(), arr.shape(), "node_" + k + ".npy"});
  }
  for (const auto& [k, arr] : ds.edata) {
    std::vector<int64_t> shape = arr.shape();
    shape[0] = c.num_edges;  // one row per (possibly symmetrized) edge of the partitioned graph
    c.edata.push_back({k, arr.dtype(), shape, "edge_" + k + ".npy"});
  }
  c.parts.resize(static_cast<size_t>(opts.num_parts));
  return c;
}

// Writes partition p's folder under `root`: its local graph, then its node and edge data;
// fills c.parts[p] and st.parts[p]'s counts.
void write_part(const Dataset& ds, const Relabelled& r, int64_t p, int halo_hops,
                const std::filesystem::path& root, PartitionConfig& c, PartitionStats& st) {
  LocalGraph L = build_local(r, p, halo_hops);
  PartInfo info;
  info.dir = fmt::format("part{}", p);
  const std::filesystem::path pd = root / info.dir;
  std::filesystem::create_directory(pd);
  info.num_nodes = static_cast<int64_t>(L.nid.size());
  info.num_inner_nodes = L.num_inner_nodes;
  info.num_edges = static_cast<int64_t>(L.eid.size());
  info.num_inner_edges = L.num_inner_edges;
  info.files.push_back(write_i64(pd, "indptr.npy", L.indptr));
  info.files.push_back(write_i64(pd, "indices.npy", L.indices));
  info.files.push_back(write_i64(pd, "eid.npy", L.eid));
  info.files.push_back(write_i64(pd, "nid.npy", L.nid));
  info.files.push_back(write_bool(pd, "inner_node.npy", L.inner_node));
  info.files.push_back(write_bool(pd, "inner_edge.npy", L.inner_edge));
  info.files.push_back(write_i64(pd, "orig_nid.npy", L.orig_nid));
  info.files.push_back(write_i64(pd, "orig_eid.npy", L.orig_eid));
  auto& ps = st.parts[p];
  ps.inner_nodes = L.num_inner_nodes;
  ps.inner_edges = L.num_inner_edges;
  ps.halo_nodes = info.num_nodes - L.num_inner_nodes;
  ps.local_edges = info.num_edges;
  L = LocalGraph();  // free before gathering features
  const int64_t s = r.node_offsets[p], e = r.node_offsets[p + 1];
  for (const auto& sch : c.ndata) {
    const Array rows = ds.ndata.at(sch.name).take_rows(r.orig_nid.data() + s, e - s);
    info.files.push_back(write_file(pd, sch.file, rows.dtype(), rows.shape(), rows.raw()));
  }
  if (!c.edata.empty()) {
    const int64_t es = r.edge_offsets[p], ee = r.edge_offsets[p + 1];
    std::vector<int64_t> idx(static_cast<size_t>(ee - es));
    for (int64_t k = es; k < ee; ++k) {
      idx[k - es] = r.csc.eids[k] % ds.num_input_edges;  // reverse edge E + i takes row i
    }
    for (const auto& sch : c.edata) {
      const Array rows = ds.edata.at(sch.name).take_rows(idx.data(), ee - es);
      info.files.push_back(write_file(pd, sch.file, rows.dtype(), rows.shape(), rows.raw()));
    }
  }
  c.parts[p] = std::move(info);
}

// Writes the config file `root`/`config_name`, with where the data came from and the options
// and cut of the run.
void write_config(PartitionConfig& c, const PartitionOptions& opts, const WriteOptions& out,
                  const Dataset& ds, const PartitionStats& st, const std::filesystem::path& root,
                  const std::string& config_name) {
  nlohmann::json extra = nlohmann::json::object();
  // An existing path is recorded absolute, so that a run from another folder can tell whether
  // a partitioning it finds is of its dataset; a spec (rmat:21,25) as given.
  std::error_code ec;
  const bool is_path = !out.source_path.empty() && std::filesystem::exists(out.source_path, ec);
  const std::string source =
      is_path ? std::filesystem::absolute(out.source_path, ec).lexically_normal().string()
              : out.source_path;
  extra["source"] = {{"path", source}, {"format", ds.format}};
  if (is_path) {  // what the dataset's files were: a cached partitioning of it can be checked
    extra["source"]["fingerprint"] = dataset_fingerprint(out.source_path);
  }
  nlohmann::json po = {{"num_parts", opts.num_parts},
                       {"method", part_method_name(opts.method)},
                       {"balance_masks", opts.balance_masks},
                       {"balance_edges", opts.balance_edges},
                       {"halo_hops", opts.halo_hops},
                       {"node_order", node_order_name(opts.node_order)},
                       {"seed", opts.seed},
                       {"ufactor", opts.ufactor},
                       {"constraints", st.constraints}};
  extra["partition_options"] = po;
  extra["edge_cut"] = st.edge_cut;
  extra["cut_edges"] = st.cut_edges;
  c.json = extra;
  std::ofstream f(root / config_name);
  f << config_to_string(c) << "\n";
  f.close();
  TESSERA_EXPECTS(f.good(), IOError, "{}: write failed (disk full?)",
                  (root / config_name).string());
}

// `spill`: ds.graph, mutable, when its CSC may be parked on disk (low_memory): during METIS
// and from relabel on, when only the relabelled copy is read. `spilled` holds the parked
// arrays; the caller reads them back.
PartitionStats partition_impl(const Dataset& ds, Graph* spill,
                              std::unique_ptr<detail::SpilledArrays>* spilled,
                              const PartitionOptions& opts, const WriteOptions& out,
                              PhaseTimer& timer) {
  check_partition_inputs(ds, opts, out);
  const Graph& g = ds.graph;
  const int64_t P = opts.num_parts;

  // --overwrite replaces the whole output folder: refuse unless it holds only what a previous
  // run writes, so a mistyped --out cannot wipe a real folder. Fails now (before any work) if
  // the output exists and --overwrite was not given.
  AtomicDir dir(out.out_dir, out.overwrite, [&out](const std::string& f, bool is_dir) {
    return is_dir ? is_partition_folder(out.out_dir / f) : is_partition_config(out.out_dir / f);
  });

  PartitionStats st;
  st.graph_name = out.name.empty() ? ds.name : out.name;
  st.method = part_method_name(opts.method);
  st.num_nodes = ds.num_nodes;
  st.num_edges = g.num_edges();
  st.num_parts = P;
  st.halo_hops = opts.halo_hops;
  for (const auto& kv : ds.ndata) {
    st.feature_bytes += static_cast<int64_t>(kv.second.nbytes());
  }
  for (const auto& kv : ds.edata) {
    st.feature_bytes += static_cast<int64_t>(kv.second.nbytes());
  }

  timer.begin(opts.method == PartMethod::kMetis ? "METIS adjacency" : "random partition");
  std::vector<int32_t> w;
  Assignment a = assign_parts(ds, spill, spilled, opts, dir, timer, w);
  st.constraints = a.constraints;
  st.metis_objval = a.metis_objval;
  st.warnings = a.warnings;
  if (spill != nullptr && *spilled != nullptr && detail::on_tmpfs(dir.path().parent_path())) {
    st.warnings.push_back(fmt::format(
        "--low-memory: {} is on tmpfs, so the CSR parked there still took memory; put --out on "
        "a disk to lower the peak",
        out.out_dir.string()));
  }

  timer.begin("edge cut");
  count_cut(g, a, w, st);

  timer.begin("relabel");
  const Relabelled r = relabel(g, a, opts.node_order);
  std::vector<int32_t>().swap(a.part);
  if (spill != nullptr && *spilled != nullptr) {
    (*spilled)->park();  // from here on only the relabelled copy is read
  }

  timer.begin("halo + write");
  PartitionConfig c = make_config(ds, opts, st, r);
  Progress progress("writing partitions", P, "parts");
  // One partition at a time: build_local is parallel inside, and writing two partitions
  // concurrently on top of it was slower (oversubscribed) and holds two local graphs.
  for (int64_t p = 0; p < P; ++p) {
    write_part(ds, r, p, opts.halo_hops, dir.path(), c, st);
    progress.update(p + 1);
  }
  progress.update(P);
  progress.done();
  const std::string config_name = out.name + ".json";
  write_config(c, opts, out, ds, st, dir.path(), config_name);
  dir.commit();
  timer.end();
  st.config_path = dir.final_path() / config_name;
  st.phases = timer.phases();
  st.peak_rss_bytes = peak_rss_bytes();
  return st;
}

}  // namespace

PartitionStats partition_dataset(const Dataset& ds, const PartitionOptions& opts,
                                 const WriteOptions& out, PhaseTimer& timer) {
  TESSERA_EXPECTS(!opts.low_memory, ValueError,
                  "low_memory releases the dataset's graph during METIS: pass a mutable dataset");
  return partition_impl(ds, nullptr, nullptr, opts, out, timer);
}

namespace {

// A dataset whose CSC is gone: empty graph, not finalized, so every later use says so.
void unfinalize(Dataset& ds) {
  ds.graph = Graph();
  ds.finalized = false;
}

PartitionStats partition_mutable(Dataset& ds, const PartitionOptions& opts, const WriteOptions& out,
                                 PhaseTimer& timer, bool restore) {
  const bool spill = opts.low_memory && opts.method == PartMethod::kMetis;
  std::unique_ptr<detail::SpilledArrays> spilled;
  PartitionStats st;
  try {
    st = partition_impl(ds, spill ? &ds.graph : nullptr, &spilled, opts, out, timer);
  } catch (...) {
    if (spilled != nullptr && spilled->parked()) {
      try {
        spilled->restore();  // ds as it was, whatever failed
      } catch (...) {
        // The first error is the one to report; ds cannot be trusted any more.
        unfinalize(ds);
      }
    }
    throw;
  }
  if (spilled != nullptr && spilled->parked()) {
    if (restore) {
      timer.begin("restore CSR");  // the caller gets ds back as it gave it
      try {
        spilled->restore();
      } catch (...) {
        unfinalize(ds);
        throw;
      }
      timer.end();
      st.phases = timer.phases();
      st.peak_rss_bytes = peak_rss_bytes();
    } else {
      unfinalize(ds);  // consumed: any later use fails cleanly ("not finalized")
    }
  }
  return st;
}

}  // namespace

PartitionStats partition_dataset(Dataset& ds, const PartitionOptions& opts, const WriteOptions& out,
                                 PhaseTimer& timer) {
  return partition_mutable(ds, opts, out, timer, true);
}

PartitionStats partition_dataset(Dataset&& ds, const PartitionOptions& opts,
                                 const WriteOptions& out, PhaseTimer& timer) {
  return partition_mutable(ds, opts, out, timer, false);
}

}  // namespace tessera
