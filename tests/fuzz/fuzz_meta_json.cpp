// SPDX-License-Identifier: Apache-2.0
// An npy dataset folder's meta.json (node count, edge storage flags, anything else), beside a
// small valid edge_index.npy, feat.npy and train_mask.npy; read and finalized as `tessera
// partition` would.
#include "fuzz_target.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/graph/npy.hpp"

TESSERA_FUZZ_TARGET(meta_json) {
  using namespace tessera;
  const auto dir = fuzz::scratch() / "npydir";
  static const bool arrays = [&] {
    std::filesystem::create_directories(dir);
    const int64_t ei[] = {0, 1, 2, 3, 1, 2, 3, 0, 0, 2};  // 5 edges over 4 nodes
    write_npy(dir / "edge_index.npy", DType::kInt64, {2, 5}, ei);
    const float feat[] = {1, 2, 3, 4, 5, 6, 7, 8};
    write_npy(dir / "feat.npy", DType::kFloat32, {4, 2}, feat);
    const uint8_t mask[] = {1, 0, 1, 0};
    write_npy(dir / "train_mask.npy", DType::kBool, {4}, mask);
    return true;
  }();
  (void)arrays;
  fuzz::write_file("npydir/meta.json", data, size);
  fuzz::guarded([&] {
    ReadOptions o;
    o.symmetrize_if_undirected = true;
    Dataset ds = read_npy_dir(dir, o);
    finalize(ds, resolve_build_options(ds, o));
  });
  return 0;
}
