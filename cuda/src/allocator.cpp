// SPDX-License-Identifier: Apache-2.0
// Stream-ordered caching allocator: pure C++ over an Upstream, shared by the CUDA and CPU-only
// builds (tests check the caching logic with a host upstream).
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda {

CachingAllocator::CachingAllocator(Upstream& upstream) : up_(upstream) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks are the caller's leak; free only what we hold. No quiesce in a destructor
  // that may run at exit after the driver is gone: cudaFree itself synchronizes.
  for (auto& [key, list] : free_)
    for (void* p : list)
      up_.deallocate(p, key.second);
}

size_t CachingAllocator::round_size(size_t bytes) {
  size_t s = 512;
  while (s < bytes)
    s <<= 1;
  return s;
}

void* CachingAllocator::allocate(size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++st_.requests;
  void* p = nullptr;
  auto it = free_.find({stream, size});
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++st_.cache_hits;
    st_.bytes_cached -= static_cast<int64_t>(size);
  } else {
    p = up_.allocate(size);
    TESSERA_ASSERT(p != nullptr, "upstream returned null for {} bytes", size);
    ++st_.upstream_allocs;
  }
  live_.emplace(p, Block{size, stream});
  st_.bytes_in_use += static_cast<int64_t>(size);
  st_.peak_bytes_in_use = std::max(st_.peak_bytes_in_use, st_.bytes_in_use);
  return p;
}

void CachingAllocator::deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  TESSERA_EXPECTS(it != live_.end(), ValueError,
                  "CachingAllocator::deallocate: pointer {} was not allocated here (or was "
                  "already returned)",
                  p);
  const Block b = it->second;
  live_.erase(it);
  free_[{b.stream, b.size}].push_back(p);
  st_.bytes_in_use -= static_cast<int64_t>(b.size);
  st_.bytes_cached += static_cast<int64_t>(b.size);
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  up_.quiesce();
  for (auto& [key, list] : free_) {
    for (void* p : list) {
      up_.deallocate(p, key.second);
      ++st_.upstream_frees;
    }
  }
  free_.clear();
  st_.bytes_cached = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return st_;
}

CachingAllocator& scratch_allocator() {
  // Leaked on purpose: device memory must not be freed after the CUDA runtime tears down.
  static CachingAllocator* a = new CachingAllocator(device_upstream());
  return *a;
}

}  // namespace tessera::cuda
