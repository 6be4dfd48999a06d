// SPDX-License-Identifier: Apache-2.0
// Stream-ordered caching allocator: pure C++ over an Upstream, shared by the CUDA and CPU-only
// builds (tests check the caching logic with a host upstream).
#include <algorithm>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda {

CachingAllocator::CachingAllocator(Upstream& upstream) : up_(upstream) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks are the caller's leak; free only what we hold. No quiesce in a destructor
  // that may run at exit after the driver is gone: cudaFree itself synchronizes.
  for (auto& [key, list] : free_) {
    for (void* p : list) {
      up_.deallocate(p, std::get<2>(key));
    }
  }
  for (auto& [key, list] : retired_) {
    for (void* p : list) {
      up_.deallocate(p, key.second);
    }
  }
  for (const Orphan& o : orphans_) {
    up_.deallocate(o.p, o.size);
  }
}

uint64_t CachingAllocator::retirements(int device, StreamHandle stream) const {
  auto it = retired_count_.find({device, stream});
  return it == retired_count_.end() ? 0 : it->second;
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
  const int device = up_.device();
  std::lock_guard<std::mutex> lock(mu_);
  ++st_.requests;
  void* p = nullptr;
  auto take = [&](std::vector<void*>& list) {
    p = list.back();
    list.pop_back();
    ++st_.cache_hits;
    st_.bytes_cached -= static_cast<int64_t>(size);
  };
  auto it = free_.find({device, stream, size});
  auto old = retired_.find({device, size});
  if (it != free_.end() && !it->second.empty()) {
    take(it->second);
  } else if (old != retired_.end() && !old->second.empty()) {
    take(old->second);
  } else {
    p = up_.allocate(size);
    TESSERA_ASSERT(p != nullptr, "upstream returned null for {} bytes", size);
    ++st_.upstream_allocs;
  }
  live_.emplace(p, Block{size, stream, device, retirements(device, stream)});
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
  if (b.retirements == retirements(b.device, b.stream)) {
    free_[{b.device, b.stream, b.size}].push_back(p);
  } else {  // its stream was retired since: no stream may take it before release_cached()
    orphans_.push_back({p, b.size, b.device});
  }
  st_.bytes_in_use -= static_cast<int64_t>(b.size);
  st_.bytes_cached += static_cast<int64_t>(b.size);
}

void CachingAllocator::retire_stream(StreamHandle stream) {
  const int device = up_.device();
  std::lock_guard<std::mutex> lock(mu_);
  ++retired_count_[{device, stream}];
  for (auto it = free_.lower_bound({device, stream, 0});
       it != free_.end() && std::get<0>(it->first) == device && std::get<1>(it->first) == stream;
       it = free_.erase(it)) {
    std::vector<void*>& to = retired_[{device, std::get<2>(it->first)}];
    to.insert(to.end(), it->second.begin(), it->second.end());
  }
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int> devices;
  for (const auto& [key, list] : free_) {
    if (!list.empty()) {
      devices.insert(std::get<0>(key));
    }
  }
  for (const auto& [key, list] : retired_) {
    if (!list.empty()) {
      devices.insert(key.first);
    }
  }
  for (const Orphan& o : orphans_) {
    devices.insert(o.device);
  }
  for (int d : devices) {
    up_.quiesce(d);
  }
  auto give_back = [&](void* p, size_t size) {
    up_.deallocate(p, size);
    ++st_.upstream_frees;
  };
  for (auto& [key, list] : free_) {
    for (void* p : list) {
      give_back(p, std::get<2>(key));
    }
  }
  for (auto& [key, list] : retired_) {
    for (void* p : list) {
      give_back(p, key.second);
    }
  }
  for (const Orphan& o : orphans_) {
    give_back(o.p, o.size);
  }
  free_.clear();
  retired_.clear();
  orphans_.clear();
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
