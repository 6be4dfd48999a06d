// SPDX-License-Identifier: Apache-2.0
// Philox-4x32-10 counter-based RNG (Salmon et al., SC'11; Random123) and Tessera's key layout.
//
// Header-only and usable from CUDA: every function is TESSERA_HD (`__host__ __device__` under
// nvcc, nothing otherwise), uses only 32/64-bit integer arithmetic, and allocates nothing.
//
// KEY LAYOUT (a contract: CPU and CUDA twins, any thread count, any world size must agree).
// Every random number Tessera draws is one Philox-4x32-10 block, a pure function of
//
//   key[0] = seed                  (user seed, 32 bits: must be < 2^32)
//   key[1] = epoch                 (32 bits)
//   ctr[0] = draw index            (32 bits: the j-th draw made for this node/item)
//   ctr[1] = node bits 0..31       (global node ID, or the item's ID for the stream)
//   ctr[2] = node bits 32..47      (bits 0..15; node IDs must be < 2^48)
//            | layer << 16         (bits 16..23; the hop, 0 = the seeds' own neighborhood)
//            | stream << 24        (bits 24..31; what the numbers are for, see Stream)
//   ctr[3] = batch                 (32 bits: the mini-batch index within the epoch)
//
// Each draw uses one whole block; a draw that needs an integer in [0, n) or a double reads the
// 64-bit value `w0 | w1 << 32` of the block (words w2, w3 are unused). So the sample of a node
// depends only on (seed, epoch, batch, layer, stream, node, draw index): not on the order of
// seeds in the batch, on the thread that samples it, or on the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif

namespace tessera {

/// A Philox-4x32 counter block (input) or output block: four 32-bit words.
struct Philox4x32Block {
  uint32_t w[4];
};
/// A Philox-4x32 key: two 32-bit words.
struct Philox4x32Key {
  uint32_t k[2];
};

namespace detail {
TESSERA_HD inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace detail

/// Philox-4x32 with 10 rounds, exactly as Random123's philox4x32_R(10, ctr, key).
TESSERA_HD inline Philox4x32Block philox4x32_10(Philox4x32Block c, Philox4x32Key k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = c.w[0], c1 = c.w[1], c2 = c.w[2], c3 = c.w[3];
  uint32_t k0 = k.k[0], k1 = k.k[1];
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    detail::philox_mulhilo(kM0, c0, hi0, lo0);
    detail::philox_mulhilo(kM1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Philox4x32Block{{c0, c1, c2, c3}};
}

/// What a stream of random numbers is used for (ctr[2] bits 24..31). Distinct streams never
/// share a counter, so e.g. the loader's shuffle never correlates with neighbor sampling.
enum class RngStream : uint8_t {
  kNeighbor = 0,  ///< sample_neighbors: node = the node whose neighborhood is sampled
  kShuffle = 1,   ///< loader shuffle: node = position in the seed set, batch = 0, layer = 0
  kNegative = 2,  ///< negative sampling: node = the positive edge's ID
  kCluster = 3,   ///< Cluster-GCN: batch = rank; layer 0 part order (node = part position),
                  ///< layer 1 random clustering (node = node position)
};

/// The (seed, epoch, batch, layer) part of a sampling key; node and draw are added per draw.
/// Plain data, copyable to the device.
struct RngKey {
  uint32_t seed = 0;
  uint32_t epoch = 0;
  uint32_t batch = 0;
  uint32_t layer = 0;  ///< must be < 256
  RngStream stream = RngStream::kNeighbor;
};

/// The Philox block of draw `draw` for node/item `node` (< 2^48) under `key` (see the layout).
TESSERA_HD inline Philox4x32Block philox_draw(const RngKey& key, uint64_t node, uint32_t draw) {
  Philox4x32Block c;
  c.w[0] = draw;
  c.w[1] = static_cast<uint32_t>(node);
  c.w[2] = static_cast<uint32_t>((node >> 32) & 0xFFFFu) | ((key.layer & 0xFFu) << 16) |
           (static_cast<uint32_t>(key.stream) << 24);
  c.w[3] = key.batch;
  return philox4x32_10(c, Philox4x32Key{{key.seed, key.epoch}});
}

/// The 64-bit value of a block: w0 | w1 << 32.
TESSERA_HD inline uint64_t philox_u64(const Philox4x32Block& b) {
  return static_cast<uint64_t>(b.w[0]) | (static_cast<uint64_t>(b.w[1]) << 32);
}

/// An integer in [0, n) from a 64-bit random value: floor(r * n / 2^64) (multiply-high; the
/// bias is below n / 2^64, i.e. < 2^-16 relative for n < 2^48, and no rejection loop, so the
/// number of blocks a draw consumes is fixed).
TESSERA_HD inline uint64_t bounded_u64(uint64_t r, uint64_t n) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(r, n);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
#endif
}

/// A double in [0, 1) with 53 random bits: (r >> 11) * 2^-53.
TESSERA_HD inline double uniform01(uint64_t r) {
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}
/// A double in (0, 1] with 53 random bits: ((r >> 11) + 1) * 2^-53 (safe for log).
TESSERA_HD inline double uniform01_open0(uint64_t r) {
  return static_cast<double>((r >> 11) + 1) * (1.0 / 9007199254740992.0);
}

}  // namespace tessera
