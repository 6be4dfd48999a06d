// SPDX-License-Identifier: Apache-2.0
#include "random.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera::transport::detail {

void random_bytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t k = ::getrandom(p, n, 0);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    TESSERA_EXPECTS(k > 0, IOError, "getrandom failed: {}", std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace tessera::transport::detail
