// SPDX-License-Identifier: Apache-2.0
// DistTensor rows in device memory (Placement::kDevice) and reads into device memory. Plain C++
// over tessera::cuda (buffers, streams, the gather/scatter kernels); in a build without CUDA the
// cuda stubs throw NotCompiledError, and the public entry points in tensor.cpp check that first
// and say so in the tensor's own words.
#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::dist::detail {

DeviceShard::DeviceShard() : device(cuda::current_device()) {}

// The members are freed after the destructor's body, on the device it selects; a DistTensor
// dropped while another tensor is created runs this on the caller's thread, whose current
// device (torch's) is restored once they are freed.
DeviceShard::~DeviceShard() {
  if (device >= 0) {
    try {
      on_device.emplace(device);
    } catch (const std::exception&) {
    }
  }
}

DeviceMirror::DeviceMirror() : device(cuda::current_device()) {}

DeviceMirror::~DeviceMirror() {
  if (device >= 0) {
    try {
      on_device.emplace(device);
    } catch (const std::exception&) {
    }
  }
}

namespace {

/// Pinned staging of `bytes` for one transfer: the tensor's kept buffer when it is free (grown
/// to a power of two when too small), else a buffer of this call's own, so concurrent readers
/// and the server never wait for each other. The destructor synchronizes `stream` first, so no
/// copy into or out of the staging is still running when another thread takes it over (also
/// when unwinding).
class StagingLease {
 public:
  StagingLease(const TensorStore& s, size_t bytes, cuda::StreamHandle stream) : stream_(stream) {
    if (bytes == 0) {
      return;
    }
    std::unique_lock<std::mutex> lk(s.staging_mu, std::try_to_lock);
    if (lk.owns_lock()) {
      if (s.staging.size() < bytes) {
        s.staging = cuda::PinnedBuffer();  // free the old one before allocating the larger
        s.staging = cuda::PinnedBuffer(cuda::CachingAllocator::round_size(bytes));
      }
      p_ = static_cast<uint8_t*>(s.staging.data());
      lk_ = std::move(lk);
    } else {
      own_ = cuda::PinnedBuffer(bytes);
      p_ = static_cast<uint8_t*>(own_.data());
    }
  }
  ~StagingLease() {
    if (p_) {
      try {
        cuda::synchronize(stream_);
      } catch (const std::exception&) {
      }
    }
  }
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;
  uint8_t* data() const { return p_; }

 private:
  cuda::StreamHandle stream_;
  std::unique_lock<std::mutex> lk_;  // released after own_ is freed and the stream is idle
  cuda::PinnedBuffer own_;
  uint8_t* p_ = nullptr;
};

cuda::CachingAllocator& scratch() {
  return cuda::scratch_allocator();
}

// A kDevice shard is read by kernels on the caller's stream: it must be the caller's device.
void check_same_device(const TensorStore& s, const char* what) {
  const int cur = cuda::current_device();
  TESSERA_EXPECTS(cur == s.dev->device, ValueError,
                  "DistTensor '{}' {}: its rows live on CUDA device {} but the calling thread's "
                  "current device is {} (select device {} first)",
                  s.name, what, s.dev->device, cur, s.dev->device);
}

}  // namespace

void init_device_shard(TensorStore& s, const InitFn& init) {
  auto dev = std::make_unique<DeviceShard>();
  const size_t bytes = static_cast<size_t>(s.hi - s.lo) * s.row_bytes;
  dev->rows = cuda::DeviceBuffer(bytes);
  const cuda::StreamHandle st = dev->stream.get();
  if (init && s.hi > s.lo) {
    std::vector<uint8_t> host(bytes, 0);  // the init contract: zero-filled host memory
    init(s.lo, s.hi, host.data());
    // From pageable memory: returns once the bytes are staged, so `host` may go afterwards.
    cuda::copy_async(dev->rows.data(), host.data(), bytes, st);
  } else {
    cuda::memset_async(dev->rows.data(), 0, bytes, st);
  }
  cuda::synchronize(st);
  s.data = static_cast<uint8_t*>(dev->rows.data());
  s.dev = std::move(dev);
}

void make_mirror(TensorStore& s, cuda::Placement where, const int64_t* hot_rows, int64_t num_hot) {
  TESSERA_EXPECTS(where != cuda::Placement::kHost, ValueError,
                  "DistTensor '{}' mirror_on_device: placement host is not a device mirror; use "
                  "gpu or uva",
                  s.name);
  TESSERA_EXPECTS(!s.dev, ValueError,
                  "DistTensor '{}' mirror_on_device: its rows already live in device memory "
                  "(Placement::kDevice)",
                  s.name);
  const int64_t rows = s.hi - s.lo;
  const size_t bytes = static_cast<size_t>(rows) * s.row_bytes;
  auto m = std::make_shared<DeviceMirror>();
  m->placement = where;
  cuda::Stream stream;
  if (where == cuda::Placement::kGpu) {
    m->rows = cuda::DeviceBuffer(std::max<size_t>(bytes, 1));
    if (bytes) cuda::copy_async(m->rows.data(), s.data, bytes, stream.get());
  } else {
    m->pinned = cuda::PinnedBuffer(std::max<size_t>(bytes, 1));
    if (bytes) std::memcpy(m->pinned.data(), s.data, bytes);
    if (num_hot > 0 && s.row_bytes > 0) {
      std::vector<int64_t> slot_of(static_cast<size_t>(rows), -1);
      for (int64_t k = 0; k < num_hot; ++k) {
        TESSERA_EXPECTS(hot_rows[k] >= 0 && hot_rows[k] < rows && slot_of[hot_rows[k]] < 0,
                        ValueError,
                        "DistTensor '{}' mirror_on_device: hot row {} at position {} is outside "
                        "[0, {}) or listed twice",
                        s.name, hot_rows[k], k, rows);
        slot_of[hot_rows[k]] = k;
      }
      m->cache = std::make_unique<cuda::FeatureCache>(m->pinned.data(), rows,
                                                      static_cast<int64_t>(s.row_bytes), hot_rows,
                                                      num_hot, slot_of.data(), stream.get());
    }
  }
  cuda::synchronize(stream.get());
  s.mirror = std::move(m);
}

void gather_mirror(const TensorStore& s, const int64_t* d_rel, int64_t n, void* out_device,
                   cuda::StreamHandle stream) {
  const DeviceMirror& m = *s.mirror;
  if (n <= 0 || s.row_bytes == 0) {
    return;
  }
  const auto rb = static_cast<int64_t>(s.row_bytes);
  if (m.cache) {
    cuda::gather_rows_cached_impl(m.src(), s.hi - s.lo, rb, m.cache->cache(), m.cache->slot_of(),
                                  d_rel, cuda::IndexType::kInt64, n, out_device,
                                  m.cache->d_counters(), nullptr, stream);
  } else {
    cuda::gather_rows_impl(m.src(), s.hi - s.lo, rb, d_rel, cuda::IndexType::kInt64, n, out_device,
                           nullptr, stream);
  }
}

void gather_device_rows(const TensorStore& s, const int64_t* rel, int64_t n, uint8_t* out_host) {
  const size_t rb = s.row_bytes;
  if (n <= 0 || rb == 0) {
    return;
  }
  const DeviceShard& d = *s.dev;
  cuda::DeviceGuard guard(d.device);  // e.g. on the transport's handler thread
  const cuda::StreamHandle st = d.stream.get();
  const size_t nb = static_cast<size_t>(n) * rb;
  cuda::ScratchBuffer idx(scratch(), static_cast<size_t>(n) * 8, st);
  cuda::ScratchBuffer rows(scratch(), nb, st);
  cuda::copy_async(idx.data(), rel, static_cast<size_t>(n) * 8, st);
  cuda::gather_rows_impl(s.data, s.hi - s.lo, static_cast<int64_t>(rb), idx.data(),
                         cuda::IndexType::kInt64, n, rows.data(), nullptr, st);
  StagingLease stage(s, nb, st);
  cuda::copy_async(stage.data(), rows.data(), nb, st);
  cuda::synchronize(st);
  std::memcpy(out_host, stage.data(), nb);
}

void scatter_device_rows(const TensorStore& s, const int64_t* rel, int64_t n,
                         const uint8_t* rows_host) {
  const size_t rb = s.row_bytes;
  if (n <= 0 || rb == 0) {
    return;
  }
  // The scatter kernel leaves the winner among repeated rows unspecified; the host rule is
  // "the last one wins", so only the last occurrence of each row is sent to the device.
  std::unordered_map<int64_t, int64_t> last;
  last.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    last[rel[i]] = i;
  }
  std::vector<int64_t> keep_rel;
  std::vector<uint8_t> keep_rows;
  const int64_t* up_rel = rel;
  const uint8_t* up_rows = rows_host;
  int64_t m = n;
  if (static_cast<int64_t>(last.size()) != n) {
    m = static_cast<int64_t>(last.size());
    keep_rel.reserve(last.size());
    keep_rows.reserve(last.size() * rb);
    for (int64_t i = 0; i < n; ++i) {
      if (last[rel[i]] == i) {
        keep_rel.push_back(rel[i]);
        keep_rows.insert(keep_rows.end(), rows_host + i * rb, rows_host + (i + 1) * rb);
      }
    }
    up_rel = keep_rel.data();
    up_rows = keep_rows.data();
  }
  const DeviceShard& d = *s.dev;
  cuda::DeviceGuard guard(d.device);
  const cuda::StreamHandle st = d.stream.get();
  const size_t mb = static_cast<size_t>(m) * rb;
  cuda::ScratchBuffer idx(scratch(), static_cast<size_t>(m) * 8, st);
  cuda::ScratchBuffer rows(scratch(), mb, st);
  cuda::copy_async(idx.data(), up_rel, static_cast<size_t>(m) * 8, st);
  cuda::copy_async(rows.data(), up_rows, mb, st);
  cuda::scatter_rows_impl(rows.data(), m, static_cast<int64_t>(rb), idx.data(),
                          cuda::IndexType::kInt64, s.data, s.hi - s.lo, nullptr, st);
  cuda::synchronize(st);
}

void check_rows_on_current_device(const TensorStore& s, const char* what) {
  if (s.dev) {
    check_same_device(s, what);
  } else if (s.mirror) {
    TESSERA_EXPECTS(cuda::current_device() == s.mirror->device, ValueError,
                    "DistTensor '{}' {}: its device mirror is on CUDA device {} but the calling "
                    "thread's current device is {}",
                    s.name, what, s.mirror->device, cuda::current_device());
  }
}

void read_rows_device(const TensorStore& s, const int64_t* ids, int64_t n, void* out_device,
                      cuda::StreamHandle stream) {
  const size_t rb = s.row_bytes;
  if (n <= 0 || rb == 0) {
    return;
  }
  const size_t nb = static_cast<size_t>(n) * rb;
  if (!s.dev && !s.mirror) {
    // Host rows (local copies, one-sided gets, owners' answers) into pinned staging, then one
    // host-to-device copy; the lease waits for that copy before the staging is reused.
    StagingLease stage(s, nb, stream);
    read_rows(s, ids, n, stage.data());
    cuda::copy_async(out_device, stage.data(), nb, stream);
    cuda::synchronize(stream);
    return;
  }
  check_rows_on_current_device(s, "read_into_device");
  // Local rows (device shard or mirror): one gather kernel straight into the output (other
  // positions are zero-filled by the kernel's out-of-range rule and overwritten below). Remote
  // rows: the owners' answers.
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> rpos, rids;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id >= s.lo && id < s.hi) {
      idx[i] = id - s.lo;
    } else {
      idx[i] = -1;
      rpos.push_back(i);
      rids.push_back(id);
    }
  }
  if (static_cast<int64_t>(rpos.size()) < n) {
    cuda::ScratchBuffer d_idx(scratch(), static_cast<size_t>(n) * 8, stream);
    cuda::copy_async(d_idx.data(), idx.data(), static_cast<size_t>(n) * 8, stream);
    if (s.dev) {
      cuda::gather_rows_impl(s.data, s.hi - s.lo, static_cast<int64_t>(rb), d_idx.data(),
                             cuda::IndexType::kInt64, n, out_device, nullptr, stream);
    } else {
      gather_mirror(s, static_cast<const int64_t*>(d_idx.data()), n, out_device, stream);
    }
  }
  if (rpos.empty()) {
    return;  // all local: asynchronous on `stream`
  }
  const int64_t m = static_cast<int64_t>(rpos.size());
  const size_t mb = static_cast<size_t>(m) * rb;
  StagingLease stage(s, mb, stream);
  read_rows(s, rids.data(), m, stage.data());  // requests: peers never get device rows
  cuda::ScratchBuffer d_rows(scratch(), mb, stream);
  cuda::ScratchBuffer d_pos(scratch(), static_cast<size_t>(m) * 8, stream);
  cuda::copy_async(d_rows.data(), stage.data(), mb, stream);
  cuda::copy_async(d_pos.data(), rpos.data(), static_cast<size_t>(m) * 8, stream);
  cuda::scatter_rows_impl(d_rows.data(), m, static_cast<int64_t>(rb), d_pos.data(),
                          cuda::IndexType::kInt64, out_device, n, nullptr, stream);
  cuda::synchronize(stream);
}

void read_collective_device(const TensorStore& s, const int64_t* ids, int64_t n, void* out_device,
                            cuda::StreamHandle stream, const std::function<void()>& check) {
  auto& st = s.rt->state();
  auto& t = *st.t;
  const transport::CollectiveLabel label(
      t, fmt::format("DistTensor '{}' read_collective_into_device", s.name));
  const int world = t.world_size();
  const size_t rb = s.row_bytes;
  // IDs to their owners over the host transport, every rank's check agreed in the same step
  // (also for rows of 0 bytes: a bad ID on one rank fails every rank, as read_collective does).
  std::vector<std::vector<int64_t>> pos;
  const auto asked = exchange_read_requests(
      s, ids, n, "read_collective_into_device",
      [&] {
        check();
        if (s.dev && rb > 0) {
          check_same_device(s, "read_collective_into_device");
        }
      },
      pos);
  if (rb == 0) {
    return;  // nothing to send
  }
  auto& dt = *st.dt;
  // The rows this rank sends, grouped by the asking rank.
  std::vector<int64_t> rel;
  std::vector<size_t> sc(static_cast<size_t>(world)), so(static_cast<size_t>(world));
  std::vector<size_t> rc(static_cast<size_t>(world)), ro(static_cast<size_t>(world));
  for (int p = 0; p < world; ++p) {
    const size_t k = asked[p].size() / 8;
    so[p] = rel.size() * rb;
    sc[p] = k * rb;
    for (size_t j = 0; j < k; ++j) {
      int64_t id;
      std::memcpy(&id, asked[p].data() + 8 * j, 8);
      TESSERA_EXPECTS(id >= s.lo && id < s.hi, IndexError,
                      "DistTensor '{}': rank {} asked rank {} for row {} it does not own", s.name,
                      p, t.rank(), id);
      rel.push_back(id - s.lo);
    }
  }
  size_t got = 0;
  for (int p = 0; p < world; ++p) {
    ro[p] = got;
    rc[p] = pos[p].size() * rb;
    got += rc[p];
  }
  const int64_t k_rows = static_cast<int64_t>(rel.size());
  const size_t kb = rel.size() * rb;
  cuda::ScratchBuffer send(scratch(), kb, stream);
  cuda::ScratchBuffer recv(scratch(), got, stream);
  std::optional<StagingLease> stage;
  if (k_rows > 0) {
    if (s.dev) {
      cuda::ScratchBuffer d_rel(scratch(), rel.size() * 8, stream);
      cuda::copy_async(d_rel.data(), rel.data(), rel.size() * 8, stream);
      cuda::gather_rows_impl(s.data, s.hi - s.lo, static_cast<int64_t>(rb), d_rel.data(),
                             cuda::IndexType::kInt64, k_rows, send.data(), nullptr, stream);
    } else {
      stage.emplace(s, kb, stream);
      for (size_t j = 0; j < rel.size(); ++j) {
        std::memcpy(stage->data() + j * rb, s.data + static_cast<size_t>(rel[j]) * rb, rb);
      }
      cuda::copy_async(send.data(), stage->data(), kb, stream);
    }
  }
  // The exchange on the device transport's stream, after everything enqueued on `stream` so far
  // (the rows above and the caller's earlier work); then a checked wait for it, so a lost rank
  // or a timeout is an error here instead of a stream that never finishes.
  cuda::Event ready;
  ready.record(stream);
  ready.make_wait(dt.stream());
  try {
    dt.all_to_all_v(send.data(), sc.data(), so.data(), recv.data(), rc.data(), ro.data());
    dt.synchronize();
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(
        fmt::format("DistTensor '{}' read_collective_into_device of {} rows", s.name, n));
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(
        fmt::format("DistTensor '{}' read_collective_into_device of {} rows", s.name, n));
  }
  stage.reset();  // its copy ran before the exchange
  if (n == 0) {
    return;
  }
  // recv holds the rows grouped by owner; out[i] = recv[place of i in that grouping].
  std::vector<int64_t> inv(static_cast<size_t>(n));
  int64_t k = 0;
  for (int p = 0; p < world; ++p) {
    for (int64_t i : pos[p]) {
      inv[i] = k++;
    }
  }
  cuda::ScratchBuffer d_inv(scratch(), static_cast<size_t>(n) * 8, stream);
  cuda::copy_async(d_inv.data(), inv.data(), static_cast<size_t>(n) * 8, stream);
  cuda::gather_rows_impl(recv.data(), n, static_cast<int64_t>(rb), d_inv.data(),
                         cuda::IndexType::kInt64, n, out_device, nullptr, stream);
}

}  // namespace tessera::dist::detail
