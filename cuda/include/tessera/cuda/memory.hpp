// SPDX-License-Identifier: Apache-2.0
// Device memory, pinned host memory, UVA pointers, streams, events and a stream-ordered caching
// allocator for per-batch scratch. Plain C++: safe to include without CUDA (no cuda_runtime.h);
// streams are opaque `StreamHandle`s. In a CPU-only build every constructor that needs the GPU
// throws NotCompiledError (not_compiled_with_cuda); the allocator logic itself is pure C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::cuda {

/// An opaque CUDA stream (a `cudaStream_t`). nullptr is the legacy default stream.
using StreamHandle = void*;

/// An owned, non-blocking CUDA stream on the current device. Move-only. Destroying it waits for
/// its work (errors ignored) and retires it from scratch_allocator() (retire_stream), so the
/// scratch cached for it serves later streams, and a later stream given the same handle value
/// does not inherit blocks whose work had not finished.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& o) noexcept : s_(o.s_), device_(o.device_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle get() const { return s_; }
  /// Blocks the host until all work queued on this stream is done (explicit; never implied).
  void synchronize() const;

 private:
  StreamHandle s_ = nullptr;
  int device_ = -1;
};

/// An owned CUDA event (timing enabled). Move-only.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Records the event on `stream` (asynchronous).
  void record(StreamHandle stream);
  /// Makes `stream` wait for this event on the device (no host synchronization).
  void make_wait(StreamHandle stream) const;
  /// Blocks the host until the event has completed.
  void synchronize() const;
  /// Milliseconds between `start` and this event (both recorded and completed).
  float elapsed_ms_since(const Event& start) const;

 private:
  void* e_ = nullptr;
};

/// Device memory from cudaMalloc on the current device. Move-only; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

/// Pinned (page-locked) host memory from cudaHostAlloc(Portable | Mapped). `data()` is both the
/// host pointer and, under UVA (every 64-bit Linux system with sm_90), the device pointer that
/// kernels read in place over PCIe/NVLink-C2C. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

/// Page-locks an existing host range (e.g. an mmapped .npy data region) with cudaHostRegister
/// (Portable | Mapped, plus ReadOnly for read-only mappings) so kernels can read it through
/// UVA. The range is widened to whole pages. Unregisters on destruction; the memory itself is
/// not owned and must outlive this object. Throws ValueError if the device cannot use the host
/// pointer of registered memory directly (then `device_ptr() != host pointer` would break the
/// one-pointer contract of Memory::kPinned).
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(const void* data, size_t bytes, bool read_only);
  ~HostRegistration();
  HostRegistration(HostRegistration&& o) noexcept : base_(o.base_) { o.base_ = nullptr; }
  HostRegistration& operator=(HostRegistration&&) = delete;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  bool registered() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
};

/// Asynchronous cudaMemcpyAsync(cudaMemcpyDefault) on `stream` (UVA decides the direction).
void copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream);
/// Asynchronous cudaMemsetAsync on `stream`.
void memset_async(void* dst, int value, size_t bytes, StreamHandle stream);
/// Blocks the host until `stream` is idle (explicit synchronization point).
void synchronize(StreamHandle stream);
/// True when `p` is device memory or pinned/registered host memory that kernels can address.
bool is_device_accessible(const void* p);
/// Multiprocessor count and L2 size of the current device.
int multiprocessor_count();
size_t l2_cache_bytes();

/// Where a caching allocator gets its memory. The device upstream is cudaMalloc/cudaFree;
/// tests substitute a host upstream to check the caching logic without a GPU.
class Upstream {
 public:
  virtual ~Upstream() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  /// Called before cached blocks of `device` go back upstream (the device upstream synchronizes
  /// that device).
  virtual void quiesce(int device) { (void)device; }
  /// The calling thread's current device, whose memory allocate() returns.
  virtual int device() const { return 0; }
};
/// cudaMalloc / cudaFree on the current device (quiesce = cudaDeviceSynchronize of the device).
/// CPU-only build: allocate() throws NotCompiledError.
Upstream& device_upstream();

/// Counters of a CachingAllocator (bytes are rounded block sizes).
struct AllocatorStats {
  int64_t upstream_allocs = 0;  ///< calls to Upstream::allocate (cudaMalloc)
  int64_t upstream_frees = 0;   ///< calls to Upstream::deallocate
  int64_t requests = 0;         ///< allocate() calls
  int64_t cache_hits = 0;       ///< requests served from a cached block
  int64_t bytes_in_use = 0;     ///< handed out and not yet returned
  int64_t bytes_cached = 0;     ///< returned and kept for reuse
  int64_t peak_bytes_in_use = 0;
};

/// A stream-ordered caching allocator for per-batch scratch (PyTorch's rule): a block freed on
/// stream S goes back to S's free list and is reused only by later requests on S, whose work is
/// ordered after every earlier use of the block, so no event or synchronization is needed.
/// Blocks are kept per device (a stream handle such as the default stream's 0 names a stream of
/// every device) and handed out for the calling thread's current device only. A stream about to
/// be destroyed is retired (retire_stream): its cached blocks then serve any stream of the device.
/// Sizes are rounded up to powers of two (at least 512 bytes), so batches whose scratch varies
/// in size still hit in steady state. Thread-safe. Zero-byte requests return nullptr.
class CachingAllocator {
 public:
  explicit CachingAllocator(Upstream& upstream = device_upstream());
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least `bytes` of the current device for work on `stream`: one cached for
  /// `stream` on this device, else one of a retired stream, else a new one from upstream.
  void* allocate(size_t bytes, StreamHandle stream);
  /// Returns a block; later requests on the stream it was allocated for may reuse it at once.
  void deallocate(void* p);
  /// For a stream that is idle (every operation on it finished) and about to be destroyed,
  /// on the current device: its cached blocks become reusable by every stream of the device
  /// (without this they would wait for a stream that never comes back). Blocks still live then
  /// are kept apart when they are returned, until release_cached(): their last work may be on
  /// any stream, and a new stream may reuse the handle.
  void retire_stream(StreamHandle stream);
  /// Returns every cached (free) block upstream after Upstream::quiesce() of its device. Not for
  /// hot paths.
  void release_cached();
  AllocatorStats stats() const;
  /// Rounded block size for a request (power of two, >= 512).
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t size;
    StreamHandle stream;
    int device;
    uint64_t retirements;  // of (device, stream) when it was allocated
  };
  uint64_t retirements(int device, StreamHandle stream) const;
  Upstream& up_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  std::map<std::tuple<int, StreamHandle, size_t>, std::vector<void*>> free_;  // device, stream
  std::map<std::pair<int, size_t>, std::vector<void*>> retired_;    // of idle, destroyed streams
  std::map<std::pair<int, StreamHandle>, uint64_t> retired_count_;  // retire_stream calls
  struct Orphan {
    void* p;
    size_t size;
    int device;
  };
  std::vector<Orphan> orphans_;  // returned after their stream was retired
  AllocatorStats st_;
};

/// The process-wide scratch allocator over device_upstream() (one per process; Tessera uses one
/// GPU per process).
CachingAllocator& scratch_allocator();

/// RAII scratch from a CachingAllocator.
class ScratchBuffer {
 public:
  ScratchBuffer(CachingAllocator& a, size_t bytes, StreamHandle stream)
      : a_(&a), p_(a.allocate(bytes, stream)), n_(bytes) {}
  ~ScratchBuffer() {
    if (a_ && p_) a_->deallocate(p_);
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  void* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  CachingAllocator* a_;
  void* p_;
  size_t n_;
};

}  // namespace tessera::cuda
