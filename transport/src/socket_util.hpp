// SPDX-License-Identifier: Apache-2.0
// Blocking TCP helpers with deadlines (internal to transport/).
#pragma once

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "tessera/transport/transport.hpp"

namespace tessera::transport::detail {

using Clock = std::chrono::steady_clock;

/// A timeout as a duration, saturated at about 31 years: "inf" or a huge number of seconds
/// means no deadline (the conversion would otherwise overflow into a deadline in the past).
inline Clock::duration seconds(double s) {
  constexpr double kMax = 1e9;
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(s < kMax ? s : kMax));
}

inline int ms_until(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) {
    return -1;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

inline void send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    TESSERA_EXPECTS(k > 0, IOError, "send on socket failed: {}", std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

/// Reads exactly n bytes. Returns false on EOF before the first byte when eof_ok; throws
/// IOError on EOF mid-message or socket errors and TimeoutError at the deadline.
inline bool recv_all(int fd, void* data, size_t n, Clock::time_point deadline, bool eof_ok) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_until(deadline));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r == 0) {
      throw TimeoutError("timed out waiting for data on a rendezvous socket", -1);
    }
    const ssize_t k = ::recv(fd, p + got, n - got, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (k == 0 && got == 0 && eof_ok) {
      return false;
    }
    if (k == 0) {
      TESSERA_FAIL(IOError, "connection closed in the middle of a message");
    }
    TESSERA_EXPECTS(k > 0, IOError, "recv on socket failed: {}", std::strerror(errno));
    got += static_cast<size_t>(k);
  }
  return true;
}

/// Keepalive probes so that a peer whose host died silently (no FIN) is noticed within
/// about 15 s instead of TCP's default two hours.
inline void set_keepalive(int fd) {
  int one = 1, idle = 5, intvl = 2, cnt = 5;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/// connect() that gives up at the deadline: a host that drops SYNs (a full accept queue, a
/// firewall, a host that is down) would otherwise hold a blocking connect() for the kernel's
/// SYN retries (about 127 s on Linux), whatever the caller's timeout. Leaves `fd` blocking;
/// on failure sets *why.
inline bool connect_by(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline,
                       std::string* why) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    *why = std::strerror(errno);
    return false;
  }
  int err = 0;
  if (::connect(fd, addr, len) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      int r = 0;
      do {
        r = ::poll(&pfd, 1, ms_until(deadline));
      } while (r < 0 && errno == EINTR);
      if (r == 0) {
        *why = "connection attempt timed out (no answer to SYN)";
        return false;
      }
      socklen_t el = sizeof err;
      if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
        err = errno;
      }
    }
  }
  if (err != 0) {
    *why = std::strerror(err);
    return false;
  }
  return ::fcntl(fd, F_SETFL, flags) == 0;
}

/// Connects to host:port, retrying (the server may not be up yet) until the deadline; throws
/// TimeoutError naming `what` and `peer`.
inline int connect_retry(const std::string& host, int port, Clock::time_point deadline,
                         const std::string& what, int peer) {
  std::string last = "no attempt";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port_s = std::to_string(port);
    const int gai = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res);
    if (gai != 0) {
      last = ::gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
          continue;
        }
        if (connect_by(fd, a->ai_addr, a->ai_addrlen, deadline, &last)) {
          ::freeaddrinfo(res);
          set_keepalive(fd);
          return fd;
        }
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    if (Clock::now() >= deadline) {
      throw TimeoutError(fmt::format("could not connect to {} before the deadline: {}", what, last),
                         peer);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tessera::transport::detail
