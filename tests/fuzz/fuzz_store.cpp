// SPDX-License-Identifier: Apache-2.0
// The rendezvous store's framing, against a real store in this process (one handshake thread,
// one thread per authenticated connection), over loopback. The first byte picks how the rest
// is sent:
//   0  as a stranger: the bytes follow the store's challenge (the handshake, unauthenticated);
//   1  as rank 0's client after a valid handshake: the bytes are framed messages (set, get, ...);
//   2  after a valid handshake whose hello claims the role, rank and world of bytes 1-9;
//   3  as a store to a client: the bytes are taken for the store's challenge, answer and first
//      frame, checked by the client's parsers.
// Every connection is closed by the store or after the bytes are sent; the store keeps serving.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "fuzz_target.hpp"
#include "loopback.hpp"
#include "store_wire.hpp"
#include "tessera/transport/rendezvous.hpp"

namespace {

using namespace tessera::transport;
namespace wire = tessera::transport::detail::wire;

const std::string kToken = "fuzz-token-0123456789abcdef";

using tessera::test::connect_to;

// Reads exactly n bytes within 2 s; false otherwise.
bool read_n(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 2000) <= 0) {
      return false;
    }
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) {
      return false;
    }
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) {
      return;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Reads until the store closes the connection (or 2 s of silence).
void drain(int fd) {
  char buf[4096];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 2000) <= 0 || ::recv(fd, buf, sizeof buf, 0) <= 0) {
      return;
    }
  }
}

StoreServer& store() {
  // Restarted now and then so what the inputs store does not pile up over millions of runs.
  static std::unique_ptr<StoreServer> s;
  static int uses = 0;
  if (!s || ++uses % 2000 == 0) {
    s.reset();
    s = std::make_unique<StoreServer>(0, 4, kToken, "127.0.0.1", 15);
  }
  return *s;
}

void client_side(const uint8_t* data, size_t size) {
  wire::Challenge c{};
  std::memcpy(&c, data, std::min(size, sizeof c));
  tessera::fuzz::guarded([&] { wire::check_challenge(c); });
  const wire::Hello h = wire::make_hello(c, kToken, 1, 4, wire::kRoleClient);
  wire::Accept a{};
  if (size > sizeof c) {
    std::memcpy(&a, data + sizeof c, std::min(size - sizeof c, sizeof a));
  }
  tessera::fuzz::guarded([&] { wire::check_accept(a, kToken, c, h, "the store", 1); });
  const size_t off = sizeof c + sizeof a;
  if (size >= off + sizeof(wire::Header)) {
    wire::Header fh{};
    std::memcpy(&fh, data + off, sizeof fh);
    tessera::fuzz::guarded([&] { wire::check_header(fh, "the store"); });
  }
}

}  // namespace

TESSERA_FUZZ_TARGET(store) {
  if (size == 0) {
    return 0;
  }
  const int mode = data[0] % 4;
  ++data;
  --size;
  if (mode == 3) {
    client_side(data, size);
    return 0;
  }
  const int fd = connect_to(store().port());
  if (fd < 0) {
    return 0;
  }
  wire::Challenge c{};
  if (!read_n(fd, &c, sizeof c)) {
    ::close(fd);
    return 0;
  }
  if (mode == 1 || mode == 2) {
    uint8_t role = wire::kRoleClient;
    int32_t rank = 0;
    uint32_t world = 4;
    if (mode == 2 && size >= 9) {
      role = data[0];
      std::memcpy(&rank, data + 1, 4);
      std::memcpy(&world, data + 5, 4);
      data += 9;
      size -= 9;
    }
    const wire::Hello h = wire::make_hello(c, kToken, rank, world, role);
    send_all(fd, reinterpret_cast<const uint8_t*>(&h), sizeof h);
    wire::Accept a{};
    if (!read_n(fd, &a, sizeof a) || a.status != wire::kAccepted) {
      ::close(fd);
      return 0;
    }
  }
  send_all(fd, data, size);
  ::shutdown(fd, SHUT_WR);
  drain(fd);
  ::close(fd);
  return 0;
}
