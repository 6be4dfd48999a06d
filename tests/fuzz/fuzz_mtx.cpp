// SPDX-License-Identifier: Apache-2.0
// Matrix Market files (banner, size line, entries), plain or gzip (detected by the magic bytes),
// read and finalized (the CSC built) as `tessera partition` would.
#include "fuzz_target.hpp"
#include "tessera/graph/dataset.hpp"

TESSERA_FUZZ_TARGET(mtx) {
  using namespace tessera;
  const auto p = fuzz::write_file("in.mtx", data, size);
  fuzz::guarded([&] {
    ReadOptions o;
    o.symmetrize_if_undirected = true;
    Dataset ds = read_mtx(p, o);
    finalize(ds, resolve_build_options(ds, o));
  });
  return 0;
}
