// SPDX-License-Identifier: Apache-2.0
// detail::order_row (host/distributed/src/row_order.hpp), the order DistGraph's loading gives
// each stored row in its sampling structure: every path (radix sort of long rows, packed keys,
// radix sort of 32-bit keys, plain comparison sort) against a plain sort by (original source,
// edge ID), with multi-edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "row_order.hpp"

namespace tessera::dist::detail {
namespace {

struct Case {
  int64_t degree;
  int64_t num_nodes;  // sources drawn from [0, num_nodes): small values force multi-edges
  bool pack;
};

class RowOrder : public ::testing::TestWithParam<Case> {};

TEST_P(RowOrder, EqualsAPlainSortBySourceThenEdgeId) {
  const Case c = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(c.degree * 131 + c.num_nodes));
  std::vector<int64_t> orig(static_cast<size_t>(c.degree)), eid(orig.size());
  for (auto& o : orig) {
    o = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.num_nodes));
  }
  std::iota(eid.begin(), eid.end(), int64_t{1000});
  std::shuffle(eid.begin(), eid.end(), rng);
  int id_bits = 1;
  while ((int64_t{1} << id_bits) < c.num_nodes) {
    ++id_bits;
  }
  int pos_bits = 1;
  while ((int64_t{1} << pos_bits) < c.degree) {
    ++pos_bits;
  }
  std::vector<int64_t> want(orig.size());
  std::iota(want.begin(), want.end(), int64_t{0});
  std::sort(want.begin(), want.end(), [&](int64_t x, int64_t y) {
    return orig[x] != orig[y] ? orig[x] < orig[y] : eid[x] < eid[y];
  });
  RowOrderScratch scratch;
  for (int round = 0; round < 2; ++round) {  // the scratch is reused across rows
    std::vector<int64_t> got(orig.size(), -1);
    order_row(
        orig.data(), c.degree, id_bits, pos_bits, c.pack,
        [&](int64_t x, int64_t y) { return eid[x] < eid[y]; }, scratch, got.data());
    EXPECT_EQ(got, want) << "degree " << c.degree << ", round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, RowOrder,
    ::testing::Values(Case{0, 10, true}, Case{1, 10, true}, Case{2, 2, true}, Case{7, 3, false},
                      Case{kKeyRadixRowMin - 1, 1 << 21, true},
                      Case{kKeyRadixRowMin, 1 << 21, true}, Case{200, 1 << 23, true},
                      Case{200, 30, true}, Case{300, 1 << 24, true}, Case{300, 1 << 21, true},
                      Case{300, 40, false}, Case{kRadixRowMin - 1, 1 << 21, true},
                      Case{kRadixRowMin, 1 << 21, true}, Case{kRadixRowMin, 50, true},
                      Case{kRadixRowMin + 1, 1 << 21, false}, Case{5000, 1 << 30, true},
                      Case{5000, 100, false}, Case{100000, 1 << 21, true},
                      Case{100000, 1 << 23, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return "d" + std::to_string(info.param.degree) + "_n" + std::to_string(info.param.num_nodes) +
             (info.param.pack ? "_packed" : "_plain");
    });

}  // namespace
}  // namespace tessera::dist::detail
