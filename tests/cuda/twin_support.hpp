// SPDX-License-Identifier: Apache-2.0
// Shared by the twin tests: which backend this executable checks, random host data, and
// device round trips. test_twins_cpu checks the CPU twins against plain oracles (runs in CI);
// test_twins_cuda (label gpu) checks the CUDA twins against the CPU twins and skips without a
// device.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/gather.hpp"

namespace tessera::test {

enum class Backend { kCpu, kCuda };
inline const char* backend_name(Backend b) {
  return b == Backend::kCpu ? "cpu" : "cuda";
}

#if TESSERA_TEST_CUDA
inline constexpr Backend kBackend = Backend::kCuda;
#else
inline constexpr Backend kBackend = Backend::kCpu;
#endif

/// Skips a CUDA case when this machine has no GPU (or the build has no CUDA).
#define TESSERA_SKIP_WITHOUT_DEVICE(backend)                                                  \
  do {                                                                                        \
    if ((backend) == ::tessera::test::Backend::kCuda && ::tessera::cuda::device_count() == 0) \
      GTEST_SKIP() << "no CUDA device (" << ::tessera::cuda::describe() << ")";               \
  } while (0)

inline std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i)
    v[i] = static_cast<unsigned char>(rng());
  return v;
}

/// `n` indices in [0, rows) of type I (uniform, repeats allowed) as raw bytes.
template <typename I>
std::vector<I> random_indices(int64_t n, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<I> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = static_cast<I>(rng() % static_cast<uint64_t>(rows));
  return v;
}

/// A device (or pinned) copy of host bytes, with `offset` leading bytes so that the data
/// pointer is misaligned on purpose when offset is not a multiple of 16.
class DeviceCopy {
 public:
  DeviceCopy(const void* host, size_t bytes, size_t offset, bool pinned)
      : bytes_(bytes), offset_(offset) {
    if (pinned) {
      pinned_ = cuda::PinnedBuffer(bytes + offset + 1);
      if (bytes) std::memcpy(data(), host, bytes);
    } else {
      dev_ = cuda::DeviceBuffer(bytes + offset + 1);
      cuda::copy_async(data(), host, bytes, nullptr);
      cuda::synchronize(nullptr);
    }
  }
  void* data() const {
    return static_cast<char*>(pinned_.data() ? pinned_.data() : dev_.data()) + offset_;
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> v(bytes_);
    cuda::synchronize(nullptr);
    cuda::copy_async(v.data(), data(), bytes_, nullptr);
    cuda::synchronize(nullptr);
    return v;
  }
  ops::Memory memory() const {
    return pinned_.data() ? ops::Memory::kPinned : ops::Memory::kDevice;
  }

 private:
  size_t bytes_, offset_;
  cuda::DeviceBuffer dev_;
  cuda::PinnedBuffer pinned_;
};

}  // namespace tessera::test
