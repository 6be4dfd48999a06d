// SPDX-License-Identifier: Apache-2.0
// DistTensor's device API without a GPU (runs everywhere, one process, `local` transport): what a
// build without CUDA says (NotCompiledError naming the tensor and the fix), what a CUDA build on
// a machine without a device says (ValueError), and the argument checks that come before any
// CUDA call (null output, bad IDs, no device transport, the wrong kind of transport, host/device
// accessors). The GPU behaviour itself is in test_tensor_device.cpp (label gpu).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/transport/transport.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

using dist::DistTensor;
using dist::PartPolicy;
using dist::Placement;
using dist::Runtime;

std::shared_ptr<Runtime> local_runtime() {
  return Runtime::create("local", transport::Options{});
}

DistTensor host_tensor(const std::shared_ptr<Runtime>& rt, const std::string& name) {
  return DistTensor(rt, name, {10, 3}, DType::kFloat32, PartPolicy::even(10, 1),
                    [](int64_t b, int64_t e, void* dst) {
                      auto* f = static_cast<float*>(dst);
                      for (int64_t i = 0; i < (e - b) * 3; ++i)
                        f[i] = static_cast<float>(b * 3 + i);
                    });
}

bool has_device() {
  return cuda::compiled_with_cuda() && cuda::device_count() > 0;
}

TEST(DistTensorDeviceArgs, DevicePlacementWithoutCudaOrDevice) {
  if (has_device()) GTEST_SKIP() << "a device is present: test_tensor_device covers it";
  auto rt = local_runtime();
  auto make = [&] {
    DistTensor(rt, "feat", {10, 3}, DType::kFloat32, PartPolicy::even(10, 1), nullptr, false,
               Placement::kDevice);
  };
  if (!cuda::compiled_with_cuda()) {
    TESSERA_EXPECT_THROW_MSG(make(), NotCompiledError, "DistTensor 'feat'");
    TESSERA_EXPECT_THROW_MSG(make(), NotCompiledError, "Placement::kDevice needs CUDA");
    TESSERA_EXPECT_THROW_MSG(make(), NotCompiledError, "not_compiled_with_cuda");
    TESSERA_EXPECT_THROW_MSG(make(), NotCompiledError, "-DTESSERA_WITH_CUDA=ON");
  } else {
    TESSERA_EXPECT_THROW_MSG(make(), ValueError, "no CUDA device is available");
    TESSERA_EXPECT_THROW_MSG(make(), ValueError, "DistTensor 'feat' (Placement::kDevice)");
  }
  // Nothing was registered: the name is still free for a host tensor of another shape.
  DistTensor h(rt, "feat", {4}, DType::kInt64, PartPolicy::even(4, 1));
  EXPECT_EQ(h.placement(), Placement::kHost);
}

TEST(DistTensorDeviceArgs, ShapeErrorsComeBeforeTheDeviceCheck) {
  auto rt = local_runtime();
  TESSERA_EXPECT_THROW_MSG(DistTensor(rt, "x", {10, -1}, DType::kFloat32, PartPolicy::even(10, 1),
                                      nullptr, false, Placement::kDevice),
                           ValueError, "negative dimension");
  TESSERA_EXPECT_THROW_MSG(DistTensor(rt, "x", {9, 2}, DType::kFloat32, PartPolicy::even(10, 1),
                                      nullptr, false, Placement::kDevice),
                           ValueError, "has 9 rows but the even policy covers 10");
  TESSERA_EXPECT_THROW_MSG(DistTensor(rt, "x", {10, 2}, DType::kFloat32, PartPolicy::even(10, 1),
                                      nullptr, false, static_cast<Placement>(7)),
                           ValueError, "unknown placement code 7");
}

TEST(DistTensorDeviceArgs, ReadIntoDeviceChecksArgumentsFirst) {
  auto rt = local_runtime();
  DistTensor t = host_tensor(rt, "t");
  std::vector<int64_t> ids{0, 9, 3};
  TESSERA_EXPECT_THROW_MSG(t.read_into_device(ids, nullptr, nullptr), ValueError,
                           "DistTensor 't' read_into_device: null output");
  std::vector<int64_t> bad{0, 10};
  float sink[6];
  TESSERA_EXPECT_THROW_MSG(t.read_into_device(bad, sink, nullptr), IndexError,
                           "row ID 10 at position 1 is outside [0, 10)");
  std::vector<int64_t> neg{-1};
  TESSERA_EXPECT_THROW_MSG(t.read_into_device(neg, sink, nullptr), IndexError, "row ID -1");
  TESSERA_EXPECT_THROW_MSG(DistTensor().read_into_device(ids, sink, nullptr), ValueError,
                           "undefined DistTensor");
  if (has_device()) return;  // the rest is what a machine without a device says
  float out[9];
  if (!cuda::compiled_with_cuda()) {
    TESSERA_EXPECT_THROW_MSG(t.read_into_device(ids, out, nullptr), NotCompiledError,
                             "device output needs CUDA (not_compiled_with_cuda");
    // Even an empty read says so: the call cannot mean anything in this build.
    TESSERA_EXPECT_THROW_MSG(t.read_into_device({}, nullptr, nullptr), NotCompiledError,
                             "not_compiled_with_cuda");
  } else {
    TESSERA_EXPECT_THROW_MSG(t.read_into_device(ids, out, nullptr), ValueError,
                             "no CUDA device is available");
  }
}

TEST(DistTensorDeviceArgs, ReadCollectiveIntoDeviceNeedsADeviceTransport) {
  auto rt = local_runtime();
  DistTensor t = host_tensor(rt, "t");
  std::vector<int64_t> ids{1, 2};
  float out[6];
  TESSERA_EXPECT_THROW_MSG(t.read_collective_into_device(ids, nullptr, nullptr), ValueError,
                           "read_collective_into_device: null output");
  std::vector<int64_t> bad{11};
  TESSERA_EXPECT_THROW_MSG(t.read_collective_into_device(bad, out, nullptr), IndexError,
                           "row ID 11");
  if (!cuda::compiled_with_cuda()) {
    TESSERA_EXPECT_THROW_MSG(t.read_collective_into_device(ids, out, nullptr), NotCompiledError,
                             "not_compiled_with_cuda");
  } else {
    TESSERA_EXPECT_THROW_MSG(t.read_collective_into_device(ids, out, nullptr), ValueError,
                             "Runtime::attach_device_transport");
  }
  // The host read_collective is unchanged.
  Array got = t.read_collective(ids);
  ASSERT_EQ(got.rows(), 2);
  EXPECT_EQ(got.data<float>()[0], 3.0f);
  EXPECT_EQ(got.data<float>()[5], 8.0f);
}

TEST(DistTensorDeviceArgs, AttachDeviceTransportRefusesWhatCannotServe) {
  auto rt = local_runtime();
  EXPECT_FALSE(rt->has_device_transport());
  TESSERA_EXPECT_THROW_MSG(rt->device_transport(), ValueError, "has no device transport");
  TESSERA_EXPECT_THROW_MSG(rt->attach_device_transport(std::unique_ptr<transport::Transport>()),
                           ValueError, "null transport");
  // A host transport has no device-memory collectives.
  TESSERA_EXPECT_THROW_MSG(
      rt->attach_device_transport(transport::create_transport("local", transport::Options{})),
      ValueError, "transport 'local' has no device-memory collectives");
  EXPECT_FALSE(rt->has_device_transport());
  if (has_device()) return;
  // The nccl backend: absent without CUDA/NCCL, unusable without a device.
  bool nccl_compiled = false;
  for (const auto& b : transport::list_backends())
    if (b.name == "nccl") nccl_compiled = b.compiled;
  if (!nccl_compiled) {
    TESSERA_EXPECT_THROW_MSG(rt->attach_device_transport("nccl"), NotCompiledError,
                             "'nccl' transport was not compiled");
  } else {
    TESSERA_EXPECT_THROW_MSG(rt->attach_device_transport("nccl"), ValueError, "cannot run here");
  }
  EXPECT_FALSE(rt->has_device_transport());
}

TEST(DistTensorDeviceArgs, HostAndDeviceAccessors) {
  auto rt = local_runtime();
  DistTensor t = host_tensor(rt, "t");
  EXPECT_EQ(t.placement(), Placement::kHost);
  EXPECT_EQ(t.device_index(), -1);
  ASSERT_NE(t.local_data(), nullptr);
  EXPECT_EQ(static_cast<float*>(t.local_data())[29], 29.0f);
  TESSERA_EXPECT_THROW_MSG(t.local_device_data(), ValueError,
                           "its rows are in host memory (Placement::kHost)");
}

}  // namespace
}  // namespace tessera::test
