// SPDX-License-Identifier: Apache-2.0
// Internal: the order of one stored row in the unpartitioned graph's storage order, which
// loading a DistGraph computes for every row of its sampling structure. Rows of a partition are
// stored by (local source, edge ID); the sampling structure wants them by (original source,
// original edge ID), so about half of a large partition's rows need sorting: its hubs (rows of
// 10^4-10^5 entries in an R-MAT graph) by a radix sort on the source, rows of 64-511 entries by
// a radix sort on 32-bit (source, position) keys, shorter ones by a comparison sort. tests/dist/
// test_row_order.cpp checks it against a plain sort.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessera::dist::detail {

/// Rows of at least this many entries are radix-sorted (linear in the row); shorter ones
/// comparison-sorted.
inline constexpr int64_t kRadixRowMin = 512;

/// Rows of at least this many entries (and below kRadixRowMin) whose (source, position) keys fit
/// 32 bits are radix-sorted on those keys, 8 bits a pass; shorter ones comparison-sorted.
inline constexpr int64_t kKeyRadixRowMin = 64;

/// Per-thread buffers of order_row, reused across rows.
struct RowOrderScratch {
  std::vector<uint64_t> keys;
  std::vector<int64_t> tmp;
  std::vector<uint32_t> count;
  std::vector<uint32_t> keys32, tmp32;
};

/// Sorts keys[0 .. d) (unique, below 2^bits) by LSD radix, 8 bits a pass, through `tmp`.
inline void radix_sort32(uint32_t* keys, int64_t d, int bits, uint32_t* tmp) {
  uint32_t* from = keys;
  uint32_t* to = tmp;
  for (int shift = 0; shift < bits; shift += 8) {
    uint32_t count[256] = {};
    for (int64_t t = 0; t < d; ++t) {
      ++count[(from[t] >> shift) & 0xFFu];
    }
    uint32_t sum = 0;
    for (uint32_t& c : count) {
      const uint32_t n = c;
      c = sum;
      sum += n;
    }
    for (int64_t t = 0; t < d; ++t) {
      to[count[(from[t] >> shift) & 0xFFu]++] = from[t];
    }
    std::swap(from, to);
  }
  if (from != keys) {
    std::copy(from, from + d, keys);
  }
}

/// order[0 .. d) = the positions 0 .. d-1 of a row sorted by (orig[t], edge ID), where
/// `eid_less(x, y)` compares the edge IDs of positions x and y (distinct) and every orig[t] lies
/// in [0, 2^id_bits). `pos_bits` bounds d (d <= 2^pos_bits); `pack` says that id_bits + pos_bits
/// <= 63, so that (orig, position) fits one 64-bit key.
template <typename EidLess>
void order_row(const int64_t* orig, int64_t d, int id_bits, int pos_bits, bool pack,
               EidLess&& eid_less, RowOrderScratch& s, int64_t* order) {
  auto before = [&](int64_t x, int64_t y) {
    return orig[x] != orig[y] ? orig[x] < orig[y] : eid_less(x, y);
  };
  int row_bits = 1;  // bits of a position in this row
  while ((int64_t{1} << row_bits) < d) {
    ++row_bits;
  }
  if (d >= kRadixRowMin) {
    // LSD radix sort by the original source, 11 bits a pass, stable: positions with the same
    // source keep their stored order until the runs below.
    constexpr int kBits = 11;
    constexpr uint32_t kBuckets = 1u << kBits;
    s.count.resize(kBuckets);
    s.tmp.resize(static_cast<size_t>(d));
    for (int64_t t = 0; t < d; ++t) {
      order[t] = t;
    }
    int64_t* from = order;
    int64_t* to = s.tmp.data();
    for (int shift = 0; shift < id_bits; shift += kBits) {
      std::fill(s.count.begin(), s.count.end(), 0u);
      for (int64_t t = 0; t < d; ++t) {
        ++s.count[(static_cast<uint64_t>(orig[from[t]]) >> shift) & (kBuckets - 1)];
      }
      uint32_t sum = 0;
      for (uint32_t& c : s.count) {
        const uint32_t n = c;
        c = sum;
        sum += n;
      }
      for (int64_t t = 0; t < d; ++t) {
        to[s.count[(static_cast<uint64_t>(orig[from[t]]) >> shift) & (kBuckets - 1)]++] = from[t];
      }
      std::swap(from, to);
    }
    if (from != order) {
      std::copy(from, from + d, order);
    }
  } else if (pack && d >= kKeyRadixRowMin && id_bits + row_bits <= 32) {
    // (source, position) in 32 bits: linear passes instead of a comparison sort, whose
    // mispredicted branches dominated loading (rows of 10^2 entries in random source order).
    s.keys32.resize(static_cast<size_t>(d));
    s.tmp32.resize(static_cast<size_t>(d));
    for (int64_t t = 0; t < d; ++t) {
      s.keys32[t] = (static_cast<uint32_t>(orig[t]) << row_bits) | static_cast<uint32_t>(t);
    }
    radix_sort32(s.keys32.data(), d, id_bits + row_bits, s.tmp32.data());
    const uint32_t mask = (uint32_t{1} << row_bits) - 1;
    for (int64_t t = 0; t < d; ++t) {
      order[t] = static_cast<int64_t>(s.keys32[t] & mask);
    }
  } else if (pack) {
    s.keys.resize(static_cast<size_t>(d));
    for (int64_t t = 0; t < d; ++t) {
      s.keys[t] = (static_cast<uint64_t>(orig[t]) << pos_bits) | static_cast<uint64_t>(t);
    }
    std::sort(s.keys.begin(), s.keys.end());
    const uint64_t mask = (uint64_t{1} << pos_bits) - 1;
    for (int64_t t = 0; t < d; ++t) {
      order[t] = static_cast<int64_t>(s.keys[t] & mask);
    }
  } else {
    for (int64_t t = 0; t < d; ++t) {
      order[t] = t;
    }
    std::sort(order, order + d, before);
    return;
  }
  for (int64_t t = 0; t < d;) {  // runs of one source (multi-edges): by edge ID
    int64_t u = t + 1;
    while (u < d && orig[order[u]] == orig[order[t]]) {
      ++u;
    }
    if (u - t > 1) {
      std::sort(order + t, order + u, before);
    }
    t = u;
  }
}

}  // namespace tessera::dist::detail
