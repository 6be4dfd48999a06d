// SPDX-License-Identifier: Apache-2.0
// Device and pinned memory, streams and events over the CUDA runtime. Compiled as C++ (no
// kernels here), so nvcc is not needed for this file.
#include <unistd.h>

#include <cstdint>
#include <utility>

#include "tessera/cuda/check.cuh"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {
namespace {
cudaStream_t st(StreamHandle s) {
  return static_cast<cudaStream_t>(s);
}
}  // namespace

Stream::Stream() {
  require_cuda("Stream");
  cudaStream_t s = nullptr;
  TESSERA_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  s_ = s;
  device_ = current_device();
}
Stream::~Stream() {
  if (!s_) {
    return;
  }
  try {
    const DeviceGuard guard(device_);
    TESSERA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(st(s_)));
    scratch_allocator().retire_stream(s_);
  } catch (...) {  // a destructor: the stream still goes
  }
  TESSERA_CUDA_TRY_NOTHROW(cudaStreamDestroy(st(s_)));
}
Stream& Stream::operator=(Stream&& o) noexcept {
  std::swap(s_, o.s_);
  std::swap(device_, o.device_);
  return *this;
}
void Stream::synchronize() const {
  TESSERA_CUDA_TRY(cudaStreamSynchronize(st(s_)));
}

Event::Event() {
  require_cuda("Event");
  cudaEvent_t e = nullptr;
  TESSERA_CUDA_TRY(cudaEventCreate(&e));
  e_ = e;
}
Event::~Event() {
  if (e_) TESSERA_CUDA_TRY_NOTHROW(cudaEventDestroy(static_cast<cudaEvent_t>(e_)));
}
void Event::record(StreamHandle stream) {
  TESSERA_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(e_), st(stream)));
}
void Event::make_wait(StreamHandle stream) const {
  TESSERA_CUDA_TRY(cudaStreamWaitEvent(st(stream), static_cast<cudaEvent_t>(e_), 0));
}
void Event::synchronize() const {
  TESSERA_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(e_)));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  TESSERA_CUDA_TRY(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.e_), static_cast<cudaEvent_t>(e_)));
  return ms;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : n_(bytes) {
  require_cuda("DeviceBuffer");
  if (bytes) TESSERA_CUDA_TRY(cudaMalloc(&p_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) TESSERA_CUDA_TRY_NOTHROW(cudaFree(p_));
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : n_(bytes) {
  require_cuda("PinnedBuffer");
  if (bytes) {
    TESSERA_CUDA_TRY(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    void* d = nullptr;
    TESSERA_CUDA_TRY(cudaHostGetDevicePointer(&d, p_, 0));
    TESSERA_ASSERT(d == p_, "UVA: device pointer {} of pinned memory differs from host {}", d, p_);
  }
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) TESSERA_CUDA_TRY_NOTHROW(cudaFreeHost(p_));
}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  return *this;
}

HostRegistration::HostRegistration(const void* data, size_t bytes, bool read_only) {
  require_cuda("HostRegistration");
  if (bytes == 0) return;
  int dev = 0, direct = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&dev));
  TESSERA_CUDA_TRY(
      cudaDeviceGetAttribute(&direct, cudaDevAttrCanUseHostPointerForRegisteredMem, dev));
  TESSERA_EXPECTS(direct != 0, ValueError,
                  "HostRegistration: device {} cannot use host pointers of registered memory "
                  "directly; copy the array into a PinnedBuffer instead",
                  dev);
  // Register whole pages: an mmapped .npy's data starts after its header, mid-page.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  unsigned flags = cudaHostRegisterPortable | cudaHostRegisterMapped;
  if (read_only) {
    int ro = 0;
    TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, dev));
    TESSERA_EXPECTS(ro != 0, ValueError,
                    "HostRegistration: device {} cannot register read-only host memory "
                    "(cudaDevAttrHostRegisterReadOnlySupported = 0); copy the array into a "
                    "PinnedBuffer instead",
                    dev);
    flags |= cudaHostRegisterReadOnly;
  }
  void* base = reinterpret_cast<void*>(lo);
  TESSERA_CUDA_TRY(cudaHostRegister(base, hi - lo, flags));
  base_ = base;
}
HostRegistration::~HostRegistration() {
  if (base_) TESSERA_CUDA_TRY_NOTHROW(cudaHostUnregister(base_));
}

void copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  if (bytes) TESSERA_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st(stream)));
}
void memset_async(void* dst, int value, size_t bytes, StreamHandle stream) {
  if (bytes) TESSERA_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, st(stream)));
}
void synchronize(StreamHandle stream) {
  TESSERA_CUDA_TRY(cudaStreamSynchronize(st(stream)));
}
bool is_device_accessible(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
         (a.type == cudaMemoryTypeHost && a.devicePointer != nullptr);
}
int multiprocessor_count() {
  int dev = 0, n = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&dev));
  TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}
size_t l2_cache_bytes() {
  int dev = 0, n = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&dev));
  TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrL2CacheSize, dev));
  return static_cast<size_t>(n);
}

int current_device() {
  require_cuda("current_device");
  int dev = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&dev));
  return dev;
}
void set_device(int device) {
  TESSERA_CUDA_TRY(cudaSetDevice(device));
}
DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  const int prev = current_device();
  if (prev != device) {
    set_device(device);
    prev_ = prev;
  }
}
DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) TESSERA_CUDA_TRY_NOTHROW(cudaSetDevice(prev_));
}

namespace {
class DeviceUpstream final : public Upstream {
 public:
  void* allocate(size_t bytes) override {
    require_cuda("scratch allocation");
    void* p = nullptr;
    TESSERA_CUDA_TRY(cudaMalloc(&p, bytes));
    return p;
  }
  void deallocate(void* p, size_t) override { TESSERA_CUDA_TRY_NOTHROW(cudaFree(p)); }
  void quiesce(int device) override {
    const DeviceGuard guard(device);
    TESSERA_CUDA_TRY(cudaDeviceSynchronize());
  }
  int device() const override {
    require_cuda("scratch allocation");
    return current_device();
  }
};
}  // namespace

Upstream& device_upstream() {
  static DeviceUpstream up;
  return up;
}

}  // namespace tessera::cuda
