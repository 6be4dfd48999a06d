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
  std::filesystem::remove(d / "label.npy");
  std::vector<int64_t> bad = {0, 1, 1, 7};
  write_npy(d / "edge_index.npy", DType::kInt64, {2, 2}, bad.data());
  TESSERA_EXPECT_THROW_MSG(read_dataset(d, Format::kNpy, {}), IndexError, "outside [0, 3)");
  write_npy(d / "edge_index.npy", DType::kFloat32, {2, 1}, feat.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), TypeError, "integer");
  write_npy(d / "edge_index.npy", DType::kInt64, {4}, ei.data());
  TESSERA_EXPECT_THROW_MSG(read_npy_dir(d, {}), ValueError, "shape [2, E]");
}

}  // namespace
}  // namespace tessera
