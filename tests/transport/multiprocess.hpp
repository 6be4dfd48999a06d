// SPDX-License-Identifier: Apache-2.0
// Forked-process harness for the transport tests: run a body in N real processes on loopback,
// with a deadline, and collect what every rank saw.
#pragma once

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/transport/launch.hpp"
#include "tessera/transport/rendezvous.hpp"

namespace tessera::test {

/// Throws from inside a rank (gtest assertions do not cross fork).
#define RANK_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw std::runtime_error(fmt::format("{}:{}: check `{}` failed: {}", __FILE__, __LINE__, \
                                           #cond, fmt::format(__VA_ARGS__)));                  \
  } while (0)

struct RankResult {
  int rank = 0;
  int exit_code = -1;      ///< 0: body returned; 1: body threw; 128+sig: killed
  bool timed_out = false;  ///< killed by the harness at the deadline
  std::string message;     ///< the exception text (or what the body returned)
  double seconds = 0;      ///< from fork to exit
};

struct JobSpec {
  int world = 2;
  std::map<std::string, std::string> env;  ///< extra environment for every rank
  std::set<int> absent;                    ///< ranks that are never started
  std::map<int, std::string> token_of;     ///< per-rank token override
  double deadline_s = 60;
  int port = 0;  ///< the store's port (0: a free one)
};

/// The body returns a string that is reported back (e.g. an observed value).
using RankBody = std::function<std::string(int rank)>;

inline std::vector<RankResult> run_ranks(const JobSpec& spec, const RankBody& body) {
  // A free port stays bound (not listening) by this process until the job ends, so no other
  // test's bind to port 0 or connect() takes it before rank 0's store listens on it (the store
  // binds it too: both sockets set SO_REUSEADDR, and this one never listens).
  transport::PortReservation hold;
  if (spec.port <= 0) {
    hold = transport::PortReservation("127.0.0.1");
  }
  const int port = spec.port > 0 ? spec.port : hold.port();
  const std::string token = transport::generate_job_token();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<RankResult> res(spec.world);
  std::vector<pid_t> pids(spec.world, -1);
  std::vector<int> fds(spec.world, -1);
  for (int r = 0; r < spec.world; ++r) {
    res[r].rank = r;
    if (spec.absent.count(r)) continue;
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(spec.world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(spec.world).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      auto it = spec.token_of.find(r);
      ::setenv("TESSERA_JOB_TOKEN", it != spec.token_of.end() ? it->second.c_str() : token.c_str(),
               1);
      for (const auto& [k, v] : spec.env)
        ::setenv(k.c_str(), v.c_str(), 1);
      int code = 0;
      std::string msg;
      try {
        msg = body(r);
      } catch (const std::exception& e) {
        code = 1;
        msg = e.what();
      } catch (...) {
        code = 1;
        msg = "non-standard exception";
      }
      if (msg.size() > 8000) msg.resize(8000);
      [[maybe_unused]] ssize_t k = ::write(p[1], msg.data(), msg.size());
      ::close(p[1]);
      ::_exit(code);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(spec.deadline_s * 1e3));
  int left = 0;
  for (pid_t p : pids)
    left += p > 0;
  while (left > 0) {
    for (int r = 0; r < spec.world; ++r) {
      if (pids[r] <= 0) continue;
      int st = 0;
      if (::waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        res[r].exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        res[r].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        pids[r] = 0;
        --left;
      }
    }
    if (left == 0) break;
    if (Clock::now() >= deadline) {
      for (int r = 0; r < spec.world; ++r)
        if (pids[r] > 0) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], nullptr, 0);
          res[r].timed_out = true;
          res[r].exit_code = 128 + SIGKILL;
          res[r].seconds = spec.deadline_s;
          pids[r] = 0;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < spec.world; ++r) {
    if (fds[r] < 0) continue;
    char buf[4096];
    ssize_t k;
    while ((k = ::read(fds[r], buf, sizeof buf)) > 0)
      res[r].message.append(buf, static_cast<size_t>(k));
    ::close(fds[r]);
  }
  return res;
}

inline std::string describe(const std::vector<RankResult>& res) {
  std::string s;
  for (const auto& r : res)
    s += fmt::format("  rank {}: exit {}{} after {:.2f} s: {}\n", r.rank, r.exit_code,
                     r.timed_out ? " (TIMED OUT)" : "", r.seconds, r.message);
  return s;
}

}  // namespace tessera::test
