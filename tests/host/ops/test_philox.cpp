#include <gtest/gtest.h>

#include <set>

#include "tessera/core/philox.hpp"

namespace tessera {
namespace {

// Random123 kat_vectors, the three "philox4x32 10" lines (counter[4] key[2] -> output[4]).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    Philox4x32Block c;
    Philox4x32Key k;
    uint32_t want[4];
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& kat : kats) {
    const auto r = philox4x32_10(kat.c, kat.k);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(r.w[i], kat.want[i]) << "word " << i;
  }
}

TEST(Philox, KeyLayoutPlacesEveryField) {
  RngKey key;
  key.seed = 0x01020304;
  key.epoch = 0x05060708;
  key.batch = 0x090a0b0c;
  key.layer = 0x0d;
  key.stream = RngStream::kNegative;
  const uint64_t node = 0x0000abcd12345678ull;
  const auto got = philox_draw(key, node, 0x11223344);
  const Philox4x32Block c{
      {0x11223344, 0x12345678, 0x0000abcdu | (0x0du << 16) | (2u << 24), 0x090a0b0c}};
  const auto want = philox4x32_10(c, Philox4x32Key{{0x01020304, 0x05060708}});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(got.w[i], want.w[i]);
  // Changing any one field changes the block.
  std::set<uint64_t> seen{philox_u64(got)};
  auto k2 = key;
  k2.seed ^= 1;
  seen.insert(philox_u64(philox_draw(k2, node, 0x11223344)));
  k2 = key;
  k2.epoch ^= 1;
  seen.insert(philox_u64(philox_draw(k2, node, 0x11223344)));
  k2 = key;
  k2.batch ^= 1;
  seen.insert(philox_u64(philox_draw(k2, node, 0x11223344)));
  k2 = key;
  k2.layer ^= 1;
  seen.insert(philox_u64(philox_draw(k2, node, 0x11223344)));
  k2 = key;
  k2.stream = RngStream::kNeighbor;
  seen.insert(philox_u64(philox_draw(k2, node, 0x11223344)));
  seen.insert(philox_u64(philox_draw(key, node ^ (1ull << 40), 0x11223344)));
  seen.insert(philox_u64(philox_draw(key, node, 0x11223345)));
  EXPECT_EQ(seen.size(), 8u);
}

TEST(Philox, BoundedAndUniformHelpers) {
  EXPECT_EQ(bounded_u64(0, 10), 0u);
  EXPECT_EQ(bounded_u64(~0ull, 10), 9u);
  EXPECT_EQ(bounded_u64(1ull << 63, 10), 5u);
  EXPECT_EQ(uniform01(0), 0.0);
  EXPECT_LT(uniform01(~0ull), 1.0);
  EXPECT_GT(uniform01_open0(0), 0.0);
  EXPECT_EQ(uniform01_open0(~0ull), 1.0);
}

}  // namespace
}  // namespace tessera
