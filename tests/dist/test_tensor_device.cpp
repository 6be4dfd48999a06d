// SPDX-License-Identifier: Apache-2.0
// DistTensor on the GPU (label gpu): rows placed in device memory (Placement::kDevice), reads into
// device memory (read_into_device) and the NCCL read_collective_into_device, each compared byte
// for byte with a host-placed tensor of the same contents (the oracle, itself checked against the
// formula that filled it). Every case runs in forked processes (the transport suite's harness),
// so this process never initializes CUDA before a fork; a rank without the devices it needs
// reports "SKIP: ..." and the case is skipped. Cases:
//   * OneRank: local + nccl at 1 rank; float32 rows of 37 and 64 columns, uint8 rows of 3 bytes,
//     1-D int64, 0 rows, 0-byte rows; IDs empty, one, all in order and reversed, 5000 with
//     repeats; device and pinned outputs; writes with repeated IDs (last wins).
//   * TwoRanksUcx: 2 ranks over ucx tcp sharing the GPU(s): remote device rows come through the
//     owner's server; writes to a peer's device rows.
//   * TwoRanksNccl: 2 ranks, ucx tcp + nccl, one GPU each (skipped with fewer than 2 GPUs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "multiprocess.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/embedding.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/transport/transport.hpp"

namespace tessera::test {
namespace {

using dist::DistTensor;
using dist::PartPolicy;
using dist::Placement;
using dist::Runtime;

// --- helpers (run inside the ranks) -------------------------------------------------------------

/// "" when this process sees at least `need` CUDA devices, else the reason to skip.
std::string skip_without_devices(int need) {
  const int n = cuda::device_count();
  if (n >= need) return "";
  return fmt::format("SKIP: no CUDA device for every rank ({} visible, {} needed; {})", n, need,
                     cuda::describe());
}

std::string skip_without_ucx() {
  for (const auto& b : transport::list_backends())
    if (b.name == "ucx" && !b.compiled) {
      return "SKIP: built without UCX (TESSERA_WITH_UCX=OFF): needs several ranks";
    }
  return "";
}

/// Byte `j` of row `r` as the tensors are filled (version 0) or rewritten (version 1).
uint8_t fill_byte(int64_t r, size_t j, int version) {
  const uint64_t x = static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull + j * 0x632BE59BD9B4E019ull +
                     static_cast<uint64_t>(version) * 0xD6E8FEB86659FD93ull;
  return static_cast<uint8_t>((x >> 29) ^ (x >> 47));
}

dist::InitFn filler(size_t rb) {
  return [rb](int64_t b, int64_t e, void* dst) {
    auto* p = static_cast<uint8_t*>(dst);
    for (int64_t r = b; r < e; ++r)
      for (size_t j = 0; j < rb; ++j)
        p[(r - b) * rb + j] = fill_byte(r, j, 0);
  };
}

std::vector<uint8_t> bytes_of(const Array& a) {
  const auto* p = static_cast<const uint8_t*>(a.raw());
  return std::vector<uint8_t>(p, p + a.nbytes());
}

void check_equal(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                 const std::string& what) {
  RANK_CHECK(got.size() == want.size(), "{}: {} bytes, expected {}", what, got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    RANK_CHECK(got[i] == want[i], "{}: byte {} is {}, expected {}", what, i, got[i], want[i]);
}

/// Where read_into_device writes: device memory or pinned host memory (UVA).
enum class Out { kDevice, kPinned };

/// t.read_into_device (or read_collective_into_device) into a poisoned buffer, downloaded.
std::vector<uint8_t> read_to_device(const DistTensor& t, const std::vector<int64_t>& ids, Out out,
                                    bool collective, cuda::StreamHandle stream) {
  const size_t nb = ids.size() * t.row_bytes();
  cuda::DeviceBuffer dev;
  cuda::PinnedBuffer pin;
  void* p;
  if (out == Out::kDevice) {
    dev = cuda::DeviceBuffer(nb + 16);
    p = dev.data();
  } else {
    pin = cuda::PinnedBuffer(nb + 16);
    p = pin.data();
  }
  // Rows the read misses stay poisoned.
  if (out == Out::kDevice)
    cuda::memset_async(p, 0xAB, nb + 16, stream);
  else
    std::memset(p, 0xAB, nb + 16);
  if (collective)
    t.read_collective_into_device(ids, p, stream);
  else
    t.read_into_device(ids, p, stream);
  std::vector<uint8_t> back(nb + 16);
  cuda::copy_async(back.data(), p, nb + 16, stream);
  cuda::synchronize(stream);
  for (size_t i = nb; i < nb + 16; ++i)
    RANK_CHECK(back[i] == 0xAB, "{} wrote past its {} bytes (byte {})",
               collective ? "read_collective_into_device" : "read_into_device", nb, i);
  back.resize(nb);
  return back;
}

/// The expected bytes of t[ids] under `version_of` (the fill version of each row).
std::vector<uint8_t> expected(const std::vector<int64_t>& ids, size_t rb,
                              const std::vector<int>& version_of) {
  std::vector<uint8_t> v(ids.size() * rb);
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = 0; j < rb; ++j)
      v[i * rb + j] = fill_byte(ids[i], j, version_of[ids[i]]);
  return v;
}

struct IdSet {
  std::string name;
  std::vector<int64_t> ids;
};

std::vector<IdSet> id_sets(int64_t rows, uint64_t seed) {
  std::vector<IdSet> s{{"empty", {}}};
  if (rows == 0) return s;
  s.push_back({"one", {rows - 1}});
  std::vector<int64_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  s.push_back({"all", all});
  std::reverse(all.begin(), all.end());
  s.push_back({"reversed", all});
  std::mt19937_64 rng(seed);
  std::vector<int64_t> rnd(5000);
  for (auto& x : rnd)
    x = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  s.push_back({"random5000", rnd});
  return s;
}

/// Compares every read of `d` (device-placed) and `h` (host-placed, same contents) with the
/// expected bytes. `collective`: also the read_collective paths (every rank must call this with
/// the same tensors in the same order).
void compare_reads(const DistTensor& h, const DistTensor& d, const std::vector<IdSet>& sets,
                   const std::vector<int>& version_of, bool device_collective,
                   cuda::StreamHandle stream) {
  const size_t rb = h.row_bytes();
  for (const auto& [name, ids] : sets) {
    const std::string what = fmt::format("'{}' ids {}", d.name(), name);
    const auto want = expected(ids, rb, version_of);
    check_equal(bytes_of(h.read(ids)), want, what + ": host tensor read (oracle)");
    check_equal(bytes_of(d.read(ids)), want, what + ": device tensor read");
    check_equal(bytes_of(d.read_collective(ids)), want, what + ": device tensor read_collective");
    for (const DistTensor* t : {&h, &d}) {
      const std::string tw = what + (t == &h ? " host tensor" : " device tensor");
      check_equal(read_to_device(*t, ids, Out::kDevice, false, stream), want,
                  tw + ": read_into_device (device output)");
      check_equal(read_to_device(*t, ids, Out::kPinned, false, stream), want,
                  tw + ": read_into_device (pinned output)");
      if (device_collective) {
        check_equal(read_to_device(*t, ids, Out::kDevice, true, stream), want,
                    tw + ": read_collective_into_device");
      }
    }
  }
}

JobSpec job(int world, const std::string& host_backend) {
  JobSpec s;
  s.world = world;
  s.deadline_s = 240;  // CUDA and NCCL start-up in every rank
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "60";
  s.env["TESSERA_OP_TIMEOUT"] = "60";
  s.env["TESSERA_TRANSPORT"] = host_backend;
  if (host_backend == "ucx") s.env["UCX_TLS"] = "tcp";
  return s;
}

#define SKIP_IF_A_RANK_SKIPPED(res)                                          \
  do {                                                                       \
    for (const auto& r_ : (res))                                             \
      if (r_.exit_code == 0 && r_.message.rfind("SKIP:", 0) == 0)            \
        GTEST_SKIP() << r_.message.substr(6) << " (rank " << r_.rank << ")"; \
  } while (0)

#define EXPECT_RANKS_OK(res)                       \
  do {                                             \
    for (const auto& r_ : (res))                   \
      EXPECT_EQ(r_.exit_code, 0) << describe(res); \
  } while (0)

struct Shape {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
};

size_t row_bytes(const Shape& sh) {
  size_t rb = dtype_size(sh.dtype);
  for (size_t i = 1; i < sh.shape.size(); ++i)
    rb *= static_cast<size_t>(sh.shape[i]);
  return rb;
}

std::vector<Shape> shapes(int64_t rows) {
  return {{"f32x37", {rows, 37}, DType::kFloat32}, {"f32x64", {rows, 64}, DType::kFloat32},
          {"u8x3", {rows, 3}, DType::kUInt8},      {"i64", {rows}, DType::kInt64},
          {"empty", {0, 5}, DType::kFloat32},      {"zero_width", {rows, 0}, DType::kFloat32}};
}

// --- cases --------------------------------------------------------------------------------------

TEST(DistTensorDevice, OneRank) {
  auto res = run_ranks(job(1, "local"), [](int) -> std::string {
    if (auto why = skip_without_devices(1); !why.empty()) return why;
    auto rt = Runtime::create("local");
    rt->attach_device_transport("nccl");
    RANK_CHECK(rt->has_device_transport() && rt->device_transport().name() == "nccl",
               "no nccl device transport");
    cuda::Stream stream;
    for (const auto& sh : shapes(1000)) {
      const int64_t rows = sh.shape[0];
      const PartPolicy pol = PartPolicy::even(rows, 1);
      const size_t rb = row_bytes(sh);
      DistTensor h(rt, "h_" + sh.name, sh.shape, sh.dtype, pol, filler(rb), false,
                   Placement::kHost);
      DistTensor d(rt, "d_" + sh.name, sh.shape, sh.dtype, pol, filler(rb), false,
                   Placement::kDevice);
      RANK_CHECK(d.placement() == Placement::kDevice, "placement");
      RANK_CHECK(d.device_index() == cuda::current_device(), "device {} vs current {}",
                 d.device_index(), cuda::current_device());
      // The device shard holds exactly the host shard's bytes.
      std::vector<uint8_t> shard(static_cast<size_t>(rows) * rb);
      cuda::copy_async(shard.data(), d.local_device_data(), shard.size(), stream.get());
      cuda::synchronize(stream.get());
      const auto* hp = static_cast<const uint8_t*>(h.local_data());
      check_equal(shard, std::vector<uint8_t>(hp, hp + shard.size()), sh.name + " device shard");
      bool threw = false;
      try {
        d.local_data();
      } catch (const ValueError&) {
        threw = true;
      }
      RANK_CHECK(threw, "local_data() of a device tensor did not refuse");
      // Same name, other placement: refused, naming both.
      threw = false;
      try {
        DistTensor(rt, "d_" + sh.name, sh.shape, sh.dtype, pol, nullptr, false, Placement::kHost);
      } catch (const ValueError& e) {
        threw = std::string(e.what()).find("placement device") != std::string::npos;
      }
      RANK_CHECK(threw, "re-creating a device tensor as a host tensor was not refused");

      std::vector<int> version(static_cast<size_t>(rows), 0);
      const auto sets = id_sets(rows, 7);
      compare_reads(h, d, sets, version, true, stream.get());
      if (rows == 0) continue;
      // Writes with repeated IDs: the last row of each ID wins, on the device as on the host
      // (the earlier ones carry other bytes).
      std::vector<int64_t> w{5, 7, 5, 0, rows - 1, 5, 7, rows / 2};
      std::vector<uint8_t> vals(w.size() * rb);
      for (size_t i = 0; i < w.size(); ++i) {
        const bool last =
            std::find(w.begin() + static_cast<std::ptrdiff_t>(i) + 1, w.end(), w[i]) == w.end();
        for (size_t j = 0; j < rb; ++j)
          vals[i * rb + j] = last ? fill_byte(w[i], j, 1) : static_cast<uint8_t>(i * 31 + j);
        version[static_cast<size_t>(w[i])] = 1;
      }
      h.write(w, vals.data());
      d.write(w, vals.data());
      compare_reads(h, d, sets, version, true, stream.get());
    }
    return "ok";
  });
  SKIP_IF_A_RANK_SKIPPED(res);
  EXPECT_RANKS_OK(res);
}

// The sparse optimizers update host rows in place: an embedding with device rows is refused
// when the optimizer is made, and one with a device mirror at its first step (the mirror would
// go on serving the old rows), every error naming the embedding.
TEST(DistTensorDevice, SparseOptimizersRefuseDeviceRows) {
  auto res = run_ranks(job(1, "local"), [](int) -> std::string {
    if (auto why = skip_without_devices(1); !why.empty()) {
      return why;
    }
    auto rt = Runtime::create("local");
    const PartPolicy pol = PartPolicy::even(100, 1);
    DistTensor d(rt, "emb_dev", {100, 4}, DType::kFloat32, pol, nullptr, false, Placement::kDevice);
    std::string said;
    try {
      (void)dist::SparseOptimizer::adagrad(d);
    } catch (const ValueError& e) {
      said = e.what();
    }
    RANK_CHECK(said.find("'emb_dev' must have host rows") != std::string::npos, "said: {}", said);
    DistTensor h(rt, "emb_mirrored", {100, 4}, DType::kFloat32, pol, nullptr, false,
                 Placement::kHost);
    h.mirror_on_device(cuda::Placement::kGpu);
    dist::SparseOptimizer opt = dist::SparseOptimizer::adagrad(h);
    const std::vector<int64_t> ids = {3, 5};
    const std::vector<float> g(8, 1.0f);
    said.clear();
    try {
      opt.step(ids, g.data());
    } catch (const ValueError& e) {
      said = e.what();
    }
    RANK_CHECK(said.find("'emb_mirrored': the embedding has a read-only device mirror") !=
                   std::string::npos,
               "said: {}", said);
    return "ok";
  });
  SKIP_IF_A_RANK_SKIPPED(res);
  EXPECT_RANKS_OK(res);
}

TEST(DistTensorDevice, TwoRanksUcx) {
  auto res = run_ranks(job(2, "ucx"), [](int rank) -> std::string {
    if (auto why = skip_without_ucx(); !why.empty()) return why;
    if (auto why = skip_without_devices(1); !why.empty()) return why;
    cuda::set_device(rank % cuda::device_count());
    auto rt = Runtime::create("ucx");
    const int world = rt->world_size();
    cuda::Stream stream;
    const int64_t rows = 5003;
    for (const auto& sh : {Shape{"f32x37", {rows, 37}, DType::kFloat32},
                           Shape{"f32x256", {rows, 256}, DType::kFloat32},
                           Shape{"u8x3", {rows, 3}, DType::kUInt8}}) {
      const PartPolicy pol = PartPolicy::even(rows, world);
      const size_t rb = row_bytes(sh);
      DistTensor h(rt, "h_" + sh.name, sh.shape, sh.dtype, pol, filler(rb), false,
                   Placement::kHost);
      DistTensor d(rt, "d_" + sh.name, sh.shape, sh.dtype, pol, filler(rb), false,
                   Placement::kDevice);
      std::vector<int> version(static_cast<size_t>(rows), 0);
      // Different IDs on each rank: rows of both owners, repeated, in any order.
      const auto sets = id_sets(rows, 100 + static_cast<uint64_t>(rank));
      compare_reads(h, d, sets, version, false, stream.get());
      // Every rank has read version 0 before any rewrites a row it reads.
      rt->barrier();
      // Every rank rewrites the rows r with r % world == rank (half of them a peer's).
      std::vector<int64_t> mine;
      for (int64_t r = rank; r < rows; r += world)
        mine.push_back(r);
      std::vector<uint8_t> vals(mine.size() * rb);
      for (size_t i = 0; i < mine.size(); ++i)
        for (size_t j = 0; j < rb; ++j)
          vals[i * rb + j] = fill_byte(mine[i], j, 1);
      h.write(mine, vals.data());
      d.write(mine, vals.data());
      rt->barrier();
      std::fill(version.begin(), version.end(), 1);
      compare_reads(h, d, sets, version, false, stream.get());
      rt->barrier();
    }
    return "ok";
  });
  SKIP_IF_A_RANK_SKIPPED(res);
  EXPECT_RANKS_OK(res);
}

TEST(DistTensorDevice, TwoRanksNccl) {
  auto res = run_ranks(job(2, "ucx"), [](int rank) -> std::string {
    if (auto why = skip_without_ucx(); !why.empty()) return why;
    // NCCL refuses two ranks on one GPU.
    if (auto why = skip_without_devices(2); !why.empty()) return why;
    auto rt = Runtime::create("ucx");
    rt->attach_device_transport("nccl");  // selects device LOCAL_RANK % devices
    RANK_CHECK(cuda::current_device() == rank, "rank {} on device {}", rank,
               cuda::current_device());
    const int world = rt->world_size();
    cuda::Stream stream;
    const int64_t rows = 5003;
    const PartPolicy pol = PartPolicy::even(rows, world);
    const size_t rb = 37 * 4;
    DistTensor h(rt, "h", {rows, 37}, DType::kFloat32, pol, filler(rb), false, Placement::kHost);
    DistTensor d(rt, "d", {rows, 37}, DType::kFloat32, pol, filler(rb), false, Placement::kDevice);
    std::vector<int> version(static_cast<size_t>(rows), 0);
    compare_reads(h, d, id_sets(rows, 200 + static_cast<uint64_t>(rank)), version, true,
                  stream.get());
    return "ok";
  });
  SKIP_IF_A_RANK_SKIPPED(res);
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace tessera::test
