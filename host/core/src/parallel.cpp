// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/parallel.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

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

// --- the pool ------------------------------------------------------------------------------
// Jobs wait in a queue until as many pool threads as they asked for have taken them; a thread
// that takes a job claims its chunks one at a time until none is left, then leaves it. The
// job's owner claims chunks too (in wait()), takes the job out of the queue, and waits only for
// threads that are running one of its chunks: a chunk claimed is a chunk being run, so a wait
// always ends. Threads are started on demand and sleep on a condition variable between jobs.
// Before a fork (os.fork, a launcher's ranks) the idle threads end and are joined, so that the
// child is forked from a process without them (starting threads after a fork of a
// multi-threaded process is what POSIX leaves undefined); the rest end when they finish their
// job, and later jobs start new ones. The pool is never destroyed, so a process may exit while
// its threads sleep.
class WorkerPool {
 public:
  static WorkerPool& get() {
    static std::once_flag once;
    std::call_once(once, [] {
      g_pool = new WorkerPool;
      // The child has none of the parent's threads, and may have been forked while a thread
      // of the parent held the pool's mutex: it starts a pool of its own (the parent's is left
      // behind).
      ::pthread_atfork([] { g_pool->end_idle_threads(); }, nullptr,
                       [] { g_pool = new WorkerPool(g_pool); });
    });
    return *g_pool;
  }

  int threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(threads_.size());
  }

  void submit(PoolJob* j) {
    std::unique_lock<std::mutex> lock(mu_);
    join_ended();
    queue_.push_back(j);
    j->queued_ = true;
    // Start threads so that the job finds as many idle ones as it asks for; without threads
    // (std::system_error) its owner runs the chunks.
    while (idle_ + starting_ < j->helpers_ && static_cast<int>(threads_.size()) < kMaxThreads - 1) {
      const uint64_t id = next_id_++;
      try {
        threads_.emplace(id, std::thread(&WorkerPool::serve, this, id, era_));
      } catch (const std::system_error&) {
        break;
      }
      ++starting_;
    }
    for (int k = 0; k < j->helpers_; ++k) {
      work_.notify_one();
    }
  }

  void retire(PoolJob* j) {
    std::unique_lock<std::mutex> lock(mu_);
    if (j->queued_) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), j));
      j->queued_ = false;
    }
    j->left_.wait(lock, [&] { return j->active_ == 0; });
  }

 private:
  explicit WorkerPool(WorkerPool* before = nullptr) : before_(before) {}

  void serve(uint64_t id, uint64_t era) {
#ifdef __linux__
    ::pthread_setname_np(::pthread_self(), "tessera-pool");
#endif
    std::unique_lock<std::mutex> lock(mu_);
    --starting_;
    for (;;) {
      ++idle_;
      work_.wait(lock, [&] { return !queue_.empty() || era_ != era; });
      --idle_;
      if (era_ != era) {  // a fork is coming (or came): end; a later job starts a new thread
        if (joining_) {   // end_idle_threads() joins it
          ended_.push_back(id);
          ended_cv_.notify_all();
        } else {  // it was running a job when the fork came: nobody waits for it
          auto it = threads_.find(id);
          it->second.detach();
          threads_.erase(it);
        }
        return;
      }
      PoolJob* j = queue_.front();
      ++j->active_;
      if (++j->joined_ >= j->helpers_) {
        queue_.pop_front();
        j->queued_ = false;
      }
      lock.unlock();
      j->run_unclaimed();
      lock.lock();
      if (--j->active_ == 0) {
        j->left_.notify_all();
      }
    }
  }

  // Before a fork: ends the threads that wait for a job (and those about to), and joins them.
  // Threads running a job end when they finish it; they are not waited for (a job may wait
  // for the thread that forks). Bounded: a thread that does not end within a second is left.
  void end_idle_threads() {
    std::unique_lock<std::mutex> lock(mu_);
    if (threads_.empty()) {
      return;
    }
    ++era_;
    joining_ = true;
    work_.notify_all();
    ended_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return idle_ == 0 && starting_ == 0; });
    joining_ = false;
    join_ended();
  }

  // Joins the threads that have ended (under mu_: they no longer need it).
  void join_ended() {
    for (uint64_t id : ended_) {
      auto it = threads_.find(id);
      it->second.join();
      threads_.erase(it);
    }
    ended_.clear();
  }

  static WorkerPool* g_pool;
  [[maybe_unused]] WorkerPool* const
      before_;  // the parent's pool in a forked child: left, but kept reachable
  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable ended_cv_;
  std::deque<PoolJob*> queue_;
  std::map<uint64_t, std::thread> threads_;  // every thread not yet joined
  std::vector<uint64_t> ended_;              // threads that have ended, to be joined
  uint64_t next_id_ = 0;
  uint64_t era_ = 0;      // a thread ends when it changes (before a fork)
  bool joining_ = false;  // end_idle_threads() waits to join the threads that end
  int idle_ = 0;          // waiting for a job
  int starting_ = 0;      // started and not yet waiting: they will be idle in a moment
};

WorkerPool* WorkerPool::g_pool = nullptr;

PoolJob::PoolJob(int64_t chunks, int helpers, void (*run)(void*, int64_t), void* ctx)
    : chunks_(chunks),
      helpers_(static_cast<int>(std::clamp<int64_t>(helpers, 0, std::max<int64_t>(chunks, 0)))),
      run_(run),
      ctx_(ctx) {
  if (helpers_ > 0) {
    pool_ = &WorkerPool::get();
    pool_->submit(this);
  }
}

void PoolJob::run_unclaimed() {
  for (int64_t c = next_.fetch_add(1, std::memory_order_relaxed); c < chunks_;
       c = next_.fetch_add(1, std::memory_order_relaxed)) {
    run_(ctx_, c);
  }
}

void PoolJob::wait() {
  if (done_) {
    return;
  }
  run_unclaimed();
  if (pool_ != nullptr) {
    pool_->retire(this);
  }
  done_ = true;
}

int pool_threads() {
  return WorkerPool::get().threads();
}

}  // namespace tessera
