// SPDX-License-Identifier: Apache-2.0
// Many Philox-4x32-10 draws at once, with SIMD where the CPU has it (AVX-512F or AVX2, chosen
// at run time). Each lane computes exactly philox_u64(philox_draw(key, node, draw)) of
// tessera/core/philox.hpp: the key layout and the results are unchanged, only evaluated eight
// (AVX-512) or four (AVX2) blocks at a time.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "tessera/core/philox.hpp"

// GCC 12 warns that the AVX-512 intrinsics' own placeholder vectors may be used uninitialized
// (a known false positive of _mm512_cvtepu32_epi64 and friends).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tessera::ops::detail {

/// A batch of draw requests: lane i asks for draw `draw[i]` of the node whose counter words
/// ctr[1], ctr[2] are `c1[i]`, `c2[i]` (philox_ctr_words).
struct PhiloxRound {
  uint32_t k0[10], k1[10];  // the round keys
  uint32_t c3;              // ctr[3] = batch
  explicit PhiloxRound(const RngKey& key) : c3(key.batch) {
    uint32_t a = key.seed, b = key.epoch;
    for (int r = 0; r < 10; ++r) {
      k0[r] = a;
      k1[r] = b;
      a += 0x9E3779B9u;
      b += 0xBB67AE85u;
    }
  }
};

/// ctr[1], ctr[2] of `node` under `key` (see philox_draw).
inline void philox_ctr_words(const RngKey& key, uint64_t node, uint32_t& c1, uint32_t& c2) {
  c1 = static_cast<uint32_t>(node);
  c2 = static_cast<uint32_t>((node >> 32) & 0xFFFFu) | ((key.layer & 0xFFu) << 16) |
       (static_cast<uint32_t>(key.stream) << 24);
}

inline uint64_t philox_one(const PhiloxRound& k, uint32_t c0, uint32_t c1, uint32_t c2) {
  uint32_t c3 = k.c3;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k.k0[r];
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k.k1[r];
    c0 = n0;
    c1 = static_cast<uint32_t>(p1);
    c2 = n2;
    c3 = static_cast<uint32_t>(p0);
  }
  return static_cast<uint64_t>(c0) | (static_cast<uint64_t>(c1) << 32);
}

__attribute__((target("avx512f"))) inline void philox_many_avx512(const PhiloxRound& k,
                                                                  const uint32_t* draw,
                                                                  const uint32_t* c1,
                                                                  const uint32_t* c2, int64_t n,
                                                                  uint64_t* out) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFFu);
  const __m512i b3 = _mm512_set1_epi64(k.c3);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // 64-bit lanes; only the low 32 bits of a lane are meaningful (the multiplies read only
    // those, and the result is masked).
    __m512i x0 =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(draw + i)));
    __m512i x1 =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c1 + i)));
    __m512i x2 =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c2 + i)));
    __m512i x3 = b3;
    for (int r = 0; r < 10; ++r) {
      const __m512i p0 = _mm512_mul_epu32(m0, x0);
      const __m512i p1 = _mm512_mul_epu32(m1, x2);
      const __m512i n0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), x1,
                                                   _mm512_set1_epi64(k.k0[r]), 0x96);
      const __m512i n2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), x3,
                                                   _mm512_set1_epi64(k.k1[r]), 0x96);
      x0 = n0;
      x1 = p1;
      x2 = n2;
      x3 = p0;
    }
    const __m512i r = _mm512_or_si512(_mm512_and_si512(x0, lo32), _mm512_slli_epi64(x1, 32));
    _mm512_storeu_si512(out + i, r);
  }
  for (; i < n; ++i)
    out[i] = philox_one(k, draw[i], c1[i], c2[i]);
}

__attribute__((target("avx2"))) inline void philox_many_avx2(const PhiloxRound& k,
                                                             const uint32_t* draw,
                                                             const uint32_t* c1, const uint32_t* c2,
                                                             int64_t n, uint64_t* out) {
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  const __m256i lo32 = _mm256_set1_epi64x(0xFFFFFFFFu);
  const __m256i b3 = _mm256_set1_epi64x(k.c3);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256i x0 = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(draw + i)));
    __m256i x1 = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c1 + i)));
    __m256i x2 = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c2 + i)));
    __m256i x3 = b3;
    for (int r = 0; r < 10; ++r) {
      const __m256i p0 = _mm256_mul_epu32(m0, x0);
      const __m256i p1 = _mm256_mul_epu32(m1, x2);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), x1),
                                          _mm256_set1_epi64x(k.k0[r]));
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), x3),
                                          _mm256_set1_epi64x(k.k1[r]));
      x0 = n0;
      x1 = p1;
      x2 = n2;
      x3 = p0;
    }
    const __m256i r = _mm256_or_si256(_mm256_and_si256(x0, lo32), _mm256_slli_epi64(x1, 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), r);
  }
  for (; i < n; ++i)
    out[i] = philox_one(k, draw[i], c1[i], c2[i]);
}

inline void philox_many_scalar(const PhiloxRound& k, const uint32_t* draw, const uint32_t* c1,
                               const uint32_t* c2, int64_t n, uint64_t* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = philox_one(k, draw[i], c1[i], c2[i]);
}

/// Which implementation philox_many uses: 2 AVX-512F, 1 AVX2, 0 scalar (set once from the CPU;
/// tests may force a lower level to compare them).
inline int& philox_simd_level() {
  static int level = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
  return level;
}

/// Whether Floyd's algorithm for fanouts <= 16 finds repeated draws by AVX-512CD conflict
/// detection (set once from the CPU; tests may turn it off to cover the 64-bit register form).
inline bool& floyd_conflict_detection() {
  static bool on = __builtin_cpu_supports("avx512cd");
  return on;
}

/// out[i] = philox_u64 of draw[i] for the node with counter words c1[i], c2[i].
inline void philox_many(const PhiloxRound& k, const uint32_t* draw, const uint32_t* c1,
                        const uint32_t* c2, int64_t n, uint64_t* out) {
  switch (philox_simd_level()) {
    case 2:
      philox_many_avx512(k, draw, c1, c2, n, out);
      break;
    case 1:
      philox_many_avx2(k, draw, c1, c2, n, out);
      break;
    default:
      philox_many_scalar(k, draw, c1, c2, n, out);
  }
}

}  // namespace tessera::ops::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
