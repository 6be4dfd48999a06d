// SPDX-License-Identifier: Apache-2.0
// The 'ucx' transport when UCX was not found at build time: says so instead of failing to link.
#include "../src/backends.hpp"

namespace tessera::transport::detail {

bool ucx_compiled() {
  return false;
}
std::string ucx_unavailable_reason() {
  return "not compiled in (UCX was not found at build time)";
}

std::unique_ptr<Transport> make_ucx(const LaunchEnv&, const Options&) {
  TESSERA_FAIL(NotCompiledError,
               "the 'ucx' transport was not compiled into this build (UCX was not found; install "
               "libucx-dev and reconfigure with -DTESSERA_WITH_UCX=ON)");
}

}  // namespace tessera::transport::detail
