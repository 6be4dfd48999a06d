// The GPU side of `tessera bench gather`: CUDA events around each run (the library's gather as
// callers get it, a sort of the indices included), warm-up, an L2 flush before every timed run,
// medians; the bound is a cudaMemcpyAsync of the same payload measured in the same process (D2D
// for HBM, pinned H2D for UVA).
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The source of a copy bound: `bytes` of pinned host memory (`pinned`) or of device memory,
// filled with a pattern (the device fill is enqueued on `stream`).
struct BoundSource {
  DeviceBuffer dev;
  PinnedBuffer host;
  BoundSource(size_t bytes, bool pinned, StreamHandle stream) {
    if (pinned) {
      host = PinnedBuffer(bytes);
      std::fill_n(static_cast<unsigned char*>(host.data()), bytes, 0x5a);
    } else {
      dev = DeviceBuffer(bytes);
      memset_async(dev.data(), 0x5a, bytes, stream);
    }
  }
  const void* data() const { return host.data() ? host.data() : dev.data(); }
};

}  // namespace

GatherBenchResult bench_gather_device(const void* src, int64_t src_rows, int64_t row_bytes,
                                      int64_t n, bool uva, int warmup, int iters, uint64_t seed) {
  require_cuda("bench gather");
  TESSERA_EXPECTS(src_rows > 0 && row_bytes > 0 && n > 0 && iters > 0, ValueError,
                  "bench gather: need rows, row bytes, batch and iterations > 0 (got {}, {}, "
                  "{}, {})",
                  src_rows, row_bytes, n, iters);
  Stream stream;
  const size_t payload = static_cast<size_t>(n) * static_cast<size_t>(row_bytes);

  std::vector<int64_t> h_idx(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, src_rows - 1);
  for (auto& x : h_idx)
    x = pick(rng);
  DeviceBuffer idx(h_idx.size() * sizeof(int64_t));
  copy_async(idx.data(), h_idx.data(), idx.size(), stream.get());
  DeviceBuffer out(payload);
  // Flushing twice the L2 size through a memset evicts the gathered rows between runs.
  DeviceBuffer flush(2 * l2_cache_bytes());
  // The bound's source: a contiguous buffer of the same kind and size as the payload.
  const BoundSource bound_buf(payload, uva, stream.get());
  const void* bound_src = bound_buf.data();

  Event start, stop;
  auto time_one = [&](auto&& body) {
    memset_async(flush.data(), 0, flush.size(), stream.get());
    start.record(stream.get());
    body();
    stop.record(stream.get());
    stop.synchronize();
    return static_cast<double>(stop.elapsed_ms_since(start));
  };
  auto gather = [&] {
    gather_rows_impl(src, src_rows, row_bytes, idx.data(), IndexType::kInt64, n, out.data(),
                     nullptr, stream.get());
  };
  auto bound = [&] { copy_async(out.data(), bound_src, payload, stream.get()); };

  for (int i = 0; i < warmup; ++i) {
    gather();
    bound();
  }
  stream.synchronize();
  std::vector<double> tg, tb;
  for (int i = 0; i < iters; ++i) {
    tg.push_back(time_one(gather));
    tb.push_back(time_one(bound));
  }
  GatherBenchResult r;
  r.iterations = iters;
  r.sorted = gather_sorts_indices(src, row_bytes, n);
  r.gather_ms = median(tg);
  r.bound_ms = median(tb);
  r.gather_gbps = r.gather_ms > 0 ? payload / (r.gather_ms * 1e6) : 0;
  r.bound_gbps = r.bound_ms > 0 ? payload / (r.bound_ms * 1e6) : 0;
  return r;
}

double copy_bandwidth_gbps(size_t bytes, bool pinned_h2d, int iters) {
  require_cuda("copy bandwidth");
  TESSERA_EXPECTS(bytes > 0 && iters > 0, ValueError,
                  "copy bandwidth: need bytes and iterations > 0 (got {}, {})", bytes, iters);
  Stream stream;
  DeviceBuffer dst(bytes);
  const BoundSource src_buf(bytes, pinned_h2d, stream.get());
  const void* src = src_buf.data();
  copy_async(dst.data(), src, bytes, stream.get());  // warm-up
  Event start, stop;
  std::vector<double> gbps;
  for (int i = 0; i < iters; ++i) {
    start.record(stream.get());
    copy_async(dst.data(), src, bytes, stream.get());
    stop.record(stream.get());
    stop.synchronize();
    gbps.push_back(static_cast<double>(bytes) / (1e6 * stop.elapsed_ms_since(start)));
  }
  return median(gbps);
}

}  // namespace tessera::cuda
