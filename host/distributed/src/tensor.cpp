// SPDX-License-Identifier: Apache-2.0
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <new>
#include <thread>

#include "agree.hpp"
#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/partition/format.hpp"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotation: reports on this memory are expected races.
extern "C" void AnnotateBenignRaceSized(const char* file, int line, const volatile void* mem,
                                        unsigned long size, const char* description);
#endif

namespace tessera::dist {

// --- PartPolicy -------------------------------------------------------------------------------

PartPolicy PartPolicy::node(const PartitionBook& book) {
  return PartPolicy{"node", book.node_offsets()};
}
PartPolicy PartPolicy::edge(const PartitionBook& book) {
  return PartPolicy{"edge", book.edge_offsets()};
}
PartPolicy PartPolicy::even(int64_t rows, int world) {
  TESSERA_EXPECTS(rows >= 0 && world >= 1, ValueError, "PartPolicy::even: {} rows over {} ranks",
                  rows, world);
  PartPolicy p{"even", std::vector<int64_t>(static_cast<size_t>(world) + 1)};
  for (int r = 0; r <= world; ++r) {
    p.offsets[r] = rows * r / world;
  }
  return p;
}
int PartPolicy::owner(int64_t row) const {
  auto it = std::upper_bound(offsets.begin(), offsets.end(), row);
  return static_cast<int>(it - offsets.begin()) - 1;
}

namespace detail {
namespace {

// The per-rank handle of a tensor: keeps the runtime alive and releases a non-persistent
// tensor's name when the last handle goes.
struct Ref {
  Ref(std::shared_ptr<Runtime> r, std::shared_ptr<TensorStore> st)
      : rt(std::move(r)), s(std::move(st)) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  std::shared_ptr<Runtime> rt;
  std::shared_ptr<TensorStore> s;
  ~Ref() {
    if (s->persistent) {
      return;
    }
    auto& st = rt->state();
    std::lock_guard<std::mutex> lk(st.mu);
    auto it = st.by_name.find(s->name);
    if (it != st.by_name.end() && it->second == s) {
      st.by_name.erase(it);
      st.retired.push_back(s);  // peers may still read it: freed once every rank dropped it
    }
  }
};

}  // namespace

std::vector<uint64_t> dropped_tensor_ids(RuntimeState& st) {
  std::lock_guard<std::mutex> lk(st.mu);
  std::vector<uint64_t> ids;
  for (const auto& s : st.retired) {
    if (s->handle.expired()) {
      ids.push_back(s->id);
    }
  }
  return ids;
}

void reclaim_dropped(RuntimeState& st, const std::vector<std::vector<uint64_t>>& dropped_by) {
  std::map<uint64_t, size_t> ranks_of;  // id -> how many ranks dropped it
  for (const auto& ids : dropped_by) {
    for (uint64_t id : ids) {
      ++ranks_of[id];
    }
  }
  std::vector<std::shared_ptr<TensorStore>> dead;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    const auto gone = std::stable_partition(
        st.retired.begin(), st.retired.end(), [&](const std::shared_ptr<TensorStore>& s) {
          auto it = ranks_of.find(s->id);
          return it == ranks_of.end() || it->second < dropped_by.size() || !s->handle.expired();
        });
    for (auto it = gone; it != st.retired.end(); ++it) {
      auto t = st.tensors.find((*it)->id);
      if (t != st.tensors.end() && t->second == *it) {
        st.tensors.erase(t);
      }
      dead.push_back(*it);
    }
    st.retired.erase(gone, st.retired.end());
  }
  // Freed here, outside the lock: a handler that looked a tensor up before holds its own
  // reference, and one that looks it up now finds none (nobody asks: every rank dropped it).
  dead.clear();
}

namespace {

const char* placement_name(Placement p) {
  return p == Placement::kDevice ? "device" : "host";
}

std::string describe(const std::vector<int64_t>& shape, DType dtype, const PartPolicy& p,
                     Placement placement) {
  std::string off;
  for (size_t i = 0; i < p.offsets.size(); ++i) {
    off += (i ? "," : "") + std::to_string(p.offsets[i]);
  }
  return fmt::format("shape {} dtype {} policy {} [{}] placement {}", shape_string(shape),
                     dtype_name(dtype), p.kind, off, placement_name(placement));
}

// The checks of read_into_device / read_collective_into_device that need no GPU, then the GPU.
void check_device_output(const TensorStore& s, ops::Span<const int64_t> ids, const void* out,
                         const char* what, bool collective) {
  TESSERA_EXPECTS(out != nullptr || ids.empty() || s.row_bytes == 0, ValueError,
                  "DistTensor '{}' {}: null output", s.name, what);
  check_ids(s, ids.data(), ids.size(), what);
  TESSERA_EXPECTS(cuda::compiled_with_cuda(), NotCompiledError,
                  "DistTensor '{}' {}: device output needs CUDA (not_compiled_with_cuda: this "
                  "Tessera build has TESSERA_WITH_CUDA=OFF); rebuild with -DTESSERA_WITH_CUDA=ON "
                  "or use read() / read_collective() into host memory",
                  s.name, what);
  if (collective) {
    s.rt->device_transport();  // ValueError naming attach_device_transport when absent
  }
  cuda::require_cuda(fmt::format("DistTensor '{}' {}", s.name, what).c_str());
  if (ids.empty() || s.row_bytes == 0) {
    return;
  }
  TESSERA_EXPECTS(cuda::is_device_accessible(out), ValueError,
                  "DistTensor '{}' {}: the output at {} is not device memory (nor pinned host "
                  "memory); use read_into() for pageable host memory",
                  s.name, what, out);
}

}  // namespace

uint64_t row_stamp(const uint8_t* p, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h[4] = {n ^ 0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                   0x082EFA98EC4E6C89ull};
  auto mix = [](uint64_t x) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
  };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * static_cast<size_t>(l), 8);
      h[l] = (h[l] ^ mix(w)) * kMul;
    }
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h[0] = (h[0] ^ mix(w)) * kMul;
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    h[1] = (h[1] ^ mix(w)) * kMul;
  }
  return mix(h[0] ^ mix(h[1] + kMul) ^ mix(h[2] + 2 * kMul) ^ mix(h[3] + 3 * kMul));
}

void restamp(const TensorStore& s, int64_t rel_begin, int64_t rel_end) {
  if (s.stamps == nullptr) {
    return;
  }
  for (int64_t r = rel_begin; r < rel_end; ++r) {
    s.stamps[r] = row_stamp(s.data + static_cast<size_t>(r) * s.row_bytes, s.row_bytes);
  }
}

void check_ids(const TensorStore& s, const int64_t* ids, int64_t n, const char* what) {
  const int64_t rows = s.policy.num_rows();
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= rows) {
      TESSERA_FAIL(IndexError, "DistTensor '{}' {}: row ID {} at position {} is outside [0, {})",
                   s.name, what, ids[i], i, rows);
    }
  }
}

std::vector<transport::Bytes> exchange_read_requests(const TensorStore& s, const int64_t* ids,
                                                     int64_t n, const char* what,
                                                     const std::function<void()>& check,
                                                     std::vector<std::vector<int64_t>>& pos) {
  auto& t = *s.rt->state().t;
  const int world = t.world_size();
  std::exception_ptr err;
  try {
    check();
  } catch (...) {
    err = std::current_exception();
  }
  // Each message is an outcome (agree.hpp): the asked IDs, or this rank's error.
  pos.assign(static_cast<size_t>(world), {});
  std::vector<transport::Bytes> ask(static_cast<size_t>(world));
  if (!err) {
    for (int64_t i = 0; i < n; ++i) {
      const int p = s.policy.owner(ids[i]);
      pos[p].push_back(i);
      const size_t o = ask[p].size();
      ask[p].resize(o + 8);
      std::memcpy(ask[p].data() + o, &ids[i], 8);
    }
  }
  for (auto& m : ask) {
    m = outcome_message(err, m);
  }
  auto asked = t.all_to_all_v(ask);
  if (err) {
    std::rethrow_exception(err);
  }
  const std::string context = fmt::format("DistTensor '{}' {}", s.name, what);
  for (int p = 0; p < world; ++p) {
    asked[p] = payload_of(asked[p], context, p);
  }
  return asked;
}

namespace {

// Appends a get of `bytes` at `off` into `dst`, merged with the previous one when both sides
// are consecutive.
void add_range(std::vector<transport::GetRange>& ranges, uint64_t off, void* dst, size_t bytes) {
  if (!ranges.empty()) {
    auto& b = ranges.back();
    if (b.remote_offset + b.bytes == off && static_cast<uint8_t*>(b.local) + b.bytes == dst) {
      b.bytes += bytes;
      return;
    }
  }
  ranges.push_back({off, dst, bytes});
}

// One-sided copies whose stamp check failed this many times in a row are read by a request.
constexpr int kGetAttempts = 3;

// Rows at positions `pos` of `ids` from owner p by one request (kMsgRead or kMsgReadRepair).
void request_rows(const TensorStore& s, int p, const int64_t* ids, const std::vector<int64_t>& pos,
                  uint8_t* out, transport::MessageId msg) {
  const size_t rb = s.row_bytes;
  Writer w;
  w.put<uint64_t>(s.id);
  w.put<uint64_t>(pos.size());
  for (int64_t i : pos) {
    w.put<int64_t>(ids[i]);
  }
  transport::Bytes b = s.rt->state().t->request_async(p, msg, transport::ByteView(w.buf)).wait();
  TESSERA_EXPECTS(b.size() == pos.size() * rb, ValueError,
                  "DistTensor '{}': rank {} answered {} bytes for {} rows of {} bytes", s.name, p,
                  b.size(), pos.size(), rb);
  for (size_t k = 0; k < pos.size(); ++k) {
    std::memcpy(out + pos[k] * rb, b.data() + k * rb, rb);
  }
}

// Rows at positions `pos` of `ids` from owner p by one-sided gets. The owner's write count is
// copied before and after the rows (each get completes before the next starts): the same even
// count means no write overlapped the copy, and the rows are whole. Otherwise every row is
// checked against its stamp, copied after it; a row whose bytes do not match was being written
// during the copy (or was changed through local_data()): it is copied again with its stamp, and
// after kGetAttempts failures read by a repair request, which the owner answers under its lock.
void get_rows(const TensorStore& s, int p, const int64_t* ids, const std::vector<int64_t>& pos,
              uint8_t* out) {
  const size_t rb = s.row_bytes;
  auto& t = *s.rt->state().t;
  const int64_t plo = s.policy.offsets[p];
  const int64_t prows = s.policy.offsets[p + 1] - plo;
  const uint64_t soff = stamps_offset(prows, rb);
  const uint64_t qoff = seq_offset(prows, rb);
  std::vector<transport::GetRange> ranges, stamp_ranges;
  if (const uint8_t* m = s.remotes[p]->mapped()) {
    // The owner's region is mapped here (same node, shared memory): the sequence lock's reads
    // as loads and a copy loop, without a transport call per row.
    const auto* seq = reinterpret_cast<const std::atomic<uint64_t>*>(m + qoff);
    const uint64_t before = seq->load(std::memory_order_acquire);
    for (int64_t i : pos) {
      std::memcpy(out + i * rb, m + static_cast<uint64_t>(ids[i] - plo) * rb, rb);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && seq->load(std::memory_order_relaxed) == before) {
      return;
    }
  } else {
    for (int64_t i : pos) {
      add_range(ranges, static_cast<uint64_t>(ids[i] - plo) * rb, out + i * rb, rb);
    }
    uint64_t before = 1, after = 0;
    t.get(*s.remotes[p], qoff, &before, sizeof before);
    t.get(*s.remotes[p], ranges.data(), ranges.size());
    t.get(*s.remotes[p], qoff, &after, sizeof after);
    if (before == after && before % 2 == 0) {
      return;
    }
  }
  std::vector<int64_t> todo, bad;
  std::vector<uint64_t> got(pos.size(), 0);
  for (size_t k = 0; k < pos.size(); ++k) {
    add_range(stamp_ranges, soff + static_cast<uint64_t>(ids[pos[k]] - plo) * 8, &got[k], 8);
  }
  t.get(*s.remotes[p], stamp_ranges.data(), stamp_ranges.size());
  for (size_t k = 0; k < pos.size(); ++k) {
    if (row_stamp(out + pos[k] * rb, rb) != got[k]) {
      todo.push_back(pos[k]);
    }
  }
  for (int attempt = 0; attempt < kGetAttempts && !todo.empty(); ++attempt) {
    got.assign(todo.size(), 0);
    ranges.clear();
    stamp_ranges.clear();
    for (size_t k = 0; k < todo.size(); ++k) {
      const auto rel = static_cast<uint64_t>(ids[todo[k]] - plo);
      add_range(ranges, rel * rb, out + todo[k] * rb, rb);
      add_range(stamp_ranges, soff + rel * 8, &got[k], 8);
    }
    ranges.insert(ranges.end(), stamp_ranges.begin(), stamp_ranges.end());
    t.get(*s.remotes[p], ranges.data(), ranges.size());
    bad.clear();
    for (size_t k = 0; k < todo.size(); ++k) {
      if (row_stamp(out + todo[k] * rb, rb) != got[k]) {
        bad.push_back(todo[k]);
      }
    }
    todo.swap(bad);
  }
  if (!todo.empty()) {
    request_rows(s, p, ids, todo, out, kMsgReadRepair);
  }
}

}  // namespace

void read_rows(const TensorStore& s, const int64_t* ids, int64_t n, uint8_t* out) {
  check_ids(s, ids, n, "read");
  const size_t rb = s.row_bytes;
  auto& t = *s.rt->state().t;
  const int world = t.world_size(), me = t.rank();
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(world));
  std::vector<int64_t> local_pos;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id >= s.lo && id < s.hi) {
      local_pos.push_back(i);
    } else if (s.machine_rows != nullptr && id >= s.machine_lo && id < s.machine_hi) {
      // Another trainer of this machine owns the row: it is in the memory we share. (Its
      // writer's lock is in its own process: rows of a sibling are not row-atomic, see
      // docs/dist.md.)
      std::memcpy(out + i * rb, s.machine_rows + (id - s.machine_lo) * rb, rb);
    } else {
      pos[s.policy.owner(id)].push_back(i);
    }
  }
  if (rb == 0) {
    return;
  }
  if (!local_pos.empty()) {
    // Local rows under the row lock: a writer of this rank's rows (a local thread, or the
    // server for a peer) never interleaves with these copies.
    std::shared_lock<std::shared_mutex> lk(s.rows_mu);
    if (s.dev) {
      std::vector<int64_t> local_rel(local_pos.size());
      for (size_t k = 0; k < local_pos.size(); ++k) {
        local_rel[k] = ids[local_pos[k]] - s.lo;
      }
      std::vector<uint8_t> rows(local_pos.size() * rb);
      gather_device_rows(s, local_rel.data(), static_cast<int64_t>(local_rel.size()), rows.data());
      for (size_t k = 0; k < local_pos.size(); ++k) {
        std::memcpy(out + local_pos[k] * rb, rows.data() + k * rb, rb);
      }
    } else {
      for (int64_t i : local_pos) {
        std::memcpy(out + i * rb, s.data + (ids[i] - s.lo) * rb, rb);
      }
    }
  }
  try {
    // Gets for rows of at least min_get_bytes, and for any row of an owner whose region is
    // mapped here (a get is then a copy, cheaper than the owner's server at every size);
    // requests for the rest.
    std::vector<int> get_owners, request_owners;
    for (int p = 0; p < world; ++p) {
      if (p == me || pos[p].empty()) {
        continue;
      }
      const bool get = s.one_sided && (rb >= s.min_get_bytes || s.remotes[p]->mapped() != nullptr);
      (get ? get_owners : request_owners).push_back(p);
    }
    std::vector<transport::PendingResponse> pending(static_cast<size_t>(world));
    for (int p : request_owners) {
      Writer w;
      w.put<uint64_t>(s.id);
      w.put<uint64_t>(pos[p].size());
      for (int64_t i : pos[p]) {
        w.put<int64_t>(ids[i]);
      }
      pending[p] = t.request_async(p, kMsgRead, transport::ByteView(w.buf));
    }
    if (!get_owners.empty()) {
      // Owners in parallel: each get waits for its own flush.
      std::vector<std::exception_ptr> errs(get_owners.size());
      std::vector<std::thread> th;
      try {
        for (size_t k = 1; k < get_owners.size(); ++k) {
          th.emplace_back([&, k] {
            try {
              get_rows(s, get_owners[k], ids, pos[get_owners[k]], out);
            } catch (...) {
              errs[k] = std::current_exception();
            }
          });
        }
      } catch (...) {
        // A thread could not start (a process or thread limit): the started ones still use
        // this frame's buffers; joined before the error goes up (a joinable std::thread
        // destroyed would terminate the process).
        for (auto& x : th) {
          x.join();
        }
        throw;
      }
      try {
        get_rows(s, get_owners[0], ids, pos[get_owners[0]], out);
      } catch (...) {
        errs[0] = std::current_exception();
      }
      for (auto& x : th) {
        x.join();
      }
      for (auto& e : errs) {
        if (e) {
          std::rethrow_exception(e);
        }
      }
    }
    for (int p : request_owners) {
      transport::Bytes b = pending[p].wait();
      TESSERA_EXPECTS(b.size() == pos[p].size() * rb, ValueError,
                      "DistTensor '{}': rank {} answered {} bytes for {} rows of {} bytes", s.name,
                      p, b.size(), pos[p].size(), rb);
      for (size_t k = 0; k < pos[p].size(); ++k) {
        std::memcpy(out + pos[p][k] * rb, b.data() + k * rb, rb);
      }
    }
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(fmt::format("DistTensor '{}' read of {} rows", s.name, n));
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(fmt::format("DistTensor '{}' read of {} rows", s.name, n));
  } catch (const transport::RemoteError&) {
    rethrow_with_context(fmt::format("DistTensor '{}' read of {} rows", s.name, n));
  }
}

}  // namespace detail

// --- DistTensor -------------------------------------------------------------------------------

DistTensor::DistTensor(const std::shared_ptr<Runtime>& rt, const std::string& name,
                       std::vector<int64_t> shape, DType dtype, PartPolicy policy,
                       const InitFn& init, bool persistent, Placement placement,
                       const MachineRows& machine) {
  TESSERA_EXPECTS(rt != nullptr, ValueError, "DistTensor '{}': null runtime", name);
  TESSERA_EXPECTS(!name.empty(), ValueError, "DistTensor: empty name");
  TESSERA_EXPECTS(!shape.empty(), ValueError, "DistTensor '{}': shape must have >= 1 dimension",
                  name);
  for (int64_t d : shape) {
    TESSERA_EXPECTS(d >= 0, ValueError, "DistTensor '{}': negative dimension in shape {}", name,
                    shape_string(shape));
  }
  const int world = rt->world_size(), me = rt->rank();
  TESSERA_EXPECTS(policy.world_size() == world, ValueError,
                  "DistTensor '{}': the {} policy covers {} ranks but the world has {}", name,
                  policy.kind, policy.world_size(), world);
  TESSERA_EXPECTS(
      policy.offsets.front() == 0 && std::is_sorted(policy.offsets.begin(), policy.offsets.end()),
      ValueError, "DistTensor '{}': policy offsets must rise from 0", name);
  TESSERA_EXPECTS(shape[0] == policy.num_rows(), ValueError,
                  "DistTensor '{}': shape {} has {} rows but the {} policy covers {}", name,
                  shape_string(shape), shape[0], policy.kind, policy.num_rows());
  TESSERA_EXPECTS(placement == Placement::kHost || placement == Placement::kDevice, ValueError,
                  "DistTensor '{}': unknown placement code {}", name, static_cast<int>(placement));
  if (placement == Placement::kDevice) {
    TESSERA_EXPECTS(cuda::compiled_with_cuda(), NotCompiledError,
                    "DistTensor '{}': Placement::kDevice needs CUDA (not_compiled_with_cuda: this "
                    "Tessera build has TESSERA_WITH_CUDA=OFF); rebuild with "
                    "-DTESSERA_WITH_CUDA=ON or create the tensor with Placement::kHost",
                    name);
  }
  // Collective from here, attaching included: every rank must agree on what it creates or
  // attaches to, and a step that fails on one rank (no GPU, no memory, an init that throws, a
  // name that exists with another shape) fails every rank instead of leaving the others waiting
  // in the next collective. Ranks that disagree on whether the name exists (one dropped the last
  // handle of a non-persistent tensor, another kept one) fail too, instead of some creating
  // (collectively) while the others attach (alone) and every later collective pairs wrongly.
  auto& st = rt->state();
  auto& t = *st.t;
  const transport::CollectiveLabel label(t, fmt::format("DistTensor '{}'", name));
  const std::string context = fmt::format("DistTensor '{}' creation", name);
  std::shared_ptr<detail::TensorStore> existing;
  uint64_t id;
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    auto it = st.by_name.find(name);
    if (it != st.by_name.end()) {
      existing = it->second;
      // Held through the collectives: a handle dropped meanwhile on another thread would
      // otherwise let every rank list the tensor as dropped and free it under this attach.
      ref_ = existing->handle.lock();
    }
    id = existing ? existing->id : st.next_tensor_id;
  }
  try {
    if (existing) {
      const auto& e = *existing;
      TESSERA_EXPECTS(
          e.shape == shape && e.dtype == dtype && e.policy == policy && e.placement == placement,
          ValueError, "DistTensor '{}' already exists with {}; it cannot be created again with {}",
          name, detail::describe(e.shape, e.dtype, e.policy, e.placement),
          detail::describe(shape, dtype, policy, placement));
    } else if (placement == Placement::kDevice) {
      cuda::require_cuda(fmt::format("DistTensor '{}' (Placement::kDevice)", name).c_str());
    }
  } catch (...) {
    err = std::current_exception();
  }
  // [u8 1: attaches to an existing tensor, 0: creates it][u64 bytes of what it is][what it is]
  // [u64 IDs of the dropped tensors this rank still keeps (see reclaim_dropped)].
  const std::string meta =
      fmt::format("'{}' (id {}) {}", name, id, detail::describe(shape, dtype, policy, placement));
  const std::vector<uint64_t> dropped = detail::dropped_tensor_ids(st);
  const uint64_t meta_bytes = meta.size();
  transport::Bytes mine(1 + 8 + meta.size() + 8 * dropped.size(), existing ? 1 : 0);
  std::memcpy(mine.data() + 1, &meta_bytes, 8);
  std::memcpy(mine.data() + 9, meta.data(), meta.size());
  if (!dropped.empty()) {  // memcpy from an empty vector's null data() is undefined
    std::memcpy(mine.data() + 9 + meta.size(), dropped.data(), 8 * dropped.size());
  }
  const auto all = detail::all_or_nothing(t, context, err, mine);
  std::vector<int> creating, attaching;
  std::vector<std::string> metas(world);
  std::vector<std::vector<uint64_t>> dropped_by(world);
  for (int r = 0; r < world; ++r) {
    const transport::Bytes& b = all[r];
    uint64_t n = 0;
    TESSERA_ASSERT(b.size() >= 9, "DistTensor '{}': short agreement from rank {}", name, r);
    std::memcpy(&n, b.data() + 1, 8);
    TESSERA_ASSERT(b.size() >= 9 + n && (b.size() - 9 - n) % 8 == 0,
                   "DistTensor '{}': malformed agreement from rank {}", name, r);
    (b[0] ? attaching : creating).push_back(r);
    metas[r].assign(reinterpret_cast<const char*>(b.data()) + 9, n);
    dropped_by[r].resize((b.size() - 9 - n) / 8);
    if (!dropped_by[r].empty()) {
      std::memcpy(dropped_by[r].data(), b.data() + 9 + n, b.size() - 9 - n);
    }
  }
  detail::reclaim_dropped(st, dropped_by);
  if (!creating.empty() && !attaching.empty()) {
    TESSERA_FAIL(ValueError,
                 "DistTensor '{}': {} {} {} it (no tensor of that name lives there: a "
                 "non-persistent tensor's name is released when the last handle on a rank is "
                 "dropped) while {} {} {} to the one that exists there (a handle is still "
                 "alive); drop the handles of a non-persistent tensor on every rank, or on none, "
                 "before creating it again (or make it persistent)",
                 name, creating.size() > 1 ? "ranks" : "rank", fmt::join(creating, ", "),
                 creating.size() > 1 ? "create" : "creates",
                 attaching.size() > 1 ? "ranks" : "rank", fmt::join(attaching, ", "),
                 attaching.size() > 1 ? "attach" : "attaches");
  }
  for (int r = 0; r < world; ++r) {
    const std::string& theirs = metas[r];
    TESSERA_EXPECTS(theirs == meta, ValueError,
                    "DistTensor {} differs between ranks: rank {} {} {} while rank {} {} {} "
                    "(create tensors collectively, in the same order, with the same arguments)",
                    existing ? "attaching" : "creation", r, existing ? "attaches to" : "created",
                    theirs, me, existing ? "attaches to" : "created", meta);
  }
  if (existing) {
    s_ = existing;
    std::lock_guard<std::mutex> lk(st.mu);
    if (!ref_) {
      ref_ = s_->handle.lock();
    }
    if (!ref_) {
      ref_ = std::make_shared<detail::Ref>(rt, s_);
      s_->handle = ref_;
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lk(st.mu);
    st.next_tensor_id = id + 1;
  }
  std::shared_ptr<detail::TensorStore> s;
  try {
    s = std::make_shared<detail::TensorStore>();
    s->id = id;
    s->name = name;
    s->shape = shape;
    s->dtype = dtype;
    s->policy = policy;
    s->persistent = persistent;
    s->row_bytes = dtype_size(dtype);
    for (size_t i = 1; i < shape.size(); ++i) {
      s->row_bytes *= static_cast<size_t>(shape[i]);
    }
    std::tie(s->lo, s->hi) = policy.range(me);
    s->rt = rt.get();
    s->placement = placement;
    if (machine.base != nullptr) {
      TESSERA_EXPECTS(placement == Placement::kHost && machine.lo <= s->lo && s->hi <= machine.hi,
                      ValueError,
                      "DistTensor '{}': machine-shared rows [{}, {}) must be host memory holding "
                      "this rank's rows [{}, {})",
                      name, machine.lo, machine.hi, s->lo, s->hi);
      s->machine_hold = machine.hold;
      s->machine_rows = machine.base;
      s->machine_lo = machine.lo;
      s->machine_hi = machine.hi;
      s->machine_trainers = machine.trainers;
      s->machine_local = machine.local;
    }
    // Peers never get device rows one-sidedly: the owner's server answers (a gather kernel). Nor
    // rows in machine-shared memory, which is not registered with the transport.
    s->one_sided =
        st.one_sided && world > 1 && placement == Placement::kHost && s->machine_rows == nullptr;
    s->min_get_bytes = st.min_get_bytes;
    const size_t bytes = static_cast<size_t>(s->hi - s->lo) * s->row_bytes;
    if (placement == Placement::kDevice) {
      detail::init_device_shard(*s, init);
    } else {
      if (s->machine_rows != nullptr) {
        s->data = machine.base + static_cast<size_t>(s->lo - machine.lo) * s->row_bytes;
      } else if (s->one_sided) {
        // The rows, one stamp per row (peers check their one-sided copies against it), then the
        // count of writes (peers skip the check when no write overlapped their copy).
        const size_t soff = detail::stamps_offset(s->hi - s->lo, s->row_bytes);
        const size_t qoff = detail::seq_offset(s->hi - s->lo, s->row_bytes);
        s->region = t.allocate_memory(qoff + sizeof(uint64_t));
        s->data = static_cast<uint8_t*>(s->region->data());
        s->stamps = reinterpret_cast<uint64_t*>(s->data + soff);
        static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                          std::atomic<uint64_t>::is_always_lock_free,
                      "peers read the write count as 8 plain bytes");
        s->write_seq = new (s->data + qoff) std::atomic<uint64_t>(0);
#if defined(__SANITIZE_THREAD__)
        // Peers' one-sided gets copy from this region (over UCX tcp, this process's UCX progress
        // thread does the copy) while writers change it: the race that the write count and the
        // stamps detect, by design. (It hides races among this process's own threads on the
        // region too; they copy in and out of it only under rows_mu.)
        AnnotateBenignRaceSized(__FILE__, __LINE__, s->data, qoff + sizeof(uint64_t),
                                "DistTensor rows read by peers' one-sided gets");
#endif
      } else {
        // Zeroed on every core (the first touch of gigabytes of fresh pages is what costs).
        s->heap.reset(new uint8_t[std::max<size_t>(bytes, 1)]);
        s->data = s->heap.get();
      }
      constexpr size_t kGrain = size_t{8} << 20;
      if (!machine.filled) {
        parallel_for(0, static_cast<int64_t>((bytes + kGrain - 1) / kGrain), 1,
                     [&](int64_t c0, int64_t c1, int64_t) {
                       const size_t b = static_cast<size_t>(c0) * kGrain;
                       const size_t e = std::min(bytes, static_cast<size_t>(c1) * kGrain);
                       std::memset(s->data + b, 0, e - b);
                     });
      }
      if (init && s->hi > s->lo && !machine.filled) {
        init(s->lo, s->hi, s->data);
      }
      if (s->stamps != nullptr) {
        const detail::TensorStore& cs = *s;
        parallel_for(0, s->hi - s->lo, 4096,
                     [&](int64_t r0, int64_t r1, int64_t) { detail::restamp(cs, r0, r1); });
      }
    }
    std::lock_guard<std::mutex> lk(st.mu);
    st.tensors[id] = s;
    st.by_name[name] = s;
  } catch (...) {
    err = std::current_exception();
  }
  // A second collective: nobody asks for rows before every owner has registered them, and
  // nobody keeps a tensor that another rank failed to create.
  try {
    if (world > 1 || err) {
      detail::all_or_nothing(t, context, err);
    }
    if (s->one_sided) {
      s->remotes = t.exchange_regions(*s->region);
    }
  } catch (...) {
    if (!err) {
      std::lock_guard<std::mutex> lk(st.mu);
      st.tensors.erase(id);
      st.by_name.erase(name);
    }
    throw;
  }
  s_ = s;
  ref_ = std::make_shared<detail::Ref>(rt, s_);
  s_->handle = ref_;
  created_ = true;
}

const std::string& DistTensor::name() const {
  return s_->name;
}
const std::vector<int64_t>& DistTensor::shape() const {
  return s_->shape;
}
DType DistTensor::dtype() const {
  return s_->dtype;
}
int64_t DistTensor::num_rows() const {
  return s_->policy.num_rows();
}
size_t DistTensor::row_bytes() const {
  return s_->row_bytes;
}
const PartPolicy& DistTensor::policy() const {
  return s_->policy;
}
bool DistTensor::persistent() const {
  return s_->persistent;
}
void DistTensor::release_name() {
  TESSERA_EXPECTS(defined(), ValueError, "release_name: the DistTensor is undefined");
  auto& st = s_->rt->state();
  std::lock_guard<std::mutex> lk(st.mu);
  auto it = st.by_name.find(s_->name);
  if (it != st.by_name.end() && it->second == s_) {
    st.by_name.erase(it);
    st.retired.push_back(s_);  // as in ~Ref: peers may still read it
  }
}
Placement DistTensor::placement() const {
  return s_->placement;
}
Runtime& DistTensor::runtime() const {
  return *s_->rt;
}
std::pair<int64_t, int64_t> DistTensor::local_range() const {
  return {s_->lo, s_->hi};
}
void* DistTensor::local_data() const {
  TESSERA_EXPECTS(s_->placement == Placement::kHost, ValueError,
                  "DistTensor '{}': its rows are in device memory (Placement::kDevice), not host "
                  "memory; use local_device_data(), or read() for a host copy",
                  s_->name);
  return s_->data;
}
void DistTensor::local_rows_changed(int64_t begin, int64_t end) {
  TESSERA_EXPECTS(defined(), ValueError, "local_rows_changed of an undefined DistTensor");
  TESSERA_EXPECTS(s_->lo <= begin && begin <= end && end <= s_->hi, IndexError,
                  "DistTensor '{}' local_rows_changed: [{}, {}) is not within this rank's rows "
                  "[{}, {})",
                  s_->name, begin, end, s_->lo, s_->hi);
  std::unique_lock<std::shared_mutex> lk(s_->rows_mu);
  const detail::RowWrites bracket(*s_);
  detail::restamp(*s_, begin - s_->lo, end - s_->lo);
}

void* DistTensor::local_device_data() const {
  TESSERA_EXPECTS(s_->placement == Placement::kDevice, ValueError,
                  "DistTensor '{}': its rows are in host memory (Placement::kHost); use "
                  "local_data()",
                  s_->name);
  return s_->data;
}
MachineRows DistTensor::machine_rows() const {
  MachineRows mr;
  if (s_->machine_rows != nullptr) {
    mr.hold = s_->machine_hold;
    mr.base = const_cast<uint8_t*>(s_->machine_rows);
    mr.lo = s_->machine_lo;
    mr.hi = s_->machine_hi;
    mr.trainers = s_->machine_trainers;
    mr.local = s_->machine_local;
  }
  return mr;
}
int DistTensor::device_index() const {
  return s_->dev ? s_->dev->device : -1;
}

Array DistTensor::read(ops::Span<const int64_t> ids) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  std::vector<int64_t> shape = s_->shape;
  shape[0] = ids.size();
  Array out = Array::zeros(s_->dtype, shape);
  detail::read_rows(*s_, ids.data(), ids.size(), static_cast<uint8_t*>(out.raw_mut()));
  return out;
}

void DistTensor::read_into(ops::Span<const int64_t> ids, void* out) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  TESSERA_EXPECTS(out != nullptr || ids.empty() || s_->row_bytes == 0, ValueError,
                  "DistTensor '{}' read_into: null output", s_->name);
  detail::read_rows(*s_, ids.data(), ids.size(), static_cast<uint8_t*>(out));
}

void DistTensor::write(ops::Span<const int64_t> ids, const Array& rows) {
  TESSERA_EXPECTS(defined(), ValueError, "write to an undefined DistTensor");
  TESSERA_EXPECTS(rows.dtype() == s_->dtype, TypeError,
                  "DistTensor '{}' write: rows are {} but the tensor is {}", s_->name,
                  dtype_name(rows.dtype()), dtype_name(s_->dtype));
  TESSERA_EXPECTS(rows.rows() == ids.size() && rows.row_bytes() == s_->row_bytes, ValueError,
                  "DistTensor '{}' write: rows of shape {} for {} IDs of a tensor of shape {}",
                  s_->name, rows.shape_str(), ids.size(), shape_string(s_->shape));
  write(ids, rows.raw());
}

void DistTensor::write(ops::Span<const int64_t> ids, const void* rows_v) {
  TESSERA_EXPECTS(defined(), ValueError, "write to an undefined DistTensor");
  const auto& s = *s_;
  const auto* rows = static_cast<const uint8_t*>(rows_v);
  TESSERA_EXPECTS(rows != nullptr || ids.empty() || s.row_bytes == 0, ValueError,
                  "DistTensor '{}' write: null rows", s.name);
  detail::check_ids(s, ids.data(), ids.size(), "write");
  TESSERA_EXPECTS(!s.mirror, ValueError,
                  "DistTensor '{}' write: it has a read-only device mirror (mirror_on_device) that "
                  "would go stale; drop_mirror() first",
                  s.name);
  const size_t rb = s.row_bytes;
  auto& t = *s.rt->state().t;
  const int world = t.world_size(), me = t.rank();
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(world));
  std::vector<int64_t> local_pos;
  for (int64_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id >= s.lo && id < s.hi) {
      local_pos.push_back(i);
    } else {
      pos[s.policy.owner(id)].push_back(i);
    }
  }
  if (rb && !local_pos.empty()) {
    // Row-atomic: no reader of this rank (nor the server answering a peer) copies these rows
    // while they change; a peer's one-sided copy is checked against the stamps set here.
    std::unique_lock<std::shared_mutex> lk(s.rows_mu);
    if (s.dev) {
      std::vector<int64_t> local_rel;
      std::vector<uint8_t> local_rows;
      local_rel.reserve(local_pos.size());
      local_rows.reserve(local_pos.size() * rb);
      for (int64_t i : local_pos) {
        local_rel.push_back(ids[i] - s.lo);
        local_rows.insert(local_rows.end(), rows + i * rb, rows + (i + 1) * rb);
      }
      detail::scatter_device_rows(s, local_rel.data(), static_cast<int64_t>(local_rel.size()),
                                  local_rows.data());
    } else {
      const detail::RowWrites bracket(s);
      for (int64_t i : local_pos) {
        const int64_t rel = ids[i] - s.lo;
        std::memcpy(s.data + rel * rb, rows + i * rb, rb);
        if (s.stamps != nullptr) {
          s.stamps[rel] = detail::row_stamp(rows + i * rb, rb);
        }
      }
    }
  }
  try {
    std::vector<transport::PendingResponse> pending(static_cast<size_t>(world));
    for (int p = 0; p < world; ++p) {
      if (p == me || pos[p].empty()) {
        continue;
      }
      detail::Writer w;
      w.buf.reserve(16 + pos[p].size() * (8 + rb));
      w.put<uint64_t>(s.id);
      w.put<uint64_t>(pos[p].size());
      for (int64_t i : pos[p]) {
        w.put<int64_t>(ids[i]);
      }
      for (int64_t i : pos[p]) {
        w.put_bytes(rows + i * rb, rb);
      }
      pending[p] = t.request_async(p, detail::kMsgWrite, transport::ByteView(w.buf));
    }
    for (auto& pr : pending) {
      if (pr.valid()) {
        pr.wait();  // the owner's acknowledgement
      }
    }
  } catch (const transport::PeerLostError&) {
    detail::rethrow_with_context(
        fmt::format("DistTensor '{}' write of {} rows", s.name, ids.size()));
  } catch (const transport::TimeoutError&) {
    detail::rethrow_with_context(
        fmt::format("DistTensor '{}' write of {} rows", s.name, ids.size()));
  } catch (const transport::RemoteError&) {
    detail::rethrow_with_context(
        fmt::format("DistTensor '{}' write of {} rows", s.name, ids.size()));
  }
}

Array DistTensor::read_collective(ops::Span<const int64_t> ids) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  const auto& s = *s_;
  auto& t = *s.rt->state().t;
  const transport::CollectiveLabel label(t, fmt::format("DistTensor '{}' read_collective", s.name));
  const int world = t.world_size();
  const size_t rb = s.row_bytes;
  std::vector<std::vector<int64_t>> pos;
  const auto asked = detail::exchange_read_requests(
      s, ids.data(), ids.size(), "read_collective",
      [&] { detail::check_ids(s, ids.data(), ids.size(), "read_collective"); }, pos);
  std::vector<transport::Bytes> rows(static_cast<size_t>(world));
  std::vector<int64_t> dev_rel;  // device rows: all peers' rows in one gather below
  std::shared_lock<std::shared_mutex> lk(s.rows_mu);
  for (int p = 0; p < world; ++p) {
    const size_t k = asked[p].size() / 8;
    rows[p].resize(k * rb);
    for (size_t j = 0; j < k; ++j) {
      int64_t id;
      std::memcpy(&id, asked[p].data() + 8 * j, 8);
      TESSERA_EXPECTS(id >= s.lo && id < s.hi, IndexError,
                      "DistTensor '{}': rank {} asked rank {} for row {} it does not own", s.name,
                      p, t.rank(), id);
      if (rb && s.dev) {
        dev_rel.push_back(id - s.lo);
      } else if (rb) {
        std::memcpy(rows[p].data() + j * rb, s.data + (id - s.lo) * rb, rb);
      }
    }
  }
  if (!dev_rel.empty()) {
    std::vector<uint8_t> all(dev_rel.size() * rb);
    detail::gather_device_rows(s, dev_rel.data(), static_cast<int64_t>(dev_rel.size()), all.data());
    size_t o = 0;
    for (int p = 0; p < world; ++p) {
      if (!rows[p].empty()) {
        std::memcpy(rows[p].data(), all.data() + o, rows[p].size());
        o += rows[p].size();
      }
    }
  }
  lk.unlock();
  const auto got = t.all_to_all_v(rows);
  std::vector<int64_t> shape = s.shape;
  shape[0] = ids.size();
  Array out = Array::zeros(s.dtype, shape);
  auto* o = static_cast<uint8_t*>(out.raw_mut());
  for (int p = 0; p < world; ++p) {
    TESSERA_EXPECTS(got[p].size() == pos[p].size() * rb, ValueError,
                    "DistTensor '{}': rank {} sent {} bytes for {} rows", s.name, p, got[p].size(),
                    pos[p].size());
    for (size_t k = 0; k < pos[p].size(); ++k) {
      if (rb) {
        std::memcpy(o + pos[p][k] * rb, got[p].data() + k * rb, rb);
      }
    }
  }
  return out;
}

void DistTensor::read_into_device(ops::Span<const int64_t> ids, void* out_device,
                                  cuda::StreamHandle stream) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  detail::check_device_output(*s_, ids, out_device, "read_into_device", false);
  detail::read_rows_device(*s_, ids.data(), ids.size(), out_device, stream);
}

void DistTensor::read_into_device_ids(const int64_t* d_ids, int64_t n, void* out_device,
                                      cuda::StreamHandle stream) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  const auto& s = *s_;
  TESSERA_EXPECTS(n >= 0, ValueError, "DistTensor '{}' read_into_device_ids: n = {}", s.name, n);
  if (n == 0 || s.row_bytes == 0) {
    return;
  }
  const bool all_local = s.lo == 0 && s.hi == s.policy.num_rows();
  if (all_local && (s.mirror || s.dev)) {
    // Every row is this rank's: the device IDs are the row indices, one kernel, no host trip.
    // Out-of-range IDs zero-fill their rows (the caller's IDs come from the sampler).
    TESSERA_EXPECTS(d_ids != nullptr && out_device != nullptr, ValueError,
                    "DistTensor '{}' read_into_device_ids: null pointer", s.name);
    detail::check_rows_on_current_device(s, "read_into_device_ids");
    if (s.mirror) {
      detail::gather_mirror(s, d_ids, n, out_device, stream);
    } else {
      cuda::gather_rows_impl(s.data, s.hi - s.lo, static_cast<int64_t>(s.row_bytes), d_ids,
                             cuda::IndexType::kInt64, n, out_device, nullptr, stream);
    }
    return;
  }
  std::vector<int64_t> ids(static_cast<size_t>(n));
  cuda::copy_async(ids.data(), d_ids, static_cast<size_t>(n) * 8, stream);
  cuda::synchronize(stream);  // the IDs route the read to their owners
  read_into_device(ids, out_device, stream);
}

void DistTensor::mirror_on_device(cuda::Placement where, ops::Span<const int64_t> hot_rows) {
  TESSERA_EXPECTS(defined(), ValueError, "mirror of an undefined DistTensor");
  TESSERA_EXPECTS(cuda::compiled_with_cuda(), NotCompiledError,
                  "DistTensor '{}' mirror_on_device needs CUDA (not_compiled_with_cuda: this "
                  "Tessera build has TESSERA_WITH_CUDA=OFF)",
                  s_->name);
  cuda::require_cuda(fmt::format("DistTensor '{}' mirror_on_device", s_->name).c_str());
  detail::make_mirror(*s_, where, hot_rows.data(), hot_rows.size());
}

void DistTensor::drop_mirror() {
  if (s_) {
    s_->mirror.reset();
  }
}

DeviceMirrorInfo DistTensor::mirror_info() const {
  DeviceMirrorInfo i;
  if (!s_ || !s_->mirror) {
    return i;
  }
  const auto& m = *s_->mirror;
  i.mirrored = true;
  i.placement = m.placement;
  i.device = m.device;
  const int64_t bytes = (s_->hi - s_->lo) * static_cast<int64_t>(s_->row_bytes);
  if (m.placement == cuda::Placement::kGpu) {
    i.gpu_bytes = bytes;
  } else {
    i.pinned_bytes = bytes;
  }
  if (m.cache) {
    i.cache_rows = m.cache->capacity_rows();
    i.gpu_bytes += i.cache_rows * static_cast<int64_t>(s_->row_bytes);
  }
  return i;
}

CacheCounters DistTensor::mirror_cache_counters(bool reset) const {
  CacheCounters c;
  if (!s_ || !s_->mirror || !s_->mirror->cache) {
    return c;
  }
  const auto& m = *s_->mirror;
  cuda::DeviceGuard guard(m.device);
  cuda::Stream st;
  m.cache->read_counters(st.get(), &c.lookups, &c.hits);
  if (reset) {
    m.cache->reset_counters(st.get());
    st.synchronize();
  }
  return c;
}

void DistTensor::read_collective_into_device(ops::Span<const int64_t> ids, void* out_device,
                                             cuda::StreamHandle stream) const {
  TESSERA_EXPECTS(defined(), ValueError, "read of an undefined DistTensor");
  detail::read_collective_device(*s_, ids.data(), ids.size(), out_device, stream, [&] {
    detail::check_device_output(*s_, ids, out_device, "read_collective_into_device", true);
  });
}

}  // namespace tessera::dist
