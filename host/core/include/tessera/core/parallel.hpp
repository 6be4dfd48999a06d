// SPDX-License-Identifier: Apache-2.0
// Fork-join parallelism over index ranges on one process-wide pool of worker threads
// (std::thread; no OpenMP dependency).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

namespace tessera {

class WorkerPool;

/// Number of worker threads used by parallel_for: TESSERA_NUM_THREADS if set, else the
/// hardware concurrency, overridable with set_num_threads (0 restores the default). ValueError
/// when TESSERA_NUM_THREADS is set to anything but an integer in [1, kMaxThreads].
int num_threads();
/// The thread count a TESSERA_NUM_THREADS value asks for (0 for null or empty: the default);
/// ValueError naming the value when it is not an integer in [1, kMaxThreads].
int threads_from_env(const char* value);
inline constexpr int kMaxThreads = 4096;
void set_num_threads(int n);

/// Worker threads the process's pool has started so far (it starts them as jobs ask for them,
/// up to kMaxThreads - 1, and keeps them; a forked child starts with none).
int pool_threads();

/// A job of `chunks` independent tasks run(ctx, c), c in [0, chunks), on the process's pool:
/// up to `helpers` pool threads take chunks from the moment the job is constructed, and wait()
/// (the destructor too) runs the chunks nobody has taken on the calling thread, then waits for
/// those in flight. A chunk may start its own jobs (they run on the same pool; a thread waiting
/// in wait() runs chunks itself, so nesting never deadlocks), but it must not wait for another
/// chunk of its own job: the chunks may all run on one thread, one after the other. `run` must
/// not throw (parallel_chunks catches for it).
class PoolJob {
 public:
  PoolJob(int64_t chunks, int helpers, void (*run)(void*, int64_t), void* ctx);
  ~PoolJob() { wait(); }
  PoolJob(const PoolJob&) = delete;
  PoolJob& operator=(const PoolJob&) = delete;
  void wait();

 private:
  friend class WorkerPool;
  void run_unclaimed();  // claims and runs chunks until every one is taken

  const int64_t chunks_;
  const int helpers_;
  void (*const run_)(void*, int64_t);
  void* const ctx_;
  // Chunks are claimed by a fetch_add; the rest is guarded by the pool's mutex.
  std::atomic<int64_t> next_{0};
  int joined_ = 0;       // pool threads that took the job
  int active_ = 0;       // of those, still running its chunks
  bool queued_ = false;  // in the pool's queue: pool threads may still take it
  bool done_ = false;
  WorkerPool* pool_ = nullptr;    // the pool it was submitted to
  std::condition_variable left_;  // active_ reached 0
};

/// Calls f(c) for every c in [0, chunks), on up to `max_threads` threads (the caller's among
/// them). The first exception, by chunk index, is rethrown here once every chunk has ended.
template <typename F>
void parallel_chunks(int max_threads, int64_t chunks, F&& f) {
  if (chunks <= 0) {
    return;
  }
  const int64_t threads = std::min<int64_t>(std::max(max_threads, 1), chunks);
  if (threads == 1) {
    for (int64_t c = 0; c < chunks; ++c) {
      f(c);
    }
    return;
  }
  struct Ctx {
    F& f;
    std::vector<std::exception_ptr> errors;
  } ctx{f, std::vector<std::exception_ptr>(static_cast<size_t>(chunks))};
  {
    PoolJob job(
        chunks, static_cast<int>(threads - 1),
        [](void* p, int64_t c) {
          auto& x = *static_cast<Ctx*>(p);
          try {
            x.f(c);
          } catch (...) {
            x.errors[static_cast<size_t>(c)] = std::current_exception();
          }
        },
        &ctx);
  }
  for (auto& e : ctx.errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
}

/// Splits [begin, end) into at most `max_threads` contiguous chunks of at least `grain` items
/// and calls f(lo, hi, chunk_index) on each, in parallel (parallel_chunks). Chunk boundaries
/// depend only on the range, grain and thread count. The first exception thrown by any chunk
/// is rethrown here.
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
  parallel_chunks(static_cast<int>(chunks), chunks,
                  [&](int64_t c) { f(begin + n * c / chunks, begin + n * (c + 1) / chunks, c); });
}

/// parallel_for_threads over num_threads() threads.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  parallel_for_threads(num_threads(), begin, end, grain, std::forward<F>(f));
}

}  // namespace tessera
