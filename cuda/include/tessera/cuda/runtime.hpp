// SPDX-License-Identifier: Apache-2.0
// What this build and this machine can do on the GPU. Safe to include without CUDA.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::cuda {

/// True when Tessera was built with TESSERA_WITH_CUDA (nvcc compiled the kernels).
bool compiled_with_cuda();
/// Number of usable CUDA devices (0 when not compiled with CUDA or when no driver/GPU).
int device_count();
/// One line describing the CUDA build and devices, for `tessera info` and logs.
std::string describe();
/// Throws NotCompiledError("... not_compiled_with_cuda ...") naming `op` when CUDA is absent,
/// or ValueError when compiled in but no device is present.
void require_cuda(const char* op);
/// Free and total bytes of the calling thread's current device (cudaMemGetInfo).
/// NotCompiledError without CUDA.
void device_memory(int64_t* free_bytes, int64_t* total_bytes);

}  // namespace tessera::cuda
