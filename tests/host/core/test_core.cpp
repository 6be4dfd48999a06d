// SPDX-License-Identifier: Apache-2.0
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/core/progress.hpp"
#include "tessera_test.hpp"

namespace tessera {
namespace {

TEST(Error, ExpectsThrowsTypedWithMessage) {
  TESSERA_EXPECT_THROW_MSG(TESSERA_EXPECTS(1 == 2, ValueError, "bad {} {}", "x", 3), ValueError,
                           "bad x 3");
  EXPECT_NO_THROW(TESSERA_EXPECTS(true, IndexError, "never"));
  TESSERA_EXPECT_THROW_MSG(TESSERA_ASSERT(false, "inv {}", 1), InternalError, "inv 1");
}

class ParallelFor : public ::testing::TestWithParam<int> {};

TEST_P(ParallelFor, CoversRangeExactlyOnce) {
  set_num_threads(GetParam());
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(0, n, 3, [&](int64_t lo, int64_t hi, int64_t) {
      for (int64_t i = lo; i < hi; ++i)
        hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
  set_num_threads(0);
}

TEST_P(ParallelFor, RethrowsWorkerException) {
  set_num_threads(GetParam());
  EXPECT_THROW(parallel_for(0, 1000, 1,
                            [&](int64_t lo, int64_t hi, int64_t) {
                              if (lo <= 999 && 999 < hi) TESSERA_FAIL(IndexError, "boom");
                            }),
               IndexError);
  set_num_threads(0);
}

INSTANTIATE_TEST_SUITE_P(Threads, ParallelFor, ::testing::Values(1, 2, 5));

// Every chunk waits until all `threads` chunks have started (or 20 s have gone by): true when
// they all ran at once.
bool chunks_meet(int threads) {
  std::atomic<int> started{0};
  std::atomic<bool> met{true};
  parallel_chunks(threads, threads, [&](int64_t) {
    ++started;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (started.load() < threads) {
      if (std::chrono::steady_clock::now() > until) {
        met = false;
        return;
      }
      std::this_thread::yield();
    }
  });
  return met.load();
}

// parallel_for_threads takes its thread count from the caller (the CPU spmm from torch's), not
// from num_threads(): as many chunks as asked (the range allowing), on as many threads at once.
TEST(ParallelForThreads, UsesTheThreadsAskedFor) {
  set_num_threads(1);
  for (int asked : {1, 3, 4}) {
    std::vector<std::thread::id> ids(static_cast<size_t>(asked));
    std::atomic<int> chunks{0};
    parallel_for_threads(asked, 0, 1000, 1, [&](int64_t, int64_t, int64_t c) {
      ids[static_cast<size_t>(c)] = std::this_thread::get_id();
      ++chunks;
    });
    EXPECT_EQ(chunks.load(), asked);
    std::sort(ids.begin(), ids.end());
    EXPECT_LE(std::unique(ids.begin(), ids.end()) - ids.begin(), asked) << asked << " threads";
    EXPECT_TRUE(chunks_meet(asked)) << asked << " chunks did not all run at once";
  }
  set_num_threads(0);
}

// The pool keeps its threads: a thousand jobs of 4 chunks start at most 3 threads, where
// starting a thread per chunk cost about 75 us each (2-core CI machine).
TEST(ThreadPool, ReusesItsThreads) {
  ASSERT_TRUE(chunks_meet(4));
  const int before = pool_threads();
  EXPECT_GE(before, 3);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 1000; ++i) {
    parallel_for_threads(4, 0, 400, 1, [&](int64_t lo, int64_t hi, int64_t) { sum += hi - lo; });
  }
  EXPECT_EQ(sum.load(), 400 * 1000);
  EXPECT_EQ(pool_threads(), before);
}

// Chunks that start jobs of their own, and jobs from several threads at once, all finish: a
// thread waiting for its job runs that job's chunks itself.
TEST(ThreadPool, NestedAndConcurrentJobsFinish) {
  std::vector<std::thread> callers;
  callers.reserve(4);
  std::vector<int64_t> totals(4, 0);
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      std::atomic<int64_t> total{0};
      for (int rep = 0; rep < 50; ++rep) {
        parallel_chunks(3, 6, [&](int64_t) {
          parallel_for_threads(3, 0, 30, 1, [&](int64_t lo, int64_t hi, int64_t) {
            parallel_chunks(2, 2, [&](int64_t) { total += hi - lo; });
          });
        });
      }
      totals[static_cast<size_t>(t)] = total.load();
    });
  }
  for (auto& c : callers) {
    c.join();
  }
  for (int64_t v : totals) {
    EXPECT_EQ(v, 50 * 6 * 30 * 2);
  }
}

// The first exception by chunk index is the one rethrown, after every chunk has ended.
TEST(ThreadPool, RethrowsTheFirstChunksErrorAfterAllEnded) {
  std::atomic<int> ended{0};
  try {
    parallel_chunks(4, 8, [&](int64_t c) {
      ++ended;
      if (c == 5) {
        TESSERA_FAIL(ValueError, "chunk 5");
      }
      if (c == 2) {
        TESSERA_FAIL(IndexError, "chunk 2");
      }
    });
    FAIL() << "no exception";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 2"), std::string::npos);
  }
  EXPECT_EQ(ended.load(), 8);
}

// The pool's idle threads end before a fork, so the child is forked from a process without
// them; the child starts a pool of its own, and the parent starts new threads for later jobs.
TEST(ThreadPool, WorksAcrossAFork) {
  ASSERT_TRUE(chunks_meet(3));  // the parent's pool has threads
  ASSERT_GE(pool_threads(), 2);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool ok = pool_threads() == 0 && chunks_meet(3) && pool_threads() >= 2;
    ::_exit(ok ? 0 : 1);
  }
  EXPECT_EQ(pool_threads(), 0);  // ended and joined before the fork
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(chunks_meet(3));
}

// A fork while a pool thread runs a chunk does not wait for that chunk (it may be waiting for
// the thread that forks).
TEST(ThreadPool, AForkDoesNotWaitForAChunkInFlight) {
  std::atomic<bool> release{false};
  std::atomic<int> running{0};
  std::thread job([&] {
    parallel_chunks(2, 2, [&](int64_t) {
      ++running;
      while (!release.load()) {
        std::this_thread::yield();
      }
    });
  });
  while (running.load() < 2) {
    std::this_thread::yield();
  }
  const pid_t pid = ::fork();  // one chunk runs on a pool thread, waiting for `release`
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::_exit(chunks_meet(2) ? 0 : 1);
  }
  release = true;
  job.join();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(NumThreads, EnvironmentValueIsCheckedNotIgnored) {
  EXPECT_EQ(threads_from_env(nullptr), 0);
  EXPECT_EQ(threads_from_env(""), 0);
  EXPECT_EQ(threads_from_env("7"), 7);
  // A bad value fell back to the hardware count without a word.
  for (const char* bad : {"bogus", "0", "-2", "3x", "99999999999999999999", "5000"}) {
    TESSERA_EXPECT_THROW_MSG(threads_from_env(bad), ValueError,
                             fmt::format("TESSERA_NUM_THREADS must be an integer in [1, 4096], "
                                         "got '{}'",
                                         bad));
  }
}

TEST(AtomicDir, CommitRenamesAndAbortCleansUp) {
  test::TempDir tmp;
  const auto out = tmp / "out";
  {
    AtomicDir d(out, false);
    std::ofstream(d.path() / "a.txt") << "hi";
    EXPECT_FALSE(fs::exists(out));
    d.commit();
  }
  EXPECT_TRUE(fs::exists(out / "a.txt"));
  // Refuses to overwrite without permission.
  EXPECT_THROW(AtomicDir(out, false), ValueError);
  // Abandoned (exception) -> nothing left but the old output.
  try {
    AtomicDir d(out, true);
    std::ofstream(d.path() / "b.txt") << "x";
    throw std::runtime_error("fail");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(fs::exists(out / "a.txt"));
  EXPECT_FALSE(fs::exists(out / "b.txt"));
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "temporary folder left behind";
}

std::string host_for_temp_names() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  std::string h(buf);
  for (char& c : h) {
    if (c == '/' || c == '-') {
      c = '_';
    }
  }
  return h;
}

// A pid no process has (a child that exited and was reaped; pids are reused only after wrapping).
pid_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) {
    ::_exit(0);
  }
  ::waitpid(p, nullptr, 0);
  return p;
}

TEST(AtomicDir, OverwriteReplacesOnlyWhatTheCallerMayReplace) {
  test::TempDir tmp;
  const auto out = tmp / "out";
  fs::create_directories(out);
  std::ofstream(out / "thesis.tex") << "years of work";
  // No predicate: only an empty folder may be replaced.
  TESSERA_EXPECT_THROW_MSG(AtomicDir(out, true), ValueError, "'thesis.tex'");
  const AtomicDir::Replaceable npy_only = [](const std::string& f, bool is_dir) {
    return !is_dir && f.size() > 4 && f.compare(f.size() - 4, 4, ".npy") == 0;
  };
  TESSERA_EXPECT_THROW_MSG(AtomicDir(out, true, npy_only), ValueError, "refusing to overwrite");
  EXPECT_TRUE(fs::exists(out / "thesis.tex"));
  fs::remove(out / "thesis.tex");
  std::ofstream(out / "old.npy") << "old";
  {
    AtomicDir d(out, true, npy_only);
    std::ofstream(d.path() / "new.npy") << "new";
    d.commit();
  }
  EXPECT_TRUE(fs::exists(out / "new.npy"));
  EXPECT_FALSE(fs::exists(out / "old.npy"));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "the old output or a temporary folder was left behind";
  std::ofstream(tmp / "file") << "x";
  TESSERA_EXPECT_THROW_MSG(AtomicDir(tmp / "file", true, npy_only), ValueError, "is not a folder");
}

// While a folder is replaced again and again, a reader polling a file in it finds it every time:
// the swap is one atomic exchange, never a removal followed by a rename.
TEST(AtomicDir, ReadersNeverFindTheOutputMissing) {
  test::TempDir tmp;
  const auto out = tmp / "out";
  const AtomicDir::Replaceable any = [](const std::string&, bool) { return true; };
  {
    AtomicDir d(out, false);
    std::ofstream(d.path() / "marker") << 0;
    d.commit();
  }
  std::atomic<bool> done{false};
  std::atomic<int64_t> looks{0}, missing{0};
  std::thread reader([&] {
    while (!done) {
      if (!fs::exists(out / "marker")) {
        ++missing;
      }
      ++looks;
    }
  });
  for (int i = 1; i <= 200; ++i) {
    AtomicDir d(out, true, any);
    std::ofstream(d.path() / "marker") << i;
    d.commit();
  }
  done = true;
  reader.join();
  EXPECT_GT(looks.load(), 0);
  EXPECT_EQ(missing.load(), 0) << "of " << looks.load() << " looks";
  std::ifstream in(out / "marker");
  int last = -1;
  in >> last;
  EXPECT_EQ(last, 200);
}

// kill -9 during a write leaves a hidden temporary folder: the next run on this host removes it
// once its process is gone, and leaves alone those of running processes and of other hosts.
TEST(AtomicDir, StaleTemporariesOfDeadProcessesAreRemoved) {
  test::TempDir tmp;
  const std::string host = host_for_temp_names();
  const pid_t dead = dead_pid();
  const auto stale = tmp / fmt::format(".out.tmp-{}-{}", host, dead);
  const auto legacy = tmp / fmt::format(".out.tmp-{}", dead);  // named before hosts were recorded
  const auto stale_old = tmp / fmt::format(".out.old-{}-{}", host, dead);
  const auto alive = tmp / fmt::format(".out.tmp-{}-{}", host, ::getppid());
  const auto elsewhere = tmp / fmt::format(".out.tmp-otherhost-{}", dead);
  const auto other_output = tmp / fmt::format(".other.tmp-{}-{}", host, dead);
  for (const auto& d : {stale, legacy, stale_old, alive, elsewhere, other_output}) {
    fs::create_directories(d / "part0");
    std::ofstream(d / "part0" / "indices.npy") << "half-written";
  }
  {
    AtomicDir d(tmp / "out", false);
    d.commit();
  }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_FALSE(fs::exists(stale_old));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(elsewhere));
  EXPECT_TRUE(fs::exists(other_output));
}

TEST(Checksum, MatchesKnownCrc32) {
  // CRC-32 of "123456789" is cbf43926 (the standard check value).
  EXPECT_EQ(crc32_hex(crc32_update(0, "123456789", 9)), "cbf43926");
  test::TempDir tmp;
  std::ofstream(tmp / "f") << "123456789";
  EXPECT_EQ(crc32_hex(file_crc32(tmp / "f")), "cbf43926");
  EXPECT_THROW(file_crc32(tmp / "missing"), IOError);
  // Continuing over nothing (a null buffer: an empty array's data) keeps the CRC.
  const uint32_t head = crc32_update(0, "1234", 4);
  EXPECT_EQ(crc32_update(head, nullptr, 0), head);
  EXPECT_EQ(crc32_hex(crc32_update(crc32_update(head, nullptr, 0), "56789", 5)), "cbf43926");
}

// Large buffers are checksummed in slices on several threads and the slices' CRCs joined: the
// result is zlib's CRC-32 of the whole, whatever the thread count and the length's remainder.
TEST(Checksum, SlicedOnThreadsEqualsZlib) {
  std::vector<unsigned char> buf((size_t{48} << 20) + 12345);
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < buf.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(buf.data() + i, &r, std::min<size_t>(8, buf.size() - i));
  }
  uLong want = ::crc32(0, Z_NULL, 0);
  for (size_t off = 0; off < buf.size(); off += size_t{1} << 20) {
    const size_t k = std::min(buf.size() - off, size_t{1} << 20);
    want = ::crc32(want, buf.data() + off, static_cast<uInt>(k));
  }
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(crc32_update(0, buf.data(), buf.size()), static_cast<uint32_t>(want)) << threads;
    EXPECT_EQ(crc32_update(crc32_update(0, buf.data(), 100), buf.data() + 100, buf.size() - 100),
              static_cast<uint32_t>(want))
        << threads;
  }
  set_num_threads(0);
}

TEST(Progress, MemoryReadingsArePlausible) {
  EXPECT_GT(current_rss_bytes(), 0);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes());
  EXPECT_EQ(human_bytes(2048), "2.00 KiB");
  EXPECT_EQ(human_count(1.5e6), "1.50M");
}

TEST(Progress, HeartbeatSpeaksDuringALongCallAndStopsAtOnce) {
  set_quiet(false);
  ::testing::internal::CaptureStderr();
  const double t0 = now_seconds();
  int beats = 0;
  {
    Heartbeat hb("long call", 0.05, 0.05);
    while (hb.beats() < 3 && now_seconds() - t0 < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    beats = hb.beats();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(beats, 3);
  EXPECT_NE(err.find("[tessera] long call: still running"), std::string::npos) << err;
  EXPECT_NE(err.find("RSS"), std::string::npos) << err;
  // A short call says nothing, and the destructor does not wait out the interval.
  ::testing::internal::CaptureStderr();
  const double t1 = now_seconds();
  { Heartbeat hb("short call", 30, 30); }
  EXPECT_LT(now_seconds() - t1, 5.0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // Quiet: no thread, no output.
  set_quiet(true);
  ::testing::internal::CaptureStderr();
  {
    Heartbeat hb("quiet call", 0.01, 0.01);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(hb.beats(), 0);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  set_quiet(false);
}

}  // namespace
}  // namespace tessera
