// SPDX-License-Identifier: Apache-2.0
// Cutting n items into batches without the int64 overflow of the usual formulas when a batch
// size is near INT64_MAX ("one batch of everything").
#pragma once

#include <cstdint>

namespace tessera {

/// ceil(n / d) for n >= 0 and d >= 1; (n + d - 1) / d overflows for d near INT64_MAX.
inline int64_t ceil_div(int64_t n, int64_t d) {
  return n / d + (n % d != 0 ? 1 : 0);
}

/// min(n, lo + size) for 0 <= lo <= n and size >= 0, without computing lo + size past n.
inline int64_t clipped_end(int64_t lo, int64_t size, int64_t n) {
  return size >= n - lo ? n : lo + size;
}

}  // namespace tessera
