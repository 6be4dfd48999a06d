// SPDX-License-Identifier: Apache-2.0
// The 'ucx' transport: one UCP worker per rank, one endpoint per peer, tagged messages for
// collectives and requests, ucp_get on registered host memory for one-sided reads. The same code
// runs over tcp, shared memory (posix/sysv/cma) and verbs; UCX_TLS picks.
//
// Built as a module of its own (libtessera_transport_ucx.so) that ucx_loader.cpp loads when the
// first UCX transport is created: linking UCX into the library would load libucs, and with it
// UCX's memory hooks, into every process that merely imports tessera.
//
// Threads: a progress thread owns the worker's event loop (ucp_worker_progress, probing for
// incoming messages, sleeping on the worker's event fd); a handler thread runs request
// handlers. Every worker call holds worker_mu_ (the worker is SERIALIZED). Completions land in
// a mailbox (messages) or flip flags on ops, both guarded by mbox_mu_; waiters sleep on
// mbox_cv_ with a deadline and check the lost-peer table. Lock order: worker_mu_ -> mbox_mu_.
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../src/backends.hpp"
#include "../src/socket_util.hpp"
#include "tags.hpp"
#include "ucx_module.hpp"

/// Checks a UCS status; throws tessera::Error with the call text and UCX's status string.
#define TESSERA_UCX_TRY(call)                                                                  \
  do {                                                                                         \
    const ucs_status_t tessera_st_ = (call);                                                   \
    if (tessera_st_ != UCS_OK)                                                                 \
      throw ::tessera::Error(fmt::format("UCX call `{}` failed at {}:{}: {}", #call, __FILE__, \
                                         __LINE__, ucs_status_string(tessera_st_)));           \
  } while (0)

namespace tessera::transport::detail {

namespace {

using Clock = std::chrono::steady_clock;

using namespace ucx_tags;

class UcxTransport;

// A send, flush or other operation whose completion someone waits for.
struct Op {
  UcxTransport* t = nullptr;
  int peer = -1;
  bool done = false;  // guarded by mbox_mu_ once posted
  ucs_status_t status = UCS_OK;
  Bytes owned;  // the bytes being sent (kept alive until completion)
};

struct Rx {
  UcxTransport* t;
  uint64_t tag;
  Bytes data;
};

struct Incoming {
  int src;
  uint64_t req_id;
  Bytes payload;  // [u32 message id][body]
};

class UcxRegion;
class UcxRemote;
struct PeerCtx;

class UcxTransport final : public Transport {
 public:
  UcxTransport(const LaunchEnv& env, const Options& options);
  ~UcxTransport() override;

  std::string name() const override { return "ucx"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.collectives = c.request_response = c.one_sided_get = c.host_memory = true;
    c.detects_peer_loss = true;
    c.fabric = fabric_;
    return c;
  }

  void barrier() override;
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void all_gather(const void* send, size_t bytes, void* recv) override;
  void all_to_all_v(const void* send, const size_t* sc, const size_t* so, void* recv,
                    const size_t* rc, const size_t* ro) override;
  using Transport::all_gather;
  using Transport::all_to_all_v;

  void register_handler(MessageId id, Handler h) override { handlers_.set(id, std::move(h)); }
  PendingResponse request_async(int peer, MessageId id, ByteView payload) override;

  std::unique_ptr<MemoryRegion> register_memory(void* data, size_t bytes) override;
  std::unique_ptr<MemoryRegion> allocate_memory(size_t bytes) override;
  std::unique_ptr<RemoteMemory> attach(int owner, ByteView key) override;
  void get(const RemoteMemory& remote, const GetRange* ranges, size_t n) override;

  // Called from UCX callbacks and the watch thread.
  void deliver(uint64_t tag, Bytes&& data);
  void complete(Op* op, ucs_status_t st);
  void mark_lost(int peer, const std::string& reason);
  void mark_left(int peer);

  std::mutex worker_mu_;
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;

 private:
  void exchange(uint64_t seq, const CollectiveId& id, const void* send, const size_t* sc,
                const size_t* so, void* recv, const size_t* rc, const size_t* ro);
  std::shared_ptr<Op> post_send(int peer, uint64_t tag, Bytes&& data);
  Bytes take(uint64_t key, int peer, Clock::time_point deadline, const std::string& what);
  void wait_op(const std::shared_ptr<Op>& op, Clock::time_point deadline, const std::string& what);
  void check_peer(int peer, const char* what) const;
  [[noreturn]] void throw_lost(int peer, const std::string& what);  // mbox_mu_ held
  bool gone(int peer) const;                                        // mbox_mu_ held
  void wake();
  void progress_loop();
  void handler_loop();
  void init();
  void shutdown();
  bool shut_down_ = false;

  Rendezvous rv_;
  int rank_ = 0, world_ = 1;
  std::string fabric_;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::unique_ptr<PeerCtx>> peer_ctx_;
  bool peer_failure_by_ucx_ = true;  // false: only the store's watch detects lost ranks
  int efd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread progress_thread_;

  std::mutex mbox_mu_;
  std::condition_variable mbox_cv_;
  std::unordered_map<uint64_t, Bytes> mailbox_;
  std::vector<char> lost_;
  std::vector<std::string> lost_reason_;
  std::vector<Clock::time_point> left_at_;  // when a rank said goodbye (max: still here)
  static constexpr std::chrono::seconds kLeftGrace{3};
  bool finishing_ = false;

  HandlerTable handlers_;
  std::mutex hq_mu_;
  std::condition_variable hq_cv_;
  std::deque<Incoming> hq_;
  std::thread handler_thread_;

  uint64_t coll_seq_ = 0;
  std::atomic<uint64_t> next_req_{1};
};

// --- callbacks ----------------------------------------------------------------------------------

struct OpHolder {
  std::shared_ptr<Op> op;
};

void op_cb(void* request, ucs_status_t st, void* user_data) {
  auto* h = static_cast<OpHolder*>(user_data);
  h->op->t->complete(h->op.get(), st);
  delete h;
  ucp_request_free(request);
}

void recv_cb(void* request, ucs_status_t st, const ucp_tag_recv_info_t*, void* user_data) {
  auto* rx = static_cast<Rx*>(user_data);
  if (st == UCS_OK) {
    rx->t->deliver(rx->tag, std::move(rx->data));
  }
  delete rx;
  ucp_request_free(request);
}

struct PeerCtx {
  UcxTransport* t;
  int peer;
};

void ep_error_cb(void* arg, ucp_ep_h, ucs_status_t st) {
  auto* c = static_cast<PeerCtx*>(arg);
  c->t->mark_lost(c->peer,
                  fmt::format("UCX reported its endpoint failed ({})", ucs_status_string(st)));
}

// --- construction -------------------------------------------------------------------------------

UcxTransport::UcxTransport(const LaunchEnv& env, const Options& options)
    : Transport(options), rank_(env.rank), world_(env.world_size) {
  TESSERA_EXPECTS(world_ < (1 << 20), ValueError, "ucx: world size {} exceeds 2^20", world_);
  const char* tls = std::getenv("UCX_TLS");
  fabric_ = (tls && *tls) ? tls : "auto";
  lost_.assign(world_, 0);
  lost_reason_.assign(world_, "");
  left_at_.assign(world_, Clock::time_point::max());

  rv_ = rendezvous(env, options_.rendezvous_timeout_s, options_.heartbeat_timeout_s);
  rv_.client->watch([this](int r, const std::string& why) { mark_lost(r, why); },
                    [this](int r, const std::string&) { mark_left(r); });
  try {
    init();
  } catch (...) {
    // Say goodbye before leaving, so that (on rank 0) the store stays up until the other ranks
    // have run into their own deadlines and can report what they were waiting for.
    options_.op_timeout_s = options_.rendezvous_timeout_s;
    shutdown();
    throw;
  }
}

void UcxTransport::init() {
  ucp_config_t* config = nullptr;
  TESSERA_UCX_TRY(ucp_config_read(nullptr, nullptr, &config));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // TESSERA_UCX_PROGRESS=wakeup sleeps on the worker's event fd when idle; =poll (default)
  // does not ask UCX for wakeups, which keeps transports without events (cma, the zero-copy
  // shared-memory RMA) eligible, and spins briefly after activity then naps 200 us at a time.
  const char* pm = std::getenv("TESSERA_UCX_PROGRESS");
  const std::string progress_mode = (pm && *pm) ? pm : "poll";
  TESSERA_EXPECTS(progress_mode == "poll" || progress_mode == "wakeup", ValueError,
                  "TESSERA_UCX_PROGRESS='{}' must be 'poll' or 'wakeup'", progress_mode);
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  if (progress_mode == "wakeup") {
    params.features |= UCP_FEATURE_WAKEUP;
  }
  params.mt_workers_shared = 1;
  const ucs_status_t st = ucp_init(&params, config, &ctx_);
  ucp_config_release(config);
  TESSERA_EXPECTS(st == UCS_OK, Error, "rank {}: ucp_init failed ({}) with UCX_TLS={}", rank_,
                  ucs_status_string(st), fabric_);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  TESSERA_UCX_TRY(ucp_worker_create(ctx_, &wp, &worker_));
  if (progress_mode == "wakeup" && ucp_worker_get_efd(worker_, &efd_) != UCS_OK) {
    efd_ = -1;
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  TESSERA_EXPECTS(wake_fd_ >= 0, IOError, "eventfd failed: {}", std::strerror(errno));

  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  TESSERA_UCX_TRY(ucp_worker_get_address(worker_, &addr, &addr_len));
  rv_.client->set(fmt::format("ucx/addr/{}", rank_), ByteView(addr, addr_len));
  ucp_worker_release_address(worker_, addr);

  eps_.assign(world_, nullptr);
  for (int i = 1; i < world_; ++i) {
    const int p = (rank_ + i) % world_;
    const Bytes peer_addr =
        rv_.client->get(fmt::format("ucx/addr/{}", p), options_.rendezvous_timeout_s,
                        fmt::format("rank {}'s UCX worker address", p), p);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer_addr.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_error_cb;
    peer_ctx_.push_back(std::make_unique<PeerCtx>(PeerCtx{this, p}));
    ep.err_handler.arg = peer_ctx_.back().get();
    std::lock_guard<std::mutex> lk(worker_mu_);
    ucs_status_t es = UCS_ERR_UNREACHABLE;
    if (peer_failure_by_ucx_) {
      // Probe quietly: UCX logs an ERROR line when no transport supports the PEER mode.
      const ucs_log_level_t saved = ucs_global_opts.log_component.log_level;
      ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_FATAL;
      es = ucp_ep_create(worker_, &ep, &eps_[p]);
      ucs_global_opts.log_component.log_level = saved;
    }
    if (es == UCS_ERR_UNREACHABLE) {
      // Transports without peer-failure support (UCX 1.13 shared memory) refuse the PEER error
      // mode; connect without it and rely on the rendezvous store's watch to detect lost ranks.
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      es = ucp_ep_create(worker_, &ep, &eps_[p]);
      if (es == UCS_OK) {
        peer_failure_by_ucx_ = false;
      }
    }
    TESSERA_EXPECTS(es == UCS_OK, Error, "rank {}: creating the UCX endpoint to rank {} failed: {}",
                    rank_, p, ucs_status_string(es));
  }
  progress_thread_ = std::thread([this] { progress_loop(); });
  handler_thread_ = std::thread([this] { handler_loop(); });
  // Prove every endpoint works before anyone relies on it.
  const double saved = options_.op_timeout_s;
  options_.op_timeout_s = options_.rendezvous_timeout_s;
  barrier();
  options_.op_timeout_s = saved;
}

UcxTransport::~UcxTransport() {
  shutdown();
}

void UcxTransport::shutdown() {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lk(mbox_mu_);
    finishing_ = true;
  }
  // Wait until every rank is done (or lost) so nobody tears down while a peer reads from us.
  rv_.client->finish(std::min(options_.op_timeout_s, 60.0));
  {
    std::lock_guard<std::mutex> lk(hq_mu_);
    stop_ = true;
    hq_cv_.notify_all();
  }
  wake();
  if (handler_thread_.joinable()) {
    handler_thread_.join();
  }
  if (progress_thread_.joinable()) {
    progress_thread_.join();
  }
  if (worker_) {
    std::lock_guard<std::mutex> lk(worker_mu_);
    for (ucp_ep_h& ep : eps_) {
      if (!ep) {
        continue;
      }
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* req = ucp_ep_close_nbx(ep, &p);
      if (UCS_PTR_IS_PTR(req)) {
        const auto until = Clock::now() + std::chrono::seconds(2);
        while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < until) {
          ucp_worker_progress(worker_);
        }
        ucp_request_free(req);
      }
      ep = nullptr;
    }
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (ctx_) {
    ucp_cleanup(ctx_);
  }
  ctx_ = nullptr;
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
  }
  rv_.client.reset();
  rv_.server.reset();
}

// --- progress -----------------------------------------------------------------------------------

void UcxTransport::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t k = ::write(wake_fd_, &one, sizeof one);
}

constexpr timespec kNap{0, 200000};  // 200 us

void UcxTransport::progress_loop() {
  auto last_active = Clock::now();
  const auto spin = std::chrono::microseconds(efd_ >= 0 ? 50 : 2000);
  while (!stop_.load()) {
    bool sleep = false;
    {
      std::lock_guard<std::mutex> lk(worker_mu_);
      int events = 0;
      while (ucp_worker_progress(worker_) != 0) {
        ++events;
      }
      for (;;) {
        ucp_tag_recv_info_t info{};
        ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);
        if (!msg) {
          break;
        }
        ++events;
        auto* rx = new Rx{this, info.sender_tag, Bytes(info.length)};
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.recv = recv_cb;
        p.user_data = rx;
        void* req = ucp_tag_msg_recv_nbx(worker_, rx->data.empty() ? nullptr : rx->data.data(),
                                         rx->data.size(), msg, &p);
        if (req == nullptr) {
          deliver(rx->tag, std::move(rx->data));
          delete rx;
        } else if (UCS_PTR_IS_ERR(req)) {
          delete rx;
        }
      }
      const auto now = Clock::now();
      if (events) {
        last_active = now;
      }
      // Spin for a moment after activity (replies tend to follow requests), then sleep.
      sleep = events == 0 && now - last_active >= spin &&
              (efd_ < 0 || ucp_worker_arm(worker_) != UCS_ERR_BUSY);
    }
    if (!sleep) {
      std::this_thread::yield();  // lets threads that post operations take the lock
      continue;
    }
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {efd_, POLLIN, 0}};
    if (efd_ >= 0) {
      ::poll(fds, 2, 100);
    } else {
      ::ppoll(fds, 1, &kNap, nullptr);
    }
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t k = ::read(wake_fd_, &v, sizeof v);
      last_active = Clock::now();
    }
  }
}

void UcxTransport::deliver(uint64_t tag, Bytes&& data) {
  if (!valid_tag(tag, world_)) {
    return;  // not from a rank of this job: received (so UCX lets go of it) and dropped
  }
  if (tag_kind(tag) == kReq) {
    std::lock_guard<std::mutex> lk(hq_mu_);
    hq_.push_back(Incoming{tag_src(tag), tag_seq(tag), std::move(data)});
    hq_cv_.notify_one();
    return;
  }
  std::lock_guard<std::mutex> lk(mbox_mu_);
  mailbox_[tag] = std::move(data);
  mbox_cv_.notify_all();
}

void UcxTransport::complete(Op* op, ucs_status_t st) {
  std::lock_guard<std::mutex> lk(mbox_mu_);
  op->status = st;
  op->done = true;
  mbox_cv_.notify_all();
}

void UcxTransport::mark_lost(int peer, const std::string& reason) {
  if (peer < 0 || peer >= world_) {
    return;
  }
  std::lock_guard<std::mutex> lk(mbox_mu_);
  if (finishing_ || lost_[peer]) {
    return;
  }
  lost_[peer] = 1;
  lost_reason_[peer] = reason;
  mbox_cv_.notify_all();
}

void UcxTransport::mark_left(int peer) {
  if (peer < 0 || peer >= world_) {
    return;
  }
  std::lock_guard<std::mutex> lk(mbox_mu_);
  if (left_at_[peer] == Clock::time_point::max()) {
    left_at_[peer] = Clock::now();
  }
  mbox_cv_.notify_all();
}

bool UcxTransport::gone(int peer) const {
  // A rank that left cleanly may still have messages in flight to us: give them a grace period.
  return lost_[peer] || (left_at_[peer] != Clock::time_point::max() &&
                         Clock::now() >= left_at_[peer] + kLeftGrace);
}

void UcxTransport::handler_loop() {
  for (;;) {
    Incoming in;
    {
      std::unique_lock<std::mutex> lk(hq_mu_);
      hq_cv_.wait(lk, [&] { return stop_.load() || !hq_.empty(); });
      if (hq_.empty()) {
        return;
      }
      in = std::move(hq_.front());
      hq_.pop_front();
    }
    Bytes response;
    MessageId id = 0;
    ByteView body;
    if (!parse_request(in.payload, id, body)) {
      const std::string err =
          fmt::format("malformed request from rank {} ({} bytes) refused by rank {}", in.src,
                      in.payload.size(), rank_);
      response.assign(1, 1);
      response.insert(response.end(), err.begin(), err.end());
    } else {
      response = handlers_.invoke(rank_, id, in.src, body);
    }
    const uint64_t tag = make_tag(kResp, rank_, in.req_id);
    if (in.src == rank_) {
      deliver(tag, std::move(response));
      continue;
    }
    try {
      post_send(in.src, tag, std::move(response));  // completion is not awaited
    } catch (const std::exception&) {
      // The requester is gone; it will not wait for the answer.
    }
  }
}

// --- messaging ----------------------------------------------------------------------------------

void UcxTransport::check_peer(int peer, const char* what) const {
  TESSERA_EXPECTS(peer >= 0 && peer < world_, IndexError,
                  "{}: rank {} is outside the world of {} ranks", what, peer, world_);
}

void UcxTransport::throw_lost(int peer, const std::string& what) {
  if (!lost_[peer]) {
    throw PeerLostError(fmt::format("rank {}: {} failed because rank {} left the job (it finished, "
                                    "possibly early because of an error) without sending what "
                                    "rank {} waited for",
                                    rank_, what, peer, rank_),
                        peer);
  }
  throw PeerLostError(fmt::format("rank {}: {} failed because rank {} was lost ({})", rank_, what,
                                  peer, lost_reason_[peer]),
                      peer);
}

std::shared_ptr<Op> UcxTransport::post_send(int peer, uint64_t tag, Bytes&& data) {
  auto op = std::make_shared<Op>();
  op->t = this;
  op->peer = peer;
  op->owned = std::move(data);
  {
    std::lock_guard<std::mutex> lk(mbox_mu_);
    if (lost_[peer]) {
      throw_lost(peer, "sending");
    }
  }
  auto* holder = new OpHolder{op};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = op_cb;
  p.user_data = holder;
  static uint8_t dummy = 0;
  void* req;
  {
    std::lock_guard<std::mutex> lk(worker_mu_);
    req = ucp_tag_send_nbx(eps_[peer], op->owned.empty() ? &dummy : op->owned.data(),
                           op->owned.size(), tag, &p);
  }
  if (!UCS_PTR_IS_PTR(req)) {
    delete holder;
    op->status = UCS_PTR_STATUS(req);
    op->done = true;
  }
  wake();
  return op;
}

Bytes UcxTransport::take(uint64_t key, int peer, Clock::time_point deadline,
                         const std::string& what) {
  std::unique_lock<std::mutex> lk(mbox_mu_);
  for (;;) {
    auto it = mailbox_.find(key);
    if (it != mailbox_.end()) {
      Bytes out = std::move(it->second);
      mailbox_.erase(it);
      return out;
    }
    if (gone(peer)) {
      throw_lost(peer, what);
    }
    if (Clock::now() >= deadline) {
      throw TimeoutError(fmt::format("rank {}: {} timed out after {:.1f} s waiting for rank {}",
                                     rank_, what, options_.op_timeout_s, peer),
                         peer);
    }
    mbox_cv_.wait_until(lk, std::min(deadline, Clock::now() + std::chrono::milliseconds(500)));
  }
}

void UcxTransport::wait_op(const std::shared_ptr<Op>& op, Clock::time_point deadline,
                           const std::string& what) {
  std::unique_lock<std::mutex> lk(mbox_mu_);
  while (!op->done) {
    if (gone(op->peer)) {
      throw_lost(op->peer, what);
    }
    if (Clock::now() >= deadline) {
      throw TimeoutError(fmt::format("rank {}: {} timed out after {:.1f} s waiting for rank {}",
                                     rank_, what, options_.op_timeout_s, op->peer),
                         op->peer);
    }
    mbox_cv_.wait_until(lk, std::min(deadline, Clock::now() + std::chrono::milliseconds(500)));
  }
  if (op->status != UCS_OK) {
    if (lost_[op->peer]) {
      throw_lost(op->peer, what);
    }
    throw PeerLostError(fmt::format("rank {}: {} failed talking to rank {}: {}", rank_, what,
                                    op->peer, ucs_status_string(op->status)),
                        op->peer);
  }
}

void UcxTransport::exchange(uint64_t seq, const CollectiveId& id, const void* send,
                            const size_t* sc, const size_t* so, void* recv, const size_t* rc,
                            const size_t* ro) {
  const auto deadline = op_deadline();
  const auto* s = static_cast<const uint8_t*>(send);
  auto* r = static_cast<uint8_t*>(recv);
  // Every message starts with what this rank called (encode_collective_id); each rank compares
  // its peers' with its own before it uses any payload.
  const Bytes head = encode_collective_id(id);
  const size_t hn = head.size();
  std::vector<std::shared_ptr<Op>> ops;
  for (int i = 1; i < world_; ++i) {
    const int p = (rank_ + i) % world_;
    Bytes m(hn + sc[p]);
    std::memcpy(m.data(), head.data(), hn);
    if (sc[p]) {
      std::memcpy(m.data() + hn, s + so[p], sc[p]);
    }
    ops.push_back(post_send(p, make_tag(kColl, rank_, seq), std::move(m)));
  }
  const std::string what = fmt::format("{} (collective #{})", describe_collective(id), seq);
  std::vector<Bytes> in(static_cast<size_t>(world_));
  bool mismatch = false;
  std::vector<std::string> failed(static_cast<size_t>(world_));  // peers that did not answer
  for (int i = 1; i < world_; ++i) {
    const int p = (rank_ + world_ - i) % world_;
    try {
      in[p] = take(make_tag(kColl, p, seq), p, deadline, what);
    } catch (const Error& e) {
      if (!mismatch) {
        throw;
      }
      failed[p] = e.what();  // the mismatch is the error; this peer is named without its call
      continue;
    }
    mismatch = mismatch || in[p].size() < hn || std::memcmp(in[p].data(), head.data(), hn) != 0;
  }
  if (mismatch) {
    std::vector<std::string> calls(static_cast<size_t>(world_));
    for (int p = 0; p < world_; ++p) {
      CollectiveId theirs;
      std::string label;
      if (p == rank_) {
        calls[p] = describe_collective(id);
      } else if (!failed[p].empty()) {
        calls[p] = fmt::format("nothing this rank received ({})", failed[p]);
      } else if (decode_collective_id(ByteView(in[p]), &theirs, &label) > 0) {
        calls[p] = describe_collective(theirs);
      } else {
        calls[p] = fmt::format("something unknown (a malformed message of {} bytes)", in[p].size());
      }
    }
    for (auto& op : ops) {
      try {
        wait_op(op, deadline, what);  // lets the peers see this rank's call too
      } catch (const Error&) {
        // The mismatch is the error to report.
      }
    }
    throw CollectiveMismatchError(collective_mismatch_message(rank_, seq, calls));
  }
  TESSERA_EXPECTS(sc[rank_] == rc[rank_], ValueError,
                  "{}: rank {} sends {} bytes to itself but expects to receive {}", what, rank_,
                  sc[rank_], rc[rank_]);
  if (sc[rank_]) {
    std::memmove(r + ro[rank_], s + so[rank_], sc[rank_]);
  }
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) {
      continue;
    }
    const size_t n = in[p].size() - hn;
    TESSERA_EXPECTS(n == rc[p], ValueError,
                    "{}: rank {} sent {} bytes to rank {}, which expected {}", what, p, n, rank_,
                    rc[p]);
    if (n) {
      std::memcpy(r + ro[p], in[p].data() + hn, n);
    }
  }
  for (auto& op : ops) {
    wait_op(op, deadline, what);
  }
}

void UcxTransport::all_to_all_v(const void* send, const size_t* sc, const size_t* so, void* recv,
                                const size_t* rc, const size_t* ro) {
  CollectiveId id;
  id.kind = CollKind::all_to_all_v;
  id.label = collective_label();
  exchange(coll_seq_++, id, send, sc, so, recv, rc, ro);
}

void UcxTransport::barrier() {
  std::vector<size_t> zeros(world_, 0);
  uint8_t dummy = 0;
  CollectiveId id;
  id.kind = CollKind::barrier;
  id.label = collective_label();
  exchange(coll_seq_++, id, &dummy, zeros.data(), zeros.data(), &dummy, zeros.data(), zeros.data());
}

void UcxTransport::all_gather(const void* send, size_t bytes, void* recv) {
  std::vector<size_t> sc(world_, bytes), so(world_, 0), ro(world_);
  for (int p = 0; p < world_; ++p) {
    ro[p] = static_cast<size_t>(p) * bytes;
  }
  CollectiveId id;
  id.kind = CollKind::all_gather;
  id.count = bytes;
  id.label = collective_label();
  exchange(coll_seq_++, id, send, sc.data(), so.data(), recv, sc.data(), ro.data());
}

void UcxTransport::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  TESSERA_EXPECTS(data != nullptr || count == 0, ValueError, "all_reduce: null buffer");
  const size_t es = dtype_size(dtype);
  const size_t n = static_cast<size_t>(world_);
  // Reduce-scatter then all-gather: rank p reduces chunk p in rank order, so every rank ends
  // with the same bits.
  std::vector<size_t> lo(n + 1);
  for (size_t p = 0; p <= n; ++p) {
    lo[p] = count * p / n;
  }
  const size_t mine = lo[rank_ + 1] - lo[rank_];
  std::vector<size_t> sc(n), so(n), rc(n, mine * es), ro(n);
  for (size_t p = 0; p < n; ++p) {
    sc[p] = (lo[p + 1] - lo[p]) * es;
    so[p] = lo[p] * es;
    ro[p] = p * mine * es;
  }
  Bytes parts(n * mine * es);
  CollectiveId id;
  id.kind = CollKind::all_reduce;
  id.dtype = dtype;
  id.op = op;
  id.count = count;
  id.label = collective_label();
  exchange(coll_seq_++, id, data, sc.data(), so.data(), parts.data(), rc.data(), ro.data());
  for (size_t p = 1; p < n; ++p) {
    reduce_into(parts.data(), parts.data() + p * mine * es, mine, dtype, op);
  }
  std::vector<size_t> sc2(n, mine * es), so2(n, 0);
  exchange(coll_seq_++, id, parts.data(), sc2.data(), so2.data(), data, sc.data(), so.data());
}

PendingResponse UcxTransport::request_async(int peer, MessageId id, ByteView payload) {
  check_peer(peer, "request");
  const uint64_t req_id = next_req_.fetch_add(1) & kSeqMask;
  Bytes msg(4 + payload.size);
  std::memcpy(msg.data(), &id, 4);
  if (payload.size) {
    std::memcpy(msg.data() + 4, payload.data, payload.size);
  }
  if (peer == rank_) {
    std::lock_guard<std::mutex> lk(hq_mu_);
    hq_.push_back(Incoming{rank_, req_id, std::move(msg)});
    hq_cv_.notify_one();
  } else {
    post_send(peer, make_tag(kReq, rank_, req_id), std::move(msg));
  }
  return PendingResponse([this, peer, id, req_id] {
    Bytes b = take(make_tag(kResp, peer, req_id), peer, op_deadline(),
                   fmt::format("request (message id {}) to rank {}", id, peer));
    return decode_response(std::move(b), peer, id);
  });
}

// --- one-sided reads ----------------------------------------------------------------------------

class UcxRegion final : public MemoryRegion {
 public:
  /// Registers [data, data+size), or with data == nullptr lets UCX allocate `size` bytes.
  UcxRegion(UcxTransport* t, void* data, size_t size) : MemoryRegion(data, size), t_(t) {
    Bytes packed;
    if (size > 0) {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = data;
      mp.length = size;
      if (!data) {
        mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        mp.flags = UCP_MEM_MAP_ALLOCATE;
      }
      std::lock_guard<std::mutex> lk(t_->worker_mu_);
      TESSERA_UCX_TRY(ucp_mem_map(t_->ctx_, &mp, &memh_));
      if (!data) {
        ucp_mem_attr_t attr{};
        attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
        const ucs_status_t qs = ucp_mem_query(memh_, &attr);
        if (qs != UCS_OK || attr.length < size) {
          ucp_mem_unmap(t_->ctx_, memh_);
          TESSERA_FAIL(Error, "ucx: allocating {} registered bytes failed ({})", size,
                       qs != UCS_OK ? ucs_status_string(qs) : "short allocation");
        }
        data_ = attr.address;
        std::memset(data_, 0, size);
      }
      void* buf = nullptr;
      size_t len = 0;
      const ucs_status_t st = ucp_rkey_pack(t_->ctx_, memh_, &buf, &len);
      if (st != UCS_OK) {
        ucp_mem_unmap(t_->ctx_, memh_);
        TESSERA_UCX_TRY(st);
      }
      packed.assign(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + len);
      ucp_rkey_buffer_release(buf);
    }
    key_ = pack_region_key(t->rank(), reinterpret_cast<uint64_t>(data_), size, packed);
  }
  ~UcxRegion() override {
    if (!memh_ || !t_->ctx_) {
      return;
    }
    std::lock_guard<std::mutex> lk(t_->worker_mu_);
    ucp_mem_unmap(t_->ctx_, memh_);
  }
  Bytes remote_key() const override { return key_; }

 private:
  UcxTransport* t_;
  ucp_mem_h memh_ = nullptr;
  Bytes key_;
};

class UcxRemote final : public RemoteMemory {
 public:
  UcxRemote(UcxTransport* t, int owner, uint64_t address, size_t size, ucp_rkey_h rkey)
      : RemoteMemory(owner, size), t_(t), address_(address), rkey_(rkey) {
    // Memory UCX placed in shared memory (allocate_memory on a same-node peer) is mapped here
    // too: gets become plain copies, without a UCX operation per range.
    void* p = nullptr;
    if (rkey_ && size > 0 && ucp_rkey_ptr(rkey_, address_, &p) == UCS_OK) {
      mapped_ = static_cast<const uint8_t*>(p);
    }
  }
  ~UcxRemote() override {
    if (!rkey_ || !t_->worker_) {
      return;
    }
    std::lock_guard<std::mutex> lk(t_->worker_mu_);
    ucp_rkey_destroy(rkey_);
  }
  const uint8_t* mapped() const override { return mapped_; }
  UcxTransport* t_;
  uint64_t address_;
  ucp_rkey_h rkey_;
  const uint8_t* mapped_ = nullptr;  // the region mapped into this process, if UCX can
};

std::unique_ptr<MemoryRegion> UcxTransport::register_memory(void* data, size_t bytes) {
  TESSERA_EXPECTS(data != nullptr || bytes == 0, ValueError, "register_memory: null pointer");
  return std::make_unique<UcxRegion>(this, data, bytes);
}

std::unique_ptr<MemoryRegion> UcxTransport::allocate_memory(size_t bytes) {
  return std::make_unique<UcxRegion>(this, nullptr, bytes);
}

std::unique_ptr<RemoteMemory> UcxTransport::attach(int owner, ByteView key) {
  check_peer(owner, "attach");
  RegionKey k = unpack_region_key(key, owner);
  ucp_rkey_h rkey = nullptr;
  if (owner != rank_ && k.size > 0) {
    std::lock_guard<std::mutex> lk(worker_mu_);
    const ucs_status_t st = ucp_ep_rkey_unpack(eps_[owner], k.packed.data(), &rkey);
    TESSERA_EXPECTS(st == UCS_OK, ValueError,
                    "rank {}: the remote key of rank {} could not be unpacked: {}", rank_, owner,
                    ucs_status_string(st));
  }
  return std::make_unique<UcxRemote>(this, owner, k.address, k.size, rkey);
}

void UcxTransport::get(const RemoteMemory& remote, const GetRange* ranges, size_t n) {
  check_ranges(remote, ranges, n);
  const auto* rm = dynamic_cast<const UcxRemote*>(&remote);
  TESSERA_EXPECTS(rm != nullptr && rm->t_ == this, ValueError,
                  "get: the remote region was attached by another transport");
  const int peer = rm->owner();
  if (peer == rank_) {
    for (size_t i = 0; i < n; ++i) {
      if (ranges[i].bytes) {
        std::memcpy(ranges[i].local,
                    reinterpret_cast<const uint8_t*>(rm->address_) + ranges[i].remote_offset,
                    ranges[i].bytes);
      }
    }
    return;
  }
  if (!rm->rkey_) {
    return;  // an empty region: every range is empty
  }
  const std::string what = fmt::format("get of {} ranges from rank {}", n, peer);
  {
    std::lock_guard<std::mutex> lk(mbox_mu_);
    if (lost_[peer]) {
      throw_lost(peer, what);
    }
  }
  if (rm->mapped_) {
    for (size_t i = 0; i < n; ++i) {
      if (ranges[i].bytes) {
        std::memcpy(ranges[i].local, rm->mapped_ + ranges[i].remote_offset, ranges[i].bytes);
      }
    }
    return;
  }
  auto op = std::make_shared<Op>();
  op->t = this;
  op->peer = peer;
  {
    std::lock_guard<std::mutex> lk(worker_mu_);
    ucp_request_param_t none{};
    for (size_t i = 0; i < n; ++i) {
      if (!ranges[i].bytes) {
        continue;
      }
      void* req = ucp_get_nbx(eps_[peer], ranges[i].local, ranges[i].bytes,
                              rm->address_ + ranges[i].remote_offset, rm->rkey_, &none);
      if (UCS_PTR_IS_ERR(req)) {
        throw PeerLostError(fmt::format("rank {}: {} failed: ucp_get_nbx: {}", rank_, what,
                                        ucs_status_string(UCS_PTR_STATUS(req))),
                            peer);
      }
      if (req) {
        ucp_request_free(req);  // completion is covered by the flush below
      }
    }
    auto* holder = new OpHolder{op};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = op_cb;
    p.user_data = holder;
    void* req = ucp_ep_flush_nbx(eps_[peer], &p);
    if (!UCS_PTR_IS_PTR(req)) {
      delete holder;
      op->status = UCS_PTR_STATUS(req);
      op->done = true;
    }
  }
  wake();
  wait_op(op, op_deadline(), what);
}

std::unique_ptr<Transport> make_ucx_transport(const LaunchEnv& env, const Options& options) {
  return std::make_unique<UcxTransport>(env, options);
}

}  // namespace

}  // namespace tessera::transport::detail

/// The module's only exported symbol (everything else is hidden, see transport/CMakeLists.txt).
extern "C" __attribute__((visibility("default"))) const tessera::transport::detail::UcxModule*
tessera_transport_ucx_module() {
  static const tessera::transport::detail::UcxModule m{
      TESSERA_TRANSPORT_ABI, &tessera::transport::detail::make_ucx_transport};
  return &m;
}
