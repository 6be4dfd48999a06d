// SPDX-License-Identifier: Apache-2.0
// The 'nccl' transport when Tessera is built without CUDA/NCCL: says so instead of failing to
// link.
#include "../src/backends.hpp"

namespace tessera::transport::detail {

bool nccl_compiled() {
  return false;
}
std::string nccl_unavailable_reason() {
  return "not compiled in (build with -DTESSERA_WITH_CUDA=ON and NCCL installed)";
}

std::unique_ptr<Transport> make_nccl(const LaunchEnv&, const Options&) {
  TESSERA_FAIL(NotCompiledError,
               "the 'nccl' transport was not compiled into this build (not_compiled_with_cuda: "
               "reconfigure with -DTESSERA_WITH_CUDA=ON on a machine with CUDA and NCCL)");
}

}  // namespace tessera::transport::detail
