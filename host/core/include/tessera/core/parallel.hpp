// SPDX-License-Identifier: Apache-2.0
// Minimal fork-join parallelism over index ranges (std::thread; no OpenMP dependency).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

namespace tessera {

/// Number of worker threads used by parallel_for: TESSERA_NUM_THREADS if set, else the
/// hardware concurrency, overridable with set_num_threads (0 restores the default). ValueError
/// when TESSERA_NUM_THREADS is set to anything but an integer in [1, kMaxThreads].
int num_threads();
/// The thread count a TESSERA_NUM_THREADS value asks for (0 for null or empty: the default);
/// ValueError naming the value when it is not an integer in [1, kMaxThreads].
int threads_from_env(const char* value);
inline constexpr int kMaxThreads = 4096;
void set_num_threads(int n);

/// Splits [begin, end) into at most `max_threads` contiguous chunks of at least `grain` items
/// and calls f(lo, hi, chunk_index) on each, in parallel. Chunk boundaries depend only on the
/// range, grain and thread count. The first exception thrown by any chunk is rethrown here.
template <typename F>
void parallel_for_threads(int max_threads, int64_t begin, int64_t end, int64_t grain, F&& f) {
  const int64_t n = end - begin;
  if (n <= 0) {
    return;
  }
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(std::max(max_threads, 1), n / grain));
  if (chunks == 1) {
    f(begin, end, 0);
    return;
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(chunks);
  threads.reserve(chunks - 1);
  auto run = [&](int64_t c) {
    const int64_t lo = begin + n * c / chunks, hi = begin + n * (c + 1) / chunks;
    try {
      f(lo, hi, c);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  for (int64_t c = 1; c < chunks; ++c) {
    threads.emplace_back(run, c);
  }
  run(0);
  for (auto& t : threads) {
    t.join();
  }
  for (auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
}

/// parallel_for_threads over num_threads() threads.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  parallel_for_threads(num_threads(), begin, end, grain, std::forward<F>(f));
}

}  // namespace tessera
