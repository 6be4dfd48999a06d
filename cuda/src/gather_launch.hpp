// SPDX-License-Identifier: Apache-2.0
// Internal: typed launchers of the gather/scatter kernels, one explicit instantiation per index
// type in its own .cu file to keep nvcc builds small: gather_i32.cu and gather_i64.cu (the plain
// gather, the sort keys, the scatter), gather_u32.cu and gather_u64.cu (the sorted gather over
// 32- or 64-bit keys and positions, and their CUB radix sort).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/cuda/gather_plan.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda::detail {

/// The arguments of a gather launch apart from the indices. `cache`/`slot_of` null for a plain
/// gather; `counters`, when non-null (cached only), receives [0] += n lookups and [1] += cached
/// reads; `first_bad` (may be null) is lowered to the first position of an out-of-range index.
struct GatherLaunch {
  const void* src = nullptr;
  int64_t src_rows = 0;
  const void* cache = nullptr;
  const int64_t* slot_of = nullptr;
  int64_t n = 0;
  void* out = nullptr;
  unsigned long long* first_bad = nullptr;
  unsigned long long* counters = nullptr;
};

/// gather_rows_impl / gather_rows_cached_impl over `g`; for diagnostics, `rows_per_group` (1, 2,
/// 4 or 8; 0: the plan's choice) forces the rows per thread group, and `sort_only` enqueues only
/// what the sorted path does before its gather (the keys and their sort; nothing when not sorting).
void gather_dispatch(const GatherLaunch& g, int64_t row_bytes, const void* idx, IndexType idx_type,
                     GatherOrder order, StreamHandle stream, int rows_per_group = 0,
                     bool sort_only = false);

/// Launches the gather of plan `p`. Signed I (int32, int64): entry i reads row idx[i] into
/// output row i (`pos` unused). Unsigned I (uint32, uint64): the sorted path, entry i reads row
/// idx[i] (a sorted key; src_rows marks a bad index) into output row pos[i].
template <typename I>
void launch_gather(const GatherLaunch& g, const I* idx, const I* pos, const gather::Plan& p,
                   StreamHandle stream);

/// keys[i] = gather::sort_key(idx[i], src_rows), pos[i] = i, for i in [0, n).
template <typename I, typename U>
void launch_sort_keys(const I* idx, int64_t n, int64_t src_rows, U* keys, U* pos,
                      StreamHandle stream);

/// Temporary bytes of sort_pairs for n pairs and `bits` key bits.
template <typename U>
size_t sort_pairs_temp_bytes(int64_t n, int bits);

/// Radix-sorts n (key, position) pairs by the low `bits` key bits (stable) with CUB, ping-ponging
/// between the buffers 0 and 1 (both hold n entries; the input is in 0). Returns 1 when the
/// sorted pairs end up in keys1/pos1, else 0.
template <typename U>
int sort_pairs(void* temp, size_t temp_bytes, U* keys0, U* keys1, U* pos0, U* pos1, int64_t n,
               int bits, StreamHandle stream);

template <typename I>
void launch_scatter(const void* src, int64_t n, int64_t row_bytes, const I* idx, void* dst,
                    int64_t dst_rows, unsigned long long* first_bad, StreamHandle stream);

/// The OR of the addresses (what gather::vector_bytes takes).
inline uint64_t address_bits(const void* a, const void* b, const void* c = nullptr) {
  return reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
         reinterpret_cast<uintptr_t>(c);
}

/// Largest of 16, 8, 4, 2, 1 dividing row_bytes and every address (the vector width).
inline int vector_bytes(int64_t row_bytes, const void* a, const void* b, const void* c = nullptr) {
  return gather::vector_bytes(row_bytes, address_bits(a, b, c));
}

/// Resident-thread budget for grid-stride launches (SMs x 2048 threads), cached per process.
int64_t max_resident_threads();

}  // namespace tessera::cuda::detail
