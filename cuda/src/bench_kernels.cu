// SPDX-License-Identifier: Apache-2.0
// Limits the benchmarks measure in the same run as what they bound: random reads of an array
// in device memory or pinned host memory (UVA), as fast as the GPU can issue them.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gather_launch.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {
namespace {

__device__ inline uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ inline void fold(unsigned long long& acc, unsigned long long v) {
  acc ^= v;
}
__device__ inline void fold(unsigned long long& acc, uint4 v) {
  acc ^= (static_cast<unsigned long long>(v.x) | (static_cast<unsigned long long>(v.y) << 32)) ^
         (static_cast<unsigned long long>(v.z) | (static_cast<unsigned long long>(v.w) << 32));
}

// Each thread: `rounds` times, 8 independent reads at uniform random positions, then folds them.
template <typename V>
__global__ void random_read_kernel(const V* __restrict__ a, uint64_t count, int rounds,
                                   uint64_t seed, unsigned long long* sink) {
  uint64_t x = seed ^ ((blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) *
                       0xD1B54A32D192ED03ull);
  unsigned long long acc = 0;
  for (int r = 0; r < rounds; ++r) {
    uint64_t idx[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      idx[u] = __umul64hi(splitmix(x), count);
    V v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = a[idx[u]];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      fold(acc, v[u]);
  }
  if (acc == 0x5EED5EED5EED5EEDull) atomicAdd(sink, 1ull);  // keeps the loads
}

// A gather for diagnostics: 16-byte vectors, one per thread and row (row_bytes / 16 threads per
// row), int64 indices; each group takes R consecutive entries per iteration and issues all their
// index loads, then all their row loads, then the stores. `pos` (may be null) is where entry i's
// row goes (sorted gathers).
template <int R>
__global__ void probe_gather_kernel(const uint4* __restrict__ src, int64_t vpr,
                                    const int64_t* __restrict__ idx,
                                    const int64_t* __restrict__ pos, int64_t n,
                                    uint4* __restrict__ out, int log2_tpr) {
  const int lane = static_cast<int>(threadIdx.x) & ((1 << log2_tpr) - 1);
  const int64_t groups_per_block = static_cast<int64_t>(blockDim.x) >> log2_tpr;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * groups_per_block * R;
  for (int64_t i0 = (blockIdx.x * groups_per_block + (threadIdx.x >> log2_tpr)) * R; i0 < n;
       i0 += stride) {
    int64_t r[R], p[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      r[u] = i0 + u < n ? idx[i0 + u] : -1;
      p[u] = pos && i0 + u < n ? pos[i0 + u] : i0 + u;
    }
    uint4 v[R];
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (r[u] >= 0) v[u] = src[r[u] * vpr + lane];
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (r[u] >= 0) out[p[u] * vpr + lane] = v[u];
  }
}

}  // namespace

double probe_gather_gbps(const void* src, int64_t src_rows, int64_t row_bytes, int64_t n,
                         int rows_per_group, bool sorted, int grid_div, int iters, uint64_t seed) {
  require_cuda("gather probe");
  TESSERA_EXPECTS(row_bytes % 16 == 0 && row_bytes >= 16 && row_bytes <= 512 && n > 0 &&
                      src_rows > 0 && iters > 0 && grid_div >= 1 &&
                      (rows_per_group == 1 || rows_per_group == 2 || rows_per_group == 4),
                  ValueError,
                  "gather probe: rows of 16..512 bytes in 16-byte steps, 1, 2 or 4 rows per "
                  "group (got {} bytes, {} rows per group)",
                  row_bytes, rows_per_group);
  Stream stream;
  auto s = static_cast<cudaStream_t>(stream.get());
  std::vector<int64_t> h_idx(static_cast<size_t>(n)), h_pos;
  std::mt19937_64 rng(seed);
  for (auto& x : h_idx)
    x = static_cast<int64_t>(rng() % static_cast<uint64_t>(src_rows));
  if (sorted) {
    h_pos.resize(h_idx.size());
    std::iota(h_pos.begin(), h_pos.end(), 0);
    std::sort(h_pos.begin(), h_pos.end(),
              [&](int64_t a, int64_t b) { return h_idx[a] < h_idx[b]; });
    std::vector<int64_t> sorted_idx(h_idx.size());
    for (size_t i = 0; i < h_pos.size(); ++i)
      sorted_idx[i] = h_idx[static_cast<size_t>(h_pos[i])];
    h_idx.swap(sorted_idx);
  }
  DeviceBuffer idx(h_idx.size() * 8), pos(std::max<size_t>(h_pos.size() * 8, 8));
  copy_async(idx.data(), h_idx.data(), idx.size(), stream.get());
  if (sorted) copy_async(pos.data(), h_pos.data(), h_pos.size() * 8, stream.get());
  DeviceBuffer out(static_cast<size_t>(n * row_bytes));
  DeviceBuffer flush(2 * l2_cache_bytes());
  const int64_t vpr = row_bytes / 16;
  int log2_tpr = 0;
  while ((int64_t{1} << log2_tpr) < vpr)
    ++log2_tpr;
  const int threads = 256;
  const int64_t groups = (n + rows_per_group - 1) / rows_per_group;
  const int64_t want = (groups * (int64_t{1} << log2_tpr) + threads - 1) / threads;
  const int64_t cap = std::max<int64_t>(1, detail::max_resident_threads() / threads / grid_div);
  const unsigned grid = static_cast<unsigned>(std::min(want, cap));
  const auto* ps = sorted ? static_cast<const int64_t*>(pos.data()) : nullptr;
  auto run = [&] {
    auto* sv = static_cast<const uint4*>(src);
    auto* ix = static_cast<const int64_t*>(idx.data());
    auto* o = static_cast<uint4*>(out.data());
    if (rows_per_group == 1)
      TESSERA_KERNEL_CALL(probe_gather_kernel<1>, grid, threads, 0, s, sv, vpr, ix, ps, n, o,
                          log2_tpr);
    else if (rows_per_group == 2)
      TESSERA_KERNEL_CALL(probe_gather_kernel<2>, grid, threads, 0, s, sv, vpr, ix, ps, n, o,
                          log2_tpr);
    else
      TESSERA_KERNEL_CALL(probe_gather_kernel<4>, grid, threads, 0, s, sv, vpr, ix, ps, n, o,
                          log2_tpr);
  };
  run();
  Event start, stop;
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    memset_async(flush.data(), 0, flush.size(), stream.get());
    start.record(stream.get());
    run();
    stop.record(stream.get());
    stop.synchronize();
    ms.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(n * row_bytes) / (ms[ms.size() / 2] * 1e6);
}

double random_read_rate(const void* array, int64_t count, int elem_bytes, bool uva, int iters) {
  require_cuda("random read bench");
  TESSERA_EXPECTS(count > 0 && (elem_bytes == 8 || elem_bytes == 16) && iters > 0, ValueError,
                  "random read bench: need elements > 0, 8 or 16 bytes each, iterations > 0 "
                  "(got {}, {}, {})",
                  count, elem_bytes, iters);
  Stream stream;
  auto s = static_cast<cudaStream_t>(stream.get());
  DeviceBuffer sink(sizeof(unsigned long long));
  memset_async(sink.data(), 0, sink.size(), stream.get());
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>(detail::max_resident_threads() / threads);
  const int rounds = uva ? 2 : 16;
  const double reads = static_cast<double>(blocks) * threads * rounds * 8;
  auto run = [&](uint64_t seed) {
    if (elem_bytes == 8)
      TESSERA_KERNEL_CALL(random_read_kernel<unsigned long long>, blocks, threads, 0, s,
                          static_cast<const unsigned long long*>(array),
                          static_cast<uint64_t>(count), rounds, seed,
                          static_cast<unsigned long long*>(sink.data()));
    else
      TESSERA_KERNEL_CALL(random_read_kernel<uint4>, blocks, threads, 0, s,
                          static_cast<const uint4*>(array), static_cast<uint64_t>(count), rounds,
                          seed, static_cast<unsigned long long*>(sink.data()));
  };
  run(1);  // warm-up
  Event start, stop;
  std::vector<double> rate;
  for (int i = 0; i < iters; ++i) {
    start.record(stream.get());
    run(static_cast<uint64_t>(i) + 2);
    stop.record(stream.get());
    stop.synchronize();
    rate.push_back(reads / (1e-3 * stop.elapsed_ms_since(start)));
  }
  std::sort(rate.begin(), rate.end());
  return rate[rate.size() / 2];
}

}  // namespace tessera::cuda
