// SPDX-License-Identifier: Apache-2.0
// .npy files: the header parser, reading into memory and memory-mapping.
#include "fuzz_target.hpp"
#include "tessera/graph/npy.hpp"

TESSERA_FUZZ_TARGET(npy) {
  using namespace tessera;
  const auto p = fuzz::write_file("a.npy", data, size);
  fuzz::guarded([&] { read_npy_header(p); });
  fuzz::guarded([&] {
    const Array a = read_npy(p);
    (void)a.nbytes();
  });
  fuzz::guarded([&] {
    const Array a = mmap_npy(p);
    // Touch the last byte of the data: the mapping must cover what the header promised.
    if (a.nbytes() > 0) {
      volatile uint8_t last = static_cast<const uint8_t*>(a.raw())[a.nbytes() - 1];
      (void)last;
    }
  });
  return 0;
}
