// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/parallel.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
std::atomic<int> g_threads{0};
}

int threads_from_env(const char* value) {
  if (value == nullptr || *value == '\0') {
    return 0;
  }
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  TESSERA_EXPECTS(errno == 0 && *end == '\0' && v >= 1 && v <= kMaxThreads, ValueError,
                  "TESSERA_NUM_THREADS must be an integer in [1, {}], got '{}'", kMaxThreads,
                  value);
  return static_cast<int>(v);
}

int num_threads() {
  const int n = g_threads.load();
  if (n > 0) {
    return n;
  }
  const int v = threads_from_env(std::getenv("TESSERA_NUM_THREADS"));
  if (v > 0) {
    return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void set_num_threads(int n) {
  g_threads = n < 0 ? 0 : n;
}

}  // namespace tessera
