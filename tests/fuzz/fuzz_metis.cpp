// SPDX-License-Identifier: Apache-2.0
// METIS .graph files (header, weights, adjacency lists), plain or gzip (detected by the magic
// bytes), read and finalized (the CSC built) as `tessera partition` would.
#include "fuzz_target.hpp"
#include "tessera/graph/dataset.hpp"

TESSERA_FUZZ_TARGET(metis) {
  using namespace tessera;
  const auto p = fuzz::write_file("in.graph", data, size);
  fuzz::guarded([&] {
    ReadOptions o;
    o.symmetrize_if_undirected = true;
    Dataset ds = read_metis(p, o);
    finalize(ds, resolve_build_options(ds, o));
  });
  return 0;
}
