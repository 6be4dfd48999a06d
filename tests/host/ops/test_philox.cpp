// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../../host/ops/src/philox_batch.hpp"  // private: the SIMD batch of the ops library
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

// The batched (AVX-512 / AVX2 / scalar) evaluation gives exactly philox_draw's values for every
// field of the key layout, at each SIMD level the CPU has, including the tails of a batch.
TEST(Philox, BatchedDrawsMatchOneAtATime) {
  const int native = ops::detail::philox_simd_level();
  for (int level = 0; level <= native; ++level) {
    ops::detail::philox_simd_level() = level;
    for (uint32_t seed : {0u, 7u, 0xFFFFFFFFu}) {
      RngKey key;
      key.seed = seed;
      key.epoch = seed * 3 + 1;
      key.batch = 0xFFFFFFF0u - seed;
      key.layer = seed % 256;
      key.stream = static_cast<RngStream>(seed % 4);
      std::vector<uint32_t> draw, c1, c2;
      std::vector<uint64_t> node;
      uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
      for (int i = 0; i < 53; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        node.push_back((x >> 8) & ((uint64_t{1} << 48) - 1));
        draw.push_back(i % 5 == 0 ? 0xFFFFFFFFu - static_cast<uint32_t>(i)
                                  : static_cast<uint32_t>(i));
        uint32_t a, b;
        ops::detail::philox_ctr_words(key, node.back(), a, b);
        c1.push_back(a);
        c2.push_back(b);
      }
      for (int64_t n : {0, 1, 3, 4, 7, 8, 9, 16, 53}) {
        std::vector<uint64_t> out(static_cast<size_t>(n) + 1, 42);
        ops::detail::philox_many(ops::detail::PhiloxRound(key), draw.data(), c1.data(), c2.data(),
                                 n, out.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(out[i], philox_u64(philox_draw(key, node[i], draw[i])))
              << "level " << level << " n " << n << " lane " << i;
        EXPECT_EQ(out[n], 42u);  // nothing written past the batch
      }
    }
  }
  ops::detail::philox_simd_level() = native;
}

}  // namespace
}  // namespace tessera
