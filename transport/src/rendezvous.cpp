// SPDX-License-Identifier: Apache-2.0
// Launch environment detection and the token-checked TCP key-value store.
#include "tessera/transport/rendezvous.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "random.hpp"
#include "socket_util.hpp"
#include "store_wire.hpp"

namespace tessera::transport {

using detail::Clock;

// --- environment ------------------------------------------------------------------------------

namespace {

// Shorter tokens are refused: a token is a shared secret, not a job name.
constexpr size_t kMinTokenLength = 16;

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

int env_int(const char* name, int min_value) {
  const char* v = env_or_null(name);
  TESSERA_ASSERT(v != nullptr);
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  TESSERA_EXPECTS(errno == 0 && end != v && *end == '\0' && x >= min_value && x <= 1 << 30,
                  ValueError, "environment variable {}='{}' is not an integer >= {}", name, v,
                  min_value);
  return static_cast<int>(x);
}

// "node[01-04,07],other" -> "node01"; "a,b" -> "a".
std::string first_slurm_host(const std::string& list) {
  std::string out;
  bool in_bracket = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == '[') {
      in_bracket = true;
      continue;
    }
    if (in_bracket) {
      if (c == '-' || c == ',' || c == ']') {
        break;
      }
      out += c;
      continue;
    }
    if (c == ',') {
      break;
    }
    out += c;
  }
  return out;
}

}  // namespace

LaunchEnv detect_launch_env() {
  LaunchEnv e;
  if (env_or_null("RANK") || env_or_null("WORLD_SIZE")) {
    TESSERA_EXPECTS(env_or_null("RANK") && env_or_null("WORLD_SIZE"), ValueError,
                    "RANK and WORLD_SIZE must be set together (RANK={}, WORLD_SIZE={})",
                    env_or_null("RANK") ? env_or_null("RANK") : "<unset>",
                    env_or_null("WORLD_SIZE") ? env_or_null("WORLD_SIZE") : "<unset>");
    e.source = "tessera/torchrun";
    e.rank = env_int("RANK", 0);
    e.world_size = env_int("WORLD_SIZE", 1);
    e.local_rank = env_or_null("LOCAL_RANK") ? env_int("LOCAL_RANK", 0) : e.rank;
    e.local_world_size =
        env_or_null("LOCAL_WORLD_SIZE") ? env_int("LOCAL_WORLD_SIZE", 1) : e.world_size;
  } else if (env_or_null("SLURM_PROCID") && env_or_null("SLURM_NTASKS")) {
    e.source = "slurm";
    e.rank = env_int("SLURM_PROCID", 0);
    e.world_size = env_int("SLURM_NTASKS", 1);
    e.local_rank = env_or_null("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0) : 0;
    if (env_or_null("SLURM_NTASKS_PER_NODE")) {
      // May read "4" or "4(x2)"; the leading number is what we need.
      e.local_world_size = std::max(1, std::atoi(env_or_null("SLURM_NTASKS_PER_NODE")));
    } else if (env_or_null("SLURM_STEP_TASKS_PER_NODE")) {
      e.local_world_size = std::max(1, std::atoi(env_or_null("SLURM_STEP_TASKS_PER_NODE")));
    } else {
      e.local_world_size = 1;
    }
    if (!env_or_null("MASTER_ADDR")) {
      const char* nl = env_or_null("SLURM_STEP_NODELIST");
      if (!nl) {
        nl = env_or_null("SLURM_JOB_NODELIST");
      }
      if (nl) {
        e.master_addr = first_slurm_host(nl);
      }
    }
    if (!env_or_null("MASTER_PORT") && env_or_null("SLURM_JOB_ID")) {
      e.master_port =
          20000 + static_cast<int>(std::strtoul(env_or_null("SLURM_JOB_ID"), nullptr, 10) % 20000);
    }
  } else if (env_or_null("OMPI_COMM_WORLD_RANK") && env_or_null("OMPI_COMM_WORLD_SIZE")) {
    e.source = "openmpi";
    e.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank =
        env_or_null("OMPI_COMM_WORLD_LOCAL_RANK") ? env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0) : 0;
    e.local_world_size =
        env_or_null("OMPI_COMM_WORLD_LOCAL_SIZE") ? env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1) : 1;
    TESSERA_EXPECTS(env_or_null("MASTER_ADDR") || e.local_world_size == e.world_size, ValueError,
                    "under mpirun across several nodes set MASTER_ADDR to the host of rank 0 "
                    "(OMPI_COMM_WORLD_SIZE={}, OMPI_COMM_WORLD_LOCAL_SIZE={})",
                    e.world_size, e.local_world_size);
  } else {
    e.local_world_size = 1;
  }
  TESSERA_EXPECTS(e.rank < e.world_size, ValueError,
                  "rank {} is out of range for world size {} (from the {} environment)", e.rank,
                  e.world_size, e.source);
  TESSERA_EXPECTS(e.local_rank < e.local_world_size || e.source == "slurm", ValueError,
                  "local rank {} is out of range for local world size {} (from the {} "
                  "environment)",
                  e.local_rank, e.local_world_size, e.source);
  if (const char* a = env_or_null("MASTER_ADDR")) {
    e.master_addr = a;
  }
  if (env_or_null("MASTER_PORT")) {
    e.master_port = env_int("MASTER_PORT", 1);
    TESSERA_EXPECTS(e.master_port <= 65535, ValueError, "MASTER_PORT={} is not a TCP port",
                    e.master_port);
  }
  e.job_token = job_token_from_env();
  TESSERA_EXPECTS(e.world_size == 1 || !e.job_token.empty(), ValueError,
                  "no job token for a world of {} ranks: every rank needs the same secret in "
                  "TESSERA_JOB_TOKEN, or in a file only you can read named by "
                  "TESSERA_JOB_TOKEN_FILE (`tessera launch` makes one; under torchrun, srun or "
                  "mpirun: export TESSERA_JOB_TOKEN=$(openssl rand -hex 32) first)",
                  e.world_size);
  return e;
}

std::string job_token_from_env() {
  std::string token;
  if (const char* t = env_or_null("TESSERA_JOB_TOKEN")) {
    token = t;
  } else if (const char* path = env_or_null("TESSERA_JOB_TOKEN_FILE")) {
    token = read_token_file(path);
  }
  TESSERA_EXPECTS(token.empty() || token.size() >= kMinTokenLength, ValueError,
                  "the job token ({}) has {} characters; use at least {} random ones (e.g. "
                  "`openssl rand -hex 32`)",
                  env_or_null("TESSERA_JOB_TOKEN") ? "TESSERA_JOB_TOKEN" : "TESSERA_JOB_TOKEN_FILE",
                  token.size(), kMinTokenLength);
  return token;
}

std::string read_token_file(const std::string& path, const std::string& source) {
  const std::string src = source.empty() ? "TESSERA_JOB_TOKEN_FILE=" + path : source;
  // Opened without following a final symlink, then checked on the open descriptor: a file other
  // users can read (or replace) is no secret.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  TESSERA_EXPECTS(fd >= 0, IOError, "{}: cannot open: {}", src, std::strerror(errno));
  struct stat sb {};
  const bool stat_ok = ::fstat(fd, &sb) == 0;
  std::string token;
  if (stat_ok && S_ISREG(sb.st_mode) && sb.st_uid == ::geteuid() && (sb.st_mode & 077) == 0 &&
      sb.st_size <= 4096) {
    token.resize(static_cast<size_t>(sb.st_size));
    size_t got = 0;
    while (got < token.size()) {
      const ssize_t k = ::read(fd, token.data() + got, token.size() - got);
      if (k < 0 && errno == EINTR) {
        continue;
      }
      if (k <= 0) {
        break;
      }
      got += static_cast<size_t>(k);
    }
    token.resize(got);
  }
  ::close(fd);
  TESSERA_EXPECTS(stat_ok && S_ISREG(sb.st_mode), IOError, "{}: not a regular file", src);
  TESSERA_EXPECTS(sb.st_uid == ::geteuid(), ValueError,
                  "{}: owned by uid {}, not by this user (uid {})", src, sb.st_uid, ::geteuid());
  TESSERA_EXPECTS((sb.st_mode & 077) == 0, ValueError,
                  "{}: mode {:04o} lets other users read it; chmod 600 it", src,
                  sb.st_mode & 07777);
  TESSERA_EXPECTS(sb.st_size <= 4096, ValueError, "{}: {} bytes, more than a token's 4096", src,
                  sb.st_size);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  TESSERA_EXPECTS(!token.empty(), ValueError, "{}: the file is empty", src);
  TESSERA_EXPECTS(token.size() >= kMinTokenLength, ValueError,
                  "{}: the token has {} characters; use at least {} random ones (e.g. `openssl "
                  "rand -hex 32`)",
                  src, token.size(), kMinTokenLength);
  return token;
}

std::string generate_job_token() {
  uint8_t raw[32];
  detail::random_bytes(raw, sizeof raw);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : raw) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

// --- framed messages (after the handshake; store_wire.hpp) -------------------------------------
namespace {

namespace wire = detail::wire;

struct Frame {
  uint8_t op = 0;
  int32_t rank = -1;
  std::string key;
  Bytes value;
};

void write_frame(int fd, uint8_t op, int32_t rank, const std::string& key, ByteView value) {
  wire::Header h{wire::kMagic, wire::kVersion, op, 0, rank, static_cast<uint32_t>(key.size()),
                 value.size};
  std::vector<uint8_t> buf(sizeof h + key.size() + value.size);
  std::memcpy(buf.data(), &h, sizeof h);
  if (!key.empty()) {
    std::memcpy(buf.data() + sizeof h, key.data(), key.size());
  }
  if (value.size) {
    std::memcpy(buf.data() + sizeof h + key.size(), value.data, value.size);
  }
  detail::send_all(fd, buf.data(), buf.size());
}

void write_text(int fd, uint8_t op, int32_t rank, const std::string& text) {
  write_frame(fd, op, rank, "", ByteView(text.data(), text.size()));
}

// Reads one frame. Returns false on a clean EOF before any byte. Throws ValueError with
// `who` on malformed input, TimeoutError when the deadline passes, IOError on socket errors.
bool read_frame(int fd, Frame& f, Clock::time_point deadline, const std::string& who) {
  wire::Header h{};
  if (!detail::recv_all(fd, &h, sizeof h, deadline, /*eof_ok=*/true)) {
    return false;
  }
  wire::check_header(h, who);
  f.op = h.op;
  f.rank = h.rank;
  f.key.assign(h.key_len, '\0');
  if (h.key_len) {
    detail::recv_all(fd, f.key.data(), h.key_len, deadline, false);
  }
  f.value.resize(h.val_len);
  if (h.val_len) {
    detail::recv_all(fd, f.value.data(), h.val_len, deadline, false);
  }
  return true;
}

std::string text_of(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// The address the store listens on (see rendezvous.hpp: store_bind_address).
in_addr_t resolve_ipv4(const std::string& host, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  TESSERA_EXPECTS(gai == 0 && res != nullptr, ValueError, "{} '{}' does not resolve: {}", what,
                  host, gai == 0 ? "no IPv4 address" : ::gai_strerror(gai));
  const in_addr_t a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(res);
  return a;
}

void set_blocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) {
    ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
}

// True when the peer closed its side of `fd` (or the connection failed), without consuming data.
bool peer_closed(int fd) {
  char b;
  const ssize_t k = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Sends a small fixed-size message on a fresh (non-blocking) socket whose buffer is empty.
bool send_small(int fd, const void* p, size_t n) {
  return ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

// Seconds of silence on a watch connection after which its peer counts as lost, and how often
// each side speaks when it has nothing else to say.
double ping_interval(double heartbeat_s) {
  return std::min(2.0, heartbeat_s / 5);
}

}  // namespace

// --- server -----------------------------------------------------------------------------------

namespace {

// Unauthenticated connections: at most this many at a time (the oldest makes room for a new
// one), each for at most this long. Authenticated ones are at most two per rank.
constexpr size_t kMaxPending = 64;
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);

struct Pending {
  Pending(int f, std::string n, const std::string* token, const wire::Challenge& c)
      : fd(f), name(std::move(n)), deadline(Clock::now() + kHandshakeTimeout), hs(token, c) {}
  int fd;
  std::string name;
  Clock::time_point deadline;
  wire::ServerHandshake hs;
};

}  // namespace

struct StoreServer::Impl {
  int listen_fd = -1;
  int world = 0;
  std::string token;
  double heartbeat_s = 15;
  std::atomic<bool> stopping{false};
  std::thread acceptor, pinger;

  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Bytes> kv;
  // Authenticated connections; a connection's thread closes its fd and marks it done, the
  // acceptor joins it.
  struct Conn {
    int fd = -1;
    bool done = false;
    std::thread th;
  };
  std::list<Conn> conns;
  // Watch connections: fd per rank (-1: none), and who said goodbye or was lost.
  std::vector<int> watch_fd;
  std::vector<char> bye, lost, joined;
  std::vector<std::unique_ptr<std::mutex>> write_mu;
  bool all_done_sent = false;
  std::atomic<uint64_t> refused{0};

  void accept_loop();
  void ping_loop();
  void start_conn(int fd, const wire::Hello& h, const std::string& name);
  void reap_conns();
  void log_refusal(const std::string& peer, const std::string& why);
  void serve(int fd, const wire::Hello& h, const std::string& peer_name);
  void serve_watch(int fd, int rank);
  void maybe_all_done();                                                           // mu held
  void send_to_watcher(int r, uint8_t op, int32_t rank, const std::string& text);  // mu held
};

namespace {

std::string dotted(in_addr_t a) {
  char buf[INET_ADDRSTRLEN] = {0};
  in_addr in{};
  in.s_addr = a;
  ::inet_ntop(AF_INET, &in, buf, sizeof buf);
  return buf;
}

// An IPv4 TCP socket (SO_REUSEADDR, close-on-exec) bound to `bind_address`:`port`, as the store
// binds it. Errors begin with `what`.
int bind_store_socket(const std::string& bind_address, int port, const char* what) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = resolve_ipv4(bind_address, "the store's bind address");
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TESSERA_EXPECTS(fd >= 0, IOError, "store: socket() failed: {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    TESSERA_FAIL(IOError, "{} {}:{} ('{}'): {}{}", what, dotted(addr.sin_addr.s_addr), port,
                 bind_address, std::strerror(err),
                 err == EADDRNOTAVAIL ? " (not an address of this host: set MASTER_ADDR to rank "
                                        "0's host, or TESSERA_STORE_BIND to an address of it)"
                                      : "");
  }
  return fd;
}

// The address `fd` is bound to, when it is an IPv4 TCP socket bound to a port and not connected
// (a listening socket or a reservation).
bool bound_tcp4(int fd, sockaddr_in* out) {
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 || v != AF_INET) {
    return false;
  }
  len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != SOCK_STREAM) {
    return false;
  }
  len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) != 0 || v != IPPROTO_TCP) {
    return false;
  }
  sockaddr_in a{};
  len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
      a.sin_port == 0) {
    return false;
  }
  sockaddr_in peer{};
  len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 || errno != ENOTCONN) {
    return false;
  }
  *out = a;
  return true;
}

}  // namespace

PortReservation::PortReservation(const std::string& bind_address, int port) {
  TESSERA_EXPECTS(port >= 0 && port <= 65535, ValueError, "{} is not a TCP port", port);
  const int fd =
      bind_store_socket(bind_address, port, "could not reserve a port for the rendezvous store on");
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    TESSERA_FAIL(IOError, "getsockname failed on the reserved socket: {}", std::strerror(err));
  }
  fd_ = fd;
  port_ = ntohs(a.sin_port);
  address_ = a.sin_addr.s_addr;
}

PortReservation PortReservation::adopt(int fd) {
  PortReservation r;
  sockaddr_in a{};
  if (fd < 0 || !bound_tcp4(fd, &a)) {
    return r;
  }
  const int fl = ::fcntl(fd, F_GETFD);
  if (fl >= 0) {
    ::fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
  }
  r.fd_ = fd;
  r.port_ = ntohs(a.sin_port);
  r.address_ = a.sin_addr.s_addr;
  return r;
}

PortReservation::~PortReservation() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      port_(std::exchange(other.port_, 0)),
      address_(std::exchange(other.address_, 0)) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
    port_ = std::exchange(other.port_, 0);
    address_ = std::exchange(other.address_, 0);
  }
  return *this;
}

int PortReservation::release() {
  port_ = 0;
  address_ = 0;
  return std::exchange(fd_, -1);
}

PortReservation inherited_store_socket(int port) {
  static std::atomic<bool> taken{false};
  const char* v = env_or_null(kStoreSocketEnv);
  if (v == nullptr) {
    return {};
  }
  char* end = nullptr;
  errno = 0;
  const long fd = std::strtol(v, &end, 10);
  const bool fd_ok = errno == 0 && end != v && *end == ':' && fd >= 0 && fd <= (1 << 30);
  const char* p = fd_ok ? end + 1 : v;
  const long named_port = fd_ok ? std::strtol(p, &end, 10) : -1;
  TESSERA_EXPECTS(
      fd_ok && errno == 0 && end != p && *end == '\0' && named_port >= 1 && named_port <= 65535,
      ValueError,
      "environment variable {}='{}' is not FD:PORT (`tessera launch` sets it for the "
      "rank that hosts the rendezvous store; unset it)",
      kStoreSocketEnv, v);
  // Descriptors 0-2 are never the launcher's socket (it moves it above them).
  if (named_port != port || fd < 3 || taken.exchange(true)) {
    return {};
  }
  PortReservation r = PortReservation::adopt(static_cast<int>(fd));
  if (r.valid() && r.port() != port) {
    r.release();  // some other socket of this process, not the launcher's: not ours to close
    return {};
  }
  return r;
}

StoreServer::StoreServer(int port, int world_size, std::string token,
                         const std::string& bind_address, double heartbeat_s)
    : StoreServer(PortReservation::adopt(bind_store_socket(
                      bind_address, port, "rank 0 could not host the rendezvous store on")),
                  world_size, std::move(token), bind_address, heartbeat_s) {}

StoreServer::StoreServer(PortReservation reserved, int world_size, std::string token,
                         const std::string& bind_address, double heartbeat_s)
    : impl_(std::make_unique<Impl>()) {
  TESSERA_EXPECTS(world_size >= 1, ValueError, "store: world size {} < 1", world_size);
  TESSERA_EXPECTS(!token.empty(), ValueError, "store: empty job token");
  TESSERA_EXPECTS(heartbeat_s > 0, ValueError, "store: heartbeat timeout {} s is not positive",
                  heartbeat_s);
  TESSERA_EXPECTS(reserved.valid(), ValueError,
                  "store: the socket to listen on is not an IPv4 TCP socket bound to a port");
  const in_addr_t want = resolve_ipv4(bind_address, "the store's bind address");
  TESSERA_EXPECTS(reserved.address() == want, ValueError,
                  "store: the socket to listen on is bound to {}:{}, not to the store's address "
                  "{} ('{}')",
                  dotted(reserved.address()), reserved.port(), dotted(want), bind_address);
  impl_->world = world_size;
  impl_->token = std::move(token);
  impl_->heartbeat_s = heartbeat_s;
  impl_->watch_fd.assign(world_size, -1);
  impl_->bye.assign(world_size, 0);
  impl_->lost.assign(world_size, 0);
  impl_->joined.assign(world_size, 0);
  for (int i = 0; i < world_size; ++i) {
    impl_->write_mu.push_back(std::make_unique<std::mutex>());
  }
  const int fd = reserved.fd();
  const int fl = ::fcntl(fd, F_GETFL);
  if (::listen(fd, 128) != 0 || fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    TESSERA_FAIL(IOError, "rank 0 could not host the rendezvous store on {}:{} ('{}'): {}",
                 dotted(reserved.address()), reserved.port(), bind_address, std::strerror(errno));
  }
  port_ = reserved.port();
  impl_->listen_fd = reserved.release();
  Impl* im = impl_.get();
  impl_->acceptor = std::thread([im] { im->accept_loop(); });
  impl_->pinger = std::thread([im] { im->ping_loop(); });
}

StoreServer::~StoreServer() {
  stop();
}

uint64_t StoreServer::refused_connections() const {
  return impl_->refused.load();
}

void StoreServer::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cv.notify_all();
  }
  if (impl_->acceptor.joinable()) {
    impl_->acceptor.join();
  }
  if (impl_->pinger.joinable()) {
    impl_->pinger.join();
  }
  std::list<Impl::Conn> conns;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    for (const auto& c : impl_->conns) {
      if (c.fd >= 0) {
        ::shutdown(c.fd, SHUT_RDWR);
      }
    }
    conns.splice(conns.end(), impl_->conns);
    impl_->cv.notify_all();
  }
  for (auto& c : conns) {
    c.th.join();
  }
  ::close(impl_->listen_fd);
}

void StoreServer::Impl::log_refusal(const std::string& peer, const std::string& why) {
  // A flood must not flood stderr as well: the first few, then every power of ten.
  const uint64_t n = ++refused;
  if (n <= 5) {
    fmt::print(stderr, "[tessera] rendezvous store: refused {}: {}\n", peer, why);
  } else if ((n & (n - 1)) == 0 && n >= 64) {
    fmt::print(stderr,
               "[tessera] rendezvous store: {} connections refused so far (latest {}: {})\n", n,
               peer, why);
  }
}

void StoreServer::Impl::start_conn(int fd, const wire::Hello& h, const std::string& name) {
  std::lock_guard<std::mutex> lk(mu);
  if (stopping.load()) {
    ::close(fd);
    return;
  }
  conns.emplace_back();
  Conn* c = &conns.back();
  c->fd = fd;
  try {
    c->th = std::thread([this, c, h, name] {
      serve(c->fd, h, name);
      std::lock_guard<std::mutex> g(mu);
      ::close(c->fd);
      c->fd = -1;
      c->done = true;
    });
  } catch (const std::exception& e) {
    // No thread for it (a process or thread limit): this connection is dropped, its rank sees
    // the store close it and fails naming the store; the store and every other rank go on,
    // where the exception escaping the acceptor thread would have aborted rank 0.
    conns.pop_back();
    ::close(fd);
    std::fprintf(stderr, "[tessera store] could not serve %s: %s\n", name.c_str(), e.what());
  }
}

void StoreServer::Impl::reap_conns() {
  std::list<Conn> done;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      auto next = std::next(it);
      if (it->done) {
        done.splice(done.end(), conns, it);
      }
      it = next;
    }
  }
  for (auto& c : done) {
    c.th.join();
  }
}

// One thread multiplexes the listening socket and every handshake in progress, so a flood of
// connections costs a bounded number of descriptors and no threads, and reads at most a hello's
// fixed 80 bytes from each.
void StoreServer::Impl::accept_loop() {
  std::deque<std::unique_ptr<Pending>> pending;
  Clock::time_point paused_until{};
  bool told_fd_limit = false;
  auto drop = [&](size_t i) {
    ::close(pending[i]->fd);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
  };
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    reap_conns();
    const bool can_accept = Clock::now() >= paused_until;
    fds.clear();
    fds.push_back({listen_fd, static_cast<short>(can_accept ? POLLIN : 0), 0});
    for (const auto& p : pending) {
      fds.push_back({p->fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 50) < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (size_t k = fds.size() - 1; k >= 1; --k) {
      if (fds[k].revents == 0) {
        continue;
      }
      Pending& p = *pending[k - 1];
      uint8_t buf[sizeof(wire::Hello)];
      const ssize_t n = ::recv(p.fd, buf, p.hs.wanted(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        continue;
      }
      if (n <= 0) {
        log_refusal(p.name, "closed the connection during the handshake");
        drop(k - 1);
        continue;
      }
      p.hs.feed(buf, static_cast<size_t>(n));
      if (p.hs.state() == wire::ServerHandshake::State::kRefused) {
        log_refusal(p.name, p.hs.reason());  // counted before the peer can hear of it
        const wire::Accept a = wire::make_accept(p.hs.status(), token, nullptr, p.hs.hello());
        send_small(p.fd, &a, sizeof a);
        drop(k - 1);
      } else if (p.hs.state() == wire::ServerHandshake::State::kAuthenticated) {
        const int fd = p.fd;
        const wire::Hello h = p.hs.hello();
        const std::string name = p.name;
        const wire::Accept a = wire::make_accept(wire::kAccepted, token, p.hs.challenge_nonce(), h);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(k - 1));
        if (send_small(fd, &a, sizeof a)) {
          set_blocking(fd);
          start_conn(fd, h, name);
        } else {
          ::close(fd);
        }
      }
    }
    const auto now = Clock::now();
    for (size_t i = pending.size(); i-- > 0;) {
      if (now >= pending[i]->deadline) {
        log_refusal(pending[i]->name, "sent no complete hello within 5 s");
        drop(i);
      }
    }
    if (!can_accept || !(fds[0].revents & POLLIN)) {
      continue;
    }
    for (int i = 0; i < 64 && !stopping.load(); ++i) {
      sockaddr_in peer{};
      socklen_t pl = sizeof peer;
      const int c = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &pl,
                              SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the listening socket stays readable, so polling it again at
          // once would spin. Pause accepting for a moment; handshakes go on.
          paused_until = Clock::now() + std::chrono::milliseconds(100);
          if (!told_fd_limit) {
            told_fd_limit = true;
            fmt::print(stderr, "[tessera] rendezvous store: cannot accept connections: {}\n",
                       std::strerror(errno));
          }
        }
        break;
      }
      if (pending.size() >= kMaxPending) {
        log_refusal(pending.front()->name, "dropped unauthenticated to make room");
        drop(0);
      }
      detail::set_keepalive(c);
      char buf[INET_ADDRSTRLEN] = {0};
      ::inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof buf);
      const wire::Challenge ch = wire::make_challenge();
      auto p =
          std::make_unique<Pending>(c, fmt::format("{}:{}", buf, ntohs(peer.sin_port)), &token, ch);
      if (!send_small(c, &ch, sizeof ch)) {
        ::close(c);
        continue;
      }
      pending.push_back(std::move(p));
    }
  }
  for (const auto& p : pending) {
    ::close(p->fd);
  }
}

void StoreServer::Impl::ping_loop() {
  const auto every = detail::seconds(ping_interval(heartbeat_s));
  std::unique_lock<std::mutex> lk(mu);
  while (!stopping.load()) {
    cv.wait_for(lk, every, [&] { return stopping.load(); });
    if (stopping.load()) {
      break;
    }
    for (int r = 0; r < world; ++r) {
      send_to_watcher(r, wire::kPing, -1, "");
    }
  }
}

void StoreServer::Impl::send_to_watcher(int r, uint8_t op, int32_t rank, const std::string& text) {
  if (watch_fd[r] < 0) {
    return;
  }
  std::lock_guard<std::mutex> wl(*write_mu[r]);
  try {
    write_text(watch_fd[r], op, rank, text);
  } catch (const std::exception&) {
    // The watcher is gone; its own thread reports that.
  }
}

void StoreServer::Impl::maybe_all_done() {
  if (all_done_sent) {
    return;
  }
  // A rank that never opened its watch connection cannot be waited for (it never joined, so no
  // rank can have finished construction and be relying on it).
  for (int r = 0; r < world; ++r) {
    if (!bye[r] && !lost[r] && joined[r]) {
      return;
    }
  }
  all_done_sent = true;
  for (int r = 0; r < world; ++r) {
    if (bye[r]) {
      send_to_watcher(r, wire::kAllBye, -1, "");
    }
  }
}

void StoreServer::Impl::serve(int fd, const wire::Hello& h, const std::string& peer_name) {
  // The peer proved it knows the token; what it claims is checked before it is served.
  const int rank = h.rank;
  try {
    TESSERA_EXPECTS(static_cast<int64_t>(h.world) == world, ValueError,
                    "{} (rank {}) believes the world has {} ranks, the store was started for {}",
                    peer_name, rank, h.world, world);
    TESSERA_EXPECTS(rank >= 0 && rank < world, ValueError, "{} claims rank {}, outside [0, {})",
                    peer_name, rank, world);
    TESSERA_EXPECTS(h.role == wire::kRoleClient || h.role == wire::kRoleWatch, ValueError,
                    "malformed hello from {}: role {}", peer_name, h.role);
    if (h.role == wire::kRoleWatch) {
      {
        std::lock_guard<std::mutex> lk(mu);
        TESSERA_EXPECTS(watch_fd[rank] < 0 && !bye[rank] && !lost[rank], ValueError,
                        "{} claims rank {}, which has already joined", peer_name, rank);
        std::lock_guard<std::mutex> wl(*write_mu[rank]);
        write_text(fd, wire::kOk, -1, "");
        watch_fd[rank] = fd;
        joined[rank] = 1;
      }
      serve_watch(fd, rank);
      return;
    }
    write_text(fd, wire::kOk, -1, "");
    const std::string who = fmt::format("rank {} at {}", rank, peer_name);
    for (;;) {
      Frame q;
      if (!read_frame(fd, q, Clock::time_point::max(), who)) {
        return;
      }
      if (q.op == wire::kSet) {
        {
          std::lock_guard<std::mutex> lk(mu);
          kv[q.key] = std::move(q.value);
          cv.notify_all();
        }
        write_text(fd, wire::kOk, -1, "");
      } else if (q.op == wire::kGet) {
        TESSERA_EXPECTS(q.value.size() == 8, ValueError, "malformed get from {}", who);
        uint64_t ms;
        std::memcpy(&ms, q.value.data(), 8);
        ms = std::min<uint64_t>(ms, uint64_t{1} << 40);  // ~35 years: no overflow below
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        Bytes result;
        bool found = false, gone = false;
        {
          std::unique_lock<std::mutex> lk(mu);
          for (;;) {
            auto it = kv.find(q.key);
            if (it != kv.end()) {
              result = it->second;
              found = true;
              break;
            }
            // Wake now and then to notice a requester that went away (died, or gave up), so a
            // long wait does not hold this thread and its socket to the end of the timeout.
            const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
            if (stopping.load() || Clock::now() >= deadline) {
              break;
            }
            if (cv.wait_until(lk, until) == std::cv_status::timeout && peer_closed(fd)) {
              gone = true;
              break;
            }
          }
        }
        if (gone) {
          return;
        }
        if (found) {
          write_frame(fd, wire::kOk, -1, "", result);
        } else {
          write_text(fd, wire::kErr, -1, "timeout");
        }
      } else {
        TESSERA_FAIL(ValueError, "malformed message from {}: unexpected operation {}", who, q.op);
      }
    }
  } catch (const std::exception& e) {
    if (stopping.load()) {
      return;
    }
    // Tell the (authenticated) peer why, then drop it; the store keeps serving everyone else.
    try {
      write_text(fd, wire::kErr, -1, e.what());
    } catch (...) {
    }
    fmt::print(stderr, "[tessera] rendezvous store: refused {}: {}\n", peer_name, e.what());
  }
}

void StoreServer::Impl::serve_watch(int fd, int rank) {
  const std::string who = fmt::format("rank {}", rank);
  std::string reason = "its connection to the rendezvous store closed (process died?)";
  try {
    for (;;) {
      // Every rank pings at least every ping_interval(): silence for heartbeat_s means it is
      // frozen (SIGSTOP, a debugger) or its host is gone, whatever TCP says.
      Frame f;
      bool got = false;
      try {
        got = read_frame(fd, f, Clock::now() + detail::seconds(heartbeat_s), who);
      } catch (const TimeoutError&) {
        reason = fmt::format(
            "rank {} sent no heartbeat for {:.0f} s (frozen, e.g. stopped with SIGSTOP, or its "
            "host is unreachable)",
            rank, heartbeat_s);
        break;
      }
      if (!got) {
        break;
      }
      if (f.op == wire::kPing) {
        continue;
      }
      if (f.op == wire::kBye) {
        std::lock_guard<std::mutex> lk(mu);
        bye[rank] = 1;
        for (int r = 0; r < world; ++r) {
          if (r != rank && !bye[r]) {
            send_to_watcher(r, wire::kLeft, rank, "");
          }
        }
        maybe_all_done();
        continue;
      }
      TESSERA_FAIL(ValueError,
                   "malformed message from {}: unexpected operation {} on its watch "
                   "connection",
                   who, f.op);
    }
  } catch (const std::exception& e) {
    reason = e.what();
  }
  std::lock_guard<std::mutex> lk(mu);
  {
    // Forgotten before the connection's thread closes `fd`, also while stopping: another
    // watcher's thread (a kBye's kLeft) must not write to the number once it is reused.
    std::lock_guard<std::mutex> wl(*write_mu[rank]);
    watch_fd[rank] = -1;
  }
  if (stopping.load()) {
    return;
  }
  // A frozen rank that wakes up finds its watch connection closed and stops as well.
  ::shutdown(fd, SHUT_RDWR);
  if (bye[rank] || all_done_sent) {
    return;
  }
  lost[rank] = 1;
  for (int r = 0; r < world; ++r) {
    if (r != rank) {
      send_to_watcher(r, wire::kLost, rank, reason);
    }
  }
  maybe_all_done();
}

// --- client -----------------------------------------------------------------------------------

struct StoreClient::Impl {
  std::string host;
  int port = 0, rank = 0, world = 0;
  std::string token;
  std::string where;  // "host:port"
  double heartbeat_s = 15;
  int fd = -1;
  int watch_fd = -1;
  std::mutex mu;  // one request at a time on fd
  std::thread watcher;
  std::mutex wmu;
  std::condition_variable wcv;
  std::mutex watch_write_mu;  // pings and the goodbye share watch_fd
  bool finishing = false, all_bye = false, watch_closed = false;

  int connect_and_hello(uint8_t role, double timeout_s);
  int handshake(int fd, uint8_t role, Clock::time_point deadline);
};

// Returns the authenticated socket, or -1 when the store closed it before answering (it drops
// the oldest unauthenticated connection when too many wait: try again).
int StoreClient::Impl::handshake(int fd, uint8_t role, Clock::time_point deadline) {
  wire::Challenge c{};
  bool got = false;
  try {
    got = detail::recv_all(fd, &c, sizeof c, deadline, /*eof_ok=*/true);
  } catch (const IOError&) {
    return -1;  // reset or closed mid-challenge
  }
  if (!got) {
    return -1;
  }
  try {
    wire::check_challenge(c);
  } catch (const ValueError& e) {
    TESSERA_FAIL(IOError, "the server at {} is not a Tessera rendezvous store: {}", where,
                 e.what());
  }
  const wire::Hello h = wire::make_hello(c, token, rank, static_cast<uint32_t>(world), role);
  detail::send_all(fd, &h, sizeof h);
  wire::Accept a{};
  try {
    got = detail::recv_all(fd, &a, sizeof a, deadline, true);
  } catch (const IOError&) {
    return -1;
  }
  if (!got) {
    return -1;
  }
  wire::check_accept(a, token, c, h, where, rank);
  Frame f;
  got = read_frame(fd, f, deadline, fmt::format("the rendezvous store at {}", where));
  TESSERA_EXPECTS(got, IOError,
                  "the rendezvous store at {} closed the connection of rank {} without a reply",
                  where, rank);
  TESSERA_EXPECTS(f.op != wire::kErr, ValueError, "the rendezvous store at {} refused rank {}: {}",
                  where, rank, text_of(f.value));
  TESSERA_EXPECTS(f.op == wire::kOk, IOError, "the server at {} answered hello with operation {}",
                  where, f.op);
  return fd;
}

int StoreClient::Impl::connect_and_hello(uint8_t role, double timeout_s) {
  const auto deadline = Clock::now() + detail::seconds(timeout_s);
  for (;;) {
    const int fd = detail::connect_retry(host, port, deadline,
                                         fmt::format("the rendezvous store at {} (hosted by rank "
                                                     "0; is rank 0 running?)",
                                                     where),
                                         0);
    int ok = -1;
    try {
      ok = handshake(fd, role, deadline);
    } catch (const TimeoutError& e) {
      ::close(fd);
      throw TimeoutError(fmt::format("rank {} connected to the rendezvous store at {} (hosted by "
                                     "rank 0), which did not complete the handshake before the "
                                     "deadline (is rank 0 stopped, or not a Tessera store?): {}",
                                     rank, where, e.what()),
                         0);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (ok >= 0) {
      return ok;
    }
    ::close(fd);
    if (Clock::now() >= deadline) {
      throw TimeoutError(fmt::format("the rendezvous store at {} kept closing the connection of "
                                     "rank {} before the handshake ended (flooded?)",
                                     where, rank),
                         0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

StoreClient::StoreClient(const std::string& host, int port, int rank, int world_size,
                         const std::string& token, double timeout_s, double heartbeat_s)
    : impl_(std::make_unique<Impl>()) {
  TESSERA_EXPECTS(heartbeat_s > 0, ValueError,
                  "store client: heartbeat timeout {} s is not "
                  "positive",
                  heartbeat_s);
  impl_->host = host;
  impl_->port = port;
  impl_->rank = rank;
  impl_->world = world_size;
  impl_->token = token;
  impl_->heartbeat_s = heartbeat_s;
  impl_->where = fmt::format("{}:{}", host, port);
  impl_->fd = impl_->connect_and_hello(wire::kRoleClient, timeout_s);
}

StoreClient::~StoreClient() {
  {
    std::lock_guard<std::mutex> lk(impl_->wmu);
    impl_->finishing = true;
  }
  if (impl_->watch_fd >= 0) {
    ::shutdown(impl_->watch_fd, SHUT_RDWR);
  }
  if (impl_->watcher.joinable()) {
    impl_->watcher.join();
  }
  if (impl_->watch_fd >= 0) {
    ::close(impl_->watch_fd);
  }
  if (impl_->fd >= 0) {
    ::close(impl_->fd);
  }
}

void StoreClient::set(const std::string& key, ByteView value) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  TESSERA_EXPECTS(impl_->fd >= 0, IOError,
                  "rank {}: the connection to the rendezvous store at {} was dropped after an "
                  "earlier request failed",
                  impl_->rank, impl_->where);
  write_frame(impl_->fd, wire::kSet, impl_->rank, key, value);
  Frame f;
  bool got = false;
  try {
    got = read_frame(impl_->fd, f, Clock::now() + std::chrono::seconds(60),
                     "the rendezvous store at " + impl_->where);
  } catch (const TimeoutError& e) {
    ::close(impl_->fd);  // a late answer would be read as the reply to the next request
    impl_->fd = -1;
    throw TimeoutError(fmt::format("rank {} got no answer from the rendezvous store at {} (rank "
                                   "0) for 60 s while storing '{}'; is rank 0 stopped? {}",
                                   impl_->rank, impl_->where, key, e.what()),
                       0);
  }
  TESSERA_EXPECTS(got && f.op == wire::kOk, IOError,
                  "the rendezvous store at {} failed to store '{}' for rank {}{}{}", impl_->where,
                  key, impl_->rank, got ? ": " : "", got ? text_of(f.value) : "");
}

Bytes StoreClient::get(const std::string& key, double timeout_s, const std::string& waiting_for,
                       int peer) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  // Saturated as detail::seconds saturates (inf: no deadline; the cast of inf is undefined).
  const uint64_t ms = static_cast<uint64_t>(std::min(timeout_s, 1e9) * 1000);
  TESSERA_EXPECTS(impl_->fd >= 0, IOError,
                  "rank {}: the connection to the rendezvous store at {} was dropped after an "
                  "earlier request failed",
                  impl_->rank, impl_->where);
  write_frame(impl_->fd, wire::kGet, impl_->rank, key, ByteView(&ms, 8));
  Frame f;
  bool got = false;
  try {
    got = read_frame(impl_->fd, f, Clock::now() + detail::seconds(timeout_s + 10),
                     "the rendezvous store at " + impl_->where);
  } catch (const TimeoutError& e) {
    // The store did not answer at all (its own deadline is 10 s earlier): a late answer would be
    // read as the reply to the next request, so the connection goes.
    ::close(impl_->fd);
    impl_->fd = -1;
    throw TimeoutError(
        fmt::format("rank {} got no answer from the rendezvous store at {} (rank "
                    "0) while waiting for {} (key '{}'); is rank 0 stopped? {}",
                    impl_->rank, impl_->where,
                    waiting_for.empty() ? "a rendezvous key" : waiting_for, key, e.what()),
        0);
  }
  if (!got) {
    throw PeerLostError(
        fmt::format("the rendezvous store at {} (rank 0) closed the connection", impl_->where), 0);
  }
  if (f.op == wire::kOk) {
    return std::move(f.value);
  }
  const std::string msg = text_of(f.value);
  if (msg == "timeout") {
    throw TimeoutError(
        fmt::format("rank {} timed out after {:.1f} s waiting for {} (key '{}' in "
                    "the rendezvous store at {}){}",
                    impl_->rank, timeout_s, waiting_for.empty() ? "a rendezvous key" : waiting_for,
                    key, impl_->where,
                    peer >= 0 ? fmt::format("; rank {} never showed up", peer) : ""),
        peer);
  }
  TESSERA_FAIL(IOError, "the rendezvous store at {} failed to read '{}': {}", impl_->where, key,
               msg);
}

void StoreClient::watch(LostCallback on_lost, LostCallback on_left) {
  TESSERA_ASSERT(impl_->watch_fd < 0, "watch() called twice");
  impl_->watch_fd = impl_->connect_and_hello(wire::kRoleWatch, 60);
  Impl* im = impl_.get();
  impl_->watcher = std::thread([im, on_lost = std::move(on_lost), on_left = std::move(on_left)] {
    std::string why = "the rendezvous store (hosted by rank 0) closed its connection";
    const auto every = detail::seconds(ping_interval(im->heartbeat_s));
    const auto silence = detail::seconds(im->heartbeat_s);
    auto heard = Clock::now();
    auto next_ping = heard;
    try {
      for (;;) {
        auto now = Clock::now();
        if (now >= next_ping) {
          std::lock_guard<std::mutex> wl(im->watch_write_mu);
          write_text(im->watch_fd, wire::kPing, im->rank, "");
          next_ping = now + every;
        }
        if (now >= heard + silence) {
          why = fmt::format(
              "rank 0, which hosts the rendezvous store, sent no heartbeat for {:.0f} s (frozen, "
              "e.g. stopped with SIGSTOP, or its host is unreachable)",
              im->heartbeat_s);
          break;
        }
        pollfd p{im->watch_fd, POLLIN, 0};
        const int r = ::poll(&p, 1, detail::ms_until(std::min(next_ping, heard + silence)));
        if (r <= 0) {
          continue;
        }
        Frame f;
        if (!read_frame(im->watch_fd, f, Clock::now() + silence, "the rendezvous store")) {
          break;
        }
        heard = Clock::now();
        if (f.op == wire::kLost) {
          bool finishing = false;
          {
            std::lock_guard<std::mutex> lk(im->wmu);
            finishing = im->finishing;
          }
          if (!finishing) {  // after finish() a loss is no longer reported (rendezvous.hpp)
            on_lost(f.rank, text_of(f.value));
          }
        } else if (f.op == wire::kLeft) {
          if (on_left) {
            on_left(f.rank, "");
          }
        } else if (f.op == wire::kAllBye) {
          std::lock_guard<std::mutex> lk(im->wmu);
          im->all_bye = true;
          im->wcv.notify_all();
        }
      }
    } catch (const std::exception& e) {
      why += std::string(": ") + e.what();
    }
    bool report;
    {
      std::lock_guard<std::mutex> lk(im->wmu);
      im->watch_closed = true;
      report = !im->finishing;
      im->wcv.notify_all();
    }
    if (report && im->rank != 0) {
      on_lost(0, why);
    }
  });
}

bool StoreClient::finish(double timeout_s) {
  std::unique_lock<std::mutex> lk(impl_->wmu);
  impl_->finishing = true;
  if (impl_->watch_fd < 0) {
    return true;
  }
  try {
    std::lock_guard<std::mutex> wl(impl_->watch_write_mu);
    write_frame(impl_->watch_fd, wire::kBye, impl_->rank, "", ByteView());
  } catch (const std::exception&) {
    return false;
  }
  return impl_->wcv.wait_for(lk, detail::seconds(timeout_s), [&] {
    return impl_->all_bye || impl_->watch_closed;
  }) && impl_->all_bye;
}

std::string store_bind_address(const LaunchEnv& env) {
  if (const char* b = env_or_null("TESSERA_STORE_BIND")) {
    return b;
  }
  return env.local_world_size >= env.world_size ? "127.0.0.1" : env.master_addr;
}

Rendezvous rendezvous(const LaunchEnv& given, double timeout_s, double heartbeat_s) {
  LaunchEnv env = given;
  if (env.world_size == 1 && env.job_token.empty()) {
    // A world of one that no launcher started (e.g. a UCX transport asked for in a plain
    // process): no other rank joins, so a fresh secret serves, and without MASTER_PORT any free
    // port (29500 may be another job's).
    env.job_token = generate_job_token();
    if (env_or_null("MASTER_PORT") == nullptr && !(env.store_socket && env.store_socket->valid())) {
      env.store_socket = std::make_shared<PortReservation>(store_bind_address(env));
      env.master_port = env.store_socket->port();
    }
  }
  Rendezvous rv;
  rv.env = env;
  const std::string bind = store_bind_address(env);
  // Every rank on this host: the store listens on loopback only, and everyone connects there
  // (MASTER_ADDR may name this host by an address the store does not listen on).
  const bool local =
      env.local_world_size >= env.world_size && env_or_null("TESSERA_STORE_BIND") == nullptr;
  const std::string connect_to = local ? std::string("127.0.0.1") : env.master_addr;
  if (env.rank == 0) {
    PortReservation reserved;
    if (env.store_socket && env.store_socket->valid()) {
      reserved = std::move(*env.store_socket);
    } else {
      reserved = inherited_store_socket(env.master_port);
    }
    if (reserved.valid() && reserved.port() == env.master_port &&
        reserved.address() == resolve_ipv4(bind, "the store's bind address")) {
      rv.server = std::make_unique<StoreServer>(std::move(reserved), env.world_size, env.job_token,
                                                bind, heartbeat_s);
    } else {
      // Bound elsewhere (TESSERA_STORE_BIND changed after the launcher read it): the store binds
      // its own socket, beside the reservation, which holds the port until then.
      rv.server = std::make_unique<StoreServer>(env.master_port, env.world_size, env.job_token,
                                                bind, heartbeat_s);
    }
  }
  rv.client = std::make_unique<StoreClient>(connect_to, env.master_port, env.rank, env.world_size,
                                            env.job_token, timeout_s, heartbeat_s);
  return rv;
}

}  // namespace tessera::transport
