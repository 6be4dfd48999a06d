// SPDX-License-Identifier: Apache-2.0
// Liveness and robustness of a running job: a frozen rank (SIGSTOP) is named within the heartbeat
// deadline whatever the operation timeout, and a flood of junk connections to rank 0's store
// neither stops the job nor grows rank 0's descriptors or memory.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "loopback.hpp"
#include "multiprocess.hpp"
#include "tessera/transport/transport.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool wait_for_file(const fs::path& p, double seconds) {
  const auto t0 = Clock::now();
  while (!fs::exists(p)) {
    if (since(t0) > seconds) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void write_file(const fs::path& p, const std::string& s) {
  const fs::path tmp = p.string() + ".tmp";
  std::ofstream(tmp) << s;
  fs::rename(tmp, p);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

JobSpec ucx_job(int world, double deadline_s) {
  JobSpec s;
  s.world = world;
  s.deadline_s = deadline_s;
  s.env["UCX_TLS"] = "tcp";
  s.env["TESSERA_TRANSPORT"] = "ucx";
  s.env["TESSERA_OP_TIMEOUT"] = "300";  // liveness must not wait for it
  return s;
}

// Rank `frozen` stops itself after the first barrier; every other rank's next barrier must fail
// naming it within the liveness deadline. Once every other rank has, one of them kills it (the
// harness would only at its own deadline): killed earlier, its sockets would close and a slower
// rank would learn of it from the transport instead of its heartbeat.
std::vector<RankResult> run_with_frozen_rank(JobSpec s, int frozen, const fs::path& dir) {
  return run_ranks(s, [&](int r) {
    auto t = transport::create_transport();
    t->barrier();
    if (r == frozen) {
      write_file(dir / "frozen.pid", std::to_string(::getpid()));
      ::raise(SIGSTOP);  // alive to TCP (keepalive answers), silent to everyone
      return std::string("resumed");
    }
    const auto t0 = Clock::now();
    std::string what;
    try {
      t->barrier();
      what = "the barrier passed";
    } catch (const transport::PeerLostError& e) {
      what = fmt::format("lost rank {} after {:.1f} s: {}", e.peer(), since(t0), e.what());
    }
    write_file(dir / fmt::format("done.{}", r), what);
    if (r == (frozen + 1) % s.world && wait_for_file(dir / "frozen.pid", 5)) {
      for (int p = 0; p < s.world; ++p) {
        if (p != frozen) {
          wait_for_file(dir / fmt::format("done.{}", p), 60);
        }
      }
      ::kill(std::stoi(read_file(dir / "frozen.pid")), SIGKILL);
    }
    return what;
  });
}

double seconds_in(const std::string& msg) {
  const size_t k = msg.find(" after ");
  return k == std::string::npos ? 1e9 : std::atof(msg.c_str() + k + 7);
}

TEST(Liveness, FrozenRankIsNamedWithinThirtySeconds) {
  TESSERA_SKIP_WITHOUT_UCX();
  TempDir dir;
  auto res = run_with_frozen_rank(ucx_job(3, 90), 2, dir.path());
  for (int r : {0, 1}) {
    EXPECT_NE(res[r].message.find("lost rank 2"), std::string::npos) << describe(res);
    EXPECT_NE(res[r].message.find("rank 2 sent no heartbeat for 15 s"), std::string::npos)
        << describe(res);
    EXPECT_LT(seconds_in(res[r].message), 30) << describe(res);
  }
  EXPECT_EQ(res[2].exit_code, 128 + SIGKILL) << describe(res);
}

TEST(Liveness, FrozenStoreHostIsNamed) {
  TESSERA_SKIP_WITHOUT_UCX();
  TempDir dir;
  JobSpec s = ucx_job(2, 60);
  s.env["TESSERA_HEARTBEAT_TIMEOUT"] = "3";
  auto res = run_with_frozen_rank(s, 0, dir.path());
  EXPECT_NE(res[1].message.find("lost rank 0"), std::string::npos) << describe(res);
  EXPECT_NE(res[1].message.find("sent no heartbeat for 3 s"), std::string::npos) << describe(res);
  EXPECT_LT(seconds_in(res[1].message), 30) << describe(res);
}

// Timeouts of "inf" (or any huge number of seconds) mean no deadline: the durations saturate
// instead of overflowing into a deadline in the past, which made every rank report its peers
// lost at once.
TEST(Liveness, InfiniteTimeoutsMeanNoDeadline) {
  TESSERA_SKIP_WITHOUT_UCX();
  JobSpec s = ucx_job(2, 60);
  s.env["TESSERA_HEARTBEAT_TIMEOUT"] = "inf";
  s.env["TESSERA_OP_TIMEOUT"] = "1e300";
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "inf";
  auto res = run_ranks(s, [&](int) {
    auto t = transport::create_transport();
    t->barrier();
    std::this_thread::sleep_for(std::chrono::seconds(3));  // past a heartbeat interval
    int64_t x = 1;
    t->all_reduce(&x, 1, transport::DType::i64, transport::ReduceOp::sum);
    t->barrier();
    return fmt::format("sum {}", x);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    EXPECT_EQ(res[r].message, "sum 2") << describe(res);
  }
}

// --- a flood of junk connections while a job trains --------------------------------------------

int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) {
      ++n;
    }
    ::closedir(d);
  }
  return n - 3;  // ".", ".." and the directory's own descriptor
}

int64_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::atoll(line.c_str() + 6) * 1024;
    }
  }
  return -1;
}

// 2000 connections of five kinds: closed at once, HTTP junk, a header announcing a 1 TiB value,
// a well-formed hello with a forged MAC, and connections held open without a word (up to 300 at
// a time).
struct FloodStats {
  int connected = 0, failed = 0;
};
FloodStats flood(int port, int connections) {
  FloodStats st;
  std::vector<int> held;
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  uint8_t huge[24] = {0}, forged[80] = {0};
  const uint32_t magic = 0x54535356;
  for (uint8_t* m : {huge, forged}) {
    std::memcpy(m, &magic, 4);
    m[4] = 2;
  }
  huge[5] = 2;  // set
  const uint64_t big = uint64_t{1} << 40;
  std::memcpy(huge + 16, &big, 8);
  forged[5] = 1;  // hello
  for (int i = 0; i < connections; ++i) {
    const int fd = connect_to(port);
    if (fd < 0) {
      ++st.failed;
      continue;
    }
    ++st.connected;
    switch (i % 5) {
      case 1:
        (void)!::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
        break;
      case 2:
        (void)!::send(fd, huge, sizeof huge, MSG_NOSIGNAL);
        break;
      case 3:
        (void)!::send(fd, forged, sizeof forged, MSG_NOSIGNAL);
        break;
      case 4:
        held.push_back(fd);
        if (held.size() >= 300) {
          for (int h : held) {
            ::close(h);
          }
          held.clear();
        }
        continue;
      default:
        break;
    }
    ::close(fd);
  }
  for (int h : held) {
    ::close(h);
  }
  return st;
}

TEST(Store, FloodWhileAJobTrainsKeepsDescriptorsAndMemoryBounded) {
  TESSERA_SKIP_WITHOUT_UCX();
  TempDir dir;
  JobSpec s = ucx_job(2, 120);
  const transport::PortReservation hold("127.0.0.1");  // held until the job ends (run_ranks)
  s.port = hold.port();
  std::atomic<bool> started{false};
  FloodStats st;
  std::thread flooder([&] {
    if (!wait_for_file(dir / "training", 60)) {
      return;
    }
    started = true;
    st = flood(s.port, 2000);
    write_file(dir / "flood-done", "");
  });
  auto res = run_ranks(s, [&](int r) {
    if (r == 0) {
      // The limit that 1100 junk connections once exhausted, killing the job.
      rlimit lim{512, 512};
      RANK_CHECK(::setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit: {}", std::strerror(errno));
    }
    auto t = transport::create_transport();
    double x = 1;
    t->all_reduce(&x, 1, transport::DType::f64, transport::ReduceOp::sum);
    std::atomic<bool> done{false};
    int base_fds = open_fds(), max_fds = base_fds;
    int64_t base_rss = rss_bytes(), max_rss = base_rss;
    std::thread sampler([&] {
      while (!done) {
        max_fds = std::max(max_fds, open_fds());
        max_rss = std::max(max_rss, rss_bytes());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    if (r == 0) {
      write_file(dir / "training", "");
    }
    int64_t steps = 0;
    const auto t0 = Clock::now();
    for (;;) {
      // Every rank decides to stop at the same step: rank 0 looks for the marker.
      double stop = r == 0 && fs::exists(dir / "flood-done") ? 1 : 0;
      t->all_reduce(&stop, 1, transport::DType::f64, transport::ReduceOp::max);
      if (stop > 0 || since(t0) > 90) {
        break;
      }
      double v = r + 1;
      t->all_reduce(&v, 1, transport::DType::f64, transport::ReduceOp::sum);
      RANK_CHECK(v == 3, "all_reduce gave {}", v);
      ++steps;
    }
    done = true;
    sampler.join();
    return fmt::format("steps={} fds={}->{} rss={}->{} MiB", steps, base_fds, max_fds,
                       base_rss >> 20, max_rss >> 20);
  });
  flooder.join();
  std::cout << describe(res);
  ASSERT_TRUE(started) << describe(res);
  EXPECT_EQ(st.connected, 2000) << st.failed << " connections failed\n" << describe(res);
  for (const auto& r : res) {
    ASSERT_EQ(r.exit_code, 0) << describe(res);
  }
  int b = 0, m = 0;
  long rb = 0, rm = 0;
  long steps = 0;
  ASSERT_EQ(std::sscanf(res[0].message.c_str(), "steps=%ld fds=%d->%d rss=%ld->%ld", &steps, &b, &m,
                        &rb, &rm),
            5)
      << describe(res);
  EXPECT_GT(steps, 0) << describe(res);
  // At most 64 unauthenticated connections at a time, whatever the flood does.
  EXPECT_LE(m - b, 64 + 8) << describe(res);
  EXPECT_LE(rm - rb, 64) << "MiB of growth\n" << describe(res);
}

}  // namespace
}  // namespace tessera::test
