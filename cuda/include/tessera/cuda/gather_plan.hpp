// SPDX-License-Identifier: Apache-2.0
// How the row gather runs: its launch plan (vector width, threads and rows per thread group,
// whether the indices are sorted first) and the per-group copy, as plain functions. The kernels
// in cuda/src/gather_kernels.cuh call exactly these; tests/cuda/test_gather_plan.cpp runs them on
// the CPU (every lane of every group in turn) against a plain gather, so the index arithmetic of
// both paths, the out-of-range handling and the hit counting are checked where no GPU runs.
//
// The choices, from the H200 probes of `tessera bench gather --probe` (docs/cuda.md):
// - rows of at most 512 bytes: four rows per thread group and iteration, every load issued
//   before the stores, over one resident grid (128-byte rows from HBM: 87% of the D2D copy
//   against 82-86% with one row per group); wider rows: one row per group, up to four vectors
//   per lane in flight, over four resident grids (92-93% of the copy from 1 KiB up);
// - through UVA, a row read costs a translation of its page: random 128- and 256-byte rows
//   reached 24% and 47% of the pinned host-to-device copy, the same rows in sorted order 95%.
//   So a gather from host memory of rows up to 512 bytes sorts (row, position) pairs first
//   (CUB radix sort on the stream), reads the rows in row order and writes each to its
//   position; the batch must be large enough for what it saves per row to pay the sort's fixed
//   cost (a few launches).
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"  // TESSERA_HD

// Templates of TESSERA_HD functions that the kernels instantiate with device-only callables.
#ifndef TESSERA_HD_TEMPLATE
#if defined(__CUDACC__)
#define TESSERA_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define TESSERA_HD_TEMPLATE
#endif
#endif
#if defined(__CUDACC__)
#define TESSERA_GATHER_UNROLL _Pragma("unroll")
#else
#define TESSERA_GATHER_UNROLL
#endif

namespace tessera::cuda {

/// The order in which gather_rows_impl reads the requested rows. The output is the same.
enum class GatherOrder : uint8_t {
  kAuto,     ///< kSorted for a source in host memory (UVA) when gather::sort_pays(), else kAsGiven
  kAsGiven,  ///< rows read in the order of the indices
  kSorted,   ///< (row, position) pairs radix-sorted first; rows read in row order, each written
             ///< to its position
};

namespace gather {

/// Rows up to this width get four rows per thread group; wider rows one.
inline constexpr int64_t kGroupRowsMaxBytes = 512;
/// Rows up to this width are read in sorted order from host memory (kAuto).
inline constexpr int64_t kSortedMaxRowBytes = 512;

/// Smallest batch whose sorted read through UVA saves more than the sort costs (kAuto): the
/// sort is about 20-30 us of launches; sorted reads save about 7 ns per 128-byte row, 5 ns per
/// 256-byte row and 1.3 ns per 512-byte row (H200, PCIe 5: 13.4 -> 52.6, 25.9 -> 52.5 and
/// 46.5 -> ~52 GB/s).
TESSERA_HD inline int64_t sort_min_rows(int64_t row_bytes) {
  return row_bytes <= 256 ? 8192 : 32768;
}

/// Whether kAuto sorts: a source in host memory, rows of at most kSortedMaxRowBytes, a batch of
/// at least sort_min_rows().
TESSERA_HD inline bool sort_pays(bool src_in_host_memory, int64_t row_bytes, int64_t n) {
  return src_in_host_memory && row_bytes > 0 && row_bytes <= kSortedMaxRowBytes &&
         n >= sort_min_rows(row_bytes);
}

/// Largest of 16, 8, 4, 2, 1 that divides the row width and every address in `address_bits`
/// (the OR of the base addresses): the width of one vector access.
TESSERA_HD inline int vector_bytes(int64_t row_bytes, uint64_t address_bits) {
  const uint64_t m = static_cast<uint64_t>(row_bytes) | address_bits;
  for (int v = 16; v > 1; v >>= 1) {
    if (m % static_cast<uint64_t>(v) == 0) {
      return v;
    }
  }
  return 1;
}

/// Threads per block of the gather and scatter kernels.
inline constexpr int kBlockThreads = 256;

/// How one gather (or scatter) launch runs.
struct Plan {
  int vec_bytes = 1;       ///< bytes per vector access (16, 8, 4, 2, 1)
  int64_t vpr = 0;         ///< vectors per row
  int log2_tpr = 0;        ///< log2 of the threads of a group (power of two >= vpr, <= a block)
  int rows_per_group = 1;  ///< rows a group copies per iteration (1 or 4; 2 or 8 for probes)
  int grid_mult = 4;       ///< the grid is at most this many resident grids (grid-stride)
  bool sorted = false;     ///< the indices are sorted first (a gather only)
};

/// The plan of a gather of n rows of `row_bytes` (> 0): `address_bits` as vector_bytes takes
/// it; `rows_per_group` 0 chooses (4 up to kGroupRowsMaxBytes, else 1), 1, 2, 4 or 8 forces
/// (2 and 8 run only with 16-byte vectors; other widths take 4).
TESSERA_HD inline Plan plan(int64_t row_bytes, int64_t n, uint64_t address_bits,
                            bool src_in_host_memory, GatherOrder order, int rows_per_group = 0) {
  Plan p;
  p.vec_bytes = vector_bytes(row_bytes, address_bits);
  p.vpr = row_bytes / p.vec_bytes;
  while ((int64_t{1} << p.log2_tpr) < p.vpr && (1 << p.log2_tpr) < kBlockThreads) {
    ++p.log2_tpr;
  }
  p.rows_per_group = rows_per_group > 0 ? rows_per_group : row_bytes <= kGroupRowsMaxBytes ? 4 : 1;
  p.grid_mult = p.rows_per_group >= 2 ? 1 : 4;
  p.sorted = order == GatherOrder::kSorted ||
             (order == GatherOrder::kAuto && sort_pays(src_in_host_memory, row_bytes, n));
  return p;
}

/// Blocks of a launch of `p` over n rows with `resident_blocks` blocks resident on the device:
/// enough for every group to take one iteration, at most p.grid_mult resident grids.
TESSERA_HD inline int64_t grid_blocks(const Plan& p, int64_t n, int64_t resident_blocks) {
  const int64_t groups_per_block = kBlockThreads >> p.log2_tpr;
  const int64_t groups = (n + p.rows_per_group - 1) / p.rows_per_group;
  const int64_t want = (groups + groups_per_block - 1) / groups_per_block;
  const int64_t cap = resident_blocks * p.grid_mult;
  return want < cap ? want : cap;
}

/// Number of low key bits the radix sort of a gather looks at: keys are in [0, src_rows]
/// (src_rows marks an out-of-range index), so the bit length of src_rows.
TESSERA_HD inline int key_bits(int64_t src_rows) {
  int b = 0;
  while (b < 63 && (int64_t{1} << b) <= src_rows) {
    ++b;
  }
  return b > 0 ? b : 1;
}

/// Whether 32-bit keys and positions hold a sorted gather of n rows from src_rows rows (keys go
/// up to src_rows, positions up to n - 1).
TESSERA_HD inline bool narrow_keys(int64_t src_rows, int64_t n) {
  return src_rows <= int64_t{0xFFFFFFFF} && n <= int64_t{0xFFFFFFFF};
}

/// The sort key of index r: r itself when it is a row, else src_rows (sorts after every row;
/// the kernel zero-fills that position and reports it).
TESSERA_HD inline uint64_t sort_key(int64_t r, int64_t src_rows) {
  return static_cast<uint64_t>(r >= 0 && r < src_rows ? r : src_rows);
}

/// One iteration of a thread group: batch entries i0 .. i0 + R - 1 (those below n). The lane
/// copies vectors lane, lane + tpr, ... of each entry's row, issuing every load of the
/// iteration before its stores (R rows, and for R = 1 up to four vectors per row, in flight).
/// - `entry(i, &row, &pos)`: the source row of entry i (any value; outside [0, src_rows) is
///   bad) and the output row it goes to;
/// - `source(row)`: the first vector of a row in range (the source, or a cache slot); called
///   once per row and lane, so it may count hits;
/// - `bad(pos)`: an entry whose row is out of range (called by lane 0 only); its output row is
///   zero-filled.
TESSERA_HD_TEMPLATE
template <int R, typename V, typename Entry, typename Source, typename Bad>
TESSERA_HD inline void copy_group(int64_t i0, int64_t n, int64_t src_rows, int64_t vpr, int lane,
                                  int tpr, V* out, Entry&& entry, Source&& source, Bad&& bad) {
  const V* s[R];
  int64_t p[R];
  TESSERA_GATHER_UNROLL
  for (int u = 0; u < R; ++u) {
    s[u] = nullptr;
    p[u] = -1;
    if (i0 + u < n) {
      int64_t r = 0;
      entry(i0 + u, r, p[u]);
      if (r >= 0 && r < src_rows) {
        s[u] = source(r);
      } else if (lane == 0) {
        bad(p[u]);
      }
    }
  }
  // Vectors per row and iteration in flight: 4 / R (R = 4: one per row, four rows).
  constexpr int U = R >= 4 ? 1 : 4 / R;
  const int64_t t = tpr;  // offsets within a row are int64_t like the row offsets
  const int64_t last = (U - 1) * t;
  const int64_t step = U * t;
  int64_t j = lane;
  for (; j + last < vpr; j += step) {
    V v[R][U];
    TESSERA_GATHER_UNROLL
    for (int u = 0; u < R; ++u) {
      TESSERA_GATHER_UNROLL
      for (int c = 0; c < U; ++c) {
        v[u][c] = s[u] ? s[u][j + c * t] : V{};
      }
    }
    TESSERA_GATHER_UNROLL
    for (int u = 0; u < R; ++u) {
      if (p[u] >= 0) {
        TESSERA_GATHER_UNROLL
        for (int c = 0; c < U; ++c) {
          out[p[u] * vpr + j + c * t] = v[u][c];
        }
      }
    }
  }
  for (; j < vpr; j += tpr) {
    V v[R];
    TESSERA_GATHER_UNROLL
    for (int u = 0; u < R; ++u) {
      v[u] = s[u] ? s[u][j] : V{};
    }
    TESSERA_GATHER_UNROLL
    for (int u = 0; u < R; ++u) {
      if (p[u] >= 0) {
        out[p[u] * vpr + j] = v[u];
      }
    }
  }
}

}  // namespace gather
}  // namespace tessera::cuda
