// SPDX-License-Identifier: Apache-2.0
// The rendezvous store (token, malformed and foreign messages, deadlines) and the launcher
// environment (torchrun, Slurm, OpenMPI).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tessera/transport/launch.hpp"
#include "tessera/transport/rendezvous.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

using namespace tessera::transport;

int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

std::string read_all(int fd) {
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string s;
  char buf[1024];
  ssize_t k;
  while ((k = ::recv(fd, buf, sizeof buf, 0)) > 0)
    s.append(buf, static_cast<size_t>(k));
  return s;
}

TEST(Store, SetGetBetweenRanks) {
  StoreServer server(0, 2, "tok");
  StoreClient a("127.0.0.1", server.port(), 0, 2, "tok", 5);
  StoreClient b("127.0.0.1", server.port(), 1, 2, "tok", 5);
  const std::string v = "worker-address-bytes";
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.set("ucx/addr/0", ByteView(v.data(), v.size()));
  });
  Bytes got = b.get("ucx/addr/0", 5);  // waits for the late set
  late.join();
  EXPECT_EQ(std::string(got.begin(), got.end()), v);
  b.set("empty", ByteView());
  EXPECT_TRUE(a.get("empty", 1).empty());
}

TEST(Store, GetTimesOutNamingWhatAndWho) {
  StoreServer server(0, 3, "tok");
  StoreClient c("127.0.0.1", server.port(), 1, 3, "tok", 5);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.get("ucx/addr/2", 0.3, "rank 2's UCX worker address", 2);
    ADD_FAILURE() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.peer(), 2);
    EXPECT_NE(std::string(e.what()).find("rank 2 never showed up"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 2's UCX worker address"), std::string::npos);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3);
}

TEST(Store, WrongTokenIsRefusedAndTheStoreKeepsServing) {
  StoreServer server(0, 2, "the-real-token");
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", server.port(), 1, 2, "forged", 5), ValueError,
                           "token mismatch");
  StoreClient ok("127.0.0.1", server.port(), 1, 2, "the-real-token", 5);
  ok.set("k", ByteView("v", 1));
  EXPECT_EQ(ok.get("k", 1).size(), 1u);
}

TEST(Store, WrongWorldOrRankIsRefused) {
  StoreServer server(0, 2, "tok");
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", server.port(), 1, 4, "tok", 5), ValueError,
                           "believes the world has 4 ranks");
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", server.port(), 7, 2, "tok", 5), ValueError,
                           "claims rank 7");
}

TEST(Store, MalformedMessagesAreRefusedWithAReason) {
  StoreServer server(0, 2, "tok");
  // Garbage instead of a hello.
  int fd = raw_connect(server.port());
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  std::string reply = read_all(fd);
  ::close(fd);
  EXPECT_NE(reply.find("malformed message"), std::string::npos) << reply;
  EXPECT_NE(reply.find("bad magic"), std::string::npos) << reply;
  // A valid header announcing an absurd value length.
  fd = raw_connect(server.port());
  uint8_t h[24] = {0};
  const uint32_t magic = 0x54535356;
  std::memcpy(h, &magic, 4);
  h[4] = 1;  // version
  h[5] = 1;  // hello
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(h + 16, &huge, 8);
  ASSERT_EQ(::send(fd, h, sizeof h, 0), 24);
  reply = read_all(fd);
  ::close(fd);
  EXPECT_NE(reply.find("exceeds the limit"), std::string::npos) << reply;
  // The store still serves a well-behaved client.
  StoreClient ok("127.0.0.1", server.port(), 0, 2, "tok", 5);
  ok.set("k", ByteView("v", 1));
  EXPECT_EQ(ok.get("k", 1).size(), 1u);
}

TEST(Store, ForeignServerIsRecognized) {
  // A listener that is not a Tessera store answers with HTTP.
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread srv([lfd] {
    const int c = ::accept(lfd, nullptr, nullptr);
    const std::string r = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    [[maybe_unused]] ssize_t k = ::send(c, r.data(), r.size(), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::close(c);
  });
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", ntohs(a.sin_port), 1, 2, "tok", 5), IOError,
                           "not a Tessera rendezvous store");
  srv.join();
  ::close(lfd);
}

TEST(Store, NoServerTimesOutNamingTheAddress) {
  const int port = transport::pick_free_port();
  const auto t0 = std::chrono::steady_clock::now();
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", port, 1, 2, "tok", 0.5), TimeoutError,
                           fmt::format("127.0.0.1:{}", port));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3);
}

TEST(Store, LostRankIsReportedToTheOthers) {
  StoreServer server(0, 3, "tok");
  std::mutex mu;
  std::vector<std::pair<int, std::string>> seen;
  auto c0 = std::make_unique<StoreClient>("127.0.0.1", server.port(), 0, 3, "tok", 5);
  auto c1 = std::make_unique<StoreClient>("127.0.0.1", server.port(), 1, 3, "tok", 5);
  auto c2 = std::make_unique<StoreClient>("127.0.0.1", server.port(), 2, 3, "tok", 5);
  c0->watch([&](int r, const std::string& why) {
    std::lock_guard<std::mutex> lk(mu);
    seen.emplace_back(r, why);
  });
  c1->watch([&](int, const std::string&) {});
  c2->watch([&](int, const std::string&) {});
  // Rank 1 finishes cleanly, rank 2 vanishes without a goodbye.
  std::thread bye([&] { c1->finish(5); });
  c2.reset();
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!seen.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].first, 2);
    EXPECT_NE(seen[0].second.find("connection to the rendezvous store closed"), std::string::npos)
        << seen[0].second;
  }
  EXPECT_TRUE(c0->finish(5));  // rank 1 said goodbye and rank 2 is lost: everyone is accounted for
  bye.join();
}

// --- environment --------------------------------------------------------------------------------

class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::pair<std::string, std::string>> vars) {
    for (const char* k : {"RANK",
                          "WORLD_SIZE",
                          "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "TESSERA_JOB_TOKEN",
                          "TORCHELASTIC_RUN_ID",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "SLURM_LOCALID",
                          "SLURM_NTASKS_PER_NODE",
                          "SLURM_JOB_NODELIST",
                          "SLURM_STEP_NODELIST",
                          "SLURM_JOB_ID",
                          "SLURM_STEP_ID",
                          "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "PMIX_NAMESPACE"}) {
      const char* v = std::getenv(k);
      if (v)
        saved_.emplace_back(k, v);
      else
        unset_.push_back(k);
      ::unsetenv(k);
    }
    for (auto& [k, v] : vars)
      ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    for (auto& k : unset_)
      ::unsetenv(k.c_str());
    for (auto& [k, v] : saved_)
      ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
  std::vector<std::string> unset_;
};

TEST(LaunchEnv, NothingSetIsAWorldOfOne) {
  EnvGuard g({});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.source, "none");
}

TEST(LaunchEnv, Torchrun) {
  EnvGuard g({{"RANK", "5"},
              {"WORLD_SIZE", "8"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "4"},
              {"MASTER_ADDR", "node7"},
              {"MASTER_PORT", "29400"},
              {"TORCHELASTIC_RUN_ID", "abc"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.job_token, "torchelastic:abc");
}

TEST(LaunchEnv, Slurm) {
  EnvGuard g({{"SLURM_PROCID", "3"},
              {"SLURM_NTASKS", "4"},
              {"SLURM_LOCALID", "1"},
              {"SLURM_NTASKS_PER_NODE", "2"},
              {"SLURM_JOB_NODELIST", "gpu[07-08]"},
              {"SLURM_JOB_ID", "12345"},
              {"SLURM_STEP_ID", "0"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 20000 + 12345 % 20000);
  EXPECT_EQ(e.job_token, "slurm:12345.0");
}

TEST(LaunchEnv, OpenMpi) {
  EnvGuard g({{"OMPI_COMM_WORLD_RANK", "2"},
              {"OMPI_COMM_WORLD_SIZE", "3"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
              {"TESSERA_JOB_TOKEN", "t"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.job_token, "t");
}

TEST(LaunchEnv, BadValuesAreNamed) {
  {
    EnvGuard g({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "t"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "RANK='x'");
  }
  {
    EnvGuard g({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "t"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "rank 2 is out of range");
  }
  {
    EnvGuard g({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "TESSERA_JOB_TOKEN");
  }
  {
    EnvGuard g(
        {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "t"}, {"MASTER_PORT", "99999"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "MASTER_PORT");
  }
}

TEST(Registry, ListsBackendsAndRefusesUnknownNames) {
  const auto backends = list_backends();
  ASSERT_EQ(backends.size(), 3u);
  EXPECT_EQ(backends[2].name, "local");
  EXPECT_TRUE(backends[2].available);
#ifdef TESSERA_WITH_UCX
  EXPECT_TRUE(backends[0].available);
#else
  EXPECT_FALSE(backends[0].available);
  TESSERA_EXPECT_THROW_MSG(create_transport("ucx"), NotCompiledError, "not compiled");
#endif
  EnvGuard g({});
  TESSERA_EXPECT_THROW_MSG(create_transport("carrier-pigeon"), ValueError,
                           "unknown transport 'carrier-pigeon'");
  auto t = create_transport();  // a world of one picks local
  EXPECT_EQ(t->name(), "local");
#ifndef TESSERA_WITH_NCCL
  TESSERA_EXPECT_THROW_MSG(create_transport("nccl"), NotCompiledError, "not compiled");
#else
  EXPECT_TRUE(backends[1].compiled);
  if (!backends[1].available) {
    EXPECT_FALSE(backends[1].reason.empty());
    TESSERA_EXPECT_THROW_MSG(create_transport("nccl"), ValueError, "cannot run here");
  }
#endif
}

}  // namespace
}  // namespace tessera::test
