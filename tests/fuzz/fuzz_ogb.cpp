// SPDX-License-Identifier: Apache-2.0
// OGB dataset folders: the first byte picks which CSV file the rest of the input replaces
// (counts, edges, features, labels, edge features, a per-node file, a split); the others are a
// small valid dataset (4 nodes, 3 edges). Read and finalized as `tessera partition` would.
#include "fuzz_target.hpp"
#include "tessera/graph/dataset.hpp"

namespace {

struct File {
  const char* path;
  const char* valid;
};
constexpr File kFiles[] = {
    {"raw/num-node-list.csv", "4\n"},
    {"raw/num-edge-list.csv", "3\n"},
    {"raw/edge.csv", "0,1\n1,2\n2,3\n"},
    {"raw/node-feat.csv", "0.5,1\n-1,2e3\n0,0\n1.5,nan\n"},
    {"raw/node-label.csv", "0\n1\n\n2\n"},
    {"raw/edge-feat.csv", "1\n2\n3\n"},
    {"raw/node_year.csv", "2001\n2002\n2003\n2004\n"},
    {"split/s/train.csv", "0\n1\n"},
    {"split/s/valid.csv", "2\n"},
    {"split/s/test.csv", "3\n"},
};
constexpr size_t kNumFiles = sizeof kFiles / sizeof kFiles[0];

}  // namespace

TESSERA_FUZZ_TARGET(ogb) {
  using namespace tessera;
  if (size == 0) {
    return 0;
  }
  const size_t pick = data[0] % kNumFiles;
  const auto dir = fuzz::scratch() / "ogb";
  std::filesystem::remove_all(dir);
  for (size_t i = 0; i < kNumFiles; ++i) {
    const std::string rel = std::string("ogb/") + kFiles[i].path;
    if (i == pick) {
      fuzz::write_file(rel, data + 1, size - 1);
    } else {
      fuzz::write_file(rel, kFiles[i].valid, std::char_traits<char>::length(kFiles[i].valid));
    }
  }
  fuzz::guarded([&] {
    ReadOptions o;
    o.symmetrize_if_undirected = true;
    Dataset ds = read_ogb_dir(dir, o);
    finalize(ds, resolve_build_options(ds, o));
  });
  return 0;
}
