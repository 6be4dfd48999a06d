// SPDX-License-Identifier: Apache-2.0
// Device-side timing of the benchmarks (`tessera bench gather`, `tessera bench sample --device
// cuda`): CUDA events around each run, over the cuda library's runtime wrappers, so it compiles
// in every build; without CUDA each call throws NotCompiledError (not_compiled_with_cuda).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::tools {

/// One measurement of the gather benchmark on the GPU.
struct GatherBenchResult {
  /// Payload (n * row_bytes) per second / 1e9 of the gather; median over the timed runs.
  /// (HBM traffic of a device gather is about twice the payload: every byte read and written.)
  double gather_gbps = 0;
  /// The same for the bound: a D2D or pinned H2D cudaMemcpyAsync of the same payload.
  double bound_gbps = 0;
  double gather_ms = 0;  ///< median milliseconds of one gather
  double bound_ms = 0;   ///< median milliseconds of the bound copy of the same payload
  int iterations = 0;
  bool sorted = false;  ///< the gather sorted its indices first (GatherOrder::kAuto chose it)
};

/// Times cuda::gather_rows_impl (GatherOrder::kAuto: a sort of the indices, when it takes one,
/// is inside the timed region) of `n` random rows (uniform in [0, src_rows), int64 indices,
/// fixed `seed`) of `row_bytes` each from `src` into a device buffer with CUDA events: `warmup`
/// untimed runs, then `iters` timed runs each preceded by an L2 flush; reports medians. The
/// bound is cudaMemcpyAsync of the same payload bytes: device-to-device when `src` is device
/// memory (`uva` false), pinned host-to-device when `uva`. Synchronizes (it is a benchmark).
GatherBenchResult bench_gather_device(const void* src, int64_t src_rows, int64_t row_bytes,
                                      int64_t n, bool uva, int warmup, int iters, uint64_t seed);

/// The copy bound of the benchmarks: median GB/s (1e9 bytes/s) of `iters` cudaMemcpyAsync of
/// `bytes`, device-to-device (`pinned_h2d` false) or pinned host-to-device, timed with CUDA
/// events after one warm-up copy. Synchronizes (it is a benchmark).
double copy_bandwidth_gbps(size_t bytes, bool pinned_h2d, int iters);

}  // namespace tessera::tools
