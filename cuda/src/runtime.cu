// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "tessera/cuda/check.cuh"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {

bool compiled_with_cuda() {
  return true;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string describe() {
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  const int n = device_count();
  std::string s = fmt::format("CUDA runtime {}.{}, {} device(s)", rt / 1000, (rt % 1000) / 10, n);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
      s += fmt::format("; [{}] {} sm_{}{} {:.1f} GiB", d, p.name, p.major, p.minor,
                       p.totalGlobalMem / double(1 << 30));
  }
  return s;
}

void require_cuda(const char* op) {
  TESSERA_EXPECTS(device_count() > 0, ValueError,
                  "{}: device=cuda requested but no CUDA device is available on this machine", op);
}

void device_memory(int64_t* free_bytes, int64_t* total_bytes) {
  size_t f = 0, t = 0;
  TESSERA_CUDA_TRY(cudaMemGetInfo(&f, &t));
  if (free_bytes) *free_bytes = static_cast<int64_t>(f);
  if (total_bytes) *total_bytes = static_cast<int64_t>(t);
}

}  // namespace tessera::cuda
