// SPDX-License-Identifier: Apache-2.0
// One Transport interface for every backend (local, ucx, nccl), its errors, and the registry
// that picks a backend by name or takes the first one that can serve this job.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::transport {

// --- errors -----------------------------------------------------------------------------------

/// A blocking wait passed its deadline. `peer()` is the rank we were waiting for (-1: several or
/// unknown). The message names the operation, the rank and the timeout.
class TimeoutError : public Error {
 public:
  TimeoutError(const std::string& msg, int peer) : Error(msg), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};
/// A peer process died or closed its connection. `peer()` is the lost rank.
class PeerLostError : public Error {
 public:
  PeerLostError(const std::string& msg, int peer) : Error(msg), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};
/// A request handler on the remote rank threw or no handler was registered for the message id.
class RemoteError : public Error {
 public:
  using Error::Error;
};
/// The backend cannot do this operation (see Capabilities); the message names both.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};
/// The ranks called different collectives at the same point (the same collective number): a
/// different kind (barrier, all_reduce, all_gather, all_to_all_v), all_reduce arguments (dtype,
/// op, count), all_gather size, or operation (CollectiveLabel). Raised on every rank before any
/// payload is used; the message names what each rank called (Python: ValueError).
class CollectiveMismatchError : public ValueError {
 public:
  using ValueError::ValueError;
};

// --- small types ------------------------------------------------------------------------------

/// Owned bytes (messages, responses, remote-key blobs).
using Bytes = std::vector<uint8_t>;

/// A read-only view of bytes that the caller keeps alive for the duration of the call.
struct ByteView {
  const void* data = nullptr;
  size_t size = 0;
  ByteView() = default;
  ByteView(const void* d, size_t n) : data(d), size(n) {}
  ByteView(const Bytes& b) : data(b.data()), size(b.size()) {}  // NOLINT: implicit on purpose
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
};

/// Element types understood by all_reduce.
enum class DType : uint8_t { f32, f64, i32, i64, u64 };
/// Size of one element of `t` in bytes.
size_t dtype_size(DType t);
const char* dtype_name(DType t);

/// Reductions understood by all_reduce.
enum class ReduceOp : uint8_t { sum, max, min };
const char* reduce_op_name(ReduceOp op);

/// Identifies a request handler; the same id must mean the same handler on every rank.
/// Ids >= 0xF0000000 are reserved for Tessera's own protocols.
using MessageId = uint32_t;

/// What a backend can do. Callers check these instead of catching UnsupportedError.
struct Capabilities {
  bool collectives = false;        ///< barrier, all_reduce, all_gather, all_to_all_v
  bool request_response = false;   ///< register_handler / request / request_async
  bool one_sided_get = false;      ///< register_memory / attach / get
  bool host_memory = false;        ///< buffers passed to collectives may be host memory
  bool device_memory = false;      ///< buffers passed to collectives may be CUDA device memory
  bool detects_peer_loss = false;  ///< a dead peer makes waits fail with PeerLostError
  std::string fabric;              ///< e.g. "tcp", "posix,sysv,cma", "verbs", "nccl", "local"
};

/// Timeouts of one transport. Every blocking wait uses one of these as its deadline.
struct Options {
  /// Rendezvous: connecting to the store, waiting for every rank to join (s).
  /// Env: TESSERA_RENDEZVOUS_TIMEOUT (default 60).
  double rendezvous_timeout_s = 60;
  /// Collectives, requests, gets and finalize (s). Env: TESSERA_OP_TIMEOUT (default 1800, as
  /// torch.distributed's process groups: a rank may evaluate or save while others wait).
  double op_timeout_s = 1800;
  /// Liveness, separate from op_timeout_s: a rank whose heartbeat (every 2 s, on its watch
  /// connection to the rendezvous store) stops for this long is reported lost to every rank,
  /// frozen or not (s). Env: TESSERA_HEARTBEAT_TIMEOUT (default 15).
  double heartbeat_timeout_s = 15;
  /// Options with the environment applied.
  static Options from_env();
};

// --- registered memory --------------------------------------------------------------------

/// Host memory registered with a transport so that peers can read it with one-sided gets.
/// The memory stays owned by the caller and must outlive this object; destroying the object
/// deregisters it.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  void* data() const { return data_; }
  size_t size() const { return size_; }
  /// The blob a peer passes to Transport::attach (owner rank, address, size, packed key).
  virtual Bytes remote_key() const = 0;

 protected:
  MemoryRegion(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

/// A peer's registered region, ready for Transport::get. Created by Transport::attach.
class RemoteMemory {
 public:
  virtual ~RemoteMemory() = default;
  int owner() const { return owner_; }
  size_t size() const { return size_; }
  /// The region mapped into this process (a same-node peer's memory that the transport placed
  /// in shared memory), or null: then only get() reads it. Loads and copies through it see the
  /// owner's writes as they happen, as get() does; ordering them is the reader's business.
  virtual const uint8_t* mapped() const { return nullptr; }

 protected:
  RemoteMemory(int owner, size_t size) : owner_(owner), size_(size) {}
  int owner_;
  size_t size_;
};

/// One piece of a batched get: `bytes` bytes at `remote_offset` of the region into `local`.
struct GetRange {
  uint64_t remote_offset = 0;
  void* local = nullptr;
  size_t bytes = 0;
};

// --- requests -------------------------------------------------------------------------------

/// Handles one request: gets the sender's rank and the payload, returns the response bytes.
/// A thrown exception becomes a RemoteError on the requesting rank carrying its message.
/// Handlers run on the transport's handler thread (one at a time, in arrival order); a handler
/// may call request()/get() to other ranks but must not call collectives.
using Handler = std::function<Bytes(int source, ByteView payload)>;

/// A request in flight; `wait()` returns the response or throws (RemoteError, TimeoutError,
/// PeerLostError). Waiting twice is an error.
class PendingResponse {
 public:
  PendingResponse() = default;
  /// Backends build one from the function that waits for (and decodes) the answer.
  explicit PendingResponse(std::function<Bytes()> wait_fn) : wait_(std::move(wait_fn)) {}
  Bytes wait();
  bool valid() const { return static_cast<bool>(wait_); }

 private:
  std::function<Bytes()> wait_;
  bool waited_ = false;
};

// --- the interface --------------------------------------------------------------------------

/// A group of `world_size()` processes that can talk to each other. Created collectively by
/// every rank (see create_transport); collectives must be called by every rank in the same
/// order. Host backends (ucx) send what each rank called with every collective (its kind, the
/// arguments that must agree and collective_label()) and compare it before using the payload:
/// ranks that called different collectives all get CollectiveMismatchError naming each rank's
/// call (the nccl backend does not check). Collective buffers are host memory unless
/// capabilities().device_memory: then they are CUDA device memory and the collectives are enqueued
/// on stream() and return at once (call synchronize() before reading the result on the host), as
/// NCCL does. Thread safety: request/get may be called from any thread; collectives from one thread
/// at a time. Destroying a transport waits (bounded) until every rank has finished or was lost;
/// MemoryRegion and RemoteMemory objects must be destroyed before their transport.
class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  /// Backend name ("local", "ucx", "nccl").
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual Capabilities capabilities() const = 0;
  const Options& options() const { return options_; }
  /// Changes the deadline of subsequent operations (seconds, > 0).
  void set_op_timeout(double seconds);
  /// The operation the collectives called now belong to (see CollectiveLabel; "" outside one).
  const std::string& collective_label() const { return coll_label_; }

  // Device streams (device-memory backends) --------------------------------------------------
  /// The CUDA stream (a cudaStream_t) that device-memory collectives are enqueued on; nullptr for
  /// host backends, whose collectives complete before they return.
  virtual void* stream() const { return nullptr; }
  /// Enqueues subsequent collectives on `cuda_stream` (a cudaStream_t of this rank's device;
  /// nullptr is the legacy default stream, as in CUDA). UnsupportedError for host backends.
  virtual void set_stream(void* cuda_stream);
  /// Waits (with the op deadline) until every enqueued collective has finished; throws
  /// TimeoutError / PeerLostError naming the rank, or Error with the library's message. No-op
  /// for host backends.
  virtual void synchronize() {}

  // Collectives ------------------------------------------------------------------------------
  /// Returns once every rank has entered the barrier (device backends: synchronizes too).
  virtual void barrier() = 0;
  /// In-place reduction of `count` elements of `dtype` at `data` across all ranks; every rank
  /// gets the same bits (reduction in rank order).
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  /// Every rank contributes `bytes` bytes; `recv` (world_size * bytes) gets rank r's at r*bytes.
  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  /// All-to-all of bytes: send_counts[p] bytes at send + send_offsets[p] go to rank p; the
  /// recv_counts[p] bytes from rank p land at recv + recv_offsets[p]. Arrays have world_size
  /// entries; send_counts on rank a for b must equal recv_counts on b for a (checked where the
  /// backend can: ValueError naming both ranks). Counts may be 0.
  virtual void all_to_all_v(const void* send, const size_t* send_counts, const size_t* send_offsets,
                            void* recv, const size_t* recv_counts, const size_t* recv_offsets) = 0;

  /// Convenience all-to-all-v of host bytes with unknown receive sizes: sends per_peer[p] to
  /// rank p, returns what each rank sent here (exchanges the sizes first).
  std::vector<Bytes> all_to_all_v(const std::vector<Bytes>& per_peer);
  /// Convenience all-gather of variable-sized host bytes.
  std::vector<Bytes> all_gather(ByteView mine);

  // Requests ---------------------------------------------------------------------------------
  /// Registers (or replaces) the handler for `id`. Register on every rank before the first
  /// request can arrive (e.g. before a barrier).
  virtual void register_handler(MessageId id, Handler handler);
  /// Sends a request to `peer` (may be this rank) and returns its pending response. The
  /// payload is copied; the caller may free it when this returns.
  virtual PendingResponse request_async(int peer, MessageId id, ByteView payload);
  /// request_async(...).wait().
  Bytes request(int peer, MessageId id, ByteView payload);

  // One-sided reads --------------------------------------------------------------------------
  /// Registers host memory [data, data+bytes) for one-sided reads by peers.
  virtual std::unique_ptr<MemoryRegion> register_memory(void* data, size_t bytes);
  /// Allocates `bytes` of zero-filled host memory owned by the returned region (freed with it)
  /// and registered for one-sided reads. Prefer this for data peers read often: a backend may
  /// place it where peers read it fastest (UCX: its own allocator, e.g. shared memory that
  /// peers on the same node read without a system call per read).
  virtual std::unique_ptr<MemoryRegion> allocate_memory(size_t bytes);
  /// Prepares reads of a peer's region from the blob its MemoryRegion::remote_key() returned.
  /// Throws ValueError on a malformed blob or one that is not from `owner`.
  virtual std::unique_ptr<RemoteMemory> attach(int owner, ByteView remote_key);
  /// Reads the ranges of `remote` into local memory; returns when all have arrived. Ranges are
  /// bounds-checked (IndexError).
  virtual void get(const RemoteMemory& remote, const GetRange* ranges, size_t n);
  void get(const RemoteMemory& remote, uint64_t offset, void* local, size_t bytes) {
    GetRange r{offset, local, bytes};
    get(remote, &r, 1);
  }
  /// Collective: registers nothing, all-gathers `mine.remote_key()` and attaches every rank's
  /// region (entry rank() reads this rank's own memory).
  std::vector<std::unique_ptr<RemoteMemory>> exchange_regions(const MemoryRegion& mine);

 protected:
  explicit Transport(Options options) : options_(options) {}
  [[noreturn]] void unsupported(const char* what) const;
  /// A deadline op_timeout_s from now.
  std::chrono::steady_clock::time_point op_deadline() const;
  Options options_;

 private:
  friend class CollectiveLabel;
  std::string coll_label_;
};

/// Names the operation that the collectives called on `t` while it lives belong to ("node_split",
/// "all_reduce_gradients", "DistTensor 'feat'"); nested labels join ("DistGraph 'cora' >
/// DistTensor 'cora:node:feat'"). Every rank compares it, with the collective's kind and
/// arguments, with the other ranks' (CollectiveMismatchError), so it must be the same on every
/// rank: no rank numbers, local sizes or paths that may differ between ranks. Create it on the
/// thread that calls the collectives.
class CollectiveLabel {
 public:
  CollectiveLabel(Transport& t, std::string_view name) : t_(t), restore_(t.coll_label_.size()) {
    if (name.empty() || t.coll_label_ == name) {
      return;
    }
    if (!t.coll_label_.empty()) {
      t.coll_label_ += " > ";
    }
    t.coll_label_ += name;
  }
  ~CollectiveLabel() { t_.coll_label_.resize(restore_); }
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;

 private:
  Transport& t_;
  size_t restore_;
};

// --- registry -------------------------------------------------------------------------------

/// Whether a backend was compiled in and can serve the current job, and if not, why.
struct BackendInfo {
  std::string name;
  bool compiled = false;   ///< its library was found at build time
  bool available = false;  ///< it can serve a job here (compiled, and e.g. a GPU is present)
  std::string reason;      ///< why not available ("" when available)
  Capabilities capabilities;
};

/// Every known backend in preference order: ucx, nccl, local.
std::vector<BackendInfo> list_backends();

/// Creates the transport for this process, collectively with every other rank of the job.
/// Rank, world size and the rendezvous address come from the launcher's environment (see
/// rendezvous.hpp). `backend` is "local", "ucx", "nccl", or "auto"/"" (env TESSERA_TRANSPORT,
/// else: local for a world of one, else the first available of ucx, nccl). Throws
/// NotCompiledError for a backend that was not compiled in, ValueError for an unknown name.
std::unique_ptr<Transport> create_transport(const std::string& backend = "",
                                            const Options& options = Options::from_env());

}  // namespace tessera::transport
