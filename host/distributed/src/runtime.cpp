// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/transport/rendezvous.hpp"

namespace tessera::dist {

namespace detail {

void Reader::need(size_t k) const {
  TESSERA_EXPECTS(o_ + k <= n_, ValueError, "dist: malformed {} message ({} bytes, needed {} more)",
                  what_, n_, o_ + k - n_);
}

[[noreturn]] void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const transport::PeerLostError& e) {
    // One wording whatever layer noticed it first (store watch, endpoint error, failed get).
    const std::string what = e.what();
    const std::string lost = fmt::format("rank {} was lost", e.peer());
    if (e.peer() >= 0 && what.find(lost) == std::string::npos &&
        what.find("left the job") == std::string::npos) {
      throw transport::PeerLostError(fmt::format("{}: {} ({})", context, lost, what), e.peer());
    }
    throw transport::PeerLostError(context + ": " + what, e.peer());
  } catch (const transport::TimeoutError& e) {
    throw transport::TimeoutError(context + ": " + e.what(), e.peer());
  } catch (const transport::RemoteError& e) {
    throw transport::RemoteError(context + ": " + e.what());
  }
}

std::shared_ptr<TensorStore> RuntimeState::tensor(uint64_t id, int from) {
  std::lock_guard<std::mutex> lk(mu);
  auto it = tensors.find(id);
  TESSERA_EXPECTS(it != tensors.end(), ValueError,
                  "rank {} has no DistTensor with id {} (asked by rank {}): tensors must be "
                  "created collectively, in the same order, on every rank",
                  rank, id, from);
  return it->second;
}

std::shared_lock<std::shared_mutex> RuntimeState::serving(int from) {
  std::shared_lock<std::shared_mutex> lk(serve_mu);
  if (closing) {
    TESSERA_FAIL(Error, "rank {} is shutting down and no longer serves requests (from rank {})",
                 rank, from);
  }
  return lk;
}

std::shared_ptr<const SampleGraph> RuntimeState::graph(uint64_t id, int from) {
  std::lock_guard<std::mutex> lk(mu);
  auto it = graphs.find(id);
  TESSERA_EXPECTS(it != graphs.end(), ValueError,
                  "rank {} has no DistGraph with id {} (asked by rank {})", rank, id, from);
  return it->second;
}

namespace {

// Index of a row this rank owns among its rows: validates that every requested row is ours.
int64_t own_index(const TensorStore& s, int64_t id, int me, int from) {
  if (id < s.lo || id >= s.hi) {
    TESSERA_FAIL(IndexError,
                 "DistTensor '{}': row {} requested by rank {} is not owned by rank {} "
                 "(it owns [{}, {}))",
                 s.name, id, from, me, s.lo, s.hi);
  }
  return id - s.lo;
}

// Answers a read of rows this rank owns. `repair`: the reader's one-sided copies kept failing
// their stamp check, so rows whose stamp does not match their bytes are re-stamped.
transport::Bytes serve_read(RuntimeState& st, int from, transport::ByteView payload, bool repair) {
  auto lk = st.serving(from);
  Reader r(payload, "read");
  auto s = st.tensor(r.get<uint64_t>(), from);
  const uint64_t n = r.get<uint64_t>();
  TESSERA_EXPECTS(r.left() == n * 8, ValueError, "dist: malformed read message from rank {}", from);
  const uint8_t* ids = r.take(n * 8);
  transport::Bytes out(n * s->row_bytes);
  const int me = st.rank;
  std::vector<int64_t> rel(n);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t id;
    std::memcpy(&id, ids + 8 * i, 8);
    rel[i] = own_index(*s, id, me, from);
  }
  if (s->dev) {
    // Device rows: one gather kernel into pinned staging, then the response.
    std::shared_lock<std::shared_mutex> rows_lk(s->rows_mu);
    gather_device_rows(*s, rel.data(), static_cast<int64_t>(n), out.data());
    return out;
  }
  const size_t rb = s->row_bytes;
  if (repair && s->stamps != nullptr) {
    std::unique_lock<std::shared_mutex> rows_lk(s->rows_mu);
    for (uint64_t i = 0; i < n; ++i) {
      const uint8_t* row = s->data + static_cast<size_t>(rel[i]) * rb;
      std::memcpy(out.data() + i * rb, row, rb);
      const uint64_t stamp = row_stamp(row, rb);
      if (s->stamps[rel[i]] != stamp) {
        s->stamps[rel[i]] = stamp;
      }
    }
    return out;
  }
  std::shared_lock<std::shared_mutex> rows_lk(s->rows_mu);
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + i * rb, s->data + static_cast<size_t>(rel[i]) * rb, rb);
  }
  return out;
}

transport::Bytes serve_write(RuntimeState& st, int from, transport::ByteView payload) {
  auto lk = st.serving(from);
  Reader r(payload, "write");
  auto s = st.tensor(r.get<uint64_t>(), from);
  const uint64_t n = r.get<uint64_t>();
  TESSERA_EXPECTS(r.left() == n * (8 + s->row_bytes), ValueError,
                  "dist: malformed write message from rank {}", from);
  const uint8_t* ids = r.take(n * 8);
  const uint8_t* rows = r.take(n * s->row_bytes);
  const int me = st.rank;
  TESSERA_EXPECTS(!s->mirror, ValueError,
                  "DistTensor '{}': rank {} holds a read-only device mirror of its rows; rank {} "
                  "may not write them (drop the mirror first)",
                  s->name, me, from);
  std::vector<int64_t> rel(n);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t id;
    std::memcpy(&id, ids + 8 * i, 8);
    rel[i] = own_index(*s, id, me, from);
  }
  const size_t rb = s->row_bytes;
  std::unique_lock<std::shared_mutex> rows_lk(s->rows_mu);
  if (s->dev) {
    scatter_device_rows(*s, rel.data(), static_cast<int64_t>(n), rows);
    return {};
  }
  const RowWrites bracket(*s);
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(s->data + static_cast<size_t>(rel[i]) * rb, rows + i * rb, rb);
    if (s->stamps != nullptr) {
      s->stamps[rel[i]] = row_stamp(rows + i * rb, rb);
    }
  }
  return {};
}

}  // namespace
}  // namespace detail

std::shared_ptr<Runtime> Runtime::create(const std::string& backend,
                                         const transport::Options& options) {
  return create(transport::create_transport(backend, options));
}

std::shared_ptr<Runtime> Runtime::create(std::unique_ptr<transport::Transport> t) {
  TESSERA_EXPECTS(t != nullptr, ValueError, "dist::Runtime: null transport");
  return std::shared_ptr<Runtime>(new Runtime(std::move(t)));
}

Runtime::Runtime(std::unique_ptr<transport::Transport> t)
    : state_(std::make_unique<detail::RuntimeState>()) {
  auto& st = *state_;
  st.t = std::move(t);
  st.rank = st.t->rank();
  const auto caps = st.t->capabilities();
  TESSERA_EXPECTS(caps.request_response && caps.collectives && caps.host_memory, ValueError,
                  "dist::Runtime: transport '{}' cannot serve a distributed store (it needs "
                  "host-memory collectives and request/response)",
                  st.t->name());
  const char* env = std::getenv("TESSERA_DIST_GET");
  const std::string mode = env && *env ? env : "auto";
  TESSERA_EXPECTS(mode == "auto" || mode == "0" || mode == "1", ValueError,
                  "TESSERA_DIST_GET='{}' must be auto, 1 (always one-sided gets) or 0 (never)",
                  mode);
  st.one_sided = caps.one_sided_get && mode != "0";
  st.min_get_bytes = mode == "auto" ? auto_min_get_bytes(caps.fabric) : 0;
  detail::RuntimeState* sp = &st;
  st.t->register_handler(detail::kMsgRead, [sp](int from, transport::ByteView p) {
    return detail::serve_read(*sp, from, p, false);
  });
  st.t->register_handler(detail::kMsgReadRepair, [sp](int from, transport::ByteView p) {
    return detail::serve_read(*sp, from, p, true);
  });
  st.t->register_handler(detail::kMsgWrite, [sp](int from, transport::ByteView p) {
    return detail::serve_write(*sp, from, p);
  });
  st.t->register_handler(detail::kMsgSample, [sp](int from, transport::ByteView p) {
    return detail::serve_sample(*sp, from, p);
  });
  const transport::CollectiveLabel label(*st.t, "dist::Runtime creation");
  st.t->barrier();  // every rank serves before anyone asks
}

Runtime::~Runtime() {
  auto& st = *state_;
  // A clean end: every rank is here, so nobody reads our rows any more. Skipped while unwinding
  // (a failing rank must not enter a collective its peers are not in); a barrier that fails
  // means a peer failed.
  bool clean = std::uncaught_exceptions() == 0;
  if (clean && st.t && st.t->world_size() > 1) {
    try {
      const transport::CollectiveLabel label(*st.t, "dist::Runtime shutdown");
      st.t->barrier();
    } catch (const std::exception&) {
      clean = false;
    }
  }
  if (!clean && st.t && st.t->world_size() > 1) {
    // This rank failed. Keep serving for a short grace period before freeing what peers read:
    // a peer blocked on our answer gets it, runs into the real failure itself (a lost rank is
    // reported to everyone within milliseconds) and names that rank instead of us.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  }
  {
    std::unique_lock<std::shared_mutex> serve(st.serve_mu);  // waits for running handlers
    st.closing = true;
    std::lock_guard<std::mutex> lk(st.mu);
    st.graphs.clear();
  }
  // The device transport first (it may still run work on device rows), then regions and remote
  // keys before the host transport.
  st.dt.reset();
  for (auto& [id, s] : st.tensors) {
    s->remotes.clear();
    s->region.reset();
  }
  for (auto& s : st.retired) {
    s->remotes.clear();
    s->region.reset();
  }
  st.t.reset();
  st.tensors.clear();
  st.by_name.clear();
  st.retired.clear();
}

int Runtime::rank() const {
  return state_->t->rank();
}
int Runtime::world_size() const {
  return state_->t->world_size();
}
transport::Transport& Runtime::transport() const {
  return *state_->t;
}
bool Runtime::one_sided_reads() const {
  return state_->one_sided;
}
size_t Runtime::min_get_bytes() const {
  return state_->min_get_bytes;
}

size_t auto_min_get_bytes(const std::string& fabric) {
  // Transports UCX_TLS may name: tcp; shared memory within a node; "self" (loopback, any).
  static const char* const kShm[] = {"posix", "sysv", "cma", "knem", "xpmem", "sm", "shm"};
  bool tcp = false, shm = false, other = fabric.empty();
  size_t b = 0;
  while (b <= fabric.size()) {
    size_t e = fabric.find(',', b);
    if (e == std::string::npos) e = fabric.size();
    std::string tl = fabric.substr(b, e - b);
    tl.erase(0, tl.find_first_not_of(" \t"));
    tl.erase(tl.find_last_not_of(" \t") + 1);
    if (tl == "tcp") {
      tcp = true;
    } else if (std::find(std::begin(kShm), std::end(kShm), tl) != std::end(kShm)) {
      shm = true;
    } else if (tl != "self" && !tl.empty()) {
      other = true;  // RDMA, "auto", a "^..." exclusion list, ...
    }
    b = e + 1;
  }
  if (other || tcp == shm) return 1024;  // RDMA, UCX's choice, or tcp and shared memory mixed
  return tcp ? 4096 : 256;
}
void Runtime::set_one_sided_reads(bool on) {
  state_->one_sided = on && state_->t->capabilities().one_sided_get;
  state_->min_get_bytes = 0;
}
void Runtime::barrier() {
  state_->t->barrier();
}

size_t Runtime::dropped_tensors_held() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return static_cast<size_t>(std::count_if(
      state_->retired.begin(), state_->retired.end(),
      [](const std::shared_ptr<detail::TensorStore>& s) { return s->handle.expired(); }));
}

void Runtime::attach_device_transport(std::unique_ptr<transport::Transport> t) {
  auto& st = *state_;
  TESSERA_EXPECTS(t != nullptr, ValueError,
                  "dist::Runtime::attach_device_transport: null transport");
  TESSERA_EXPECTS(!st.dt, ValueError,
                  "dist::Runtime: rank {} already has a device transport ('{}')", st.rank,
                  st.dt ? st.dt->name() : "");
  const auto caps = t->capabilities();
  TESSERA_EXPECTS(caps.device_memory && caps.collectives, ValueError,
                  "dist::Runtime::attach_device_transport: transport '{}' has no device-memory "
                  "collectives (use nccl)",
                  t->name());
  TESSERA_EXPECTS(t->rank() == st.t->rank() && t->world_size() == st.t->world_size(), ValueError,
                  "dist::Runtime::attach_device_transport: transport '{}' is rank {} of {} but the "
                  "runtime is rank {} of {}",
                  t->name(), t->rank(), t->world_size(), st.t->rank(), st.t->world_size());
  st.dt = std::move(t);
}

void Runtime::attach_device_transport(const std::string& backend) {
  auto& st = *state_;
  TESSERA_EXPECTS(!st.dt, ValueError,
                  "dist::Runtime: rank {} already has a device transport ('{}')", st.rank,
                  st.dt ? st.dt->name() : "");
  transport::LaunchEnv env = transport::detect_launch_env();
  TESSERA_EXPECTS(env.rank == st.t->rank() && env.world_size == st.t->world_size(), ValueError,
                  "dist::Runtime::attach_device_transport: the launcher environment ({}) says "
                  "rank {} of {} but the runtime is rank {} of {}",
                  env.source, env.rank, env.world_size, st.t->rank(), st.t->world_size());
  // The host transport's store keeps its port for its lifetime; the second store gets a port
  // rank 0 picks, agreed on over the host transport (every rank learns the same one). Rank 0
  // binds it at once, where its store listens, and the store listens on that socket
  // (LaunchEnv::store_socket): a port that was merely free when picked could be taken before
  // the store binds it, by any process's outgoing connection or bind to port 0. A rank 0 that
  // cannot bind one sends 0, so that every rank fails instead of waiting for a store.
  std::string reserve_error;
  int64_t port = 0;
  if (st.t->rank() == 0) {
    try {
      env.store_socket =
          std::make_shared<transport::PortReservation>(transport::store_bind_address(env));
      port = env.store_socket->port();
    } catch (const std::exception& e) {
      reserve_error = e.what();
    }
  }
  {
    const transport::CollectiveLabel label(*st.t, "attach_device_transport");
    st.t->all_reduce(&port, 1, transport::DType::i64, transport::ReduceOp::max);
  }
  TESSERA_EXPECTS(port > 0, IOError,
                  "rank {}: rank 0 could not bind a port for the device transport's rendezvous "
                  "store{}",
                  st.rank, reserve_error.empty() ? "" : ": " + reserve_error);
  env.master_port = static_cast<int>(port);
  attach_device_transport(transport::create_transport(backend, env, st.t->options()));
}

bool Runtime::has_device_transport() const {
  return static_cast<bool>(state_->dt);
}

transport::Transport& Runtime::device_transport() const {
  TESSERA_EXPECTS(state_->dt != nullptr, ValueError,
                  "dist::Runtime: rank {} has no device transport (call "
                  "Runtime::attach_device_transport first, e.g. with the nccl backend)",
                  state_->rank);
  return *state_->dt;
}

}  // namespace tessera::dist
