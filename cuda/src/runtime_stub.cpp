// SPDX-License-Identifier: Apache-2.0
// CPU-only build: the CUDA entry points exist and say clearly that CUDA is not compiled in.
#include "tessera/core/error.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {

bool compiled_with_cuda() {
  return false;
}
int device_count() {
  return 0;
}
std::string describe() {
  return "not compiled with CUDA (TESSERA_WITH_CUDA=OFF): every op runs its CPU twin";
}
void require_cuda(const char* op) {
  TESSERA_FAIL(NotCompiledError,
               "{}: not_compiled_with_cuda: this Tessera build has no CUDA support; rebuild with "
               "-DTESSERA_WITH_CUDA=ON or use device=cpu",
               op);
}

void device_memory(int64_t*, int64_t*) {
  require_cuda("device_memory");
}

}  // namespace tessera::cuda
