// SPDX-License-Identifier: Apache-2.0
// host/distributed against the unpartitioned graph: sampling and DistTensor reads through a
// partitioned DistGraph (1, 2 and 4 ranks; local, ucx over tcp and shared memory) equal
// ops::sample_neighbors / NeighborSampler and the dataset's arrays after mapping IDs through
// orig_nid / orig_eid, for the same keys. Plus concurrent writers, idempotent creation, node_split,
// and faults (a killed rank, a config of another partitioning). Every multi-rank case forks real
// processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "dist_fixtures.hpp"
#include "state.hpp"  // private: the sampling structure a DeviceGraph places
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/dist/device_sampling.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/ops/sampler.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using dist::auto_min_get_bytes;
using dist::DistGraph;
using dist::DistTensor;
using dist::PartPolicy;
using dist::Runtime;

// --- partitions, made once per test process ------------------------------------------------

fs::path dataset_path(const std::string& name) {
  return dataset(name);
}

ScratchCleanup cleanup{"dist-test"};

/// `tessera partition` of a dataset in data/, cached per process.
fs::path partitions(const std::string& name, int parts, const std::string& method = "metis",
                    int halo = 1) {
  return cached_partitions("dist-test", name, parts, method, halo);
}

/// The partitioning `cfg` (halo_hops <= 1: no halo edges) rewritten as format version 1 stored
/// it: each row sorted by (stored source, original edge ID) instead of the unpartitioned graph's
/// order, its original edge IDs and edge data moved along, edge IDs still the positions. The
/// loader must put every row back into the original order (sampling equals the standalone
/// sampler's only if it does).
fs::path as_format_v1(const fs::path& cfg) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  const fs::path out = cfg.parent_path().string() + "-v1";
  fs::path ncfg = out / cfg.filename();
  if (fs::exists(ncfg)) {
    return ncfg;
  }
  fs::remove_all(out);
  fs::copy(cfg.parent_path(), out, fs::copy_options::recursive);
  nlohmann::json j;
  {
    std::ifstream in(ncfg);
    in >> j;
  }
  const PartitionConfig c = load_partition_config(ncfg);
  int64_t rows_changed = 0;
  for (int64_t p = 0; p < c.num_parts; ++p) {
    const fs::path dir = out / c.parts[p].dir;
    const Array indptr = read_npy(dir / "indptr.npy");
    Array indices = read_npy(dir / "indices.npy"), oeid = read_npy(dir / "orig_eid.npy");
    const auto* q = indptr.data<int64_t>();
    const int64_t nl = indptr.rows() - 1;
    std::vector<std::string> files{"indices.npy", "orig_eid.npy"};
    std::vector<Array> edge_data;
    for (const auto& s : c.edata) {
      files.push_back(s.file);
      edge_data.push_back(read_npy(dir / s.file));
    }
    auto* idx = indices.mut_data<int64_t>();
    auto* oe = oeid.mut_data<int64_t>();
    for (int64_t i = 0; i < nl; ++i) {
      const int64_t b = q[i], d = q[i + 1] - b;
      std::vector<int64_t> perm(static_cast<size_t>(d));
      std::iota(perm.begin(), perm.end(), int64_t{0});
      std::sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) {
        return std::pair(idx[b + x], oe[b + x]) < std::pair(idx[b + y], oe[b + y]);
      });
      if (std::is_sorted(perm.begin(), perm.end())) {
        continue;
      }
      ++rows_changed;
      auto apply = [&](uint8_t* base, size_t rb) {
        std::vector<uint8_t> row(static_cast<size_t>(d) * rb);
        for (int64_t t = 0; t < d; ++t) {
          std::memcpy(row.data() + t * rb, base + (b + perm[t]) * rb, rb);
        }
        std::memcpy(base + b * rb, row.data(), row.size());
      };
      apply(reinterpret_cast<uint8_t*>(idx), 8);
      apply(reinterpret_cast<uint8_t*>(oe), 8);
      for (Array& a : edge_data) {
        apply(static_cast<uint8_t*>(a.raw_mut()), a.row_bytes());
      }
    }
    write_npy(dir / "indices.npy", indices);
    write_npy(dir / "orig_eid.npy", oeid);
    for (size_t f = 0; f < edge_data.size(); ++f) {
      write_npy(dir / c.edata[f].file, edge_data[f]);
    }
    for (const auto& name : files) {
      auto& f = j["partitions"][p]["files"][name];
      f["bytes"] = fs::file_size(dir / name);
      f["crc32"] = crc32_hex(file_crc32(dir / name));
    }
  }
  EXPECT_GT(rows_changed, 0) << "no row of " << cfg << " differs in version 1's order";
  j["format_version"] = 1;
  std::ofstream(ncfg) << j.dump(1);
  return ncfg;
}

struct Case {
  std::string dataset;
  int parts;
  std::string tls;      // "" = local (one rank)
  std::string variant;  // "", "halo0" (no halo: remote sources), "requests" (no one-sided
                        // gets), "v1" / "v1halo0" (rows stored in format version 1's order)
  std::string label() const {
    std::string t = tls.empty() ? "local" : (tls == "tcp" ? "tcp" : "shm");
    return dataset + "_" + std::to_string(parts) + "_" + t + (variant.empty() ? "" : "_" + variant);
  }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.label();
}

std::string shm_tls() {
  return "posix,sysv,cma";
}

// --- the oracle: global ID maps read from every partition on disk ------------------------------

struct IdMaps {
  std::vector<int64_t> orig_nid;  // new node ID -> original
  std::vector<int64_t> new_nid;   // original -> new
  std::vector<int64_t> orig_eid;  // new edge ID -> original (CSC edge space)
};

IdMaps load_maps(const PartitionConfig& c) {
  IdMaps m;
  m.orig_nid.assign(static_cast<size_t>(c.num_nodes), -1);
  m.new_nid.assign(static_cast<size_t>(c.num_nodes), -1);
  m.orig_eid.assign(static_cast<size_t>(c.num_edges), -1);
  for (int64_t p = 0; p < c.num_parts; ++p) {
    const LocalPartition lp = load_partition(c, p);
    const int64_t lo = c.node_offsets[p];
    const auto* on = lp.orig_nid.data<int64_t>();
    for (int64_t i = 0; i < lp.num_inner_nodes; ++i) {
      m.orig_nid[lo + i] = on[i];
      m.new_nid[on[i]] = lo + i;
    }
    const auto* inner = lp.inner_edge.data<uint8_t>();
    const auto* eid = lp.eid.data<int64_t>();
    const auto* oe = lp.orig_eid.data<int64_t>();
    for (int64_t k = 0; k < lp.num_edges(); ++k)
      if (inner[k]) m.orig_eid[eid[k]] = oe[k];
  }
  return m;
}

std::vector<int64_t> map_ids(const std::vector<int64_t>& v, const std::vector<int64_t>& m) {
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = m[v[i]];
  return out;
}

// Distributed blocks (global new IDs) equal the standalone sampler's `want` (original IDs) after
// ID mapping, layer by layer; returns the number of edges compared.
int64_t check_blocks(const std::vector<ops::Block>& blocks, const std::vector<ops::Block>& want,
                     const IdMaps& m, const std::string& what) {
  RANK_CHECK(blocks.size() == want.size(), "{}: {} layers, {} standalone", what, blocks.size(),
             want.size());
  int64_t edges = 0;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const auto w = fmt::format("{} block {}", what, l);
    RANK_CHECK(blocks[l].num_dst == want[l].num_dst, "{}: num_dst", w);
    RANK_CHECK(map_ids(blocks[l].src_nodes, m.orig_nid) == want[l].src_nodes,
               "{}: src_nodes differ", w);
    RANK_CHECK(blocks[l].src == want[l].src && blocks[l].dst == want[l].dst,
               "{}: local edges differ", w);
    RANK_CHECK(map_ids(blocks[l].eids, m.orig_eid) == want[l].eids, "{}: eids differ", w);
    edges += blocks[l].num_edges();
  }
  return edges;
}

void check_edges(const ops::SampledEdges& d, const ops::SampledEdges& ref, const IdMaps& m,
                 const std::string& what) {
  RANK_CHECK(d.size() == ref.size(), "{}: {} edges distributed, {} standalone", what, d.size(),
             ref.size());
  for (int64_t i = 0; i < d.size(); ++i) {
    RANK_CHECK(m.orig_nid[d.src[i]] == ref.src[i] && m.orig_nid[d.dst[i]] == ref.dst[i] &&
                   m.orig_eid[d.eid[i]] == ref.eid[i],
               "{}: edge {} is ({} -> {}, e{}) mapped to ({} -> {}, e{}); standalone has ({} -> "
               "{}, e{})",
               what, i, d.src[i], d.dst[i], d.eid[i], m.orig_nid[d.src[i]], m.orig_nid[d.dst[i]],
               m.orig_eid[d.eid[i]], ref.src[i], ref.dst[i], ref.eid[i]);
  }
}

void check_rows(const Array& got, const Array& want_all, const std::vector<int64_t>& orig,
                const std::string& what) {
  const size_t rb = want_all.row_bytes();
  RANK_CHECK(got.row_bytes() == rb && got.rows() == static_cast<int64_t>(orig.size()),
             "{}: shape {}", what, got.shape_str());
  const auto* g = static_cast<const uint8_t*>(got.raw());
  const auto* w = static_cast<const uint8_t*>(want_all.raw());
  for (size_t i = 0; i < orig.size(); ++i)
    RANK_CHECK(std::memcmp(g + i * rb, w + orig[i] * rb, rb) == 0,
               "{}: row {} (original node {}) differs", what, i, orig[i]);
}

// What DistDeviceSampler places on a GPU (SampleGraph::placed_arrays: this rank's rows with new
// neighbor IDs, keyed by original ID; with `weights` the CPU path's, in the same storage order),
// sampled by the CPU twin at the rows of the seeds this rank owns, must be the whole graph's
// sample of those nodes (`ref_graph`).
void check_placed_rows(const DistGraph& g, const std::vector<int64_t>& seeds,
                       const ops::SampleOptions& r, const ops::SamplingGraph& ref_graph,
                       const std::string& weights, const IdMaps& m, const std::string& what) {
  const dist::detail::SampleGraph& sg = *g.state().sg;
  std::vector<int64_t> mine, rows, renamed;
  for (const int64_t v : seeds) {
    if (v >= sg.lo && v < sg.hi) {
      mine.push_back(v);
      rows.push_back(v - sg.lo);
    }
  }
  RANK_CHECK(!mine.empty(), "{}: no seed of this rank among {}", what, seeds.size());
  ops::SamplingGraphOptions prep = ops::SamplingGraphOptions::as_stored();
  std::vector<float> w;
  if (!weights.empty()) {
    w = dist::detail::placed_weights(sg, weights);
    prep.weights = w;
  }
  const ops::SamplingGraph placed(sg.placed_arrays(renamed), prep);
  RANK_CHECK(renamed.empty() == (sg.local_nid == nullptr), "{}: renamed {} neighbors", what,
             renamed.size());
  ops::SampledEdges c = ops::sample_neighbors(placed, rows, r);
  for (auto& d : c.dst) {
    d += sg.lo;  // the row's node
  }
  check_edges(c, ops::sample_neighbors(ref_graph, map_ids(mine, m.orig_nid), r), m,
              "placed rows " + what);
}

// The body of the equality test on one rank.
std::string equality_body(const Case& c, const fs::path& cfg_path) {
  auto rt = Runtime::create();
  const PartitionConfig cfg = load_partition_config(cfg_path);
  DistGraph g(rt, cfg.graph_name, cfg_path);
  RANK_CHECK(g.num_nodes() == cfg.num_nodes && g.num_edges() == cfg.num_edges, "counts");
  ReadOptions ro;
  ro.build = cfg.build;
  const Dataset ds = read_dataset(dataset_path(c.dataset), Format::kAuto, ro);
  const IdMaps m = load_maps(cfg);
  const int me = rt->rank(), world = rt->world_size();

  // node_split: even chunks cover the training set exactly once.
  const DistTensor& train = g.node_data("train_mask");
  const auto mine = dist::node_split(train, true);
  const auto owned = dist::node_split(train, false);
  const Array train_all = [&] {
    std::vector<int64_t> all(static_cast<size_t>(g.num_nodes()));
    for (int64_t i = 0; i < g.num_nodes(); ++i)
      all[i] = i;
    return train.read(all);
  }();
  RANK_CHECK(mine == dist::node_split(train_all, g.book(), me, true),
             "node_split even: host "
             "and DistTensor variants differ");
  RANK_CHECK(owned == dist::node_split(train_all, g.book(), me, false), "node_split local");
  const auto [nlo, nhi] = g.local_node_range();
  for (int64_t v : owned)
    RANK_CHECK(v >= nlo && v < nhi, "node_split(force_even=false) returned {} not owned", v);
  int64_t sizes[2] = {static_cast<int64_t>(mine.size()), static_cast<int64_t>(mine.size())};
  rt->transport().all_reduce(&sizes[0], 1, transport::DType::i64, transport::ReduceOp::max);
  rt->transport().all_reduce(&sizes[1], 1, transport::DType::i64, transport::ReduceOp::min);
  RANK_CHECK(sizes[0] - sizes[1] <= 1, "force_even sizes range from {} to {}", sizes[1], sizes[0]);

  // Seeds: this rank's share of the training set, plus nodes of every partition.
  std::vector<int64_t> seeds = mine;
  for (int64_t v = me; v < g.num_nodes(); v += 97)
    seeds.push_back(v);
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());

  ops::NeighborSamplerOptions so;
  so.fanouts = {10, 5};
  ops::NeighborSampler ref(ds.graph, so);
  dist::DistNeighborSampler dsamp(g, so.fanouts);
  const DistTensor& feat = g.node_data("feat");
  const DistTensor& label = g.node_data("label");
  int64_t edges_checked = 0, rows_checked = 0;
  const int64_t batch = 64;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int64_t b = 0; b * batch < static_cast<int64_t>(seeds.size()); ++b) {
      std::vector<int64_t> s(seeds.begin() + b * batch,
                             seeds.begin() + std::min<int64_t>(seeds.size(), (b + 1) * batch));
      const RngKey key = ops::make_rng_key(11, epoch, b, 0);
      const auto blocks = dsamp.sample_blocks(s, key);
      const auto want = ref.sample_blocks(map_ids(s, m.orig_nid), key);
      edges_checked += check_blocks(blocks, want, m, fmt::format("epoch {} batch {}", epoch, b));
      // Input features and labels of the batch.
      const auto& input = blocks.front().src_nodes;
      const auto orig = map_ids(input, m.orig_nid);
      check_rows(feat.read(input), ds.ndata.at("feat"), orig, "feat");
      check_rows(label.read(input), ds.ndata.at("label"), orig, "label");
      rows_checked += static_cast<int64_t>(input.size());
    }
  }
  // Every rank gathers in the same step (the same number of rounds on every rank).
  for (int round = 0; round < 2; ++round) {
    std::vector<int64_t> ids;
    for (int64_t v = (me * 31 + round * 7) % 13; v < g.num_nodes(); v += 13)
      ids.push_back(v);
    check_rows(feat.read_collective(ids), ds.ndata.at("feat"), map_ids(ids, m.orig_nid),
               "read_collective feat");
  }
  // One layer, with replacement, all neighbors, and repeated seeds, over the whole graph.
  std::vector<int64_t> any;
  std::mt19937_64 rng(me + 5);
  for (int i = 0; i < 300; ++i)
    any.push_back(static_cast<int64_t>(rng() % g.num_nodes()));
  for (auto [fanout, replace] : {std::pair<int64_t, bool>{3, true}, {-1, false}, {2, false}}) {
    dist::DistSampleOptions o;
    o.fanout = fanout;
    o.replace = replace;
    o.key = ops::make_rng_key(3, 1, 2, 1);
    ops::SampleOptions r;
    r.fanout = fanout;
    r.replace = replace;
    r.key = o.key;
    const auto ref = ops::sample_neighbors(ds.graph, map_ids(any, m.orig_nid), r);
    check_edges(dist::sample_neighbors(g, any, o), ref, m,
                fmt::format("sample_neighbors fanout {} replace {}", fanout, replace));
    check_placed_rows(g, any, r, ops::SamplingGraph::as_stored(ds.graph), "", m,
                      fmt::format("fanout {} replace {}", fanout, replace));
  }
  // Errors name the argument.
  bool threw = false;
  try {
    std::vector<int64_t> bad{0, g.num_nodes()};
    feat.read(bad);
  } catch (const IndexError& e) {
    threw = std::string(e.what()).find("position 1") != std::string::npos;
  }
  RANK_CHECK(threw, "an out-of-range row was not refused");
  rt->barrier();
  return fmt::format("rank {}/{}: {} seeds, {} edges, {} rows checked", me, world, seeds.size(),
                     edges_checked, rows_checked);
}

class DistEqualsStandalone : public ::testing::TestWithParam<Case> {};

TEST_P(DistEqualsStandalone, SamplingAndReads) {
  const Case c = GetParam();
  if (c.parts > 1) {
    TESSERA_SKIP_WITHOUT_UCX();
  }
  const bool halo0 = c.variant == "halo0" || c.variant == "v1halo0";
  fs::path cfg = partitions(c.dataset, c.parts, "metis", halo0 ? 0 : 1);
  if (c.variant.rfind("v1", 0) == 0) {
    cfg = as_format_v1(cfg);
  }
  JobSpec s = job(c.parts, c.tls, 90);
  if (c.variant == "requests") s.env["TESSERA_DIST_GET"] = "0";
  auto res = run_ranks(s, [&](int) { return equality_body(c, cfg); });
  for (const auto& r : res)
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  std::cout << describe(res);
}

std::vector<Case> equality_cases() {
  std::vector<Case> v{{"cora", 1, "", ""}, {"citeseer", 1, "", ""}};
  v.push_back({"cora", 2, "tcp", ""});
  v.push_back({"cora", 2, shm_tls(), ""});
  v.push_back({"cora", 4, "tcp", ""});
  v.push_back({"cora", 4, shm_tls(), ""});
  v.push_back({"citeseer", 2, shm_tls(), ""});
  v.push_back({"citeseer", 4, "tcp", ""});
  v.push_back({"cora", 2, "tcp", "halo0"});
  v.push_back({"cora", 4, "tcp", "requests"});
  v.push_back({"cora", 1, "", "v1"});
  v.push_back({"citeseer", 2, shm_tls(), "v1"});
  v.push_back({"cora", 2, "tcp", "v1halo0"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Datasets, DistEqualsStandalone, ::testing::ValuesIn(equality_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label(); });

// --- weighted sampling -------------------------------------------------------------------------

/// Synthetic weights of input edge i: every 5th edge 0 (never drawn), others spread over
/// [0.01, 10), so a draw depends on which weight sits at which storage position.
std::vector<float> synthetic_weights(int64_t num_input_edges) {
  std::vector<float> w(static_cast<size_t>(num_input_edges));
  for (int64_t i = 0; i < num_input_edges; ++i)
    w[i] = i % 5 == 3 ? 0.0f : static_cast<float>((i * 2654435761ull) % 1000) / 100.0f + 0.01f;
  return w;
}

/// Cora with edge feature "w" (synthetic_weights, one per input edge) in `parts` parts.
fs::path weighted_partitions(int parts) {
  static std::map<int, fs::path> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(parts);
  if (it != cache.end()) return it->second;
  Dataset ds = read_dataset(dataset_path("cora"), Format::kNpy, symmetric_read_options());
  ds.edata["w"] = Array::from_vector(synthetic_weights(ds.num_input_edges));
  PartitionOptions po;
  po.num_parts = parts;
  WriteOptions wo;
  wo.out_dir = scratch_dir("dist-test") / fmt::format("cora-weighted-{}", parts);
  wo.name = "cora";
  PhaseTimer timer;
  set_quiet(true);
  partition_dataset(ds, po, wo, timer);
  return cache[parts] = wo.out_dir / "cora.json";
}

// The body of the weighted equality test on one rank.
std::string weighted_body(const fs::path& cfg_path) {
  auto rt = Runtime::create();
  const PartitionConfig cfg = load_partition_config(cfg_path);
  DistGraph g(rt, cfg.graph_name, cfg_path);
  ReadOptions ro;
  ro.build = cfg.build;
  const Dataset ds = read_dataset(dataset_path("cora"), Format::kNpy, ro);
  const std::vector<float> by_input = synthetic_weights(ds.num_input_edges);
  const std::vector<float> w = ops::weights_in_storage_order(ds.graph, by_input);
  const IdMaps m = load_maps(cfg);
  const int me = rt->rank(), world = rt->world_size();
  // A GPU placement's weights before the CPU path has built (and cached) its own: the same.
  const std::vector<float> placed_w = dist::detail::placed_weights(*g.state().sg, "w");
  const auto zero_weight = [&](int64_t new_eid) {
    return by_input[m.orig_eid[new_eid] % ds.num_input_edges] == 0.0f;
  };
  int64_t edges_checked = 0;
  // Blocks: seeds of every partition, with and without replacement.
  std::vector<int64_t> seeds;
  for (int64_t v = me; v < g.num_nodes(); v += 3 * world)
    seeds.push_back(v);
  for (bool replace : {false, true}) {
    ops::NeighborSamplerOptions so;
    so.fanouts = {10, 5};
    so.replace = replace;
    ops::SamplingGraphOptions prep;
    prep.weights = w;
    ops::NeighborSampler ref(ds.graph, so, prep);
    dist::DistNeighborSampler dsamp(g, so.fanouts, replace, "w");
    RANK_CHECK(dsamp.weights_name() == "w", "weights_name");
    const int64_t batch = 64;
    for (int64_t b = 0; b * batch < static_cast<int64_t>(seeds.size()); ++b) {
      std::vector<int64_t> s(seeds.begin() + b * batch,
                             seeds.begin() + std::min<int64_t>(seeds.size(), (b + 1) * batch));
      const RngKey key = ops::make_rng_key(7, replace ? 1 : 0, b, 0);
      const auto blocks = dsamp.sample_blocks(s, key);
      const auto want = ref.sample_blocks(map_ids(s, m.orig_nid), key);
      check_blocks(blocks, want, m, fmt::format("replace {} batch {}", replace, b));
      for (size_t l = 0; l < blocks.size(); ++l) {
        const auto what = fmt::format("replace {} batch {} block {}", replace, b, l);
        for (int64_t e : blocks[l].eids)
          RANK_CHECK(!zero_weight(e), "{}: edge {} of weight 0 was drawn", what, e);
        edges_checked += blocks[l].num_edges();
      }
    }
  }
  // One layer over repeated random seeds; uniform draws do hit zero-weight edges.
  std::vector<int64_t> any;
  std::mt19937_64 rng(me + 9);
  for (int i = 0; i < 400; ++i)
    any.push_back(static_cast<int64_t>(rng() % g.num_nodes()));
  int64_t uniform_zero = 0;
  for (auto [fanout, replace] :
       {std::pair<int64_t, bool>{3, true}, {1, true}, {-1, false}, {2, false}, {0, false}}) {
    dist::DistSampleOptions o;
    o.fanout = fanout;
    o.replace = replace;
    o.weights_name = "w";
    o.key = ops::make_rng_key(3, 1, 2, 1);
    ops::SampleOptions r;
    r.fanout = fanout;
    r.replace = replace;
    r.key = o.key;
    const auto d = dist::sample_neighbors(g, any, o);
    const auto what =
        fmt::format("weighted sample_neighbors fanout {} replace {}", fanout, replace);
    const auto ref = ops::sample_neighbors(ops::SamplingGraph::as_stored(ds.graph, w),
                                           map_ids(any, m.orig_nid), r);
    check_edges(d, ref, m, what);
    check_placed_rows(g, any, r, ops::SamplingGraph::as_stored(ds.graph, w), "w", m, what);
    for (int64_t e : d.eid)
      RANK_CHECK(!zero_weight(e), "{}: edge {} of weight 0 was drawn", what, e);
    edges_checked += d.size();
    o.weights_name.clear();
    for (int64_t e : dist::sample_neighbors(g, any, o).eid)
      uniform_zero += zero_weight(e) ? 1 : 0;
  }
  RANK_CHECK(placed_w == dist::detail::edge_weights(*g.state().sg, "w")->w,
             "placed_weights before the CPU path built its own differ from them");
  RANK_CHECK(uniform_zero > 0, "uniform sampling drew no zero-weight edge: the check is vacuous");
  // An unknown feature is refused by name, by the sampler and by the op.
  for (int which = 0; which < 2; ++which) {
    std::string msg;
    try {
      if (which == 0) {
        dist::DistNeighborSampler bad(g, {3}, false, "nope");
      } else {
        dist::DistSampleOptions o;
        o.weights_name = "nope";
        dist::sample_neighbors(g, any, o);
      }
    } catch (const ValueError& e) {
      msg = e.what();
    }
    RANK_CHECK(msg.find("no edge data 'nope'") != std::string::npos &&
                   msg.find("(it has: w)") != std::string::npos,
               "unknown weights name: '{}'", msg);
  }
  rt->barrier();
  return fmt::format("rank {}/{}: {} weighted edges checked", me, world, edges_checked);
}

class DistWeighted : public ::testing::TestWithParam<int> {};

TEST_P(DistWeighted, EqualsStandaloneWeightedSampling) {
  const int parts = GetParam();
  if (parts > 1) {
    TESSERA_SKIP_WITHOUT_UCX();
  }
  const fs::path cfg = weighted_partitions(parts);
  auto res =
      run_ranks(job(parts, parts == 1 ? "" : "tcp", 90), [&](int) { return weighted_body(cfg); });
  for (const auto& r : res)
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  std::cout << describe(res);
}

std::vector<int> weighted_cases() {
  return {1, 2, 4};
}

INSTANTIATE_TEST_SUITE_P(Cora, DistWeighted, ::testing::ValuesIn(weighted_cases()),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return fmt::format("cora_{}", i.param);
                         });

// --- the device transport's store ---------------------------------------------------------------

// attach_device_transport(backend) starts a second transport with a store of its own: rank 0
// binds that store's port, shares it over the host transport, and the store listens on the
// socket it bound (the port is never free in between). Without a GPU the nccl backend cannot
// run; ucx serves here to bring the second store up on every rank, then is refused as a device
// transport, and the host transport works on.
TEST(DistDeviceTransport, SecondStoreComesUpOnThePortRankZeroBound) {
  TESSERA_SKIP_WITHOUT_UCX();
  auto res = run_ranks(job(2, "tcp", 60), [&](int r) {
    auto rt = Runtime::create();
    try {
      rt->attach_device_transport("ucx");
      return std::string("attached");
    } catch (const ValueError& e) {
      RANK_CHECK(std::string(e.what()).find("transport 'ucx' has no device-memory collectives") !=
                     std::string::npos,
                 "rank {} said: {}", r, e.what());
    }
    RANK_CHECK(!rt->has_device_transport(), "rank {} has a device transport", r);
    rt->barrier();
    return std::string("ok");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_EQ(res[r].message, "ok") << describe(res);
  }
}

// --- the read path's threshold ------------------------------------------------------------------

TEST(DistAutoGet, ThresholdFollowsTheFabric) {
  EXPECT_EQ(auto_min_get_bytes("tcp"), 4096u);
  EXPECT_EQ(auto_min_get_bytes("tcp,self"), 4096u);
  EXPECT_EQ(auto_min_get_bytes(" tcp , self "), 4096u);
  EXPECT_EQ(auto_min_get_bytes("posix,sysv,cma,self"), 256u);
  EXPECT_EQ(auto_min_get_bytes("sm"), 256u);
  EXPECT_EQ(auto_min_get_bytes("tcp,posix"), 1024u);  // mixed: tcp between nodes
  EXPECT_EQ(auto_min_get_bytes("rc,tcp"), 1024u);     // RDMA
  EXPECT_EQ(auto_min_get_bytes("rc,posix"), 1024u);
  EXPECT_EQ(auto_min_get_bytes("self"), 1024u);
  EXPECT_EQ(auto_min_get_bytes("auto"), 1024u);  // UCX_TLS unset: UCX chooses
  EXPECT_EQ(auto_min_get_bytes("^shm"), 1024u);
  EXPECT_EQ(auto_min_get_bytes("local"), 1024u);
  EXPECT_EQ(auto_min_get_bytes(""), 1024u);
}

// --- writes ------------------------------------------------------------------------------------

struct WCase {
  int world;
  std::string tls;
  std::string get;  // TESSERA_DIST_GET: "" (auto: 148-byte rows go by request), "0", "1"
  std::string label() const {
    const std::string t = tls.empty() ? "local" : tls == "tcp" ? "tcp" : "shm";
    const std::string g = get == "0" ? "_requests" : get == "1" ? "_gets" : "";
    return t + "_" + std::to_string(world) + g;
  }
};

void PrintTo(const WCase& c, std::ostream* os) {
  *os << c.label();
}

float value(int64_t row, int64_t col) {
  return static_cast<float>(row) * 1000.0f + static_cast<float>(col);
}

class DistWrites : public ::testing::TestWithParam<WCase> {};

TEST_P(DistWrites, ConcurrentWritersLoseNothing) {
  const WCase c = GetParam();
  if (c.world > 1) {
    TESSERA_SKIP_WITHOUT_UCX();
  }
  JobSpec s = job(c.world, c.tls);
  if (!c.get.empty()) s.env["TESSERA_DIST_GET"] = c.get;
  auto res = run_ranks(s, [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    // The read path's row-size threshold follows TESSERA_DIST_GET and the fabric (tcp alone:
    // requests below 4 KiB; shared memory alone: below 256 B; the local transport: 1 KiB).
    const size_t want_min = c.get.empty() ? (c.tls == "tcp"  ? 4096
                                             : c.tls.empty() ? 1024
                                                             : 256)
                                          : 0;
    RANK_CHECK(rt->min_get_bytes() == want_min, "min_get_bytes {} with UCX_TLS '{}', expected {}",
               rt->min_get_bytes(), c.tls, want_min);
    const int64_t rows = 5003, cols = 37;
    DistTensor t(rt, "w", {rows, cols}, DType::kFloat32, PartPolicy::even(rows, world));
    // Idempotent by name; a different shape is refused.
    DistTensor again(rt, "w", {rows, cols}, DType::kFloat32, PartPolicy::even(rows, world));
    RANK_CHECK(again.local_data() == t.local_data(), "re-creating 'w' made a new tensor");
    bool threw = false;
    try {
      DistTensor(rt, "w", {rows, cols + 1}, DType::kFloat32, PartPolicy::even(rows, world));
    } catch (const ValueError& e) {
      threw = std::string(e.what()).find("already exists") != std::string::npos;
    }
    RANK_CHECK(threw, "re-creating 'w' with another shape was not refused");
    // Everything starts zero.
    std::vector<int64_t> all(rows);
    for (int64_t i = 0; i < rows; ++i)
      all[i] = i;
    Array z = t.read(all);
    for (int64_t i = 0; i < rows * cols; ++i)
      RANK_CHECK(z.data<float>()[i] == 0.0f, "not zero-initialized at {}", i);
    rt->barrier();
    // Two threads per rank write disjoint rows spread over every owner, in batches.
    const int threads = 2;
    auto writer = [&](int th) {
      const int64_t stride = static_cast<int64_t>(world) * threads;
      std::vector<int64_t> ids;
      for (int64_t r = me * threads + th; r < rows; r += stride)
        ids.push_back(r);
      std::shuffle(ids.begin(), ids.end(), std::mt19937(me * 10 + th));
      for (size_t b = 0; b < ids.size(); b += 101) {
        std::vector<int64_t> part(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 101));
        std::vector<float> vals(part.size() * cols);
        for (size_t i = 0; i < part.size(); ++i)
          for (int64_t k = 0; k < cols; ++k)
            vals[i * cols + k] = value(part[i], k);
        t.write(part, vals.data());
      }
    };
    std::vector<std::thread> ts;
    for (int th = 0; th < threads; ++th)
      ts.emplace_back(writer, th);
    for (auto& x : ts)
      x.join();
    rt->barrier();
    std::shuffle(all.begin(), all.end(), std::mt19937(me));
    Array got = t.read(all);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < cols; ++k)
        RANK_CHECK(got.data<float>()[i * cols + k] == value(all[i], k),
                   "row {} col {}: {} (lost write?)", all[i], k, got.data<float>()[i * cols + k]);
    // An init callback fills each owner's rows; a non-persistent name is released with its
    // last handle.
    {
      DistTensor tmp(rt, "tmp", {rows}, DType::kInt64, PartPolicy::even(rows, world),
                     [](int64_t b, int64_t e, void* dst) {
                       for (int64_t i = b; i < e; ++i)
                         static_cast<int64_t*>(dst)[i - b] = 3 * i;
                     });
      Array x = tmp.read(all);
      for (int64_t i = 0; i < rows; ++i)
        RANK_CHECK(x.data<int64_t>()[i] == 3 * all[i], "init row {}", all[i]);
    }
    DistTensor tmp2(rt, "tmp", {7}, DType::kInt64, PartPolicy::even(7, world));
    rt->barrier();
    return std::string("ok");
  });
  for (const auto& r : res)
    EXPECT_EQ(r.exit_code, 0) << describe(res);
}

std::vector<WCase> write_cases() {
  std::vector<WCase> v{{1, "", ""}};
  v.push_back({4, "tcp", "1"});
  v.push_back({3, shm_tls(), "1"});
  v.push_back({3, shm_tls(), ""});
  v.push_back({2, "tcp", "0"});
  v.push_back({2, "tcp", ""});  // auto over tcp alone: these 148-byte rows go by request
  return v;
}

INSTANTIATE_TEST_SUITE_P(Backends, DistWrites, ::testing::ValuesIn(write_cases()),
                         [](const ::testing::TestParamInfo<WCase>& i) { return i.param.label(); });

// --- row atomicity: concurrent writers of the same rows, concurrent readers --------------------

// Word k of a row written by writer w (1-based) in round q; 0 everywhere = never written.
uint64_t stamp_word(uint64_t w, uint64_t q, uint64_t k) {
  return (w << 48) | (q << 20) | k;
}

struct ACase {
  int world;
  std::string tls;
  std::string get;
  std::string label() const {
    if (tls.empty()) {
      return "local_1";
    }
    return (tls == "tcp" ? "tcp_" : "shm_") + std::to_string(world) +
           (get == "0" ? "_requests" : "_gets");
  }
};

void PrintTo(const ACase& c, std::ostream* os) {
  *os << c.label();
}

class DistRowAtomic : public ::testing::TestWithParam<ACase> {};

// Every rank runs 2 writer threads that write every row of an 8 KB-row tensor in every round
// (each row filled with the writer's and the round's stamp), while a reader thread reads random
// batches. A reader must never see a row mixing two writes (torn), nor one writer's rounds going
// back (a lost or reordered write); after the last round every row holds the last round of one
// writer, whole.
TEST_P(DistRowAtomic, ConcurrentWritersOfOneRowNeverTearIt) {
  const ACase c = GetParam();
  if (c.world > 1) {
    TESSERA_SKIP_WITHOUT_UCX();
  }
  JobSpec s = job(c.world, c.tls, 120);
  s.env["TESSERA_DIST_GET"] = c.get;
  auto res = run_ranks(s, [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    const int64_t rows = int64_t{24} * world, words = 1024;  // 8 KiB rows
    const int threads = 2, rounds = 40, batch = 6;
    DistTensor t(rt, "h", {rows, words}, DType::kInt64, PartPolicy::even(rows, world));
    rt->barrier();
    std::atomic<int> writers_left{threads};
    std::vector<std::string> errors(threads + 1);
    auto writer = [&](int th) {
      const uint64_t w = static_cast<uint64_t>(me) * threads + th + 1;
      std::mt19937 rng(static_cast<unsigned>(w));
      std::vector<int64_t> ids(rows);
      std::vector<int64_t> vals(static_cast<size_t>(batch * words));
      try {
        for (int q = 0; q < rounds; ++q) {
          for (int64_t i = 0; i < rows; ++i) {
            ids[i] = i;
          }
          std::shuffle(ids.begin(), ids.end(), rng);
          for (int64_t b = 0; b < rows; b += batch) {
            for (int64_t k = 0; k < words * batch; ++k) {
              vals[k] = static_cast<int64_t>(stamp_word(w, q, k % words));
            }
            t.write(ops::Span<const int64_t>(ids.data() + b, batch), vals.data());
          }
        }
      } catch (const std::exception& e) {
        errors[th] = e.what();
      }
      writers_left--;
    };
    int64_t reads = 0, torn = 0, back = 0;
    std::string first_bad;
    auto reader = [&] {
      std::mt19937 rng(1000 + me);
      // Last round seen per (row, writer).
      std::vector<int64_t> last(static_cast<size_t>(rows * (world * threads + 1)), -1);
      std::vector<int64_t> ids(static_cast<size_t>(2 * batch));
      std::vector<int64_t> got(ids.size() * words);
      try {
        // At least 50 batches, and on until this rank's writers are done.
        for (int it = 0; it < 50 || writers_left.load() > 0; ++it) {
          for (auto& id : ids) {
            id = static_cast<int64_t>(rng() % rows);
          }
          t.read_into(ids, got.data());
          // A row named twice in one read may be copied at two moments (a position whose
          // one-sided copy overlapped a write is copied again): rounds may only not go back
          // from one read to a later one, so each position is held to the rounds seen by the
          // reads before this one, and this read's rounds count from the next read on.
          std::vector<std::pair<size_t, int64_t>> seen_now;
          for (size_t i = 0; i < ids.size(); ++i) {
            const auto* row = reinterpret_cast<const uint64_t*>(got.data() + i * words);
            ++reads;
            const uint64_t w = row[0] >> 48, q = (row[0] >> 20) & 0xFFFFFFF;
            bool ok = true;
            for (int64_t k = 0; k < words && ok; ++k) {
              ok = row[k] == (w == 0 ? 0 : stamp_word(w, q, k));
            }
            if (!ok) {
              if (torn++ == 0) {
                first_bad = fmt::format("row {} word 0 {:#x} but a word differs", ids[i], row[0]);
              }
              continue;
            }
            if (w == 0) {
              continue;
            }
            const size_t slot = static_cast<size_t>(ids[i] * (world * threads + 1)) + w;
            if (static_cast<int64_t>(q) < last[slot]) {
              ++back;
            }
            seen_now.emplace_back(slot, static_cast<int64_t>(q));
          }
          for (const auto& [slot, q] : seen_now) {
            last[slot] = std::max(last[slot], q);
          }
        }
      } catch (const std::exception& e) {
        errors[threads] = e.what();
      }
    };
    std::vector<std::thread> ts;
    ts.reserve(threads + 1);
    for (int th = 0; th < threads; ++th) {
      ts.emplace_back(writer, th);
    }
    ts.emplace_back(reader);
    for (auto& x : ts) {
      x.join();
    }
    for (const auto& e : errors) {
      RANK_CHECK(e.empty(), "{}", e);
    }
    RANK_CHECK(torn == 0, "{} torn rows of {} read (first: {})", torn, reads, first_bad);
    RANK_CHECK(back == 0, "{} reads of {} saw a writer's earlier round after a later one", back,
               reads);
    rt->barrier();
    // Every row ends as the last round of one writer, whole.
    std::vector<int64_t> all(rows);
    for (int64_t i = 0; i < rows; ++i) {
      all[i] = i;
    }
    Array fin = t.read(all);
    for (int64_t i = 0; i < rows; ++i) {
      const auto* row = reinterpret_cast<const uint64_t*>(fin.data<int64_t>() + i * words);
      const uint64_t w = row[0] >> 48;
      RANK_CHECK(w >= 1 && w <= static_cast<uint64_t>(world * threads), "row {} final {:#x}", i,
                 row[0]);
      for (int64_t k = 0; k < words; ++k) {
        RANK_CHECK(row[k] == stamp_word(w, rounds - 1, k), "row {} word {}: {:#x}", i, k, row[k]);
      }
    }
    rt->barrier();
    return fmt::format("{} reads", reads);
  });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  }
}

std::vector<ACase> atomic_cases() {
  return {{1, "", "1"}, {2, shm_tls(), "1"}, {2, "tcp", "1"}, {2, "tcp", "0"}};
}

INSTANTIATE_TEST_SUITE_P(Backends, DistRowAtomic, ::testing::ValuesIn(atomic_cases()),
                         [](const ::testing::TestParamInfo<ACase>& i) { return i.param.label(); });

// --- faults ------------------------------------------------------------------------------------

void killed_rank(const std::string& tls, int parts, int victim) {
  const fs::path cfg_path = partitions("cora", parts);
  auto res = run_ranks(job(parts, tls, 45), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg_path);
    dist::DistNeighborSampler samp(g, {10, 5});
    const auto seeds = dist::node_split(g.node_data("train_mask"), true);
    for (int64_t b = 0;; ++b) {
      std::vector<int64_t> s;
      for (size_t i = 0; i < 16; ++i)
        s.push_back(seeds[(b * 16 + i) % seeds.size()]);
      std::sort(s.begin(), s.end());
      s.erase(std::unique(s.begin(), s.end()), s.end());
      const auto blocks = samp.sample_blocks(s, ops::make_rng_key(1, 0, b % 1000, 0));
      g.node_data("feat").read(blocks.front().src_nodes);
      double loss = 1;
      rt->transport().all_reduce(&loss, 1, transport::DType::f64, transport::ReduceOp::sum);
      if (rt->rank() == victim && b == 5) ::raise(SIGKILL);
    }
    return std::string("unreachable");
  });
  for (int r = 0; r < parts; ++r) {
    if (r == victim) {
      EXPECT_EQ(res[r].exit_code, 128 + SIGKILL) << describe(res);
      continue;
    }
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_FALSE(res[r].timed_out) << describe(res);
    EXPECT_NE(res[r].message.find(fmt::format("rank {} was lost", victim)), std::string::npos)
        << describe(res);
    EXPECT_LT(res[r].seconds, 30) << describe(res);
  }
}

TEST(DistFaults, KilledRankMidEpochIsNamedTcp) {
  TESSERA_SKIP_WITHOUT_UCX();
  killed_rank("tcp", 4, 3);
}

TEST(DistFaults, KilledRankMidEpochIsNamedSharedMemory) {
  TESSERA_SKIP_WITHOUT_UCX();
  killed_rank(shm_tls(), 2, 0);
}

TEST(DistFaults, ConfigOfAnotherPartitioningIsRefused) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path metis = partitions("cora", 2, "metis"), random = partitions("cora", 2, "random");
  auto res = run_ranks(job(2, "tcp", 40), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", r == 0 ? metis : random);
    return std::string("loaded");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_NE(res[r].message.find("not from the same partitioning"), std::string::npos)
        << describe(res);
    EXPECT_NE(res[r].message.find(fmt::format("rank {}", 1 - r)), std::string::npos)
        << describe(res);
    EXPECT_LT(res[r].seconds, 20) << describe(res);
  }
}

TEST(DistFaults, PartitionCountMustMatchWorld) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path four = partitions("cora", 4);
  auto res = run_ranks(job(2, "tcp", 40), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", four);
    return std::string("loaded");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_NE(res[r].message.find("has 4 partitions but the job has 2 ranks"), std::string::npos)
        << describe(res);
  }
}

// A collective read whose IDs are bad on one rank fails on every rank, naming it, instead of
// leaving the others waiting in the exchange of rows; the runtime goes on afterwards.
TEST(DistFaults, BadIdsOfOneRankFailEveryRankOfACollectiveRead) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path two = partitions("cora", 2);
  auto res = run_ranks(job(2, "tcp", 40), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", two);
    const DistTensor& feat = g.node_data("feat");
    std::vector<int64_t> ids = {0, 1, g.num_nodes() - 1};
    if (r == 1) {
      ids.push_back(g.num_nodes() + 7);
    }
    try {
      (void)feat.read_collective(ids);
      return std::string("no error");
    } catch (const IndexError& e) {
      const std::string want =
          r == 1 ? fmt::format("row ID {} at position 3 is outside", g.num_nodes() + 7)
                 : fmt::format(
                       "read_collective: rank 1 failed: DistTensor '{}' read_collective: "
                       "row ID {} at position 3",
                       feat.name(), g.num_nodes() + 7);
      RANK_CHECK(std::string(e.what()).find(want) != std::string::npos, "rank {} said: {}", r,
                 e.what());
    }
    const std::vector<int64_t> good = {0, 1};
    const Array rows = feat.read_collective(good);  // the next collective pairs up again
    RANK_CHECK(rows.rows() == 2, "read after the failure");
    return std::string("ok");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_EQ(res[r].message, "ok") << describe(res);
    EXPECT_LT(res[r].seconds, 20) << describe(res);
  }
}

// A tensor whose creation fails on one rank (its init throws there) fails on every rank with
// the same exception type, naming that rank, in seconds, and leaves nothing registered: the
// name is created again afterwards and the ranks' tensor IDs stay in step. Rows read by
// request and one-sidedly.
TEST(DistFaults, CreationThatFailsOnOneRankFailsEveryRank) {
  TESSERA_SKIP_WITHOUT_UCX();
  for (const char* get : {"0", "1"}) {
    JobSpec s = job(2, "tcp", 40);
    s.env["TESSERA_DIST_GET"] = get;
    auto res = run_ranks(s, [&](int r) {
      auto rt = Runtime::create();
      try {
        DistTensor t(rt, "made", {100}, DType::kInt64, PartPolicy::even(100, 2),
                     [r](int64_t, int64_t, void*) {
                       if (r == 1) {
                         throw IOError("no such file on this machine");
                       }
                     });
        return std::string("created");
      } catch (const IOError& e) {
        const std::string want =
            r == 1 ? "no such file on this machine"
                   : "DistTensor 'made' creation: rank 1 failed: no such file on this machine";
        RANK_CHECK(std::string(e.what()).find(want) != std::string::npos, "rank {} said: {}", r,
                   e.what());
      }
      DistTensor t(rt, "made", {100}, DType::kInt64, PartPolicy::even(100, 2),
                   [](int64_t b, int64_t e, void* dst) {
                     for (int64_t i = b; i < e; ++i) {
                       static_cast<int64_t*>(dst)[i - b] = 5 * i;
                     }
                   });
      const std::vector<int64_t> ids = {0, 99, 50, 49};
      const Array x = t.read(ids);
      for (size_t i = 0; i < ids.size(); ++i) {
        RANK_CHECK(x.data<int64_t>()[i] == 5 * ids[i], "row {} reads {}", ids[i],
                   x.data<int64_t>()[i]);
      }
      rt->barrier();
      return std::string("ok");
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(res[r].exit_code, 0) << "TESSERA_DIST_GET=" << get << "\n" << describe(res);
      EXPECT_EQ(res[r].message, "ok") << describe(res);
      EXPECT_LT(res[r].seconds, 20) << describe(res);
    }
  }
}

// The reviewer's case: rank 0 splits the training nodes (node_split: an all_gather of counts,
// then an all_to_all_v) while rank 1 all-reduces two float64. Rank 1 used to print [0, 2] and
// rank 0 die with bad_alloc; now both fail at once with one error naming each rank's call, and
// the next collective pairs up again.
TEST(DistFaults, DifferentCollectivesOnTheRanksFailEveryRankNamingEachCall) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path two = partitions("cora", 2);
  auto res = run_ranks(job(2, "tcp", 40), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", two);
    auto& t = rt->transport();
    std::string seen;
    try {
      if (r == 0) {
        (void)dist::node_split(g.node_data("train_mask"), true);
      } else {
        const transport::CollectiveLabel label(t, "all_reduce");
        double v[2] = {1.0, 2.0};
        t.all_reduce(v, 2, transport::DType::f64, transport::ReduceOp::sum);
        return fmt::format("no error: all_reduce gave [{}, {}]", v[0], v[1]);
      }
      return std::string("no error");
    } catch (const transport::CollectiveMismatchError& e) {
      seen = e.what();
    }
    rt->barrier();
    return seen;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_NE(res[r].message.find("rank 0 called node_split (all_gather, 8 bytes per rank); rank "
                                  "1 called all_reduce (float64 sum of 2)"),
              std::string::npos)
        << describe(res);
    EXPECT_LT(res[r].seconds, 20) << describe(res);
  }
}

// A non-persistent tensor whose last handle only rank 0 dropped: creating its name again would
// create it on rank 0 (collectively) and attach to the old one on rank 1 (alone), and every
// later collective paired wrongly. Now every rank fails, naming who creates and who attaches;
// once rank 1 drops its handle too, the name is created again.
TEST(DistFaults, RecreatingATensorSomeRanksStillHoldFailsEveryRank) {
  TESSERA_SKIP_WITHOUT_UCX();
  auto res = run_ranks(job(2, "tcp", 40), [&](int r) {
    auto rt = Runtime::create();
    const auto make = [&] {
      return DistTensor(rt, "b", {10, 2}, DType::kFloat32, PartPolicy::even(10, 2));
    };
    auto b = std::make_unique<DistTensor>(make());
    rt->barrier();
    if (r == 0) {
      b.reset();
    }
    rt->barrier();
    std::string seen;
    try {
      DistTensor b2 = make();
      return std::string("no error");
    } catch (const ValueError& e) {
      seen = e.what();
    }
    b.reset();
    DistTensor b3 = make();
    RANK_CHECK(b3.created(), "rank {} attached instead of creating", r);
    const Array x = b3.read_collective(std::vector<int64_t>{0, 9});
    RANK_CHECK(x.rows() == 2, "read after the failure");
    rt->barrier();
    return seen;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_NE(res[r].message.find("DistTensor 'b': rank 0 creates it"), std::string::npos)
        << describe(res);
    EXPECT_NE(res[r].message.find("while rank 1 attaches to the one that exists there"),
              std::string::npos)
        << describe(res);
    EXPECT_LT(res[r].seconds, 20) << describe(res);
  }
}

// Non-persistent tensors every rank dropped are freed by the next creation; one that a rank still
// holds is kept (that rank may read it) until it is dropped there too. A loop that creates and
// drops a tensor per step holds at most the last step's tensor once dropped.
// Over tcp (these 8-byte rows go by request) and shared memory with one-sided gets (the peers'
// remote keys of a freed tensor go with it).
class DistTensorMemory : public ::testing::TestWithParam<bool> {};

TEST_P(DistTensorMemory, DroppedTensorsAreFreedOnceEveryRankDroppedThem) {
  TESSERA_SKIP_WITHOUT_UCX();
  JobSpec spec = job(2, GetParam() ? shm_tls() : "tcp", 40);
  spec.env["TESSERA_DIST_GET"] = GetParam() ? "1" : "0";
  auto res = run_ranks(spec, [&](int r) {
    auto rt = Runtime::create();
    const auto make = [&](const std::string& name) {
      auto t = std::make_unique<DistTensor>(rt, name, std::vector<int64_t>{10, 2}, DType::kFloat32,
                                            PartPolicy::even(10, 2));
      const std::vector<int64_t> mine{r == 0 ? 0 : 5};
      const float row[2] = {static_cast<float>(r + 1), 7};
      t->write(mine, row);
      return t;
    };
    const auto held = [&] { return rt->dropped_tensors_held(); };
    auto a = make("a");
    auto b = make("b");
    a.reset();
    RANK_CHECK(held() == 1, "after dropping a: {} held", held());
    auto c = make("c");  // every rank dropped a: freed
    RANK_CHECK(held() == 0, "after creating c: {} held", held());
    if (r == 0) {
      b.reset();
    }
    auto d = make("d");  // rank 1 still holds b: rank 0 keeps its rows
    RANK_CHECK(held() == (r == 0 ? 1u : 0u), "after creating d: {} held", held());
    if (r == 1) {
      const Array x = b->read(std::vector<int64_t>{0, 5});
      RANK_CHECK(x.data<float>()[0] == 1 && x.data<float>()[2] == 2,
                 "b's rows after rank 0 dropped it: {} {}", x.data<float>()[0], x.data<float>()[2]);
    }
    rt->barrier();
    b.reset();
    auto e = make("e");
    RANK_CHECK(held() == 0, "after creating e: {} held", held());
    for (int i = 0; i < 20; ++i) {
      auto step = make(fmt::format("step-{}", i));  // frees the last step's
      RANK_CHECK(held() == 0, "step {}: {} held", i, held());
    }
    RANK_CHECK(held() == 1, "after the loop: {} held", held());
    const Array x = c->read(std::vector<int64_t>{0, 5});
    RANK_CHECK(x.data<float>()[0] == 1 && x.data<float>()[2] == 2, "c after the loop");
    rt->barrier();
    return std::string("ok");
  });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  }
}

INSTANTIATE_TEST_SUITE_P(ReadPaths, DistTensorMemory, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "ShmGets" : "TcpRequests");
                         });

// Two trainers on one machine (2 ranks over a 1-part partitioning): the partition is shared
// (one segment, each trainer owning half of the node range), every row reads back as stored,
// and node_split covers the training nodes once either way.
TEST(DistTrainersPerMachine, TwoTrainersShareOnePartition) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path one = partitions("cora", 1);
  auto res = run_ranks(job(2, "tcp", 60), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", one);
    RANK_CHECK(g.trainers_per_machine() == 2 && g.machine() == 0 && g.part_id() == 0,
               "2 trainers on machine 0");
    RANK_CHECK(
        g.shared_bytes() > 0 && g.book().num_parts() == 2 && g.machine_book().num_parts() == 1,
        "a shared segment and one range per trainer");
    const int64_t n = g.num_nodes();
    const auto [lo, hi] = g.local_node_range();
    // Cut at the first node before which half of the partition's bytes lie: a node's rows of
    // the node data, indptr and orig_nid, and its in-edges' rows of indices, eid and orig_eid.
    const PartitionConfig c = load_partition_config(one);
    int64_t nb = 16, eb = 24;
    for (const auto& s : c.ndata) {
      auto rb = static_cast<int64_t>(dtype_size(s.dtype));
      for (size_t d = 1; d < s.shape.size(); ++d) {
        rb *= s.shape[d];
      }
      nb += rb;
    }
    RANK_CHECK(c.edata.empty(), "Cora has no edge data");
    const int64_t* ip = g.local_partition().indptr.data<int64_t>();
    auto before = [&](int64_t v) { return v * nb + ip[v] * eb; };
    int64_t half = 0;
    while (before(half) < before(n) / 2) {
      ++half;
    }
    RANK_CHECK(half > 0 && half < n && half != n / 2, "Cora's hubs come first (cut at {})", half);
    RANK_CHECK(lo == (r == 0 ? 0 : half) && hi == (r == 0 ? half : n),
               "rank {}: [{}, {}), not the half of the weight", r, lo, hi);
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    const Array got = g.node_data("feat").read(all);
    const Array& stored = g.local_partition().ndata.at("feat");
    RANK_CHECK(got.nbytes() == static_cast<size_t>(n) * stored.row_bytes() &&
                   std::memcmp(got.raw(), stored.raw(), got.nbytes()) == 0,
               "every feature row reads back as stored");
    // Both splits deal the machine's training nodes to its trainers in turn: rank r takes the
    // r-th, (r + 2)-th, ... of them in ID order, hubs and leaves alike.
    const Array mask_all = g.node_data("train_mask").read(all);
    std::vector<int64_t> dealt;
    for (int64_t v = 0, k = 0; v < n; ++v) {
      if (static_cast<const uint8_t*>(mask_all.raw())[v] != 0 && k++ % 2 == r) {
        dealt.push_back(v);
      }
    }
    RANK_CHECK(dist::node_split(mask_all, g.book(), r, true, 0, 2) == dealt, "host split dealt");
    int64_t sizes[2] = {0, 0};
    for (int even = 0; even < 2; ++even) {
      const auto mine = dist::node_split(g.node_data("train_mask"), even == 1);
      RANK_CHECK(mine == dealt, "rank {}: node_split(force_even={}) is not dealt in turn", r, even);
      const int64_t c = static_cast<int64_t>(mine.size());
      std::vector<int64_t> counts(2);
      rt->transport().all_gather(&c, sizeof c, counts.data());
      sizes[even] = counts[0] + counts[1];
      RANK_CHECK(std::abs(counts[0] - counts[1]) <= 1, "even shares");
    }
    RANK_CHECK(sizes[0] == 140 && sizes[1] == 140, "Cora's 140 training nodes, each once");
    return std::string("ok");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
  }
}

// The trainers' cut on its own: a hub heavier than a trainer's share takes one range, and the
// rest is shared by the others (each cut aims at an equal share of what is left; aiming at i/T
// of the whole left trainers 1 and 2 one node each and trainer 3 the other 997).
TEST(DistTrainersPerMachine, CutsShareTheBytesLeftAfterAHub) {
  std::vector<int64_t> indptr{0, 1000000};
  for (int v = 1; v < 1000; ++v) {
    indptr.push_back(indptr.back() + 1);
  }
  const std::vector<int64_t> cut = dist::detail::trainer_cuts(indptr.data(), 1000, 4, 1, 1);
  ASSERT_EQ(cut.size(), 5u);
  EXPECT_EQ(cut[0], 0);
  EXPECT_EQ(cut[1], 1);
  EXPECT_EQ(cut[4], 1000);
  for (int i = 1; i < 4; ++i) {
    EXPECT_NEAR(static_cast<double>(cut[i + 1] - cut[i]), 333.0, 2.0) << "range " << i;
  }
  // Fewer nodes than trainers: sizes differ by at most one; no nodes: empty ranges.
  EXPECT_EQ(dist::detail::trainer_cuts(indptr.data(), 3, 4, 1, 1),
            (std::vector<int64_t>{0, 1, 2, 3, 3}));
  EXPECT_EQ(dist::detail::trainer_cuts(indptr.data(), 0, 2, 1, 1), (std::vector<int64_t>{0, 0, 0}));
}

// place_on_device's plan, without a GPU: what a DistDeviceSampler and the mirrors place is
// charged to the budget (per-row arrays first, the adjacency by its layout, weights, a cache's
// slot map and fill), and the plan never exceeds the budget.
TEST(DevicePlacementPlan, ChargesWhatIsPlacedAndStaysInTheBudget) {
  constexpr int64_t kN = 1000, kM = 20000;  // rows, edges
  dist::PlacementRequest r;
  r.rows = kN;
  r.edges = kM;
  r.tensors = {{"label", kN, 8}, {"feat", kN, 400}};
  const int64_t per_row = (2 * kN + 1) * 8;  // offsets and keys
  EXPECT_EQ(dist::structure_bytes(kN, kM, true, false).per_row_arrays, per_row);
  EXPECT_EQ(dist::structure_bytes(kN, kM, true, false).edge_arrays, kM * 8 + 16);
  EXPECT_EQ(dist::structure_bytes(kN, kM, false, false).edge_arrays, kM * 16 + 16);
  EXPECT_EQ(dist::structure_bytes(kN, kM, true, true).per_row_arrays, per_row + 16 * kN);
  EXPECT_EQ(dist::structure_bytes(kN, kM, true, true).edge_arrays, kM * 20 + 16);
  EXPECT_EQ(dist::structure_bytes(kN, 0, true, true).edge_arrays, 0);

  // Everything fits.
  r.gpu_budget_bytes = int64_t{1} << 30;
  dist::DevicePlacement p = dist::plan_device_placement(r);
  EXPECT_EQ(p.structure, cuda::Placement::kGpu);
  EXPECT_EQ(p.structure_bytes, per_row + kM * 8 + 16);
  EXPECT_EQ(p.gpu_bytes, p.structure_bytes + kN * 8 + kN * 400);
  EXPECT_EQ(p.gpu_bytes_left, r.gpu_budget_bytes - p.gpu_bytes);
  for (const auto& t : p.tensors) {
    EXPECT_EQ(t.placement, cuda::Placement::kGpu) << t.name;
  }

  // Below the per-row arrays: refused, naming both figures; exactly them: all in pinned memory.
  r.gpu_budget_bytes = per_row - 1;
  TESSERA_EXPECT_THROW_MSG(
      dist::plan_device_placement(r), ValueError,
      std::to_string(per_row - 1) + " bytes is less than the " + std::to_string(per_row));
  r.gpu_budget_bytes = per_row;
  p = dist::plan_device_placement(r);
  EXPECT_EQ(p.structure, cuda::Placement::kPinnedHost);
  EXPECT_EQ(p.gpu_bytes, per_row);
  for (const auto& t : p.tensors) {
    EXPECT_EQ(t.placement, cuda::Placement::kPinnedHost) << t.name;
    EXPECT_EQ(t.cache_rows, 0) << t.name;
  }

  // The features behind a cache: its slot map (8 bytes a row) and fill (8 a cached row) are
  // charged, so 10,000 bytes over the structure and labels hold (10000 - 8000) / 408 = 4 rows.
  const int64_t fixed = per_row + kM * 8 + 16 + kN * 8;
  r.gpu_budget_bytes = fixed + 10000;
  p = dist::plan_device_placement(r);
  EXPECT_EQ(p.structure, cuda::Placement::kGpu);
  EXPECT_EQ(p.tensors[0].placement, cuda::Placement::kGpu);
  EXPECT_EQ(p.tensors[1].placement, cuda::Placement::kPinnedHost);
  EXPECT_EQ(p.tensors[1].cache_rows, 4);
  EXPECT_EQ(p.gpu_bytes, fixed + kN * 8 + int64_t{4} * 400);
  // No room for the slot map: no cache.
  r.gpu_budget_bytes = fixed + kN * 8;
  EXPECT_EQ(dist::plan_device_placement(r).tensors[1].cache_rows, 0);

  // Over a sweep of budgets and layouts the plan never exceeds its budget.
  for (const bool weighted : {false, true}) {
    for (const bool packed : {false, true}) {
      r.weighted = weighted;
      r.packed = packed;
      for (int64_t b = per_row + (weighted ? 16000 : 0); b < int64_t{1200000}; b += 997) {
        r.gpu_budget_bytes = b;
        p = dist::plan_device_placement(r);
        ASSERT_LE(p.gpu_bytes, b) << weighted << packed;
        ASSERT_EQ(p.gpu_bytes_left, b - p.gpu_bytes);
        ASSERT_EQ(p.weighted, weighted);
      }
    }
  }
  r.gpu_budget_bytes = -1;
  TESSERA_EXPECT_THROW_MSG(dist::plan_device_placement(r), ValueError, ">= 0 bytes");
}

// A machine whose partition is empty (2 nodes in 3 random parts), each machine shared by 2
// trainers: every rank loads the graph and reads every row. The empty machine's shared segment
// had no base address; its ranks failed to register their tensors and the others reported a
// garbled error.
TEST(DistTrainersPerMachine, AnEmptyPartitionLoads) {
  TESSERA_SKIP_WITHOUT_UCX();
  TempDir tmp;
  const fs::path data = tmp.path() / "two";
  fs::create_directories(data);
  const std::vector<int64_t> ends = {0, 1, 1, 0};  // edges 0->1 and 1->0
  write_npy(data / "edge_index.npy", DType::kInt64, {2, 2}, ends.data());
  const std::vector<float> feat = {1, 2, 3, 4};
  write_npy(data / "feat.npy", DType::kFloat32, {2, 2}, feat.data());
  Dataset ds = read_dataset(data, Format::kNpy, ReadOptions{});
  PartitionOptions po;
  po.num_parts = 3;
  po.method = PartMethod::kRandom;
  po.halo_hops = 1;
  WriteOptions wo;
  wo.out_dir = tmp.path() / "parts";
  wo.name = "two";
  PhaseTimer timer;
  set_quiet(true);
  partition_dataset(ds, po, wo, timer);
  const fs::path cfg = wo.out_dir / "two.json";
  const PartitionConfig c = load_partition_config(cfg);
  int64_t empty = 0;
  for (int64_t p = 0; p < c.num_parts; ++p) {
    empty += c.node_offsets[static_cast<size_t>(p) + 1] == c.node_offsets[static_cast<size_t>(p)];
  }
  ASSERT_GE(empty, 1);
  auto res = run_ranks(job(6, "tcp", 60), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "two", cfg);
    RANK_CHECK(g.trainers_per_machine() == 2, "2 trainers per machine");
    const std::vector<int64_t> all = {0, 1};
    const Array got = g.node_data("feat").read(all);
    RANK_CHECK(got.nbytes() == 16, "two rows of two floats");
    float sum = 0;
    for (int i = 0; i < 4; ++i) {
      sum += got.data<float>()[i];
    }
    RANK_CHECK(sum == 10, "every row reads back (sum {})", sum);
    rt->barrier();
    return std::string("ok");
  });
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_EQ(res[r].message, "ok") << describe(res);
  }
}

// The benchmark end to end under `tessera launch` (2 ranks over tcp; no ucx_perftest).
TEST(DistBench, DistGatherUnderLaunch) {
  TESSERA_SKIP_WITHOUT_UCX();
  TempDir tmp;
  const std::string json = (tmp / "dg.json").string();
  const std::string cmd = fmt::format(
      "UCX_TLS=tcp TESSERA_TRANSPORT=ucx timeout 60 {} launch --nproc-per-node 2 -- {} bench "
      "dist-gather --row-bytes 128,4096 --batch 2000 --iters 2 --warmup 1 --rows-per-rank 5000 "
      "--no-perftest --json {} 2>&1",
      TESSERA_TOOL, TESSERA_TOOL, json);
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p))
    out += buf;
  const int st = ::pclose(p);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("row  4096 B  get"), std::string::npos) << out;
  EXPECT_NE(out.find("row   128 B  request"), std::string::npos) << out;
  ASSERT_TRUE(fs::exists(json)) << out;
  nlohmann::json j;
  std::ifstream(json) >> j;
  // The command that made the result, with the options as given.
  EXPECT_EQ(j.value("command", ""),
            fmt::format("tessera launch --nproc-per-node 2 -- tessera bench dist-gather "
                        "--row-bytes 128,4096 --batch 2000 --rows-per-rank 5000 --warmup 1 "
                        "--iters 2 --no-perftest --json {}",
                        json));
}

TEST(DistStandalone, WrongGraphNameAndSplitsOnHost) {
  const fs::path cfg = partitions("cora", 1);
  auto res = run_ranks(job(1, ""), [&](int) {
    auto rt = Runtime::create();  // no launcher: a world of one on the local transport
    RANK_CHECK(rt->world_size() == 1 && rt->transport().name() == "local", "standalone runtime");
    bool threw = false;
    try {
      DistGraph g(rt, "citeseer", cfg);
    } catch (const ValueError& e) {
      threw = std::string(e.what()).find("holds graph 'cora'") != std::string::npos;
    }
    RANK_CHECK(threw, "a wrong graph name was accepted");
    DistGraph g(rt, "cora", cfg);
    TESSERA_EXPECT_THROW_MSG(g.node_data("nope"), ValueError, "it has:");
    return std::string("ok");
  });
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  // Host node_split on a tiny book: DGL's even chunks (first count % P ranks get one more).
  PartitionBook book({0, 4, 10}, {0, 0, 0});
  std::vector<uint8_t> m{1, 0, 1, 1, 0, 1, 1, 1, 0, 1};
  Array mask = Array::wrap(DType::kBool, {10}, m.data(), nullptr, false);
  EXPECT_EQ(dist::node_split(mask, book, 0, true), (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(dist::node_split(mask, book, 1, true), (std::vector<int64_t>{6, 7, 9}));
  EXPECT_EQ(dist::node_split(mask, book, 0, false), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(dist::node_split(mask, book, 1, false), (std::vector<int64_t>{5, 6, 7, 9}));
  // The same two ranks as two trainers of one machine: its selected IDs dealt in turn, in the
  // same sizes (consecutive chunks gave trainer 0 the machine's first, highest-degree nodes).
  EXPECT_EQ(dist::node_split(mask, book, 0, true, 0, 2), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(dist::node_split(mask, book, 1, true, 0, 2), (std::vector<int64_t>{2, 5, 7}));
  // Four ranks, two machines of two trainers: each machine's two chunks are dealt.
  PartitionBook four({0, 2, 4, 7, 10}, {0, 0, 0, 0, 0});
  EXPECT_EQ(dist::node_split(mask, four, 0, true, 0, 2), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(dist::node_split(mask, four, 1, true, 0, 2), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(dist::node_split(mask, four, 2, true, 0, 2), (std::vector<int64_t>{6, 9}));
  EXPECT_EQ(dist::node_split(mask, four, 3, true, 0, 2), (std::vector<int64_t>{7}));
}

// A job of one rank keeps node data in a copy-on-write mapping of the partition's file (no copy
// at load): reads give the stored rows, writes are read back, and the file keeps its bytes.
TEST(DistStandalone, NodeDataWritesStayOutOfTheFile) {
  const fs::path cfg = partitions("cora", 1);
  const PartitionConfig c = load_partition_config(cfg);
  const fs::path file = c.dir / c.parts[0].dir / "node_feat.npy";
  const PartFile* pf = c.parts[0].file("node_feat.npy");
  ASSERT_NE(pf, nullptr);
  auto res = run_ranks(job(1, ""), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg);
    DistTensor feat = g.node_data("feat");  // a handle on the graph's tensor
    const Array stored = read_npy(file);
    const std::vector<int64_t> ids{0, 7, feat.num_rows() - 1};
    const Array before = feat.read(ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      RANK_CHECK(std::memcmp(static_cast<const uint8_t*>(before.raw()) + i * feat.row_bytes(),
                             static_cast<const uint8_t*>(stored.raw()) +
                                 static_cast<size_t>(ids[i]) * feat.row_bytes(),
                             feat.row_bytes()) == 0,
                 "row " + std::to_string(ids[i]) + " differs from the file");
    }
    const std::vector<uint8_t> ones(ids.size() * feat.row_bytes(), 1);  // whatever the dtype
    feat.write(ids, ones.data());
    const Array after = feat.read(ids);
    RANK_CHECK(std::memcmp(after.raw(), ones.data(), after.nbytes()) == 0, "writes were lost");
    return std::string("ok");
  });
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  EXPECT_EQ(crc32_hex(file_crc32(file)), crc32_hex(pf->crc32)) << file << " was written";
}

}  // namespace
}  // namespace tessera::test
