// SPDX-License-Identifier: Apache-2.0
#include <atomic>
#include <fstream>
#include <thread>

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

TEST(Checksum, MatchesKnownCrc32) {
  // CRC-32 of "123456789" is cbf43926 (the standard check value).
  EXPECT_EQ(crc32_hex(crc32_update(0, "123456789", 9)), "cbf43926");
  test::TempDir tmp;
  std::ofstream(tmp / "f") << "123456789";
  EXPECT_EQ(crc32_hex(file_crc32(tmp / "f")), "cbf43926");
  EXPECT_THROW(file_crc32(tmp / "missing"), IOError);
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
