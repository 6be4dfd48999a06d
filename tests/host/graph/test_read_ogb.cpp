// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera_test.hpp"
#include "text_files.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::vector<std::pair<int64_t, int64_t>> sorted_pairs(const EdgeList& e) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (int64_t i = 0; i < e.num_edges(); ++i)
    p.emplace_back(e.src[i], e.dst[i]);
  std::sort(p.begin(), p.end());
  return p;
}

TEST(ReadOgb, CoraAgreesWithNpyCora) {
  const auto dir = test::dataset("cora-ogb");
  EXPECT_EQ(detect_format(dir), Format::kOgb);
  Dataset ogb = read_ogb_dir(dir, {});
  Dataset npy = read_npy_dir(test::dataset("cora"), {});
  EXPECT_EQ(ogb.format, "ogb");
  EXPECT_EQ(ogb.name, "cora-ogb");
  EXPECT_EQ(ogb.edges.num_nodes, 2708);
  EXPECT_EQ(ogb.edges.num_edges(), 5278);
  EXPECT_EQ(sorted_pairs(ogb.edges), sorted_pairs(npy.edges));

  // The same binary features: float32 from the CSV, uint8 in data/cora's compact npy.
  const Array& f1 = ogb.ndata.at("feat");
  const Array& f2 = npy.ndata.at("feat");
  ASSERT_EQ(f1.dtype(), DType::kFloat32);
  ASSERT_EQ(f2.dtype(), DType::kUInt8);
  ASSERT_EQ(f1.shape(), f2.shape());
  EXPECT_TRUE(std::equal(f1.data<float>(), f1.data<float>() + f1.numel(), f2.data<uint8_t>(),
                         [](float a, uint8_t b) { return a == static_cast<float>(b); }));

  const Array& l1 = ogb.ndata.at("label");
  ASSERT_EQ(l1.dtype(), DType::kInt64);
  ASSERT_EQ(l1.shape(), (std::vector<int64_t>{2708}));
  EXPECT_EQ(l1.to_int64_vector("ogb"), npy.ndata.at("label").to_int64_vector("npy"));

  EXPECT_EQ(ogb.meta.at("ogb_split"), "planetoid");
  for (const char* m : {"train_mask", "val_mask", "test_mask"}) {
    const Array& a = ogb.ndata.at(m);
    ASSERT_EQ(a.dtype(), DType::kBool) << m;
    EXPECT_EQ(a.to_int64_vector(m), npy.ndata.at(m).to_int64_vector(m)) << m;
  }
  // Through read_dataset with the build options (auto-detected).
  ReadOptions o;
  o.build.symmetrize = true;
  Dataset fin = read_dataset(dir, Format::kAuto, o);
  EXPECT_EQ(fin.graph.num_edges(), 2 * 5278);
}

// Writes a small OGB folder: 4 nodes, 3 edges, 2 features, labels with NaN/empty.
fs::path make_ogb(const test::TempDir& tmp) {
  const fs::path d = tmp / "toy";
  fs::create_directories(d / "raw");
  fs::create_directories(d / "split" / "time");
  test::write_gz(d / "raw" / "num-node-list.csv.gz", "4\n");
  test::write_gz(d / "raw" / "num-edge-list.csv.gz", "3\n");
  test::write_gz(d / "raw" / "edge.csv.gz", "0,1\n1,2\n3,0\n");
  test::write_gz(d / "raw" / "node-feat.csv.gz", "0.5,1\n-2,3e-1\n0,0\n1.25,-0.75\n");
  test::write_gz(d / "raw" / "node-label.csv.gz", "1\nnan\n\n2.0\n");
  test::write_gz(d / "split" / "time" / "train.csv.gz", "0\n3\n");
  test::write_gz(d / "split" / "time" / "valid.csv.gz", "1\n");
  test::write_text(d / "split" / "time" / "test.csv", "2\n");  // plain .csv is accepted too
  return d;
}

TEST(ReadOgb, SmallFolderLabelsAndSplits) {
  test::TempDir tmp;
  const fs::path d = make_ogb(tmp);
  Dataset ds = read_ogb_dir(d, {});
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{1, 2, 0}));
  const Array& f = ds.ndata.at("feat");
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(std::vector<float>(f.data<float>(), f.data<float>() + 8),
            (std::vector<float>{0.5f, 1, -2, 0.3f, 0, 0, 1.25f, -0.75f}));
  EXPECT_EQ(ds.ndata.at("label").to_int64_vector("l"), (std::vector<int64_t>{1, -1, -1, 2}));
  EXPECT_EQ(ds.ndata.at("train_mask").to_int64_vector("m"), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(ds.ndata.at("val_mask").to_int64_vector("m"), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(ds.ndata.at("test_mask").to_int64_vector("m"), (std::vector<int64_t>{0, 0, 1, 0}));

  // A second split makes the choice ambiguous; ogb_split picks one.
  fs::create_directories(d / "split" / "random");
  for (const char* s : {"train", "valid", "test"})
    test::write_gz(d / "split" / "random" / (std::string(s) + ".csv.gz"), "1\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "several splits (random, time)");
  ReadOptions o;
  o.ogb_split = "random";
  ds = read_ogb_dir(d, o);
  EXPECT_EQ(ds.ndata.at("train_mask").to_int64_vector("m"), (std::vector<int64_t>{0, 1, 0, 0}));
  o.ogb_split = "nope";
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, o), ValueError,
                           "no split named 'nope' (available: random, time)");
}

TEST(ReadOgb, OptionalFilesAndMultiColumnLabels) {
  test::TempDir tmp;
  const fs::path d = make_ogb(tmp);
  fs::remove_all(d / "split");
  fs::remove(d / "raw" / "node-feat.csv.gz");
  test::write_gz(d / "raw" / "node-label.csv.gz", "1,0\n0,1\n1,1\nNaN,0\n");
  test::write_gz(d / "raw" / "edge-feat.csv.gz", "1\n2\n3\n");
  test::write_gz(d / "raw" / "node_year.csv.gz", "2011\n2019\n2020\n1999\n");
  test::write_text(d / "raw" / "node-score.csv", "0.5,1\n1,1\n2,2\n3,3\n");
  Dataset ds = read_dataset(d, Format::kOgb, {});
  EXPECT_EQ(ds.ndata.at("year").dtype(), DType::kInt64);
  EXPECT_EQ(ds.ndata.at("year").to_int64_vector("y"),
            (std::vector<int64_t>{2011, 2019, 2020, 1999}));
  EXPECT_EQ(ds.ndata.at("score").dtype(), DType::kFloat32);
  EXPECT_EQ(ds.ndata.at("score").shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_FALSE(ds.ndata.count("feat"));
  EXPECT_FALSE(ds.ndata.count("train_mask"));
  EXPECT_EQ(ds.ndata.at("label").shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(ds.ndata.at("label").to_int64_vector("l"),
            (std::vector<int64_t>{1, 0, 0, 1, 1, 1, -1, 0}));
  EXPECT_EQ(ds.edata.at("feat").shape(), (std::vector<int64_t>{3, 1}));
}

TEST(ReadOgb, RejectsMalformedFiles) {
  test::TempDir tmp;
  const fs::path d = make_ogb(tmp);
  const std::string edge = (d / "raw" / "edge.csv.gz").string();
  const std::string feat = (d / "raw" / "node-feat.csv.gz").string();
  const std::string label = (d / "raw" / "node-label.csv.gz").string();
  auto restore = [&] { make_ogb(tmp); };

  test::write_gz(edge, "0,1\n1,4\n3,0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), IndexError,
                           edge + ":2: node ID 4 is outside [0, 4)");
  test::write_gz(edge, "0,1\n-1,2\n3,0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), IndexError, edge + ":2: node ID -1 is outside");
  test::write_gz(edge, "0,1\n1,x\n3,0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, edge + ":2: node ID 'x' is not");
  test::write_gz(edge, "0,1\n1,2,3\n3,0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, edge + ":2: ragged row");
  test::write_gz(edge, "0,1\n1,2\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, edge + ": has 2 rows, expected 3");
  test::write_gz(edge, "0,1\n1,2\n3,0\n2,2\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, edge + ":4: more than the 3 rows");
  restore();
  // Counts no file of its size can hold are refused before anything is sized from them.
  const std::string ecount = (d / "raw" / "num-edge-list.csv.gz").string();
  const std::string ncount = (d / "raw" / "num-node-list.csv.gz").string();
  test::write_gz(ecount, "100000000000000\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError,
                           ecount + ": 100000000000000 edges are more than edge.csv.gz");
  restore();
  test::write_gz(ncount, "100000000000000\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError,
                           "100000000000000 rows of 2 fields are more than a file of");
  test::write_gz(edge, "0 1\n1 2\n3 0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "expected 2 comma-separated");
  restore();
  // Without per-node files nothing lists the nodes: a count far beyond the edges' IDs is refused.
  fs::remove(feat);
  fs::remove(label);
  test::write_gz(ncount, "100000000000000\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError,
                           ncount + ": 100000000000000 nodes, but the 3 edges name IDs up to 3");
  restore();

  test::write_gz(feat, "0.5,1\n-2\n0,0\n1,1\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError,
                           feat + ":2: ragged row: 1 comma-separated fields, but line 1 has 2");
  test::write_gz(feat, "0.5,1\n-2,abc\n0,0\n1,1\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError,
                           feat + ":2: field 2 is not a number: 'abc'");
  test::write_gz(feat, "0.5,1\n0,0\n1,1\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, feat + ": has 3 rows, expected 4");
  restore();

  test::write_gz(label, "1\n2.5\n0\n0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, label + ":2: label '2.5' is not an");
  test::write_gz(label, "1\ncat\n0\n0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, label + ":2: label 'cat' is not a");
  test::write_gz(label, "1\n-3\n0\n0\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "negative label -3");
  restore();

  const std::string train = (d / "split" / "time" / "train.csv.gz").string();
  test::write_gz(train, "0\n9\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), IndexError, train + ":2: node ID 9 is outside");
  restore();

  test::write_gz(d / "raw" / "num-node-list.csv.gz", "4\n5\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "lists 2 graphs");
  test::write_gz(d / "raw" / "num-node-list.csv.gz", "four\n");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "count 'four' is not");
  restore();

  fs::remove(d / "raw" / "edge.csv.gz");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), IOError, "missing edge.csv.gz");
  test::write_text(d / "raw" / "data.npz", "PK");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, "data.npz, OGB's binary layout");
  fs::remove(d / "raw" / "data.npz");
  restore();
  fs::remove(d / "split" / "time" / "valid.csv.gz");
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), IOError, "missing valid.csv.gz");
  restore();
}

TEST(ReadOgb, FeatureParsingMatchesStrtod) {
  // Decimal forms OGB files use (plain, scientific, many digits, signs, extremes): every value
  // must equal strtod's correctly rounded double, narrowed to float32.
  test::TempDir tmp;
  const fs::path d = make_ogb(tmp);
  std::vector<std::string> toks = {"0",
                                   "-0",
                                   "1",
                                   "0.1",
                                   "-2.5",
                                   "1e-45",
                                   "3.4028235e38",
                                   "1.17549435e-38",
                                   "123456789012345678901234567890",
                                   "0.30000000000000004",
                                   "9007199254740993",
                                   "-1.5E+10",
                                   "+7",
                                   "1.",
                                   ".5",
                                   "2e-320",
                                   "1e400"};
  uint64_t x = 88172645463325252ULL;
  while (toks.size() < 4 * 64) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const int digits = 1 + static_cast<int>(x % 19), point = static_cast<int>((x >> 8) % 21);
    const int exp = static_cast<int>((x >> 16) % 61) - 30;
    std::string t = (x >> 40) & 1 ? "-" : "";
    std::string m = std::to_string(x >> 3).substr(0, static_cast<size_t>(digits));
    if (point < static_cast<int>(m.size())) m.insert(static_cast<size_t>(point), ".");
    t += m;
    if ((x >> 41) & 1) t += "e" + std::to_string(exp);
    toks.push_back(t);
  }
  std::string text;
  for (size_t i = 0; i < toks.size(); ++i)
    text += toks[i] + ((i + 1) % 64 ? "," : "\n");
  test::write_gz(d / "raw" / "node-feat.csv.gz", text);
  Dataset ds = read_ogb_dir(d, {});
  const Array& f = ds.ndata.at("feat");
  ASSERT_EQ(f.shape(), (std::vector<int64_t>{4, 64}));
  for (size_t i = 0; i < toks.size(); ++i) {
    const float want = static_cast<float>(std::strtod(toks[i].c_str(), nullptr));
    EXPECT_EQ(std::memcmp(&f.data<float>()[i], &want, sizeof(float)), 0)
        << toks[i] << ": got " << f.data<float>()[i] << " want " << want;
  }
}

TEST(ReadOgb, RejectsTruncatedGzip) {
  test::TempDir tmp;
  const fs::path d = make_ogb(tmp);
  // Enough feature text that half the compressed file ends inside the deflate stream.
  std::string feat;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 20000; ++j)
      feat += (j ? "," : "") + std::to_string((i * 7919 + j * 104729) % 1000003) + ".5";
    feat += "\n";
  }
  const fs::path p = d / "raw" / "node-feat.csv.gz";
  test::write_gz(p, feat);
  Dataset ok = read_ogb_dir(d, {});
  EXPECT_EQ(ok.ndata.at("feat").shape(), (std::vector<int64_t>{4, 20000}));
  test::truncate_file(p, fs::file_size(p) / 2);
  TESSERA_EXPECT_THROW_MSG(read_ogb_dir(d, {}), ValueError, p.string() + ": truncated gzip");
}

}  // namespace
}  // namespace tessera
