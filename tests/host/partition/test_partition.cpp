// SPDX-License-Identifier: Apache-2.0
// End-to-end partition contracts on generated graphs: write, load, validate.
#include <algorithm>
#include <fstream>
#include <random>

#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/partition/book.hpp"

namespace tessera::test {
namespace {

// A random multigraph with self loops, duplicate edges and isolated nodes (the last 10%).
std::vector<std::pair<int64_t, int64_t>> messy_edges(int64_t n, int64_t m, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t connected = std::max<int64_t>(1, n - n / 10);
  std::vector<std::pair<int64_t, int64_t>> e;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t s = static_cast<int64_t>(rng() % connected);
    const int64_t d = static_cast<int64_t>(rng() % connected);
    e.push_back({s, d});
    if (i % 7 == 0) e.push_back({s, d});   // duplicate
    if (i % 11 == 0) e.push_back({s, s});  // self loop
  }
  return e;
}

struct Case {
  int64_t parts;
  PartMethod method;
  int halo;
};

std::string case_name(const Case& c) {
  return fmt::format("P{}_{}_halo{}", c.parts, part_method_name(c.method), c.halo);
}

class GeneratedGraph : public ::testing::TestWithParam<Case> {};

TEST_P(GeneratedGraph, ContractsHoldDirectedAndSymmetrized) {
  const Case c = GetParam();
  TempDir tmp;
  const auto edges = messy_edges(200, 600, 3);
  for (BuildOptions bo : {BuildOptions{false, false, false}, BuildOptions{true, false, false},
                          BuildOptions{true, true, true}}) {
    const Dataset ds = make_dataset(200, edges, bo);
    PartitionOptions po;
    po.num_parts = c.parts;
    po.method = c.method;
    po.halo_hops = c.halo;
    const PartitionStats st = partition_checked(ds, po, tmp / "out");
    ASSERT_EQ(static_cast<int64_t>(st.parts.size()), c.parts);
    int64_t nodes = 0, edges_total = 0;
    for (const auto& p : st.parts) {
      nodes += p.inner_nodes;
      edges_total += p.inner_edges;
      if (c.halo == 0) {
        EXPECT_EQ(p.halo_nodes, 0);
      }
      EXPECT_GE(p.local_edges, p.inner_edges);
      if (c.halo < 2) {
        EXPECT_EQ(p.local_edges, p.inner_edges);
      }
    }
    EXPECT_EQ(nodes, 200);
    EXPECT_EQ(edges_total, ds.graph.num_edges());
    if (c.parts > 1) {
      EXPECT_GT(st.edge_cut, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GeneratedGraph,
    ::testing::Values(Case{1, PartMethod::kMetis, 1}, Case{2, PartMethod::kMetis, 0},
                      Case{3, PartMethod::kMetis, 2}, Case{8, PartMethod::kMetis, 1},
                      Case{1, PartMethod::kRandom, 0}, Case{2, PartMethod::kRandom, 2},
                      Case{3, PartMethod::kRandom, 1}, Case{8, PartMethod::kRandom, 3}),
    [](const auto& info) { return case_name(info.param); });

TEST(Partition, MorePartsThanNodesLeavesEmptyPartitions) {
  TempDir tmp;
  const Dataset ds = make_dataset(5, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}}, {true});
  for (PartMethod m : {PartMethod::kMetis, PartMethod::kRandom}) {
    for (int halo : {0, 1, 2}) {
      PartitionOptions po;
      po.num_parts = 8;
      po.method = m;
      po.halo_hops = halo;
      const PartitionStats st = partition_checked(ds, po, tmp / "out");
      int64_t empty = 0;
      for (const auto& p : st.parts)
        empty += p.inner_nodes == 0;
      EXPECT_EQ(empty, 3);
      ASSERT_FALSE(st.warnings.empty());
      EXPECT_NE(st.warnings.back().find("3 of 8 partitions are empty"), std::string::npos);
      const PartitionBook b = PartitionBook::load(tmp / "out" / "g.json");
      for (int64_t v = 0; v < 5; ++v)
        EXPECT_EQ(b.node_range(b.nid2part(v)).second - b.node_range(b.nid2part(v)).first, 1);
    }
  }
}

TEST(Partition, EmptyGraphAndEdgelessGraph) {
  TempDir tmp;
  const Dataset empty = make_dataset(0, {});
  PartitionOptions po;
  po.num_parts = 3;
  partition_checked(empty, po, tmp / "a");
  const Dataset iso = make_dataset(50, {});
  po.num_parts = 4;
  po.halo_hops = 2;
  const PartitionStats st = partition_checked(iso, po, tmp / "b");
  EXPECT_EQ(st.edge_cut, 0);
  EXPECT_EQ(st.num_edges, 0);
}

TEST(Partition, LoadPartitionMapsFilesAndMatchesTheBook) {
  TempDir tmp;
  const Dataset ds = make_dataset(300, messy_edges(300, 900, 5), {true});
  PartitionOptions po;
  po.num_parts = 3;
  po.halo_hops = 1;
  partition_checked(ds, po, tmp / "out", "toy");
  const PartitionConfig c = load_partition_config(tmp / "out" / "toy.json");
  EXPECT_EQ(c.graph_name, "toy");
  EXPECT_EQ(c.num_nodes, 300);
  EXPECT_EQ(c.num_edges, ds.graph.num_edges());
  EXPECT_EQ(c.num_input_edges, ds.num_input_edges);
  EXPECT_TRUE(c.build.symmetrize);
  EXPECT_EQ(c.part_method, "metis");
  ASSERT_EQ(c.ndata.size(), 3u);
  ASSERT_EQ(c.edata.size(), 1u);
  EXPECT_EQ(c.edata[0].shape, (std::vector<int64_t>{ds.graph.num_edges()}));
  const PartitionBook book = PartitionBook::from_config(c);
  for (int64_t p = 0; p < 3; ++p) {
    const LocalPartition L = load_partition(c, p, {true, true});
    EXPECT_FALSE(L.indptr.writable());  // memory-mapped read-only
    const auto* nid = L.nid.data<int64_t>();
    const auto* onid = L.orig_nid.data<int64_t>();
    const auto* feat = L.ndata.at("feat").data<float>();
    for (int64_t i = 0; i < L.num_inner_nodes; ++i) {
      EXPECT_EQ(book.nid2local(nid[i]), (std::pair<int32_t, int64_t>{static_cast<int32_t>(p), i}));
      EXPECT_EQ(feat[2 * i], static_cast<float>(onid[i]));  // features moved with their node
    }
    for (int64_t i = L.num_inner_nodes; i < L.num_nodes(); ++i)
      EXPECT_NE(book.nid2part(nid[i]), p);
    // Edge weights follow orig_eid (reverse edge E + i carries row i).
    const auto* oeid = L.orig_eid.data<int64_t>();
    const auto* eid = L.eid.data<int64_t>();
    const auto* w = L.edata.at("weight").data<double>();
    const int64_t es = book.edge_range(p).first;
    for (int64_t k = 0; k < L.num_edges(); ++k)
      EXPECT_EQ(w[eid[k] - es], static_cast<double>(oeid[k] % ds.num_input_edges));
  }
}

TEST(Partition, ConfigGraphNameIsTheOutputName) {
  // DGL: <out>/<graph_name>.json carries that graph_name, whatever the dataset was called.
  TempDir tmp;
  Dataset ds = make_dataset(50, messy_edges(50, 100, 3), {true});
  ds.name = "source-dataset";
  PartitionOptions po;
  po.num_parts = 2;
  const PartitionStats st = partition_checked(ds, po, tmp / "out", "renamed");
  EXPECT_EQ(st.graph_name, "renamed");
  EXPECT_EQ(load_partition_config(tmp / "out" / "renamed.json").graph_name, "renamed");
}

TEST(Partition, DeterministicOutput) {
  TempDir tmp;
  const Dataset ds = make_dataset(400, messy_edges(400, 1500, 9), {true});
  for (PartMethod m : {PartMethod::kMetis, PartMethod::kRandom}) {
    PartitionOptions po;
    po.num_parts = 4;
    po.method = m;
    po.halo_hops = 2;
    partition_checked(ds, po, tmp / "a");
    partition_checked(ds, po, tmp / "b");
    const PartitionConfig a = load_partition_config(tmp / "a" / "g.json");
    const PartitionConfig b = load_partition_config(tmp / "b" / "g.json");
    for (int64_t p = 0; p < 4; ++p) {
      ASSERT_EQ(a.parts[p].files.size(), b.parts[p].files.size());
      for (size_t f = 0; f < a.parts[p].files.size(); ++f)
        EXPECT_EQ(a.parts[p].files[f].crc32, b.parts[p].files[f].crc32)
            << part_method_name(m) << " part " << p << " " << a.parts[p].files[f].name;
    }
  }
}

TEST(Partition, OnDiskLayoutIsNpyOnly) {
  TempDir tmp;
  const Dataset ds = make_dataset(30, messy_edges(30, 60, 1), {true});
  PartitionOptions po;
  po.num_parts = 2;
  partition_checked(ds, po, tmp / "out", "toy");
  std::vector<std::string> top;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "out"))
    top.push_back(e.path().filename().string());
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"part0", "part1", "toy.json"}));
  for (const auto& e : std::filesystem::directory_iterator(tmp / "out" / "part0"))
    EXPECT_EQ(e.path().extension(), ".npy") << e.path();
  EXPECT_TRUE(std::filesystem::exists(tmp / "out" / "part0" / "node_feat.npy"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "out" / "part1" / "edge_weight.npy"));
  // No temporary folders left beside the output.
  for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string()[0] != '.', true) << e.path();
}

// --low-memory parks the CSC in a temporary file while METIS runs and from relabel on.
std::vector<std::string> phase_names(const PartitionStats& st) {
  std::vector<std::string> v;
  for (const auto& p : st.phases)
    v.push_back(p.name);
  return v;
}

void expect_same_files(const std::filesystem::path& a, const std::filesystem::path& b) {
  const PartitionConfig ca = load_partition_config(a);
  const PartitionConfig cb = load_partition_config(b);
  ASSERT_EQ(ca.parts.size(), cb.parts.size());
  for (size_t p = 0; p < ca.parts.size(); ++p) {
    ASSERT_EQ(ca.parts[p].files.size(), cb.parts[p].files.size());
    for (size_t f = 0; f < ca.parts[p].files.size(); ++f)
      EXPECT_EQ(ca.parts[p].files[f].crc32, cb.parts[p].files[f].crc32)
          << "part " << p << " " << ca.parts[p].files[f].name;
  }
}

WriteOptions quiet_out(const std::filesystem::path& dir) {
  set_quiet(true);
  WriteOptions wo;
  wo.out_dir = dir;
  wo.name = "g";
  wo.overwrite = true;
  return wo;
}

TEST(PartitionLowMemory, SameFilesAndTheDatasetComesBackUnchanged) {
  TempDir tmp;
  for (bool simple : {false, true}) {
    Dataset ds = make_dataset(400, messy_edges(400, 1500, 9), {true, simple, simple});
    const Graph before = ds.graph;
    PartitionOptions po;
    po.num_parts = 4;
    po.halo_hops = 2;
    partition_checked(ds, po, tmp / "plain");
    po.low_memory = true;
    PhaseTimer timer;
    const PartitionStats st = partition_dataset(ds, po, quiet_out(tmp / "low"), timer);
    expect_same_files(tmp / "plain" / "g.json", tmp / "low" / "g.json");
    const auto names = phase_names(st);
    for (const char* want : {"spill CSR", "METIS", "reload CSR", "restore CSR"})
      EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    EXPECT_EQ(ds.graph.indptr, before.indptr);
    EXPECT_EQ(ds.graph.indices, before.indices);
    EXPECT_EQ(ds.graph.eids, before.eids);
    EXPECT_TRUE(validate_partitions(tmp / "low" / "g.json", &ds).ok());
    // Nothing but the partition output is left, in it or beside it (the spill file had no name).
    for (const auto& e : std::filesystem::recursive_directory_iterator(tmp.path()))
      EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  }
}

TEST(PartitionLowMemory, RealDatasetAndConsumingOverload) {
  TempDir tmp;
  Dataset ds = read_real("cora");
  PartitionOptions po;
  po.num_parts = 3;
  partition_checked(ds, po, tmp / "plain");
  po.low_memory = true;
  PhaseTimer timer;
  // The dataset is handed over: its CSC is not read back at the end.
  const PartitionStats st = partition_dataset(std::move(ds), po, quiet_out(tmp / "low"), timer);
  // Consumed: the CSC is gone and the dataset says so.
  EXPECT_TRUE(ds.graph.indices.empty());  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_FALSE(ds.finalized);
  const auto names = phase_names(st);
  EXPECT_NE(std::find(names.begin(), names.end(), "spill CSR"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "restore CSR"), names.end());
  expect_same_files(tmp / "plain" / "g.json", tmp / "low" / "g.json");
  EXPECT_TRUE(validate_partitions(tmp / "low" / "g.json", nullptr).ok());
}

// A failure while the CSC is parked hands the dataset back as it was, whichever step failed.
TEST(PartitionLowMemory, FailuresStillRestoreTheDataset) {
  TempDir tmp;
  for (bool after_relabel : {false, true}) {
    SCOPED_TRACE(after_relabel ? "node array one row short" : "METIS refuses ufactor 0");
    Dataset ds = make_dataset(200, messy_edges(200, 600, 3), {true});
    PartitionOptions po;
    po.num_parts = 4;
    po.low_memory = true;
    if (after_relabel) {
      // Found only when partition rows are gathered, after the CSC was parked a second time.
      ds.ndata["short"] = Array::zeros(DType::kFloat32, {199, 3});
    } else {
      po.ufactor = 0;  // METIS_ERROR_INPUT, while the CSC is parked
    }
    const Graph before = ds.graph;
    PhaseTimer timer;
    EXPECT_ANY_THROW(partition_dataset(ds, po, quiet_out(tmp / "out"), timer));
    std::vector<std::string> names;
    for (const auto& p : timer.phases())
      names.push_back(p.name);
    EXPECT_EQ(std::find(names.begin(), names.end(), "relabel") != names.end(), after_relabel);
    EXPECT_TRUE(ds.finalized);
    EXPECT_EQ(ds.graph.indices, before.indices);
    EXPECT_EQ(ds.graph.eids, before.eids);
    EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
  }
}

TEST(PartitionLowMemory, ConstDatasetIsRefusedAndRandomIgnoresIt) {
  TempDir tmp;
  Dataset ds = make_dataset(100, messy_edges(100, 300, 5), {true});
  PartitionOptions po;
  po.num_parts = 2;
  po.low_memory = true;
  PhaseTimer timer;
  const Dataset& cds = ds;
  EXPECT_THROW(partition_dataset(cds, po, quiet_out(tmp / "a"), timer), ValueError);
  po.method = PartMethod::kRandom;  // holds no second copy: nothing to park
  const PartitionStats st = partition_dataset(ds, po, quiet_out(tmp / "b"), timer);
  const auto names = phase_names(st);
  EXPECT_EQ(std::find(names.begin(), names.end(), "spill CSR"), names.end());
}

}  // namespace
}  // namespace tessera::test
