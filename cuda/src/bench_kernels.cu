// SPDX-License-Identifier: Apache-2.0
// What the benchmarks measure beside the library in the same run: the sampling benchmark's limit
// (the reads the sampler must make for real visits, tessera/cuda/row_reads.hpp) and its
// single-entry random-read rate, and the gather benchmark's probes of the library's gather
// with its plan forced.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gather_launch.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/row_reads.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/cuda/sample_group.hpp"

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

// The limit of the sampling benchmark (tessera/cuda/row_reads.hpp): a group of 2^log2_g lanes
// per visit reads what the sampler must read of the visit's row, and folds it.
__device__ inline void fold_entry(const GraphView& g, int64_t k, unsigned long long& acc) {
  switch (g.layout) {
    case Adjacency::kPacked:
      acc ^= g.packed[k];
      return;
    case Adjacency::kPairs:
      fold(acc, reinterpret_cast<const uint4*>(g.pairs)[k]);
      return;
    default:
      acc ^= static_cast<unsigned long long>(g.indices[k]) ^
             (g.eids ? static_cast<unsigned long long>(g.eids[k]) : 0ull);
  }
}

__global__ void row_read_kernel(const __grid_constant__ GraphView g,
                                const int64_t* __restrict__ visits, int64_t begin, int64_t end,
                                int64_t k, bool replace, int stage_bytes, int log2_g,
                                unsigned long long* sink) {
  const int G = 1 << log2_g;
  const int lane = static_cast<int>(threadIdx.x) & (G - 1);
  const int64_t groups_per_block = static_cast<int64_t>(blockDim.x) >> log2_g;
  const int eb = g.edge_bytes();
  const bool weighted = g.prefix != nullptr;
  const auto* adj = g.layout == Adjacency::kPacked
                        ? reinterpret_cast<const unsigned char*>(g.packed)
                        : reinterpret_cast<const unsigned char*>(g.pairs);
  unsigned long long acc = 0;
  for (int64_t vi = begin + blockIdx.x * groups_per_block + (threadIdx.x >> log2_g); vi < end;
       vi += static_cast<int64_t>(gridDim.x) * groups_per_block) {
    const int64_t v = visits[vi];
    const int64_t rb = g.indptr[v], d = g.indptr[v + 1] - rb;
    int64_t positives = d;
    if (weighted && !replace && k >= 0 && d > k && g.row_info) positives = g.row_info[2 * v];
    const limits::RowPlan p = limits::row_plan(d, k, replace, weighted, positives, eb, stage_bytes,
                                               g.layout != Adjacency::kSplit);
    if (p.read == limits::RowRead::kStaged) {
      int64_t lo = 0, hi = 0;
      limits::staged_bytes(rb, d, eb, &lo, &hi);
      const auto* s = reinterpret_cast<const uint4*>(adj + lo);
      for (int64_t c = lane; c < (hi - lo) / 16; c += G)
        fold(acc, s[c]);
    } else if (p.read == limits::RowRead::kWhole) {
      for (int64_t t = lane; t < d; t += G)
        fold_entry(g, rb + t, acc);
    }
    for (int64_t t = lane; t < p.draws; t += G) {
      const auto visit = static_cast<uint64_t>(vi);
      const auto draw = static_cast<uint32_t>(t);
      int64_t pos = 0;
      if (p.search) {
        const double* cdf = g.prefix + rb;
        pos = limits::search_prefix(cdf, d, limits::draw_fraction(visit, draw) * cdf[d - 1]);
      } else {
        pos = limits::draw_position(visit, draw, d);
      }
      if (p.read == limits::RowRead::kDraws)
        fold_entry(g, rb + pos, acc);
      else
        acc ^= static_cast<unsigned long long>(pos);  // the entry is in the stage
    }
  }
  if (acc == 0x5EED5EED5EED5EEDull) atomicAdd(sink, 1ull);  // keeps the loads
}

}  // namespace

double probe_gather_ms(const void* src, int64_t src_rows, int64_t row_bytes, int64_t n,
                       GatherOrder order, int rows_per_group, bool sort_only, int iters,
                       uint64_t seed) {
  require_cuda("gather probe");
  TESSERA_EXPECTS(
      row_bytes > 0 && n > 0 && src_rows > 0 && iters > 0 &&
          (rows_per_group == 0 || rows_per_group == 1 || rows_per_group == 2 ||
           rows_per_group == 4 || rows_per_group == 8),
      ValueError,
      "gather probe: need rows, row bytes, batch and iterations > 0 and 0, 1, 2, 4 or 8 "
      "rows per group (got {}, {}, {}, {}, {})",
      src_rows, row_bytes, n, iters, rows_per_group);
  Stream stream;
  std::vector<int64_t> h_idx(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  for (auto& x : h_idx)
    x = static_cast<int64_t>(rng() % static_cast<uint64_t>(src_rows));
  DeviceBuffer idx(h_idx.size() * sizeof(int64_t));
  copy_async(idx.data(), h_idx.data(), idx.size(), stream.get());
  DeviceBuffer out(static_cast<size_t>(n * row_bytes));
  DeviceBuffer flush(2 * l2_cache_bytes());
  detail::GatherLaunch g;
  g.src = src;
  g.src_rows = src_rows;
  g.n = n;
  g.out = out.data();
  auto run = [&] {
    detail::gather_dispatch(g, row_bytes, idx.data(), IndexType::kInt64, order, stream.get(),
                            rows_per_group, sort_only);
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
  return ms[ms.size() / 2];
}

double row_read_rate(const GraphView& g, const int64_t* d_visits, const VisitSegment* segments,
                     int num_segments, bool replace, int stage_bytes, int64_t edges, int iters) {
  require_cuda("row read limit");
  TESSERA_EXPECTS(num_segments >= 0 && iters > 0 && edges >= 0 && stage_bytes >= 0, ValueError,
                  "row read limit: need segments >= 0, iterations > 0, edges >= 0 and stage "
                  "bytes >= 0 (got {}, {}, {}, {})",
                  num_segments, iters, edges, stage_bytes);
  Stream stream;
  auto s = static_cast<cudaStream_t>(stream.get());
  DeviceBuffer sink(sizeof(unsigned long long));
  memset_async(sink.data(), 0, sink.size(), stream.get());
  const int threads = 256;
  int per_sm = 0;
  TESSERA_CUDA_TRY(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, row_read_kernel, threads, 0));
  const int64_t resident = static_cast<int64_t>(std::max(per_sm, 1)) * multiprocessor_count();
  auto run = [&] {
    for (int i = 0; i < num_segments; ++i) {
      const VisitSegment& seg = segments[i];
      const int G = group::group_size(seg.fanout);
      int log2_g = 0;
      while ((1 << log2_g) < G)
        ++log2_g;
      const int64_t groups_per_block = threads / G;
      const int64_t want = (seg.end - seg.begin + groups_per_block - 1) / groups_per_block;
      TESSERA_KERNEL_CALL(row_read_kernel, static_cast<unsigned>(std::min(want, resident)), threads,
                          0, s, g, d_visits, seg.begin, seg.end, seg.fanout, replace, stage_bytes,
                          log2_g, static_cast<unsigned long long*>(sink.data()));
    }
  };
  run();  // warm-up
  Event start, stop;
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    start.record(stream.get());
    run();
    stop.record(stream.get());
    stop.synchronize();
    ms.push_back(stop.elapsed_ms_since(start));
  }
  std::sort(ms.begin(), ms.end());
  const double t = ms[ms.size() / 2];
  return t > 0 ? static_cast<double>(edges) / (1e-3 * t) : 0;
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
