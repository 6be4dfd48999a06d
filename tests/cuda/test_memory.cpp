// SPDX-License-Identifier: Apache-2.0
// Device memory, pinned memory, UVA registration of an mmapped .npy, streams/events and the
// caching allocator over cudaMalloc. CUDA cases only, built into test_twins_cuda alone (the
// allocator logic is checked without a GPU in test_placement.cpp); each skips when no device is
// present.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tessera/cuda/memory.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/ops/gather.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

class CudaMemory : public ::testing::Test {
 protected:
  void SetUp() override { TESSERA_SKIP_WITHOUT_DEVICE(kBackend); }
};

TEST_F(CudaMemory, BuffersAreAddressableAndRoundTrip) {
  cuda::DeviceBuffer d(1000);
  cuda::PinnedBuffer p(1000);
  std::vector<unsigned char> host = random_bytes(1000, 1), back(1000);
  EXPECT_TRUE(cuda::is_device_accessible(d.data()));
  EXPECT_TRUE(cuda::is_device_accessible(p.data()));
  EXPECT_FALSE(cuda::is_device_accessible(host.data()));
  cuda::Stream s;
  std::memcpy(p.data(), host.data(), 1000);
  cuda::copy_async(d.data(), p.data(), 1000, s.get());
  cuda::copy_async(back.data(), d.data(), 1000, s.get());
  s.synchronize();
  EXPECT_EQ(back, host);
  cuda::DeviceBuffer moved = std::move(d);
  EXPECT_EQ(d.data(), nullptr);
  EXPECT_EQ(moved.size(), 1000u);
}

TEST_F(CudaMemory, EventsTimeAndOrderStreams) {
  cuda::Stream a, b;
  cuda::Event start, stop;
  cuda::DeviceBuffer buf(64 << 20);
  start.record(a.get());
  cuda::memset_async(buf.data(), 1, buf.size(), a.get());
  stop.record(a.get());
  stop.make_wait(b.get());  // b's later work runs after the memset, no host sync
  std::vector<unsigned char> back(16);
  cuda::copy_async(back.data(), buf.data(), 16, b.get());
  b.synchronize();
  EXPECT_EQ(back, std::vector<unsigned char>(16, 1));
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
}

TEST_F(CudaMemory, CachingAllocatorSteadyStateHasNoCudaMalloc) {
  cuda::CachingAllocator alloc(cuda::device_upstream());
  cuda::Stream s;
  for (int batch = 0; batch < 20; ++batch) {
    void* a = alloc.allocate(1000 + batch, s.get());
    void* b = alloc.allocate(1 << 20, s.get());
    cuda::memset_async(a, 0, 1000, s.get());
    cuda::memset_async(b, 0, 1 << 20, s.get());
    alloc.deallocate(a);
    alloc.deallocate(b);
  }
  s.synchronize();
  const cuda::AllocatorStats st = alloc.stats();
  EXPECT_EQ(st.upstream_allocs, 2);
  EXPECT_EQ(st.cache_hits, 38);
  alloc.release_cached();
  EXPECT_EQ(alloc.stats().upstream_frees, 2);
}

TEST_F(CudaMemory, RegisteredMmapNpyIsGatheredThroughUva) {
  TempDir dir;
  const int64_t rows = 3001, cols = 37;  // odd width: the data region starts mid-page
  std::vector<float> v(rows * cols);
  const auto bytes = random_bytes(v.size() * 4, 9);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  write_npy(dir / "feat.npy", DType::kFloat32, {rows, cols}, v.data());
  const Array a = mmap_npy(dir / "feat.npy");
  cuda::HostRegistration reg(a.raw(), a.nbytes(), /*read_only=*/true);
  ASSERT_TRUE(reg.registered());
  const auto idx = random_indices<int64_t>(5000, rows, 10);
  std::vector<float> cpu(5000 * cols);
  const ops::MatrixRef src = ops::MatrixRef::of(a, ops::Memory::kPinned);
  ops::gather_rows(ops::MatrixRef::of(a), ops::IndexRef::of(idx.data(), 5000),
                   ops::MatrixRef{cpu.data(), DType::kFloat32, 5000, cols});
  DeviceCopy d_idx(idx.data(), idx.size() * 8, 0, false);
  DeviceCopy d_out(cpu.data(), cpu.size() * 4, 0, false);
  cuda::memset_async(d_out.data(), 0xcd, cpu.size() * 4, nullptr);
  ops::gather_rows(src, ops::IndexRef{d_idx.data(), DType::kInt64, 5000, ops::Memory::kDevice},
                   ops::MatrixRef{d_out.data(), DType::kFloat32, 5000, cols, ops::Memory::kDevice});
  const auto got = d_out.download();
  EXPECT_EQ(std::memcmp(got.data(), cpu.data(), got.size()), 0);
}

}  // namespace
}  // namespace tessera::test
