// SPDX-License-Identifier: Apache-2.0
// The rendezvous store (token, malformed and foreign messages, deadlines) and the launcher
// environment (torchrun, Slurm, OpenMPI).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "multiprocess.hpp"
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

// A loopback listener that never accepts nor speaks (its address in *a), or -1: connections
// complete in the kernel up to `backlog`, and later SYNs are dropped.
int silent_listener(int backlog, sockaddr_in* a) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = 0;
  socklen_t len = sizeof *a;
  if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(a), sizeof *a) != 0 ||
      ::listen(lfd, backlog) != 0 ||
      ::getsockname(lfd, reinterpret_cast<sockaddr*>(a), &len) != 0) {
    return -1;
  }
  return lfd;
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
  EXPECT_EQ(server.refused_connections(), 1u);
  StoreClient ok("127.0.0.1", server.port(), 1, 2, "the-real-token", 5);
  ok.set("k", ByteView("v", 1));
  EXPECT_EQ(ok.get("k", 1).size(), 1u);
}

// A store host that drops connection attempts (its accept queue full, a firewall, a host that
// is down) must not hold a rank past its rendezvous timeout: a blocking connect() waits for
// the kernel's SYN retries, about 127 s on Linux.
TEST(Store, ConnectingGivesUpAtTheDeadlineWhenSynsAreDropped) {
  sockaddr_in a{};
  const int lfd = silent_listener(0, &a);
  ASSERT_GE(lfd, 0);
  const int port = ntohs(a.sin_port);
  // Fill the accept queue (never accepted): later SYNs to this port are dropped.
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // in progress or queued
    held.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", port, 1, 2, "tok", 2), TimeoutError,
                           "could not connect to the rendezvous store");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  for (int fd : held) {
    ::close(fd);
  }
  ::close(lfd);
}

// A store host that accepts the connection (in the kernel) but never speaks, like a stopped
// rank 0: the timeout names the store and the handshake, not "a rendezvous socket".
TEST(Store, ASilentStoreIsNamedInTheTimeout) {
  sockaddr_in a{};
  const int lfd = silent_listener(8, &a);
  ASSERT_GE(lfd, 0);
  const int port = ntohs(a.sin_port);
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", port, 1, 2, "tok", 1), TimeoutError,
                           fmt::format("rank 1 connected to the rendezvous store at 127.0.0.1:{} "
                                       "(hosted by rank 0), which did not complete the handshake",
                                       port));
  ::close(lfd);
}

TEST(Store, WrongWorldOrRankIsRefused) {
  StoreServer server(0, 2, "tok");
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", server.port(), 1, 4, "tok", 5), ValueError,
                           "believes the world has 4 ranks");
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", server.port(), 7, 2, "tok", 5), ValueError,
                           "claims rank 7");
}

// What a peer that does not know the token gets: the 40-byte challenge, then (as soon as a field
// it sent is wrong) a 40-byte refusal, and the connection closed. Nothing it announces is
// allocated: a header claiming a 1 TiB value is refused at its operation byte.
TEST(Store, MalformedPeersAreRefusedAtTheFirstWrongByte) {
  StoreServer server(0, 2, "tok");
  auto refusal_status = [&](const void* bytes, size_t n) {
    const int fd = raw_connect(server.port());
    EXPECT_EQ(::send(fd, bytes, n, 0), static_cast<ssize_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    const std::string reply = read_all(fd);  // until the store closes the connection
    ::close(fd);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 4);
    EXPECT_EQ(reply.size(), 80u);
    return reply.size() == 80u ? static_cast<int>(static_cast<uint8_t>(reply[45])) : -1;
  };
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(refusal_status(junk.data(), junk.size()), 2);
  uint8_t h[24] = {0};
  const uint32_t magic = 0x54535356;
  std::memcpy(h, &magic, 4);
  h[4] = 2;  // version
  h[5] = 2;  // set, instead of the hello a handshake starts with
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(h + 16, &huge, 8);
  EXPECT_EQ(refusal_status(h, sizeof h), 2);
  h[4] = 1;  // the previous protocol version
  EXPECT_EQ(refusal_status(h, sizeof h), 2);
  // A well-formed hello whose MAC is not made with the token: authentication fails (status 1).
  uint8_t hello[80] = {0};
  std::memcpy(hello, &magic, 4);
  hello[4] = 2;
  hello[5] = 1;
  EXPECT_EQ(refusal_status(hello, sizeof hello), 1);
  EXPECT_EQ(server.refused_connections(), 4u);
  // The store still serves a well-behaved client.
  StoreClient ok("127.0.0.1", server.port(), 0, 2, "tok", 5);
  ok.set("k", ByteView("v", 1));
  EXPECT_EQ(ok.get("k", 1).size(), 1u);
}

// A peer that connects and says nothing holds its slot for the 5 s handshake deadline at most.
TEST(Store, SilentPeersAreDroppedAfterTheHandshakeDeadline) {
  StoreServer server(0, 2, "tok");
  const int fd = raw_connect(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  timeval tv{15, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[256];
  ssize_t k;
  while ((k = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    got.append(buf, static_cast<size_t>(k));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_EQ(k, 0) << "not closed by the store";
  EXPECT_EQ(got.size(), 40u);  // the challenge, nothing else
  EXPECT_LT(s, 10);
  EXPECT_EQ(server.refused_connections(), 1u);
}

// A stand-in store: sends a valid challenge, records the client's hello, answers `accept` (40
// bytes) if given, then closes.
struct FakeStore {
  explicit FakeStore(const std::string& accept) {
    lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(lfd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    th = std::thread([this, accept] {
      const int c = ::accept(lfd, nullptr, nullptr);
      uint8_t ch[40] = {0};
      const uint32_t magic = 0x54535356;
      std::memcpy(ch, &magic, 4);
      ch[4] = 2;
      for (int i = 8; i < 40; ++i) {
        ch[i] = static_cast<uint8_t>(i * 7);
      }
      [[maybe_unused]] ssize_t k = ::send(c, ch, sizeof ch, 0);
      char buf[80];
      size_t got = 0;
      while (got < sizeof buf && (k = ::recv(c, buf + got, sizeof buf - got, 0)) > 0) {
        got += static_cast<size_t>(k);
      }
      hello.assign(buf, got);
      if (!accept.empty()) {
        k = ::send(c, accept.data(), accept.size(), 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::close(c);
    });
  }
  ~FakeStore() {
    wait();
    ::close(lfd);
  }
  void wait() {
    if (th.joinable()) {
      th.join();
    }
  }
  int lfd = -1, port = 0;
  std::string hello;
  std::thread th;
};

TEST(Store, TheTokenNeverCrossesTheWire) {
  const std::string token = "a-secret-that-stays-home";
  {
    FakeStore fake("");
    EXPECT_THROW(StoreClient("127.0.0.1", fake.port, 1, 2, token, 1), Error);
    fake.wait();
    ASSERT_EQ(fake.hello.size(), 80u);
    EXPECT_EQ(fake.hello.find(token), std::string::npos);
    EXPECT_EQ(fake.hello.find(token.substr(0, 8)), std::string::npos);
  }
  // A server that answers "accepted" without knowing the token is not trusted.
  std::string accept(40, '\0');
  const uint32_t magic = 0x54535356;
  std::memcpy(accept.data(), &magic, 4);
  accept[4] = 2;
  FakeStore fake(accept);
  TESSERA_EXPECT_THROW_MSG(StoreClient("127.0.0.1", fake.port, 1, 2, token, 5), IOError,
                           "did not prove that it knows the job token");
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

// --- the reserved port ------------------------------------------------------------------------

#ifndef IP_LOCAL_PORT_RANGE
#define IP_LOCAL_PORT_RANGE 51  // Linux 6.3
#endif

// A TCP socket whose automatic port choice (bind to port 0, connect) may only take `port`
// (IP_LOCAL_PORT_RANGE of one port), or -1 where the kernel has no such option.
int socket_limited_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const uint32_t range = (static_cast<uint32_t>(port) << 16) | static_cast<uint32_t>(port);
  if (::setsockopt(fd, IPPROTO_IP, IP_LOCAL_PORT_RANGE, &range, sizeof range) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The port bind() to port 0 picked for a socket limited to `port`, or -errno.
int bind_any_limited_to(int port) {
  const int fd = socket_limited_to(port);
  if (fd < 0) {
    return 0;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int got = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    got = ntohs(a.sin_port);
  } else {
    got = -errno;
  }
  ::close(fd);
  return got;
}

bool listening(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on != 0;
}

// What a reservation must do: keep the port from every automatic port choice (bind to port 0,
// connect) while it is open, and still let the store (SO_REUSEADDR) bind it and listen.
TEST(PortReservation, HoldsThePortFromAutomaticChoicesButNotFromTheStore) {
  int port = 0;
  {
    PortReservation r("127.0.0.1");
    ASSERT_TRUE(r.valid());
    port = r.port();
    ASSERT_GT(port, 0);
    EXPECT_EQ(r.address(), htonl(INADDR_LOOPBACK));
    EXPECT_FALSE(listening(r.fd()));
    EXPECT_NE(::fcntl(r.fd(), F_GETFD) & FD_CLOEXEC, 0);
    // A bind without SO_REUSEADDR is refused...
    const int plain = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_NE(::bind(plain, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(errno, EADDRINUSE);
    ::close(plain);
    // ... and so are bind() to port 0 and connect() where that port is their only choice.
    const int chosen = bind_any_limited_to(port);
    if (chosen != 0) {  // 0: the kernel has no IP_LOCAL_PORT_RANGE (before 6.3)
      EXPECT_EQ(chosen, -EADDRINUSE) << "bind() to port 0 took the reserved port";
      sockaddr_in l{};
      const int lfd = silent_listener(4, &l);
      ASSERT_GE(lfd, 0);
      const int c = socket_limited_to(port);
      EXPECT_NE(::connect(c, reinterpret_cast<sockaddr*>(&l), sizeof l), 0)
          << "connect() took the reserved port as its own";
      EXPECT_EQ(errno, EADDRNOTAVAIL);
      ::close(c);
      ::close(lfd);
    }
    // The store binds the reserved port beside the reservation and serves on it.
    StoreServer server(port, 1, "tok");
    EXPECT_EQ(server.port(), port);
    StoreClient c("127.0.0.1", port, 0, 1, "tok", 5);
    c.set("k", ByteView("v", 1));
    EXPECT_EQ(c.get("k", 1).size(), 1u);
  }
  // Once every socket on it is closed, the port is free for anyone again.
  const int chosen = bind_any_limited_to(port);
  if (chosen != 0) {
    EXPECT_EQ(chosen, port);
  }
}

TEST(Store, ListensOnTheReservedSocketItself) {
  PortReservation r("127.0.0.1");
  const int fd = r.fd(), port = r.port();
  StoreServer server(std::move(r), 2, "tok");
  EXPECT_FALSE(r.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(server.port(), port);
  EXPECT_TRUE(listening(fd)) << "the store must listen on the socket it was given";
  StoreClient a("127.0.0.1", port, 0, 2, "tok", 5);
  StoreClient b("127.0.0.1", port, 1, 2, "tok", 5);
  a.set("x", ByteView("abc", 3));
  EXPECT_EQ(b.get("x", 5).size(), 3u);
}

TEST(Store, RefusesASocketItCannotListenOn) {
  TESSERA_EXPECT_THROW_MSG(StoreServer(PortReservation(), 1, "tok"), ValueError,
                           "not an IPv4 TCP socket bound to a port");
  PortReservation any("0.0.0.0");
  const int port = any.port();
  TESSERA_EXPECT_THROW_MSG(
      StoreServer(std::move(any), 1, "tok", "127.0.0.1"), ValueError,
      fmt::format("bound to 0.0.0.0:{}, not to the store's address 127.0.0.1", port));
  // Only a bound, unconnected IPv4 TCP socket is taken; anything else is left alone.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_FALSE(PortReservation::adopt(p[0]).valid());
  EXPECT_NE(::fcntl(p[0], F_GETFD), -1) << "adopt closed a descriptor it did not take";
  ::close(p[0]);
  ::close(p[1]);
  const int unbound = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_FALSE(PortReservation::adopt(unbound).valid());
  ::close(unbound);
  const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_FALSE(PortReservation::adopt(udp).valid());
  ::close(udp);
  EXPECT_FALSE(PortReservation::adopt(-1).valid());
  // Another process bound the reserved port explicitly with SO_REUSEADDR and listens on it
  // first: the store's listen() fails, naming the address.
  PortReservation mine("127.0.0.1");
  const int port2 = mine.port();
  const int other = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(other, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port2));
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(other, 4), 0);
  TESSERA_EXPECT_THROW_MSG(StoreServer(std::move(mine), 1, "tok"), IOError,
                           fmt::format("could not host the rendezvous store on 127.0.0.1:{} "
                                       "('127.0.0.1'): Address already in use",
                                       port2));
  ::close(other);
}

// rendezvous() hands rank 0's store the socket of LaunchEnv::store_socket (what
// dist::Runtime::attach_device_transport reserves for its second store).
TEST(Store, RendezvousListensOnTheSocketOfTheLaunchEnv) {
  LaunchEnv env;
  env.job_token = generate_job_token();
  env.store_socket = std::make_shared<PortReservation>("127.0.0.1");
  const int fd = env.store_socket->fd();
  env.master_port = env.store_socket->port();
  Rendezvous rv = rendezvous(env, 5);
  ASSERT_TRUE(rv.server);
  EXPECT_EQ(rv.server->port(), env.master_port);
  EXPECT_TRUE(listening(fd));
  EXPECT_FALSE(env.store_socket->valid()) << "taken once; copies of the LaunchEnv see it gone";
}

// The socket `tessera launch` passes down (TESSERA_STORE_SOCKET=FD:PORT): rank 0's store listens
// on it, it is taken once, and a variable naming another port or a descriptor that is not the
// socket leaves the store to bind the port itself. In forked processes (taking it is once per
// process), each of which reserves the port as the launcher would.
std::vector<RankResult> with_passed_socket(
    const std::function<std::string(const PortReservation&)>& variable,
    const std::function<void(PortReservation&)>& check) {
  JobSpec spec;
  spec.world = 1;
  spec.deadline_s = 30;
  return run_ranks(spec, [&](int) -> std::string {
    PortReservation r("127.0.0.1");
    ::setenv("MASTER_PORT", std::to_string(r.port()).c_str(), 1);
    ::setenv(kStoreSocketEnv, variable(r).c_str(), 1);
    check(r);
    return "ok";
  });
}

TEST(Store, RendezvousListensOnTheSocketTheLauncherPassed) {
  auto res = with_passed_socket(
      [](const PortReservation& r) { return fmt::format("{}:{}", r.fd(), r.port()); },
      [](PortReservation& r) {
        const int fd = r.fd(), port = r.port();
        RANK_CHECK(!listening(fd), "listening before the rendezvous");
        const LaunchEnv env = detect_launch_env();
        {
          Rendezvous rv = rendezvous(env, 10);
          RANK_CHECK(rv.server && rv.server->port() == port, "store on another port");
          RANK_CHECK(listening(fd), "the store does not listen on the passed socket");
          RANK_CHECK(!inherited_store_socket(port).valid(), "the passed socket was taken twice");
        }
        // The store closed it (the reservation must not close it again: it gave it up).
        RANK_CHECK(::fcntl(fd, F_GETFD) == -1, "the passed socket is still open");
        r.release();
        // A second store of the process binds the port itself.
        Rendezvous again = rendezvous(env, 10);
        RANK_CHECK(again.server && again.server->port() == port, "second store on another port");
      });
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  // A descriptor that is not the socket (a process in between closed it): the store binds the
  // port itself, beside the reservation.
  res =
      with_passed_socket([](const PortReservation& r) { return fmt::format("1000:{}", r.port()); },
                         [](PortReservation& r) {
                           Rendezvous rv = rendezvous(detect_launch_env(), 10);
                           RANK_CHECK(rv.server && rv.server->port() == r.port(), "port");
                           RANK_CHECK(!listening(r.fd()), "listens on the reservation");
                         });
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  // Another port (e.g. for a second transport's store): not this store's socket, left alone.
  res = with_passed_socket(
      [](const PortReservation& r) { return fmt::format("{}:{}", r.fd(), r.port() ^ 1); },
      [](PortReservation& r) {
        Rendezvous rv = rendezvous(detect_launch_env(), 10);
        RANK_CHECK(rv.server && rv.server->port() == r.port(), "port");
        RANK_CHECK(!listening(r.fd()), "took a socket passed for another port");
      });
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  res = with_passed_socket([](const PortReservation&) { return std::string("3"); },
                           [](PortReservation&) { rendezvous(detect_launch_env(), 10); });
  EXPECT_EQ(res[0].exit_code, 1) << describe(res);
  EXPECT_NE(res[0].message.find("TESSERA_STORE_SOCKET='3' is not FD:PORT"), std::string::npos)
      << describe(res);
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
                          "TESSERA_JOB_TOKEN_FILE",
                          "TESSERA_STORE_BIND",
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
              {"TORCHELASTIC_RUN_ID", "abc"},
              {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.job_token, "t-0123456789abcdef");
}

TEST(LaunchEnv, Slurm) {
  EnvGuard g({{"SLURM_PROCID", "3"},
              {"SLURM_NTASKS", "4"},
              {"SLURM_LOCALID", "1"},
              {"SLURM_NTASKS_PER_NODE", "2"},
              {"SLURM_JOB_NODELIST", "gpu[07-08]"},
              {"SLURM_JOB_ID", "12345"},
              {"SLURM_STEP_ID", "0"},
              {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 20000 + 12345 % 20000);
  EXPECT_EQ(e.job_token, "t-0123456789abcdef");
}

TEST(LaunchEnv, OpenMpi) {
  EnvGuard g({{"OMPI_COMM_WORLD_RANK", "2"},
              {"OMPI_COMM_WORLD_SIZE", "3"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
              {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"}});
  const LaunchEnv e = detect_launch_env();
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.job_token, "t-0123456789abcdef");
}

// A launcher's job ID is public (squeue, ps, the torchrun command line): it is never the secret.
TEST(LaunchEnv, NoTokenIsDerivedFromAPublicJobId) {
  for (const auto& id : std::vector<std::pair<std::string, std::string>>{
           {"TORCHELASTIC_RUN_ID", "abc"}, {"SLURM_JOB_ID", "12345"}, {"PMIX_NAMESPACE", "ns"}}) {
    EnvGuard g({{"RANK", "0"}, {"WORLD_SIZE", "2"}, id});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "TESSERA_JOB_TOKEN");
  }
}

TEST(LaunchEnv, TokenFileMustBeReadableOnlyByItsOwner) {
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("tessera-token-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const auto file = dir / "token";
  { std::ofstream(file) << "0123456789abcdef0123456789abcdef\n"; }
  std::filesystem::permissions(
      file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  {
    EnvGuard g({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN_FILE", file.string()}});
    EXPECT_EQ(detect_launch_env().job_token, "0123456789abcdef0123456789abcdef");
  }
  std::filesystem::permissions(file, std::filesystem::perms::group_read,
                               std::filesystem::perm_options::add);
  {
    EnvGuard g({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN_FILE", file.string()}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "chmod 600");
  }
  {
    EnvGuard g({{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"TESSERA_JOB_TOKEN_FILE", (dir / "missing").string()}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), IOError, "missing");
  }
  {
    EnvGuard g({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "short"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "at least 16");
  }
  std::filesystem::remove_all(dir);
}

TEST(LaunchEnv, GeneratedTokensAreLongAndDistinct) {
  const std::string a = generate_job_token(), b = generate_job_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(LaunchEnv, StoreListensOnLoopbackWhenEveryRankIsLocal) {
  LaunchEnv e;
  e.world_size = 4;
  e.local_world_size = 4;
  e.master_addr = "node7";
  {
    EnvGuard g({});
    EXPECT_EQ(store_bind_address(e), "127.0.0.1");
    e.local_world_size = 2;
    EXPECT_EQ(store_bind_address(e), "node7");
  }
  EnvGuard g({{"TESSERA_STORE_BIND", "0.0.0.0"}, {"MASTER_ADDR", "node7"}});
  EXPECT_EQ(store_bind_address(e), "0.0.0.0");
}

TEST(LaunchEnv, BadValuesAreNamed) {
  {
    EnvGuard g({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "RANK='x'");
  }
  {
    EnvGuard g({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "rank 2 is out of range");
  }
  {
    EnvGuard g({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    TESSERA_EXPECT_THROW_MSG(detect_launch_env(), ValueError, "TESSERA_JOB_TOKEN");
  }
  {
    EnvGuard g({{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"TESSERA_JOB_TOKEN", "t-0123456789abcdef"},
                {"MASTER_PORT", "99999"}});
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
