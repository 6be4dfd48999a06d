// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/graph/rmat.hpp"
#include "tessera_test.hpp"

namespace tessera {
namespace {

struct ThreadGuard {
  ~ThreadGuard() { set_num_threads(0); }
};

TEST(Rmat, CountsAndRange) {
  RmatOptions o;
  o.scale = 10;
  o.edge_factor = 8;
  Dataset ds = generate_rmat(o);
  EXPECT_EQ(ds.format, "rmat");
  EXPECT_EQ(ds.edges.num_nodes, 1024);
  ASSERT_EQ(ds.edges.num_edges(), 8192);
  for (int64_t i = 0; i < 8192; ++i) {
    ASSERT_GE(ds.edges.src[i], 0);
    ASSERT_LT(ds.edges.src[i], 1024);
    ASSERT_GE(ds.edges.dst[i], 0);
    ASSERT_LT(ds.edges.dst[i], 1024);
  }
  EXPECT_EQ(ds.meta.at("scale"), 10);
  EXPECT_TRUE(ds.ndata.empty());
}

TEST(Rmat, DeterministicAcrossThreadCountsAndChunks) {
  ThreadGuard guard;
  RmatOptions o;
  o.scale = 16;
  o.edge_factor = 4;
  o.seed = 42;
  o.feat_dim = 3;
  o.num_classes = 5;
  o.train_frac = 0.5;
  o.val_frac = 0.2;
  o.test_frac = 0.2;
  set_num_threads(1);
  Dataset a = generate_rmat(o);
  set_num_threads(3);
  Dataset b = generate_rmat(o);
  EXPECT_EQ(a.edges.src, b.edges.src);
  EXPECT_EQ(a.edges.dst, b.edges.dst);
  for (const char* k : {"label", "train_mask", "val_mask", "test_mask"})
    EXPECT_EQ(a.ndata.at(k).to_int64_vector(k), b.ndata.at(k).to_int64_vector(k)) << k;
  const Array& fa = a.ndata.at("feat");
  const Array& fb = b.ndata.at("feat");
  EXPECT_TRUE(std::equal(fa.data<float>(), fa.data<float>() + fa.numel(), fb.data<float>()));

  // Any chunking of the edge range gives the same edges.
  std::vector<int64_t> s(1000), d(1000);
  rmat_edges(o, 12345, 13345, s.data(), d.data());
  EXPECT_TRUE(std::equal(s.begin(), s.end(), a.edges.src.begin() + 12345));
  EXPECT_TRUE(std::equal(d.begin(), d.end(), a.edges.dst.begin() + 12345));

  o.seed = 43;
  Dataset c = generate_rmat(o);
  EXPECT_NE(a.edges.src, c.edges.src);
}

TEST(Rmat, DegreeSkewAndPermutation) {
  RmatOptions o;
  o.scale = 14;
  o.edge_factor = 16;
  o.permute = false;
  Dataset plain = generate_rmat(o);
  o.permute = true;
  Dataset perm = generate_rmat(o);
  const int64_t n = 1 << 14, e = n * 16;
  std::vector<int64_t> deg(n, 0);
  for (int64_t v : plain.edges.src)
    ++deg[v];
  const int64_t max_deg = *std::max_element(deg.begin(), deg.end());
  // R-MAT with a+b = 0.76: node 0 expects 0.76^14 * E ~ 5600 out-edges vs. a mean of 16.
  EXPECT_GT(max_deg, 100 * (e / n));
  EXPECT_EQ(max_deg, deg[0]);  // unpermuted, the hub is node 0
  const int64_t isolated = std::count(deg.begin(), deg.end(), 0);
  EXPECT_GT(isolated, n / 10);  // heavy tail: many nodes without out-edges

  // The permutation is a bijection applied to both ends of every edge.
  std::map<int64_t, int64_t> fwd, back;
  for (int64_t i = 0; i < e; ++i) {
    for (auto [u, pu] : {std::pair{plain.edges.src[i], perm.edges.src[i]},
                         std::pair{plain.edges.dst[i], perm.edges.dst[i]}}) {
      auto [it, fresh] = fwd.emplace(u, pu);
      ASSERT_EQ(it->second, pu);
      auto [jt, fresh2] = back.emplace(pu, u);
      ASSERT_EQ(jt->second, u);
    }
  }
  EXPECT_NE(fwd.at(0), 0);  // the hub moved
}

TEST(Rmat, NodeDataShapesAndFractions) {
  RmatOptions o;
  o.scale = 12;
  o.edge_factor = 2;
  o.feat_dim = 8;
  o.num_classes = 4;
  o.train_frac = 0.6;
  o.val_frac = 0.2;
  o.test_frac = 0.1;
  Dataset ds = generate_rmat(o);
  const int64_t n = 4096;
  EXPECT_EQ(ds.ndata.at("feat").shape(), (std::vector<int64_t>{n, 8}));
  const auto label = ds.ndata.at("label").to_int64_vector("label");
  std::vector<int64_t> per_class(4, 0);
  for (int64_t l : label) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 4);
    ++per_class[l];
  }
  for (int64_t c : per_class)
    EXPECT_NEAR(c, n / 4, n / 16);
  const auto tr = ds.ndata.at("train_mask").to_int64_vector("t");
  const auto va = ds.ndata.at("val_mask").to_int64_vector("v");
  const auto te = ds.ndata.at("test_mask").to_int64_vector("t");
  int64_t ntr = 0, nva = 0, nte = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(tr[i] + va[i] + te[i], 1);  // disjoint
    ntr += tr[i];
    nva += va[i];
    nte += te[i];
  }
  EXPECT_NEAR(ntr, 0.6 * n, 0.05 * n);
  EXPECT_NEAR(nva, 0.2 * n, 0.05 * n);
  EXPECT_NEAR(nte, 0.1 * n, 0.05 * n);
  // Features carry the class: per-class means differ from each other.
  const float* f = ds.ndata.at("feat").data<float>();
  std::vector<double> mean(4, 0);
  for (int64_t i = 0; i < n; ++i)
    mean[label[i]] += f[i * 8];
  for (int c = 0; c < 4; ++c)
    mean[c] /= per_class[c];
  const auto [mn, mx] = std::minmax_element(mean.begin(), mean.end());
  EXPECT_GT(*mx - *mn, 0.2);
}

TEST(Rmat, SpecParsingAndReadDataset) {
  RmatOptions o = parse_rmat_spec("rmat:21,25");
  EXPECT_EQ(o.scale, 21);
  EXPECT_EQ(o.edge_factor, 25);
  EXPECT_EQ(o.seed, 1u);
  EXPECT_EQ(parse_rmat_spec("rmat:8,4,99").seed, 99u);
  EXPECT_TRUE(is_rmat_spec("rmat:1,1"));
  EXPECT_FALSE(is_rmat_spec("graph.rmat"));
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:10"), ValueError,
                           "R-MAT spec 'rmat:10' must look like rmat:SCALE,EDGE_FACTOR[,SEED]");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:1,2,3,4"), ValueError, "got 4 fields");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:x,8"), ValueError, "SCALE 'x' is not an integer");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:41,8"), ValueError, "SCALE 41 is outside [0, 40]");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:10,-1"), ValueError, "EDGE_FACTOR -1 is negative");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:10,8,-3"), ValueError, "SEED '-3'");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat:10,,1"), ValueError, "EDGE_FACTOR ''");
  TESSERA_EXPECT_THROW_MSG(parse_rmat_spec("rmat: 10,8"), ValueError, "SCALE ' 10'");
  RmatOptions bad;
  bad.a = 0.9;
  TESSERA_EXPECT_THROW_MSG(generate_rmat(bad), ValueError, "a+b+c <= 1");
  bad = RmatOptions{};
  bad.train_frac = 0.9;
  bad.val_frac = 0.2;
  TESSERA_EXPECT_THROW_MSG(generate_rmat(bad), ValueError, "split fractions");

  ReadOptions ro;
  ro.build.symmetrize = true;
  Dataset ds = read_dataset("rmat:8,4,7", Format::kAuto, ro);
  EXPECT_TRUE(ds.finalized);
  EXPECT_EQ(ds.format, "rmat");
  EXPECT_EQ(ds.num_nodes, 256);
  EXPECT_EQ(ds.num_input_edges, 1024);
  // Every input edge, plus the reverse of each one whose reversed pair the input lacks (R-MAT
  // repeats pairs, draws both directions of some and self loops).
  const Dataset raw = generate_rmat(parse_rmat_spec("rmat:8,4,7"));
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < raw.edges.num_edges(); ++i)
    pairs.insert({raw.edges.src[i], raw.edges.dst[i]});
  int64_t lacking = 0;
  for (int64_t i = 0; i < raw.edges.num_edges(); ++i)
    lacking += pairs.count({raw.edges.dst[i], raw.edges.src[i]}) == 0;
  EXPECT_LT(lacking, 1024);
  EXPECT_EQ(ds.graph.num_edges(), 1024 + lacking);
  TESSERA_EXPECT_THROW_MSG(read_dataset("rmat:8", Format::kAuto, {}), ValueError, "rmat:8");
}

TEST(Rmat, ZeroEdgesAndScaleZero) {
  RmatOptions o;
  o.scale = 0;
  o.edge_factor = 3;
  Dataset ds = generate_rmat(o);
  EXPECT_EQ(ds.edges.num_nodes, 1);
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{0, 0, 0}));
  o.scale = 5;
  o.edge_factor = 0;
  ds = generate_rmat(o);
  EXPECT_EQ(ds.edges.num_nodes, 32);
  EXPECT_EQ(ds.edges.num_edges(), 0);
}

TEST(Rmat, AGraphLargerThanMemoryIsRefusedByName) {
  // 2^40 nodes and 2^43 edges: 137 TiB of edge list, refused before anything is allocated
  // (it was a bare std::bad_alloc).
  RmatOptions o;
  o.scale = 40;
  o.edge_factor = 8;
  TESSERA_EXPECT_THROW_MSG(generate_rmat(o), ValueError,
                           "R-MAT scale 40, edge factor 8: 1099511627776 nodes and 8796093022208 "
                           "edges need at least 137.00 TiB in memory, more than this machine's");
}

// `tessera generate rmat` end to end, when the tool has been built alongside the tests.
TEST(Rmat, GenerateCommandWritesAReadableNpyFolder) {
  if (!std::filesystem::exists(TESSERA_TOOL)) GTEST_SKIP() << "tessera tool not built";
  test::TempDir tmp;
  const auto out = tmp / "g";
  const std::string base = std::string(TESSERA_TOOL) + " generate rmat --scale 9 --edge-factor 4 " +
                           "--seed 5 --feat-dim 6 --num-classes 3 --train-frac 0.5 " +
                           "--val-frac 0.25 --test-frac 0.25 --out " + out.string();
  ASSERT_EQ(std::system((base + " 2>/dev/null").c_str()), 0);
  Dataset ds = read_dataset(out, Format::kAuto, {});
  EXPECT_EQ(ds.format, "npy");
  EXPECT_EQ(ds.num_nodes, 512);
  EXPECT_EQ(ds.num_input_edges, 2048);
  EXPECT_EQ(ds.ndata.at("feat").shape(), (std::vector<int64_t>{512, 6}));
  EXPECT_EQ(ds.meta.at("scale"), 9);
  // Same edges as the in-memory generator.
  RmatOptions o = parse_rmat_spec("rmat:9,4,5");
  Dataset mem = generate_rmat(o);
  const Array ei = read_npy(out / "edge_index.npy");
  const auto flat = ei.to_int64_vector("edge_index");
  EXPECT_TRUE(std::equal(mem.edges.src.begin(), mem.edges.src.end(), flat.begin()));
  EXPECT_TRUE(std::equal(mem.edges.dst.begin(), mem.edges.dst.end(), flat.begin() + 2048));
  // Existing output is refused without --overwrite; bad arguments fail.
  EXPECT_NE(std::system((base + " 2>/dev/null").c_str()), 0);
  EXPECT_EQ(std::system((base + " --overwrite --symmetrize 2>/dev/null").c_str()), 0);
  EXPECT_EQ(read_npy_header(out / "edge_index.npy").shape, (std::vector<int64_t>{2, 4096}));
  EXPECT_NE(
      std::system((std::string(TESSERA_TOOL) + " generate rmat --scale 99 --edge-factor 4 --out " +
                   (tmp / "h").string() + " 2>/dev/null")
                      .c_str()),
      0);
  EXPECT_FALSE(std::filesystem::exists(tmp / "h"));
}

}  // namespace
}  // namespace tessera
