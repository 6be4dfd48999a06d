// SPDX-License-Identifier: Apache-2.0
// The parts of Transport every backend shares: types, conveniences built on the virtual
// collectives, handler table and region-key blobs. Linked into the registry's library and into
// the UCX module (transport/ucx), so nothing here may hold process-wide state.
#include "tessera/transport/transport.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends.hpp"
#include "socket_util.hpp"

namespace tessera::transport {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
    case DType::u64:
      return 8;
  }
  TESSERA_FAIL(ValueError, "unknown dtype code {}", static_cast<int>(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u64:
      return "uint64";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "unknown";
}

namespace {
double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    return fallback;
  }
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  // x > 0 refuses NaN; "inf" (or any huge value) means no deadline (detail::seconds).
  TESSERA_EXPECTS(end != v && *end == '\0' && x > 0, ValueError,
                  "environment variable {}='{}' is not a positive number of seconds (inf: no "
                  "deadline)",
                  name, v);
  return x;
}
}  // namespace

Options Options::from_env() {
  Options o;
  o.rendezvous_timeout_s = env_seconds("TESSERA_RENDEZVOUS_TIMEOUT", o.rendezvous_timeout_s);
  o.op_timeout_s = env_seconds("TESSERA_OP_TIMEOUT", o.op_timeout_s);
  o.heartbeat_timeout_s = env_seconds("TESSERA_HEARTBEAT_TIMEOUT", o.heartbeat_timeout_s);
  return o;
}

// --- PendingResponse ----------------------------------------------------------------------------

Bytes PendingResponse::wait() {
  TESSERA_EXPECTS(valid(), ValueError, "PendingResponse::wait on an empty response");
  TESSERA_EXPECTS(!waited_, ValueError, "PendingResponse::wait called twice");
  waited_ = true;
  return wait_();
}

// --- Transport defaults and conveniences ------------------------------------------------------

void Transport::set_op_timeout(double seconds) {
  TESSERA_EXPECTS(seconds > 0, ValueError, "op timeout must be > 0 seconds, got {}", seconds);
  options_.op_timeout_s = seconds;
}

std::chrono::steady_clock::time_point Transport::op_deadline() const {
  return std::chrono::steady_clock::now() + detail::seconds(options_.op_timeout_s);
}

void Transport::unsupported(const char* what) const {
  throw UnsupportedError(
      fmt::format("the '{}' transport does not support {} (see capabilities())", name(), what));
}

void Transport::set_stream(void*) {
  unsupported("CUDA streams");
}

void Transport::register_handler(MessageId, Handler) {
  unsupported("request/response");
}
PendingResponse Transport::request_async(int, MessageId, ByteView) {
  unsupported("request/response");
}
Bytes Transport::request(int peer, MessageId id, ByteView payload) {
  return request_async(peer, id, payload).wait();
}
std::unique_ptr<MemoryRegion> Transport::register_memory(void*, size_t) {
  unsupported("one-sided reads of registered memory");
}
std::unique_ptr<MemoryRegion> Transport::allocate_memory(size_t) {
  unsupported("one-sided reads of registered memory");
}
std::unique_ptr<RemoteMemory> Transport::attach(int, ByteView) {
  unsupported("one-sided reads of registered memory");
}
void Transport::get(const RemoteMemory&, const GetRange*, size_t) {
  unsupported("one-sided reads of registered memory");
}

std::vector<Bytes> Transport::all_to_all_v(const std::vector<Bytes>& per_peer) {
  const int n = world_size();
  TESSERA_EXPECTS(static_cast<int>(per_peer.size()) == n, ValueError,
                  "all_to_all_v: {} send buffers for a world of {} ranks", per_peer.size(), n);
  std::vector<uint64_t> send_sizes(n), recv_sizes(n);
  std::vector<size_t> ones(n, 8), offs(n);
  for (int p = 0; p < n; ++p) {
    send_sizes[p] = per_peer[p].size();
    offs[p] = static_cast<size_t>(p) * 8;
  }
  all_to_all_v(send_sizes.data(), ones.data(), offs.data(), recv_sizes.data(), ones.data(),
               offs.data());
  std::vector<size_t> sc(n), so(n), rc(n), ro(n);
  size_t stot = 0, rtot = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = per_peer[p].size();
    so[p] = stot;
    stot += sc[p];
    rc[p] = recv_sizes[p];
    ro[p] = rtot;
    rtot += rc[p];
  }
  Bytes send(stot), recv(rtot);
  for (int p = 0; p < n; ++p) {
    if (sc[p]) {
      std::memcpy(send.data() + so[p], per_peer[p].data(), sc[p]);
    }
  }
  all_to_all_v(send.data(), sc.data(), so.data(), recv.data(), rc.data(), ro.data());
  std::vector<Bytes> out(n);
  for (int p = 0; p < n; ++p) {
    out[p].assign(recv.begin() + ro[p], recv.begin() + ro[p] + rc[p]);
  }
  return out;
}

std::vector<Bytes> Transport::all_gather(ByteView mine) {
  const int n = world_size();
  std::vector<Bytes> per_peer(n, Bytes(mine.bytes(), mine.bytes() + mine.size));
  return all_to_all_v(per_peer);
}

std::vector<std::unique_ptr<RemoteMemory>> Transport::exchange_regions(const MemoryRegion& mine) {
  const std::vector<Bytes> keys = all_gather(ByteView(mine.remote_key()));
  std::vector<std::unique_ptr<RemoteMemory>> out;
  out.reserve(keys.size());
  for (int p = 0; p < world_size(); ++p) {
    out.push_back(attach(p, ByteView(keys[p])));
  }
  return out;
}

// --- helpers for backends -----------------------------------------------------------------------

namespace detail {

namespace {
template <typename T>
void reduce_typed(T* acc, const T* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      for (size_t i = 0; i < n; ++i) {
        acc[i] += src[i];
      }
      break;
    case ReduceOp::max:
      for (size_t i = 0; i < n; ++i) {
        acc[i] = std::max(acc[i], src[i]);
      }
      break;
    case ReduceOp::min:
      for (size_t i = 0; i < n; ++i) {
        acc[i] = std::min(acc[i], src[i]);
      }
      break;
  }
}
}  // namespace

void reduce_into(void* acc, const void* src, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return reduce_typed(static_cast<float*>(acc), static_cast<const float*>(src), count, op);
    case DType::f64:
      return reduce_typed(static_cast<double*>(acc), static_cast<const double*>(src), count, op);
    case DType::i32:
      return reduce_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(src), count, op);
    case DType::i64:
      return reduce_typed(static_cast<int64_t*>(acc), static_cast<const int64_t*>(src), count, op);
    case DType::u64:
      return reduce_typed(static_cast<uint64_t*>(acc), static_cast<const uint64_t*>(src), count,
                          op);
  }
  TESSERA_FAIL(ValueError, "all_reduce: unknown dtype code {}", static_cast<int>(dtype));
}

namespace {
#pragma pack(push, 1)
struct CollHeader {
  uint8_t kind;
  uint8_t dtype;
  uint8_t op;
  uint8_t reserved;
  uint16_t label_len;
  uint16_t reserved2;
  uint64_t count;
};
#pragma pack(pop)
static_assert(sizeof(CollHeader) == 16, "the collective header is 16 bytes on the wire");

const char* coll_kind_name(CollKind k) {
  switch (k) {
    case CollKind::barrier:
      return "barrier";
    case CollKind::all_reduce:
      return "all_reduce";
    case CollKind::all_gather:
      return "all_gather";
    case CollKind::all_to_all_v:
      return "all_to_all_v";
  }
  return "unknown collective";
}

// "0", "0, 2", "0-3, 5": ascending ranks with runs folded.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ", ";
    }
    out += j - i >= 2 ? fmt::format("{}-{}", ranks[i], ranks[j])
                      : fmt::format("{}", ranks[i]) + (j > i ? fmt::format(", {}", ranks[j]) : "");
    i = j + 1;
  }
  return out;
}
}  // namespace

Bytes encode_collective_id(const CollectiveId& id) {
  const size_t n = std::min(id.label.size(), kMaxCollectiveLabel);
  CollHeader h{};
  h.kind = static_cast<uint8_t>(id.kind);
  h.dtype = static_cast<uint8_t>(id.dtype);
  h.op = static_cast<uint8_t>(id.op);
  h.label_len = static_cast<uint16_t>(n);
  h.count = id.count;
  Bytes out(sizeof h + n);
  std::memcpy(out.data(), &h, sizeof h);
  if (n) {
    std::memcpy(out.data() + sizeof h, id.label.data(), n);
  }
  return out;
}

size_t decode_collective_id(ByteView msg, CollectiveId* id, std::string* label_out) {
  CollHeader h{};
  if (msg.size < sizeof h) {
    return 0;
  }
  std::memcpy(&h, msg.data, sizeof h);
  if (h.kind < static_cast<uint8_t>(CollKind::barrier) ||
      h.kind > static_cast<uint8_t>(CollKind::all_to_all_v) ||
      h.dtype > static_cast<uint8_t>(DType::u64) || h.op > static_cast<uint8_t>(ReduceOp::min) ||
      h.label_len > kMaxCollectiveLabel || msg.size - sizeof h < h.label_len) {
    return 0;
  }
  id->kind = static_cast<CollKind>(h.kind);
  id->dtype = static_cast<DType>(h.dtype);
  id->op = static_cast<ReduceOp>(h.op);
  id->count = h.count;
  label_out->assign(reinterpret_cast<const char*>(msg.bytes() + sizeof h), h.label_len);
  id->label = *label_out;
  return sizeof h + h.label_len;
}

std::string describe_collective(const CollectiveId& id) {
  const char* kind = coll_kind_name(id.kind);
  std::string args;
  if (id.kind == CollKind::all_reduce) {
    args = fmt::format("{} {} of {}", dtype_name(id.dtype), reduce_op_name(id.op), id.count);
  } else if (id.kind == CollKind::all_gather) {
    args = fmt::format("{} bytes per rank", id.count);
  }
  if (id.label.empty() || id.label == kind) {
    return args.empty() ? std::string(kind) : fmt::format("{} ({})", kind, args);
  }
  return args.empty() ? fmt::format("{} ({})", id.label, kind)
                      : fmt::format("{} ({}, {})", id.label, kind, args);
}

std::string collective_mismatch_message(int me, uint64_t seq,
                                        const std::vector<std::string>& calls) {
  std::vector<std::string> distinct;
  std::vector<std::vector<int>> ranks;
  for (size_t r = 0; r < calls.size(); ++r) {
    const auto it = std::find(distinct.begin(), distinct.end(), calls[r]);
    if (it == distinct.end()) {
      distinct.push_back(calls[r]);
      ranks.push_back({static_cast<int>(r)});
    } else {
      ranks[static_cast<size_t>(it - distinct.begin())].push_back(static_cast<int>(r));
    }
  }
  std::string who;
  for (size_t i = 0; i < distinct.size(); ++i) {
    who += fmt::format("{}{} {} called {}", i ? "; " : "", ranks[i].size() > 1 ? "ranks" : "rank",
                       rank_list(ranks[i]), distinct[i]);
  }
  return fmt::format(
      "rank {}: the ranks called different collectives at collective #{}: {} (every rank must "
      "make the same collective calls in the same order)",
      me, seq, who);
}

void HandlerTable::set(MessageId id, Handler h) {
  std::lock_guard<std::mutex> lk(mu_);
  if (h) {
    handlers_[id] = std::make_shared<Handler>(std::move(h));
  } else {
    handlers_.erase(id);
  }
}

Bytes HandlerTable::invoke(int self_rank, MessageId id, int source, ByteView payload) const {
  std::shared_ptr<Handler> h;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = handlers_.find(id);
    if (it != handlers_.end()) {
      h = it->second;
    }
  }
  std::string err;
  if (!h) {
    err = fmt::format("no handler is registered for message id {} on rank {}", id, self_rank);
  } else {
    try {
      Bytes body = (*h)(source, payload);
      Bytes out(body.size() + 1);
      out[0] = 0;
      if (!body.empty()) {
        std::memcpy(out.data() + 1, body.data(), body.size());
      }
      return out;
    } catch (const std::exception& e) {
      err = fmt::format("the handler for message id {} on rank {} failed: {}", id, self_rank,
                        e.what());
    } catch (...) {
      err = fmt::format("the handler for message id {} on rank {} threw a non-standard exception",
                        id, self_rank);
    }
  }
  Bytes out(err.size() + 1);
  out[0] = 1;
  std::memcpy(out.data() + 1, err.data(), err.size());
  return out;
}

Bytes decode_response(Bytes&& encoded, int peer, MessageId id) {
  TESSERA_EXPECTS(!encoded.empty() && encoded[0] <= 1, ValueError,
                  "malformed response from rank {} to message id {} ({} bytes)", peer, id,
                  encoded.size());
  if (encoded[0] == 1) {
    throw RemoteError(std::string(encoded.begin() + 1, encoded.end()));
  }
  encoded.erase(encoded.begin());
  return std::move(encoded);
}

namespace {
constexpr uint32_t kKeyMagic = 0x54524b59;  // "TRKY"
#pragma pack(push, 1)
struct KeyHeader {
  uint32_t magic;
  int32_t owner;
  uint64_t address;
  uint64_t size;
  uint64_t packed_len;
};
#pragma pack(pop)
}  // namespace

Bytes pack_region_key(int owner, uint64_t address, uint64_t size, ByteView packed) {
  KeyHeader h{kKeyMagic, owner, address, size, packed.size};
  Bytes out(sizeof h + packed.size);
  std::memcpy(out.data(), &h, sizeof h);
  if (packed.size) {
    std::memcpy(out.data() + sizeof h, packed.data, packed.size);
  }
  return out;
}

RegionKey unpack_region_key(ByteView blob, int expected_owner) {
  KeyHeader h{};
  TESSERA_EXPECTS(blob.size >= sizeof h, ValueError,
                  "remote key for rank {} is malformed: {} bytes, shorter than its header",
                  expected_owner, blob.size);
  std::memcpy(&h, blob.data, sizeof h);
  TESSERA_EXPECTS(h.magic == kKeyMagic && h.packed_len == blob.size - sizeof h, ValueError,
                  "remote key for rank {} is malformed (bad magic or length)", expected_owner);
  TESSERA_EXPECTS(h.owner == expected_owner, ValueError,
                  "remote key was registered by rank {}, not by rank {} as the caller claims",
                  h.owner, expected_owner);
  RegionKey k;
  k.owner = h.owner;
  k.address = h.address;
  k.size = h.size;
  k.packed.assign(blob.bytes() + sizeof h, blob.bytes() + blob.size);
  return k;
}

void check_ranges(const RemoteMemory& remote, const GetRange* ranges, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const GetRange& r = ranges[i];
    TESSERA_EXPECTS(r.remote_offset <= remote.size() && r.bytes <= remote.size() - r.remote_offset,
                    IndexError,
                    "get: range {} [{}, {}) is outside rank {}'s registered region of {} bytes", i,
                    r.remote_offset, r.remote_offset + r.bytes, remote.owner(), remote.size());
    TESSERA_EXPECTS(r.local != nullptr || r.bytes == 0, ValueError,
                    "get: range {} has a null destination", i);
  }
}

}  // namespace detail

}  // namespace tessera::transport
