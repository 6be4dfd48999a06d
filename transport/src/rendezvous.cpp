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
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "socket_util.hpp"

namespace tessera::transport {

using detail::Clock;

// --- environment ------------------------------------------------------------------------------

namespace {

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
  if (const char* t = env_or_null("TESSERA_JOB_TOKEN")) {
    e.job_token = t;
  } else if (const char* t = env_or_null("TORCHELASTIC_RUN_ID")) {
    e.job_token = std::string("torchelastic:") + t;
  } else if (const char* j = env_or_null("SLURM_JOB_ID")) {
    const char* s = env_or_null("SLURM_STEP_ID");
    e.job_token = std::string("slurm:") + j + "." + (s ? s : "0");
  } else if (const char* n = env_or_null("PMIX_NAMESPACE")) {
    e.job_token = std::string("pmix:") + n;
  }
  TESSERA_EXPECTS(e.world_size == 1 || !e.job_token.empty(), ValueError,
                  "no job token for a world of {} ranks: set TESSERA_JOB_TOKEN to the same "
                  "secret on every rank (`tessera launch` sets it)",
                  e.world_size);
  return e;
}

std::string generate_job_token() {
  std::random_device rd;
  std::string s;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    uint32_t x = rd();
    for (int k = 0; k < 4; ++k) {
      s += hex[(x >> (8 * k + 4)) & 15];
      s += hex[(x >> (8 * k)) & 15];
    }
  }
  return s;
}

// --- wire format ------------------------------------------------------------------------------
// Every message: a 24-byte header, then key_len bytes of key and val_len bytes of value.
namespace {

constexpr uint32_t kMagic = 0x54535356;  // "TSSV"
constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = 64ull << 20;

enum Op : uint8_t {
  kHello = 1,   // key = token, value = [u32 world][u8 role]
  kSet = 2,     // key, value
  kGet = 3,     // key, value = u64 timeout in ms
  kOk = 4,      // value = result
  kErr = 5,     // value = message
  kLost = 6,    // rank = lost rank, value = reason
  kBye = 7,     // finishing cleanly
  kAllBye = 8,  // every rank finished or was lost
  kLeft = 9,    // rank = a rank that said goodbye (others stop waiting for it after a grace)
};
enum Role : uint8_t { kRoleClient = 0, kRoleWatch = 1 };

struct Frame {
  uint8_t op = 0;
  int32_t rank = -1;
  std::string key;
  Bytes value;
};

#pragma pack(push, 1)
struct Header {
  uint32_t magic;
  uint8_t version;
  uint8_t op;
  uint16_t reserved;
  int32_t rank;
  uint32_t key_len;
  uint64_t val_len;
};
#pragma pack(pop)
static_assert(sizeof(Header) == 24);

void write_frame(int fd, uint8_t op, int32_t rank, const std::string& key, ByteView value) {
  Header h{kMagic, kVersion, op, 0, rank, static_cast<uint32_t>(key.size()), value.size};
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
  Header h{};
  if (!detail::recv_all(fd, &h, sizeof h, deadline, /*eof_ok=*/true)) {
    return false;
  }
  TESSERA_EXPECTS(h.magic == kMagic, ValueError,
                  "malformed message from {}: bad magic 0x{:08x} (not a Tessera rendezvous "
                  "peer?)",
                  who, h.magic);
  TESSERA_EXPECTS(h.version == kVersion, ValueError,
                  "malformed message from {}: protocol version {} (expected {})", who, h.version,
                  kVersion);
  TESSERA_EXPECTS(h.op >= kHello && h.op <= kLeft, ValueError,
                  "malformed message from {}: unknown operation {}", who, h.op);
  TESSERA_EXPECTS(h.key_len <= kMaxKey && h.val_len <= kMaxValue, ValueError,
                  "malformed message from {}: key of {} bytes / value of {} bytes exceeds the "
                  "limit ({} / {})",
                  who, h.key_len, h.val_len, kMaxKey, kMaxValue);
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

bool token_equal(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string text_of(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

}  // namespace

// --- server -----------------------------------------------------------------------------------

struct StoreServer::Impl {
  int listen_fd = -1;
  int world = 0;
  std::string token;
  std::atomic<bool> stopping{false};
  std::thread acceptor;

  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Bytes> kv;
  std::vector<std::thread> threads;
  std::vector<int> conn_fds;
  // Watch connections: fd per rank (-1: none), and who said goodbye or was lost.
  std::vector<int> watch_fd;
  std::vector<char> bye, lost, joined;
  std::vector<std::unique_ptr<std::mutex>> write_mu;
  bool all_done_sent = false;

  void serve(int fd, std::string peer_name);
  void serve_watch(int fd, int rank);
  void maybe_all_done();                                                           // mu held
  void send_to_watcher(int r, uint8_t op, int32_t rank, const std::string& text);  // mu held
};

StoreServer::StoreServer(int port, int world_size, std::string token)
    : impl_(std::make_unique<Impl>()) {
  TESSERA_EXPECTS(world_size >= 1, ValueError, "store: world size {} < 1", world_size);
  TESSERA_EXPECTS(!token.empty(), ValueError, "store: empty job token");
  impl_->world = world_size;
  impl_->token = std::move(token);
  impl_->watch_fd.assign(world_size, -1);
  impl_->bye.assign(world_size, 0);
  impl_->lost.assign(world_size, 0);
  impl_->joined.assign(world_size, 0);
  for (int i = 0; i < world_size; ++i) {
    impl_->write_mu.push_back(std::make_unique<std::mutex>());
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TESSERA_EXPECTS(fd >= 0, IOError, "store: socket() failed: {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0) {
    const int err = errno;
    ::close(fd);
    TESSERA_FAIL(IOError, "rank 0 could not host the rendezvous store on port {}: {}", port,
                 std::strerror(err));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  impl_->listen_fd = fd;
  Impl* im = impl_.get();
  impl_->acceptor = std::thread([im] {
    while (!im->stopping.load()) {
      pollfd p{im->listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) {
        continue;
      }
      sockaddr_in peer{};
      socklen_t pl = sizeof peer;
      const int c = ::accept4(im->listen_fd, reinterpret_cast<sockaddr*>(&peer), &pl, SOCK_CLOEXEC);
      if (c < 0) {
        continue;
      }
      detail::set_keepalive(c);
      char buf[INET_ADDRSTRLEN] = {0};
      ::inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof buf);
      std::string name = fmt::format("{}:{}", buf, ntohs(peer.sin_port));
      std::lock_guard<std::mutex> lk(im->mu);
      if (im->stopping.load()) {
        ::close(c);
        break;
      }
      im->conn_fds.push_back(c);
      im->threads.emplace_back([im, c, name] { im->serve(c, name); });
    }
  });
}

StoreServer::~StoreServer() {
  stop();
}

void StoreServer::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) {
    return;
  }
  if (impl_->acceptor.joinable()) {
    impl_->acceptor.join();
  }
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    for (int fd : impl_->conn_fds) {
      ::shutdown(fd, SHUT_RDWR);
    }
    threads.swap(impl_->threads);
    impl_->cv.notify_all();
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int fd : impl_->conn_fds) {
    ::close(fd);
  }
  ::close(impl_->listen_fd);
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
      send_to_watcher(r, kAllBye, -1, "");
    }
  }
}

void StoreServer::Impl::serve(int fd, std::string peer_name) {
  // A connection that does not say a valid hello within the deadline is dropped.
  Frame f;
  int rank = -1;
  try {
    if (!read_frame(fd, f, Clock::now() + std::chrono::seconds(30), peer_name)) {
      return;
    }
    TESSERA_EXPECTS(f.op == kHello, ValueError,
                    "malformed message from {}: expected hello, got operation {}", peer_name, f.op);
    TESSERA_EXPECTS(token_equal(f.key, token), ValueError,
                    "job token mismatch from {} (claiming rank {}): it belongs to another job",
                    peer_name, f.rank);
    TESSERA_EXPECTS(f.value.size() == 5, ValueError,
                    "malformed hello from {}: {} value bytes, expected 5", peer_name,
                    f.value.size());
    uint32_t w;
    std::memcpy(&w, f.value.data(), 4);
    const uint8_t role = f.value[4];
    TESSERA_EXPECTS(static_cast<int>(w) == world, ValueError,
                    "{} (rank {}) believes the world has {} ranks, the store was started for {}",
                    peer_name, f.rank, w, world);
    TESSERA_EXPECTS(f.rank >= 0 && f.rank < world, ValueError, "{} claims rank {}, outside [0, {})",
                    peer_name, f.rank, world);
    TESSERA_EXPECTS(role == kRoleClient || role == kRoleWatch, ValueError,
                    "malformed hello from {}: role {}", peer_name, role);
    rank = f.rank;
    if (role == kRoleWatch) {
      {
        std::lock_guard<std::mutex> lk(mu);
        TESSERA_EXPECTS(watch_fd[rank] < 0 && !bye[rank] && !lost[rank], ValueError,
                        "{} claims rank {}, which has already joined", peer_name, rank);
        watch_fd[rank] = fd;
        joined[rank] = 1;
      }
      write_text(fd, kOk, -1, "");
      serve_watch(fd, rank);
      return;
    }
    write_text(fd, kOk, -1, "");
    const std::string who = fmt::format("rank {} at {}", rank, peer_name);
    for (;;) {
      Frame q;
      if (!read_frame(fd, q, Clock::time_point::max(), who)) {
        return;
      }
      if (q.op == kSet) {
        {
          std::lock_guard<std::mutex> lk(mu);
          kv[q.key] = std::move(q.value);
          cv.notify_all();
        }
        write_text(fd, kOk, -1, "");
      } else if (q.op == kGet) {
        TESSERA_EXPECTS(q.value.size() == 8, ValueError, "malformed get from {}", who);
        uint64_t ms;
        std::memcpy(&ms, q.value.data(), 8);
        const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
        Bytes result;
        bool found = false;
        {
          std::unique_lock<std::mutex> lk(mu);
          for (;;) {
            auto it = kv.find(q.key);
            if (it != kv.end()) {
              result = it->second;
              found = true;
              break;
            }
            if (stopping.load() || cv.wait_until(lk, deadline) == std::cv_status::timeout) {
              it = kv.find(q.key);
              if (it != kv.end()) {
                result = it->second;
                found = true;
              }
              break;
            }
          }
        }
        if (found) {
          write_frame(fd, kOk, -1, "", result);
        } else {
          write_text(fd, kErr, -1, "timeout");
        }
      } else {
        TESSERA_FAIL(ValueError, "malformed message from {}: unexpected operation {}", who, q.op);
      }
    }
  } catch (const std::exception& e) {
    if (stopping.load()) {
      return;
    }
    // Tell the peer why, then drop it; the store keeps serving everyone else.
    try {
      write_text(fd, kErr, -1, e.what());
    } catch (...) {
    }
    fmt::print(stderr, "[tessera] rendezvous store: refused {}: {}\n", peer_name, e.what());
    ::shutdown(fd, SHUT_RDWR);
  }
}

void StoreServer::Impl::serve_watch(int fd, int rank) {
  const std::string who = fmt::format("rank {}", rank);
  std::string reason = "its connection to the rendezvous store closed (process died?)";
  try {
    for (;;) {
      Frame f;
      if (!read_frame(fd, f, Clock::time_point::max(), who)) {
        break;
      }
      if (f.op == kBye) {
        std::lock_guard<std::mutex> lk(mu);
        bye[rank] = 1;
        for (int r = 0; r < world; ++r) {
          if (r != rank && !bye[r]) {
            send_to_watcher(r, kLeft, rank, "");
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
  if (stopping.load()) {
    return;
  }
  std::lock_guard<std::mutex> lk(mu);
  watch_fd[rank] = -1;
  if (bye[rank] || all_done_sent) {
    return;
  }
  lost[rank] = 1;
  for (int r = 0; r < world; ++r) {
    if (r != rank) {
      send_to_watcher(r, kLost, rank, reason);
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
  int fd = -1;
  int watch_fd = -1;
  std::mutex mu;  // one request at a time on fd
  std::thread watcher;
  std::mutex wmu;
  std::condition_variable wcv;
  bool finishing = false, all_bye = false, watch_closed = false;

  int connect_and_hello(uint8_t role, double timeout_s);
};

int StoreClient::Impl::connect_and_hello(uint8_t role, double timeout_s) {
  const auto deadline = Clock::now() + detail::seconds(timeout_s);
  const int fd = detail::connect_retry(host, port, deadline,
                                       fmt::format("the rendezvous store at {} (hosted by rank 0; "
                                                   "is rank 0 running?)",
                                                   where),
                                       0);
  try {
    uint8_t v[5];
    const uint32_t w = static_cast<uint32_t>(world);
    std::memcpy(v, &w, 4);
    v[4] = role;
    write_frame(fd, kHello, rank, token, ByteView(v, 5));
    Frame f;
    const std::string who = fmt::format("the server at {}", where);
    bool got = false;
    try {
      got = read_frame(fd, f, deadline, who);
    } catch (const ValueError& e) {
      TESSERA_FAIL(IOError, "the server at {} is not a Tessera rendezvous store: {}", where,
                   e.what());
    }
    TESSERA_EXPECTS(got, IOError,
                    "the rendezvous store at {} closed the connection of rank {} without a reply",
                    where, rank);
    TESSERA_EXPECTS(f.op != kErr, ValueError, "the rendezvous store at {} refused rank {}: {}",
                    where, rank, text_of(f.value));
    TESSERA_EXPECTS(f.op == kOk, IOError, "the server at {} answered hello with operation {}",
                    where, f.op);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

StoreClient::StoreClient(const std::string& host, int port, int rank, int world_size,
                         const std::string& token, double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = host;
  impl_->port = port;
  impl_->rank = rank;
  impl_->world = world_size;
  impl_->token = token;
  impl_->where = fmt::format("{}:{}", host, port);
  impl_->fd = impl_->connect_and_hello(kRoleClient, timeout_s);
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
  write_frame(impl_->fd, kSet, impl_->rank, key, value);
  Frame f;
  const bool got = read_frame(impl_->fd, f, Clock::now() + std::chrono::seconds(60),
                              "the rendezvous store at " + impl_->where);
  TESSERA_EXPECTS(got && f.op == kOk, IOError,
                  "the rendezvous store at {} failed to store '{}' for rank {}{}{}", impl_->where,
                  key, impl_->rank, got ? ": " : "", got ? text_of(f.value) : "");
}

Bytes StoreClient::get(const std::string& key, double timeout_s, const std::string& waiting_for,
                       int peer) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const uint64_t ms = static_cast<uint64_t>(timeout_s * 1000);
  write_frame(impl_->fd, kGet, impl_->rank, key, ByteView(&ms, 8));
  Frame f;
  const bool got = read_frame(impl_->fd, f, Clock::now() + detail::seconds(timeout_s + 10),
                              "the rendezvous store at " + impl_->where);
  if (!got) {
    throw PeerLostError(
        fmt::format("the rendezvous store at {} (rank 0) closed the connection", impl_->where), 0);
  }
  if (f.op == kOk) {
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
  impl_->watch_fd = impl_->connect_and_hello(kRoleWatch, 60);
  Impl* im = impl_.get();
  impl_->watcher = std::thread([im, on_lost = std::move(on_lost), on_left = std::move(on_left)] {
    std::string why = "the rendezvous store (hosted by rank 0) closed its connection";
    try {
      for (;;) {
        Frame f;
        if (!read_frame(im->watch_fd, f, Clock::time_point::max(), "the rendezvous store")) {
          break;
        }
        if (f.op == kLost) {
          on_lost(f.rank, text_of(f.value));
        } else if (f.op == kLeft) {
          if (on_left) {
            on_left(f.rank, "");
          }
        } else if (f.op == kAllBye) {
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
    write_frame(impl_->watch_fd, kBye, impl_->rank, "", ByteView());
  } catch (const std::exception&) {
    return false;
  }
  return impl_->wcv.wait_for(lk, detail::seconds(timeout_s), [&] {
    return impl_->all_bye || impl_->watch_closed;
  }) && impl_->all_bye;
}

Rendezvous rendezvous(const LaunchEnv& env, double timeout_s) {
  Rendezvous rv;
  rv.env = env;
  if (env.rank == 0) {
    rv.server = std::make_unique<StoreServer>(env.master_port, env.world_size, env.job_token);
  }
  rv.client = std::make_unique<StoreClient>(env.master_addr, env.master_port, env.rank,
                                            env.world_size, env.job_token, timeout_s);
  return rv;
}

}  // namespace tessera::transport
