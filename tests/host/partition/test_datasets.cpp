// SPDX-License-Identifier: Apache-2.0
// Partition contracts on the real datasets in data/; balance constraints; METIS vs random cut.
#include <algorithm>

#include "helpers.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test {
namespace {

struct DsCase {
  const char* name;
  int64_t parts;
  PartMethod method;
  int halo;
};

class RealDatasets : public ::testing::TestWithParam<DsCase> {};

TEST_P(RealDatasets, ContractsHold) {
  const DsCase c = GetParam();
  static std::map<std::string, Dataset> cache;
  if (!cache.count(c.name)) {
    cache.emplace(c.name, read_real(c.name));
  }
  const Dataset& ds = cache.at(c.name);
  TempDir tmp;
  PartitionOptions po;
  po.num_parts = c.parts;
  po.method = c.method;
  po.halo_hops = c.halo;
  const PartitionStats st = partition_checked(ds, po, tmp / "out", c.name);
  int64_t nodes = 0;
  for (const auto& p : st.parts) {
    nodes += p.inner_nodes;
    if (c.parts <= ds.num_nodes) {
      EXPECT_GT(p.inner_nodes, 0);
    }
  }
  EXPECT_EQ(nodes, ds.num_nodes);
  if (c.method == PartMethod::kRandom) {
    EXPECT_LE(st.node_balance(), 1.0 + c.parts / static_cast<double>(nodes));
  }
  if (c.method == PartMethod::kMetis && c.parts > 1) {
    EXPECT_LE(st.node_balance(), 1.05);
  }
}

std::vector<DsCase> dataset_cases() {
  std::vector<DsCase> v;
  for (int64_t P : {1, 2, 3, 8})
    for (PartMethod m : {PartMethod::kMetis, PartMethod::kRandom})
      for (int halo : {0, 1, 2})
        v.push_back({"cora", P, m, halo});
  v.push_back({"citeseer", 3, PartMethod::kMetis, 1});
  v.push_back({"citeseer", 8, PartMethod::kRandom, 2});
  v.push_back({"tolokers", 4, PartMethod::kMetis, 1});
  v.push_back({"tolokers", 2, PartMethod::kRandom, 0});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, RealDatasets, ::testing::ValuesIn(dataset_cases()),
                         [](const auto& i) {
                           return fmt::format("{}_P{}_{}_halo{}", i.param.name, i.param.parts,
                                              part_method_name(i.param.method), i.param.halo);
                         });

TEST(Balance, TrainValTestMasksBalancedAcrossPartitions) {
  const Dataset ds = read_real("cora");
  TempDir tmp;
  PartitionOptions po;
  po.num_parts = 4;
  po.balance_masks = {"train_mask", "val_mask", "test_mask"};
  const PartitionStats st = partition_checked(ds, po, tmp / "out");
  ASSERT_EQ(st.constraints,
            (std::vector<std::string>{"train_mask", "val_mask", "test_mask", "(no mask)"}));
  // 140 train nodes into 4 parts: METIS keeps each constraint within its tolerance (3%) plus
  // the granularity of one node.
  for (size_t c = 0; c < st.constraints.size(); ++c) {
    int64_t total = 0, mx = 0;
    for (const auto& p : st.parts) {
      total += p.constraint_weights[c];
      mx = std::max(mx, p.constraint_weights[c]);
    }
    EXPECT_LE(static_cast<double>(mx), 1.03 * total / 4.0 + 1.0) << st.constraints[c];
  }
  EXPECT_EQ(st.parts[0].constraint_weights[0] + st.parts[1].constraint_weights[0] +
                st.parts[2].constraint_weights[0] + st.parts[3].constraint_weights[0],
            140);
  // Without the constraint, train nodes are not balanced as well (sanity that it matters).
  PartitionOptions plain;
  plain.num_parts = 4;
  plain.balance_masks = {};
  std::vector<std::string> names;
  EXPECT_TRUE(balance_weights(ds, plain, &names).empty());
}

TEST(Balance, EdgesBalancedWithBalanceEdges) {
  const Dataset ds = read_real("cora");
  TempDir tmp;
  PartitionOptions po;
  po.num_parts = 4;
  po.balance_edges = true;
  po.balance_masks = {"train_mask"};
  const PartitionStats st = partition_checked(ds, po, tmp / "out");
  ASSERT_EQ(st.constraints.back(), "in_degree");
  EXPECT_LE(st.edge_balance(), 1.05);
  EXPECT_LE(st.constraint_balance(0), 1.05);
}

TEST(Balance, MultiSplitMaskColumn) {
  // tolokers masks are [N, 10] (ten fixed splits): NAME:COLUMN picks one.
  const Dataset ds = read_real("tolokers");
  PartitionOptions po;
  po.num_parts = 4;
  po.balance_masks = {"train_mask:3"};
  std::vector<std::string> names;
  const auto w = balance_weights(ds, po, &names);
  ASSERT_EQ(names, (std::vector<std::string>{"train_mask:3", "(no mask)"}));
  const auto& m = ds.ndata.at("train_mask");
  ASSERT_EQ(m.ndim(), 2);
  int64_t want = 0, got = 0;
  for (int64_t v = 0; v < ds.num_nodes; ++v) {
    want += m.data<uint8_t>()[v * m.dim(1) + 3] != 0;
    got += w[v * 2];
  }
  EXPECT_EQ(got, want);
  const Assignment a = assign_parts(ds, po);
  std::vector<int64_t> per(4, 0);
  for (int64_t v = 0; v < ds.num_nodes; ++v)
    per[a.part[v]] += w[v * 2];
  EXPECT_LE(*std::max_element(per.begin(), per.end()), 1.03 * want / 4.0 + 1.0);
  po.balance_masks = {"train_mask:10"};
  TESSERA_EXPECT_THROW_MSG(balance_weights(ds, po, &names), IndexError, "column 10 outside");
  po.balance_masks = {"train_mask:x"};
  TESSERA_EXPECT_THROW_MSG(balance_weights(ds, po, &names), ValueError, "NAME:COLUMN");
  po.balance_masks = {"nope"};
  TESSERA_EXPECT_THROW_MSG(balance_weights(ds, po, &names), ValueError, "no node array 'nope'");
  po.balance_masks = {"feat"};
  TESSERA_EXPECT_THROW_MSG(balance_weights(ds, po, &names), TypeError, "bool or integer");
  // An integer array of more than 0/1 (classes) is not a mask: it balanced "class != 0".
  po.balance_masks = {"label"};
  TESSERA_EXPECT_THROW_MSG(balance_weights(read_real("cora"), po, &names), ValueError,
                           "a mask holds 0 or 1");
}

TEST(Balance, SetsWeighAsTheMaskTheyCopy) {
  // A node set given as such (Python's balance_ntypes arrays) is the same METIS constraint as
  // the node array holding it, under its own name, and is not a node array of the dataset.
  const Dataset ds = read_real("cora");
  PartitionOptions named;
  named.num_parts = 4;
  named.balance_masks = {"train_mask"};
  PartitionOptions sets = named;
  sets.balance_masks = {};
  const std::vector<int64_t> train = ds.ndata.at("train_mask").to_int64_vector("train_mask");
  sets.balance_sets = {{"train", std::vector<uint8_t>(train.begin(), train.end())}};
  std::vector<std::string> names_named, names_sets;
  EXPECT_EQ(balance_weights(ds, sets, &names_sets), balance_weights(ds, named, &names_named));
  EXPECT_EQ(names_sets, (std::vector<std::string>{"train", "(no mask)"}));
  EXPECT_EQ(assign_parts(ds, sets).part, assign_parts(ds, named).part);
  TempDir tmp;
  const PartitionStats st = partition_checked(ds, sets, tmp / "out");
  EXPECT_EQ(st.constraints, names_sets);
  std::vector<std::string> written;
  for (const ArraySchema& a : load_partition_config(tmp / "out" / "g.json").ndata) {
    written.push_back(a.name);
  }
  EXPECT_EQ(written.size(), ds.ndata.size());
  EXPECT_EQ(std::count(written.begin(), written.end(), "train"), 0);
  sets.balance_sets[0].second.pop_back();
  TESSERA_EXPECT_THROW_MSG(balance_weights(ds, sets, &names_sets), ValueError,
                           "balance set 'train': 2707 entries for the 2708 nodes");
}

TEST(EdgeCut, MetisFarBelowRandomOnCora) {
  const Dataset ds = read_real("cora");
  for (int64_t P : {2, 4, 8}) {
    PartitionOptions po;
    po.num_parts = P;
    const Assignment m = assign_parts(ds, po);
    po.method = PartMethod::kRandom;
    const Assignment r = assign_parts(ds, po);
    const int64_t cm = symmetric_edge_cut(ds.graph, m.part);
    const int64_t cr = symmetric_edge_cut(ds.graph, r.part);
    EXPECT_EQ(cm, m.metis_objval) << "our cut agrees with METIS's objective";
    EXPECT_LT(cm * 4, cr) << "P=" << P << " metis " << cm << " random " << cr;
    // Random cuts about (1 - 1/P) of the edges.
    std::vector<int32_t> distinct(static_cast<size_t>(ds.num_nodes));
    for (int64_t v = 0; v < ds.num_nodes; ++v)
      distinct[v] = static_cast<int32_t>(v);
    const double expect =
        (1.0 - 1.0 / P) * static_cast<double>(symmetric_edge_cut(ds.graph, distinct));
    EXPECT_NEAR(static_cast<double>(cr), expect, 0.1 * expect);
    std::printf("[cora P=%ld] edge cut: metis %ld, random %ld\n", static_cast<long>(P),
                static_cast<long>(cm), static_cast<long>(cr));
  }
}

// Debian's gpmetis on the same .graph file and the same (default) options finds the same cut:
// the METIS adjacency keeps the file's neighbor order.
TEST(EdgeCut, AgreesWithGpmetis) {
  // Debian's `metis` package, which scripts/setup.sh installs.
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/gpmetis")) << "gpmetis not installed";
  const Dataset ds = read_dataset(dataset("metis/4elt.graph.gz"), Format::kMetis, {});
  TempDir tmp;
  // gpmetis reads plain files only.
  ASSERT_EQ(std::system(fmt::format("gzip -dc {} > {}", dataset("metis/4elt.graph.gz").string(),
                                    (tmp / "4elt.graph").string())
                            .c_str()),
            0);
  for (int64_t P : {3, 8}) {
    const std::string cmd =
        fmt::format("/usr/bin/gpmetis {} {} 2>&1", (tmp / "4elt.graph").string(), P);
    FILE* f = ::popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      out.append(buf, n);
    ::pclose(f);
    const auto at = out.find("Edgecut: ");
    ASSERT_NE(at, std::string::npos) << out;
    const int64_t want = std::stoll(out.substr(at + 9));
    PartitionOptions po;
    po.num_parts = P;
    const Assignment a = assign_parts(ds, po);
    EXPECT_EQ(a.metis_objval, want) << "P=" << P;
    EXPECT_EQ(symmetric_edge_cut(ds.graph, a.part), want) << "P=" << P;
  }
}

TEST(Balance, InputVertexWeightsUsedLikeGpmetis) {
  // Two heavy nodes (weight 50) among 100 unit nodes on a ring: the part holding them has far
  // fewer nodes than the other (by node count alone METIS would split 51 / 51).
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t v = 0; v < 102; ++v)
    ring.push_back({v, (v + 1) % 102});
  Dataset ds = make_dataset(102, ring, {true});
  std::vector<int64_t> w(102, 1);
  w[0] = w[1] = 50;
  ds.ndata["node_weight"] = Array::from_vector(std::move(w));
  PartitionOptions po;
  po.num_parts = 2;
  std::vector<std::string> names;
  EXPECT_EQ(balance_weights(ds, po, &names).size(), 102u);
  EXPECT_EQ(names, (std::vector<std::string>{"node_weight"}));
  const Assignment a = assign_parts(ds, po);
  int64_t with_heavy = 0;
  for (int64_t v = 0; v < 102; ++v)
    with_heavy += a.part[v] == a.part[0];
  EXPECT_LT(with_heavy, 60);
  TempDir tmp;
  const PartitionStats st = partition_checked(ds, po, tmp / "out");
  EXPECT_LE(st.constraint_balance(0), 1.05);
}

// Datasets read by the other readers (OGB, SNAP, METIS graph files): run once each.
Dataset read_other(const std::string& rel, bool symmetrize) {
  ReadOptions ro;
  ro.build.symmetrize = symmetrize;
  ro.build.deduplicate = symmetrize;
  return read_dataset(dataset(rel), Format::kAuto, ro);
}

struct OtherCase {
  const char* rel;
  bool symmetrize;
  int64_t parts;
  PartMethod method;
  int halo;
};

class OtherFormats : public ::testing::TestWithParam<OtherCase> {};

TEST_P(OtherFormats, ContractsHold) {
  const OtherCase c = GetParam();
  const Dataset ds = read_other(c.rel, c.symmetrize);
  TempDir tmp;
  PartitionOptions po;
  po.num_parts = c.parts;
  po.method = c.method;
  po.halo_hops = c.halo;
  const PartitionStats st = partition_checked(ds, po, tmp / "out");
  std::printf("[%s P=%ld %s] edge cut %ld of %ld undirected edges\n", c.rel,
              static_cast<long>(c.parts), part_method_name(c.method),
              static_cast<long>(st.edge_cut), static_cast<long>(st.undirected_edges));
}

INSTANTIATE_TEST_SUITE_P(
    All, OtherFormats,
    ::testing::Values(OtherCase{"cora-ogb", true, 3, PartMethod::kMetis, 2},
                      OtherCase{"metis/4elt.graph.gz", false, 8, PartMethod::kMetis, 1},
                      OtherCase{"metis/mdual.graph.gz", false, 4, PartMethod::kMetis, 1},
                      OtherCase{"snap/soc-Slashdot0902.txt.gz", false, 3, PartMethod::kRandom, 1},
                      OtherCase{"snap/ego-Twitter.txt.gz", true, 4, PartMethod::kMetis, 0}),
    [](const auto& i) {
      std::string s = i.param.rel;
      std::replace_if(
          s.begin(), s.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return s;
    });

}  // namespace
}  // namespace tessera::test
