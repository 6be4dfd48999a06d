// SPDX-License-Identifier: Apache-2.0
#include <fstream>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera_test.hpp"

namespace tessera {
namespace {

TEST(ReadNpyDir, Cora) {
  ReadOptions o;
  o.build.symmetrize = true;
  Dataset ds = read_dataset(test::dataset("cora"), Format::kAuto, o);
  EXPECT_EQ(ds.format, "npy");
  EXPECT_EQ(ds.num_nodes, 2708);
  EXPECT_EQ(ds.num_input_edges, 5278);
  EXPECT_EQ(ds.graph.num_edges(), 2 * 5278);
  EXPECT_EQ(ds.ndata.at("feat").shape(), (std::vector<int64_t>{2708, 1433}));
  EXPECT_EQ(ds.ndata.at("label").dtype(), DType::kInt64);
  EXPECT_EQ(ds.ndata.at("train_mask").dtype(), DType::kBool);
  EXPECT_TRUE(ds.meta.contains("license"));
  int64_t train = 0;
  const auto* m = ds.ndata.at("train_mask").data<uint8_t>();
  for (int64_t i = 0; i < 2708; ++i)
    train += m[i];
  EXPECT_EQ(train, 140);  // Planetoid public split
}

TEST(ReadNpyDir, TolokersMultiSplitMasksBecomeNodeMajor) {
  Dataset ds = read_dataset(test::dataset("tolokers"), Format::kNpy, {});
  EXPECT_EQ(ds.num_nodes, 11758);
  EXPECT_EQ(ds.ndata.at("train_mask").shape(), (std::vector<int64_t>{11758, 10}));
}

TEST(EdgeStorage, ReadsWhatMetaJsonSays) {
  using J = nlohmann::json;
  EXPECT_EQ(edge_storage(J::object()), EdgeStorage::kUnknown);
  EXPECT_EQ(edge_storage(J{{"symmetrized", true}}), EdgeStorage::kBothDirections);
  EXPECT_EQ(edge_storage(J{{"symmetrized", true}, {"directed", false}}),
            EdgeStorage::kBothDirections);
  EXPECT_EQ(edge_storage(J{{"symmetrized", false}}), EdgeStorage::kDirected);
  EXPECT_EQ(edge_storage(J{{"directed", false}}), EdgeStorage::kUndirectedOnce);
  EXPECT_EQ(edge_storage(J{{"directed", true}}), EdgeStorage::kDirected);
  EXPECT_EQ(edge_storage(J{{"undirected", true}}), EdgeStorage::kUndirectedOnce);
  EXPECT_EQ(edge_storage(J{{"edges",
                            "each undirected edge is stored once; symmetrize before "
                            "message passing"}}),
            EdgeStorage::kUndirectedOnce);
  // What `tessera generate rmat` writes, with and without --symmetrize.
  EXPECT_EQ(
      edge_storage(J{{"symmetrized", true},
                     {"edges", "both directions stored (reverse of edge i is edge E/2 + i)"}}),
      EdgeStorage::kBothDirections);
  EXPECT_EQ(edge_storage(J{{"symmetrized", false},
                           {"edges",
                            "directed R-MAT edges as generated, self loops and "
                            "duplicates kept (Graph500)"}}),
            EdgeStorage::kDirected);
  EXPECT_EQ(edge_storage(J{{"directed", "no"}}), EdgeStorage::kUnknown) << "not a boolean";
}

// An npy folder with `edges` and meta.json `meta`.
std::filesystem::path write_npy_graph(const std::filesystem::path& d, int64_t n,
                                      const std::vector<std::pair<int64_t, int64_t>>& edges,
                                      const nlohmann::json& meta) {
  std::filesystem::create_directories(d);
  const int64_t e = static_cast<int64_t>(edges.size());
  std::vector<int64_t> ei(static_cast<size_t>(2 * e));
  for (int64_t i = 0; i < e; ++i) {
    ei[i] = edges[i].first;
    ei[e + i] = edges[i].second;
  }
  write_npy(d / "edge_index.npy", DType::kInt64, {2, e}, ei.data());
  nlohmann::json m = meta;
  m["num_nodes"] = n;
  std::ofstream(d / "meta.json") << m.dump();
  return d;
}

ReadOptions sym_options(bool symmetrize, bool if_undirected) {
  ReadOptions o;
  o.build.symmetrize = symmetrize;
  o.symmetrize_if_undirected = if_undirected;
  return o;
}

// A folder that says "symmetrized": true (both directions stored, as generate rmat
// --symmetrize writes them: edge i and edge E/2 + i reverse each other) is read as stored under
// every option: each pair once per direction, the stored rows as edge IDs.
TEST(ReadNpyDir, SymmetrizedInputIsNeverDoubled) {
  test::TempDir tmp;
  const std::vector<std::pair<int64_t, int64_t>> half = {{0, 1}, {1, 2}, {2, 3}, {3, 3}, {0, 1}};
  std::vector<std::pair<int64_t, int64_t>> both = half;
  for (auto [s, d] : half)
    both.push_back({d, s});
  const auto d = write_npy_graph(tmp / "sym", 4, both, {{"symmetrized", true}});
  for (const auto& [sym, auto_sym] : std::vector<std::pair<bool, bool>>{
           {false, false}, {true, false}, {false, true}, {true, true}}) {
    const Dataset ds = read_dataset(d, Format::kAuto, sym_options(sym, auto_sym));
    EXPECT_EQ(ds.num_input_edges, 10);
    EXPECT_EQ(ds.graph.num_edges(), 10) << "symmetrize=" << sym << " auto=" << auto_sym;
    EXPECT_FALSE(ds.build.symmetrize) << "no reverse was added";
    std::set<int64_t> ids(ds.graph.eids.begin(), ds.graph.eids.end());
    EXPECT_EQ(ids.size(), 10u);
    EXPECT_EQ(*ids.rbegin(), 9) << "edge IDs are the stored rows";
  }
}

// Undirected, each pair stored once: symmetrized when asked, or by default where the front end
// asks for the input's own say (symmetrize_if_undirected); kept as stored otherwise. A directed
// input is symmetrized only when asked, and then gains only the reverses it lacks.
TEST(ReadNpyDir, SymmetrizeFollowsWhatTheInputSays) {
  test::TempDir tmp;
  const std::vector<std::pair<int64_t, int64_t>> once = {{0, 1}, {1, 2}, {2, 3}};
  const auto u = write_npy_graph(tmp / "once", 4, once, {{"directed", false}});
  EXPECT_EQ(read_dataset(u, Format::kAuto, sym_options(false, false)).graph.num_edges(), 3);
  EXPECT_EQ(read_dataset(u, Format::kAuto, sym_options(false, true)).graph.num_edges(), 6);
  EXPECT_EQ(read_dataset(u, Format::kAuto, sym_options(true, false)).graph.num_edges(), 6);
  EXPECT_TRUE(read_dataset(u, Format::kAuto, sym_options(false, true)).build.symmetrize);

  // Both directions of 0-1 listed, 1->2 one way, a self loop: 0->1, 1->0, 1->2, 2->1, 2->2.
  const std::vector<std::pair<int64_t, int64_t>> directed = {{0, 1}, {1, 0}, {1, 2}, {2, 2}};
  const auto g = write_npy_graph(tmp / "dir", 3, directed, {{"directed", true}});
  EXPECT_EQ(read_dataset(g, Format::kAuto, sym_options(false, true)).graph.num_edges(), 4);
  const Dataset ds = read_dataset(g, Format::kAuto, sym_options(true, false));
  EXPECT_TRUE(ds.build.symmetrize);
  EXPECT_EQ(ds.graph.num_edges(), 5) << "each pair once per direction";
  std::multiset<std::pair<int64_t, int64_t>> pairs;
  for (int64_t v = 0; v < ds.graph.num_nodes; ++v)
    for (int64_t k = ds.graph.indptr[v]; k < ds.graph.indptr[v + 1]; ++k)
      pairs.insert({ds.graph.indices[k], v});
  EXPECT_EQ(pairs,
            (std::multiset<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 2}}));
}

TEST(ReadNpyDir, RejectsMismatchedArrays) {
  test::TempDir tmp;
  const auto d = tmp / "ds";
  std::filesystem::create_directories(d);
  std::vector<int64_t> ei = {0, 1, 1, 2};
  write_npy(d / "edge_index.npy", DType::kInt64, {2, 2}, ei.data());
  std::vector<float> feat(3 * 2);
  write_npy(d / "feat.npy", DType::kFloat32, {3, 2}, feat.data());
  std::vector<int64_t> label = {0, 1};
  write_npy(d / "label.npy", DType::kInt64, {2}, label.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), ValueError, "label.npy: has 2 rows");
  std::vector<float> flabel = {0, 1, 2};
  write_npy(d / "label.npy", DType::kFloat32, {3}, flabel.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), TypeError, "labels must be integers");
  // Labels below -1 (unlabelled) are refused as the OGB reader refuses them.
  std::vector<int64_t> negative = {0, -7, 1};
  write_npy(d / "label.npy", DType::kInt64, {3}, negative.data());
  TESSERA_EXPECT_THROW_MSG(read_dataset(d, Format::kNpy, {}), ValueError,
                           "node array 'label' holds -7 in row 1");
  std::vector<int32_t> unlabelled = {0, -1, 1};
  write_npy(d / "label.npy", DType::kInt32, {3}, unlabelled.data());
  EXPECT_NO_THROW(read_dataset(d, Format::kNpy, {}));
  std::filesystem::remove(d / "label.npy");
  // A float mask is refused in either layout ([N, S] or [S, N]; the second skipped the check).
  std::vector<float> fmask(9, 0.5f);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{3}, {2, 3}}) {
    write_npy(d / "train_mask.npy", DType::kFloat32, shape, fmask.data());
    TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), TypeError, "a mask must be bool or integer");
  }
  std::filesystem::remove(d / "train_mask.npy");
  std::vector<int64_t> bad = {0, 1, 1, 7};
  write_npy(d / "edge_index.npy", DType::kInt64, {2, 2}, bad.data());
  TESSERA_EXPECT_THROW_MSG(read_dataset(d, Format::kNpy, {}), IndexError, "outside [0, 3)");
  write_npy(d / "edge_index.npy", DType::kFloat32, {2, 1}, feat.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), TypeError, "integer");
  write_npy(d / "edge_index.npy", DType::kInt64, {4}, ei.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), ValueError, "shape [2, E]");
}

// meta.json's node count is refused when negative, absurd or not a whole number, naming it.
TEST(ReadNpyDir, RejectsBadNodeCounts) {
  test::TempDir tmp;
  const auto d = tmp / "ds";
  for (const char* bad :
       {"-5", "1e3", "\"12\"", "2.5", "1099511627777", "18446744073709551615", "null"}) {
    write_npy_graph(d, 3, {{0, 1}, {1, 2}}, {});
    std::ofstream(d / "meta.json") << "{\"num_nodes\": " << bad << "}";
    TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), ValueError, "meta.json: num_nodes");
  }
  std::ofstream(d / "meta.json") << "{\"num_nodes\": 3}";
  EXPECT_EQ(read_npy_dir(d, {}).edges.num_nodes, 3);
}

}  // namespace
}  // namespace tessera
