// SPDX-License-Identifier: Apache-2.0
// A partition config (the JSON `tessera partition` writes): parsed, its partition book built and
// every partition's lookups exercised.
#include "fuzz_target.hpp"
#include "tessera/partition/book.hpp"
#include "tessera/partition/format.hpp"

TESSERA_FUZZ_TARGET(partition_config) {
  using namespace tessera;
  const auto p = fuzz::write_file("cfg/g.json", data, size);
  fuzz::guarded([&] {
    const PartitionConfig c = load_partition_config(p);
    const PartitionBook b = PartitionBook::from_config(c);
    for (int64_t q = 0; q < c.num_parts && q < 64; ++q) {
      (void)b.node_range(q);
      (void)b.edge_range(q);
    }
    if (c.num_nodes > 0) {
      (void)b.nid2local(c.num_nodes - 1);
      (void)b.nid2part(0);
    }
    if (c.num_edges > 0) {
      (void)b.eid2local(c.num_edges - 1);
    }
  });
  return 0;
}
