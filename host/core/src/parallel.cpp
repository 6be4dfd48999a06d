// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/parallel.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

namespace tessera {

namespace {
std::atomic<int> g_threads{0};
}

int num_threads() {
  const int n = g_threads.load();
  if (n > 0) return n;
  if (const char* env = std::getenv("TESSERA_NUM_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void set_num_threads(int n) {
  g_threads = n < 0 ? 0 : n;
}

}  // namespace tessera
