// SPDX-License-Identifier: Apache-2.0
// `tessera launch`: environment, output prefixes, failure propagation, and an end-to-end job.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "tessera/transport/rendezvous.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

struct ToolRun {
  int code = -1;
  std::string out;  // stdout and stderr together
  double seconds = 0;
};

ToolRun run(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  ToolRun r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, k);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string tool() {
  return std::string("env -u TESSERA_JOB_TOKEN -u TESSERA_JOB_TOKEN_FILE ") + TESSERA_TOOL;
}

TEST(Launch, SetsTheEnvironmentAndPrefixesOutput) {
  const ToolRun r = run(tool() +
                        " launch --nproc-per-node 3 -- sh -c 'echo \"r=$RANK w=$WORLD_SIZE "
                        "l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE a=$MASTER_ADDR p=$MASTER_PORT "
                        "t=$TESSERA_JOB_TOKEN\"; echo to-stderr >&2'");
  ASSERT_EQ(r.code, 0) << r.out;
  std::set<std::string> ports, tokens;
  for (int rank = 0; rank < 3; ++rank) {
    const std::regex line("\\[rank " + std::to_string(rank) + "\\] r=" + std::to_string(rank) +
                          " w=3 l=" + std::to_string(rank) +
                          " lw=3 a=127\\.0\\.0\\.1 p=([0-9]+) t=([0-9a-f]{64})\\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, line)) << "rank " << rank << " in:\n" << r.out;
    ports.insert(m[1]);
    tokens.insert(m[2]);
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) + "] to-stderr\n"), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(ports.size(), 1u) << "every rank must get the same MASTER_PORT";
  EXPECT_EQ(tokens.size(), 1u) << "every rank must get the same job token";
}

TEST(Launch, FailingRankStopsTheOthersAndItsCodePropagates) {
  const ToolRun r = run(tool() +
                        " launch --nproc-per-node 3 --grace 2 -- sh -c 'if [ \"$RANK\" = 1 ]; then "
                        "echo failing; exit 7; fi; sleep 60; echo survived'");
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_LT(r.seconds, 15) << r.out;
  EXPECT_NE(r.out.find("[rank 1] failing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 exited with code 7"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("survived"), std::string::npos) << r.out;
}

TEST(Launch, RankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  const ToolRun r = run(tool() +
                        " launch --nproc-per-node 2 --grace 1 -- sh -c 'if [ \"$RANK\" = 0 ]; then "
                        "sleep 0.5; exit 5; fi; trap \"\" TERM; sleep 30'");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_LT(r.seconds, 10) << r.out;
  EXPECT_NE(r.out.find("SIGKILL"), std::string::npos) << r.out;
}

TEST(Launch, ForwardsSigintToEveryRank) {
  // The ranks print when SIGINT reaches them; the launcher exits with 128+SIGINT.
  const ToolRun r = run("sh -c '" + std::string(TESSERA_TOOL) +
                        " launch --nproc-per-node 2 --grace 5 -- sh -c \"trap \\\"echo "
                        "got-int; exit 9\\\" INT; sleep 30 & wait\" & pid=$!; sleep 0.5; "
                        "kill -INT $pid; wait $pid; echo launcher-code=$?'");
  EXPECT_NE(r.out.find("launcher-code=130"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 0] got-int"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] got-int"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 10) << r.out;
}

TEST(Launch, MissingCommandAndBadOptionsAreRefused) {
  ToolRun r = run(tool() + " launch --nproc-per-node 0 -- true");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--nproc-per-node must be >= 1"), std::string::npos) << r.out;
  r = run(tool() + " launch --nproc-per-node 2 --nnodes 2 --node-rank 2 -- true");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--node-rank 2"), std::string::npos) << r.out;
  r = run(tool() + " launch --nproc-per-node 1 -- /nonexistent/program");
  EXPECT_EQ(r.code, 127) << r.out;
  EXPECT_NE(r.out.find("cannot run '/nonexistent/program'"), std::string::npos) << r.out;
  // Errors name the option given, not an environment variable nobody set.
  r = run(tool() + " launch --nproc-per-node 1 --token-file /nonexistent/token -- true");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--token-file /nonexistent/token: cannot open"), std::string::npos) << r.out;
  // More ranks than the launcher can hold pipes for: refused before any starts (it failed
  // mid-way with "pipe2 failed: Too many open files", its started ranks running on).
  r = run("ulimit -n 256; " + tool() + " launch --nproc-per-node 1000 -- true");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--nproc-per-node 1000 needs about 2032 open files"), std::string::npos)
      << r.out;
}

TEST(Launch, SignalsGraceTokensAndTorchrunSpellings) {
  // A rank killed by a signal is named as such (its code stays 128 + the signal).
  ToolRun r = run(tool() +
                  " launch --nproc-per-node 2 --grace 2 -- sh -c 'if [ \"$RANK\" = 1 ]; "
                  "then kill -9 $$; fi; sleep 30'");
  EXPECT_EQ(r.code, 137) << r.out;
  EXPECT_NE(r.out.find("rank 1 was killed by signal 9 (Killed)"), std::string::npos) << r.out;
  // --grace inf never sends SIGKILL (it overflowed and sent it at once); nan is refused.
  r = run(tool() +
          " launch --nproc-per-node 2 --grace inf -- sh -c 'if [ \"$RANK\" = 0 ]; then "
          "sleep 0.3; exit 5; fi; trap \"sleep 1; echo finished; exit 0\" TERM; sleep 30 "
          "& wait'");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_NE(r.out.find("[rank 1] finished"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SIGKILL"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 15) << r.out;
  r = run(tool() + " launch --nproc-per-node 1 --grace nan -- true");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("grace period nan s is not a number of seconds >= 0"), std::string::npos)
      << r.out;
  // A token file is held to the same minimum length as TESSERA_JOB_TOKEN.
  TempDir dir;
  const std::string tok = (dir.path() / "tok").string();
  std::ofstream(tok) << "short";
  std::filesystem::permissions(
      tok, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  r = run(tool() + " launch --nproc-per-node 1 --token-file " + tok + " -- true");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the token has 5 characters; use at least 16"), std::string::npos) << r.out;
  // torchrun's spellings.
  r = run(tool() +
          " launch --nproc_per_node=2 --master_addr 127.0.0.1 -- sh -c 'echo w=$WORLD_SIZE'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[rank 1] w=2"), std::string::npos) << r.out;
}

// Progress bars redraw a line with '\r': each redraw is a line of its own, with the prefix,
// instead of everything at once when the line ends. And what a failed rank started (a shell's
// background job) is stopped with the job: its process group is signalled too.
TEST(Launch, CarriageReturnsEndLinesAndNothingOutlivesTheJob) {
  ToolRun r = run(tool() + " launch --nproc-per-node 1 -- printf 'a\\rb\\r\\nc\\n'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[rank 0] a\r[rank 0] b\r\n[rank 0] c\n"), std::string::npos) << r.out;
  // A rank's last output, a redrawn line, is ended: the next line must not overwrite it.
  r = run(tool() + " launch --nproc-per-node 1 -- printf 'end\\r'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[rank 0] end\r\n"), std::string::npos) << r.out;
  r = run(tool() +
          " launch --nproc-per-node 2 --grace 2 -- sh -c 'if [ \"$RANK\" = 1 ]; then "
          "sleep 41.5 & sleep 0.3; exit 3; fi; sleep 30'");
  EXPECT_EQ(r.code, 3) << r.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(run("pgrep -f 'slee[p] 41[.]5'").out, "") << "a rank's background job outlived the job";
}

TEST(Launch, EndToEndUcxJob) {
  TESSERA_SKIP_WITHOUT_UCX();
  const ToolRun r = run(std::string("UCX_TLS=tcp TESSERA_TRANSPORT=ucx ") + tool() +
                        " launch --nproc-per-node 3 -- " + TESSERA_TRANSPORT_WORKER + " allreduce");
  ASSERT_EQ(r.code, 0) << r.out;
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) +
                         "] transport=ucx rank=" + std::to_string(rank) + " world=3 sum=3"),
              std::string::npos)
        << r.out;
}

// With no --master-port on one node, the launcher binds the store's port itself and hands that
// socket to rank 0 (TESSERA_STORE_SOCKET), whose store listens on it: the port is never free
// between the launcher's pick and the store, for another process to take. The other ranks get
// neither the variable nor the socket; an explicit --master-port is used as given.
TEST(Launch, RankZeroGetsTheSocketReservedForItsStore) {
  const std::string worker = std::string(" -- ") + TESSERA_TRANSPORT_WORKER + " store-socket";
  ToolRun r = run(tool() + " launch --nproc-per-node 3" + worker);
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex("\\[rank 0\\] store-socket rank=0 var=[0-9]+:([0-9]+) "
                 "before=127\\.0\\.0\\.1:([0-9]+)/bound after=127\\.0\\.0\\.1:([0-9]+)/listening "
                 "store-port=([0-9]+)\\n")))
      << r.out;
  EXPECT_TRUE(m[1] == m[2] && m[2] == m[3] && m[3] == m[4]) << r.out;
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_NE(r.out.find(fmt::format("[rank {0}] store-socket rank={0} var=- before=none "
                                     "after=none store-port=0\n",
                                     rank)),
              std::string::npos)
        << r.out;
  }
  // A rank 0 whose socket was closed on the way (by a wrapper) binds the port itself.
  r = run(tool() +
          " launch --nproc-per-node 2 -- sh -c 'fd=${TESSERA_STORE_SOCKET%%:*}; [ -z \"$fd\" ] "
          "|| eval \"exec $fd>&-\"; exec " +
          TESSERA_TRANSPORT_WORKER + " store-socket'");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("\\[rank 0\\] store-socket rank=0 var=[0-9]+:([0-9]+) "
                                           "before=closed after=\\S+ store-port=([0-9]+)\\n")))
      << r.out;
  EXPECT_EQ(m[1], m[2]) << r.out;
  // --master-port: no socket is passed (the port is held here; the store binds it beside).
  transport::PortReservation held("127.0.0.1");
  r = run(tool() + " launch --nproc-per-node 2 --master-port " + std::to_string(held.port()) +
          worker);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(fmt::format("[rank 0] store-socket rank=0 var=- before=none after=none "
                                   "store-port={}\n",
                                   held.port())),
            std::string::npos)
      << r.out;
}

TEST(Launch, KilledRankFailsTheJobWithinTheContract) {
  TESSERA_SKIP_WITHOUT_UCX();
  const ToolRun r =
      run(std::string("UCX_TLS=tcp TESSERA_TRANSPORT=ucx ") + tool() +
          " launch --nproc-per-node 3 --grace 5 -- " + TESSERA_TRANSPORT_WORKER + " die 1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.seconds, 30) << r.out;
  EXPECT_NE(r.out.find("rank 1 was killed by signal 9"), std::string::npos) << r.out;
  // The survivors report who was lost (they may be stopped before printing, so accept either).
  const bool named = r.out.find("rank 1 was lost") != std::string::npos;
  const bool stopped = r.out.find("stopping the other ranks") != std::string::npos;
  EXPECT_TRUE(named || stopped) << r.out;
}

// Ranks die with their launcher: a launcher killed by SIGKILL cannot stop them, and a quiet rank
// (one that never writes, so no broken pipe stops it either) must not run on.
TEST(Launch, RanksDieWithALauncherKilledBySigkill) {
  // Orphans are re-parented to this process, which can then tell when they die (and reap them).
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  TempDir dir;
  const std::string cmd = tool() + " launch --nproc-per-node 2 -- sh -c 'echo $$ > " +
                          dir.path().string() + "/rank$RANK.tmp && mv " + dir.path().string() +
                          "/rank$RANK.tmp " + dir.path().string() + "/rank$RANK; exec sleep 300'";
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::vector<pid_t> ranks;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    const auto f = dir / ("rank" + std::to_string(r));
    while (!std::filesystem::exists(f) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream in(f);
    pid_t pid = -1;
    in >> pid;
    ranks.push_back(pid);
  }
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  for (pid_t pid : ranks) {
    ASSERT_GT(pid, 0) << "a rank never started";
    int status = 0;
    pid_t got = 0;
    const auto k0 = std::chrono::steady_clock::now();
    while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - k0 < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(got, pid) << "rank pid " << pid << " outlived its launcher by 10 s";
    if (got == pid) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

}  // namespace
}  // namespace tessera::test
