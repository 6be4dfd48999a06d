// Dispatch of the gather/scatter twins by index type and plan (the sorted path's scratch and
// sort included), and the GPU feature cache. C++ only: the kernels live in gather_{i,u}{32,64}.cu.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gather_launch.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {
namespace detail {

int64_t max_resident_threads() {
  static const int64_t n = [] {
    int dev = 0, sms = 0, per_sm = 0;
    TESSERA_CUDA_TRY(cudaGetDevice(&dev));
    TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
    return static_cast<int64_t>(sms) * per_sm;
  }();
  return n;
}

namespace {

// Host memory (pinned, registered, or pageable that the device reads through HMM/ATS) is read
// over the bus; device and managed memory are not.
bool in_host_memory(const void* p) {
  if (p == nullptr) {
    return false;
  }
  cudaPointerAttributes a{};
  TESSERA_CUDA_TRY(cudaPointerGetAttributes(&a, p));
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

// The sorted path: (key, position) pairs into scratch, radix-sorted on the stream, then the
// gather over them (unless `sort_only`). Scratch is stream-ordered, so it may go back to the
// allocator on return.
template <typename I, typename U>
void gather_sorted(const GatherLaunch& g, const I* idx, const gather::Plan& p, bool sort_only,
                   StreamHandle stream) {
  const auto n = static_cast<size_t>(g.n);
  const int bits = gather::key_bits(g.src_rows);
  const size_t temp_bytes = sort_pairs_temp_bytes<U>(g.n, bits);
  ScratchBuffer pairs(scratch_allocator(), 4 * n * sizeof(U), stream);
  ScratchBuffer temp(scratch_allocator(), temp_bytes, stream);
  U* keys0 = static_cast<U*>(pairs.data());
  U* keys1 = keys0 + n;
  U* pos0 = keys1 + n;
  U* pos1 = pos0 + n;
  launch_sort_keys<I, U>(idx, g.n, g.src_rows, keys0, pos0, stream);
  const int sel =
      sort_pairs<U>(temp.data(), temp_bytes, keys0, keys1, pos0, pos1, g.n, bits, stream);
  if (!sort_only) {
    launch_gather<U>(g, sel ? keys1 : keys0, sel ? pos1 : pos0, p, stream);
  }
}

template <typename I>
void gather_typed(const GatherLaunch& g, int64_t row_bytes, const I* idx, GatherOrder order,
                  int rows_per_group, bool sort_only, StreamHandle stream) {
  if (g.n == 0 || row_bytes == 0) {
    return;
  }
  // Only a gather that kAuto would sort needs to know where its source is.
  const bool src_in_host = order == GatherOrder::kAuto && gather::sort_pays(true, row_bytes, g.n) &&
                           in_host_memory(g.src);
  const gather::Plan p = gather::plan(row_bytes, g.n, address_bits(g.src, g.out, g.cache),
                                      src_in_host, order, rows_per_group);
  if (!p.sorted) {
    if (!sort_only) {
      launch_gather<I>(g, idx, nullptr, p, stream);
    }
    return;
  }
  if (gather::narrow_keys(g.src_rows, g.n)) {
    gather_sorted<I, uint32_t>(g, idx, p, sort_only, stream);
  } else {
    gather_sorted<I, uint64_t>(g, idx, p, sort_only, stream);
  }
}

}  // namespace

void gather_dispatch(const GatherLaunch& g, int64_t row_bytes, const void* idx, IndexType idx_type,
                     GatherOrder order, StreamHandle stream, int rows_per_group, bool sort_only) {
  if (idx_type == IndexType::kInt32) {
    gather_typed(g, row_bytes, static_cast<const int32_t*>(idx), order, rows_per_group, sort_only,
                 stream);
  } else {
    gather_typed(g, row_bytes, static_cast<const int64_t*>(idx), order, rows_per_group, sort_only,
                 stream);
  }
}

}  // namespace detail

bool gather_sorts_indices(const void* src, int64_t row_bytes, int64_t n, GatherOrder order) {
  if (n == 0 || row_bytes == 0) {
    return false;
  }
  if (order != GatherOrder::kAuto) {
    return order == GatherOrder::kSorted;
  }
  return gather::sort_pays(true, row_bytes, n) && detail::in_host_memory(src);
}

void gather_rows_impl(const void* src, int64_t src_rows, int64_t row_bytes, const void* idx,
                      IndexType idx_type, int64_t n, void* out, unsigned long long* d_first_bad,
                      StreamHandle stream, GatherOrder order) {
  detail::GatherLaunch g;
  g.src = src;
  g.src_rows = src_rows;
  g.n = n;
  g.out = out;
  g.first_bad = d_first_bad;
  detail::gather_dispatch(g, row_bytes, idx, idx_type, order, stream);
}

void scatter_rows_impl(const void* src, int64_t n, int64_t row_bytes, const void* idx,
                       IndexType idx_type, void* dst, int64_t dst_rows,
                       unsigned long long* d_first_bad, StreamHandle stream) {
  if (idx_type == IndexType::kInt32)
    detail::launch_scatter(src, n, row_bytes, static_cast<const int32_t*>(idx), dst, dst_rows,
                           d_first_bad, stream);
  else
    detail::launch_scatter(src, n, row_bytes, static_cast<const int64_t*>(idx), dst, dst_rows,
                           d_first_bad, stream);
}

void gather_rows_cached_impl(const void* src, int64_t src_rows, int64_t row_bytes,
                             const void* cache, const int64_t* d_slot_of, const void* idx,
                             IndexType idx_type, int64_t n, void* out,
                             unsigned long long* d_counters, unsigned long long* d_first_bad,
                             StreamHandle stream, GatherOrder order) {
  TESSERA_ASSERT(cache != nullptr && d_slot_of != nullptr, "cached gather without a cache");
  detail::GatherLaunch g;
  g.src = src;
  g.src_rows = src_rows;
  g.cache = cache;
  g.slot_of = d_slot_of;
  g.n = n;
  g.out = out;
  g.first_bad = d_first_bad;
  g.counters = d_counters;
  detail::gather_dispatch(g, row_bytes, idx, idx_type, order, stream);
}

FeatureCache::FeatureCache(const void* src, int64_t src_rows, int64_t row_bytes,
                           const int64_t* hot_rows, int64_t num_hot, const int64_t* slot_of,
                           StreamHandle stream)
    : src_(src),
      src_rows_(src_rows),
      row_bytes_(row_bytes),
      num_hot_(num_hot),
      // At least one byte each, so that an empty cache still has valid (never read) pointers
      // and the cached kernel still counts lookups.
      cache_(std::max<size_t>(1, static_cast<size_t>(num_hot * row_bytes))),
      slot_(std::max<size_t>(1, static_cast<size_t>(src_rows) * sizeof(int64_t))),
      cnt_(2 * sizeof(unsigned long long)) {
  require_cuda("FeatureCache");
  TESSERA_EXPECTS(num_hot >= 0 && num_hot <= src_rows && row_bytes > 0, ValueError,
                  "FeatureCache: {} hot rows of {} bytes for a source of {} rows", num_hot,
                  row_bytes, src_rows);
  copy_async(slot_.data(), slot_of, static_cast<size_t>(src_rows) * sizeof(int64_t), stream);
  memset_async(cnt_.data(), 0, cnt_.size(), stream);
  if (num_hot > 0) {
    // Fill the cache with the gather kernel itself: one launch, reads the source in place.
    DeviceBuffer hot(static_cast<size_t>(num_hot) * sizeof(int64_t));
    copy_async(hot.data(), hot_rows, hot.size(), stream);
    gather_rows_impl(src, src_rows, row_bytes, hot.data(), IndexType::kInt64, num_hot,
                     cache_.data(), nullptr, stream);
    // `hot` is freed (cudaFree synchronizes the device) only after the fill was enqueued; the
    // constructor is a setup step, not the hot path.
  }
}

FeatureCache::~FeatureCache() = default;

void FeatureCache::read_counters(StreamHandle stream, int64_t* lookups, int64_t* hits) const {
  unsigned long long h[2] = {0, 0};
  TESSERA_CUDA_TRY(cudaMemcpyAsync(h, cnt_.data(), sizeof h, cudaMemcpyDeviceToHost,
                                   static_cast<cudaStream_t>(stream)));
  TESSERA_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  if (lookups) *lookups = static_cast<int64_t>(h[0]);
  if (hits) *hits = static_cast<int64_t>(h[1]);
}

void FeatureCache::reset_counters(StreamHandle stream) {
  memset_async(cnt_.data(), 0, cnt_.size(), stream);
}

}  // namespace tessera::cuda
