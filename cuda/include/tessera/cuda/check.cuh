// SPDX-License-Identifier: Apache-2.0
// Checked CUDA calls and kernel launches (CUDA translation units only).
#pragma once

#include <cuda_runtime.h>

#include "tessera/core/error.hpp"

/// Checks a CUDA runtime call; throws tessera::Error with the call text and CUDA's error name.
#define TESSERA_CUDA_TRY(call)                                                               \
  do {                                                                                       \
    const cudaError_t tessera_err_ = (call);                                                 \
    if (tessera_err_ != cudaSuccess)                                                         \
      throw ::tessera::Error(fmt::format("CUDA call `{}` failed at {}:{}: {} ({})", #call,   \
                                         __FILE__, __LINE__, cudaGetErrorName(tessera_err_), \
                                         cudaGetErrorString(tessera_err_)));                 \
  } while (0)

/// No-throw variant for destructors: logs to stderr instead.
#define TESSERA_CUDA_TRY_NOTHROW(call)                                            \
  do {                                                                            \
    const cudaError_t tessera_err_ = (call);                                      \
    if (tessera_err_ != cudaSuccess)                                              \
      fmt::print(stderr, "[tessera] warning: CUDA call `{}` failed: {}\n", #call, \
                 cudaGetErrorName(tessera_err_));                                 \
  } while (0)

/// Launches a kernel on a stream, skipping empty grids, and checks the launch.
#define TESSERA_KERNEL_CALL(kernel, grid, block, smem, stream, ...)      \
  do {                                                                   \
    const dim3 tessera_grid_(grid);                                      \
    if (tessera_grid_.x * tessera_grid_.y * tessera_grid_.z > 0) {       \
      kernel<<<tessera_grid_, (block), (smem), (stream)>>>(__VA_ARGS__); \
      TESSERA_CUDA_TRY(cudaPeekAtLastError());                           \
    }                                                                    \
  } while (0)
