// What this build and this machine can do on the GPU. Safe to include without CUDA.
#pragma once

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

}  // namespace tessera::cuda
