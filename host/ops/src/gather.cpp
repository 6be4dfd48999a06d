// SPDX-License-Identifier: Apache-2.0
// Row gather / scatter: one validator per op, the CPU twin, and dispatch to the CUDA twin.
#include "tessera/ops/gather.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::ops {
namespace {

bool host_readable(Memory m) {
  return m != Memory::kDevice;
}
bool device_readable(Memory m) {
  return m != Memory::kHost;
}

int64_t index_at(const IndexRef& idx, int64_t i) {
  return idx.dtype == DType::kInt32 ? static_cast<const int32_t*>(idx.data)[i]
                                    : static_cast<const int64_t*>(idx.data)[i];
}

cuda::IndexType index_type(const IndexRef& idx) {
  return idx.dtype == DType::kInt32 ? cuda::IndexType::kInt32 : cuda::IndexType::kInt64;
}

void check_matrix(const char* op, const char* name, const MatrixRef& m) {
  TESSERA_EXPECTS(m.rows >= 0 && m.cols >= 0, ValueError, "{}: {} has a negative shape [{}, {}]",
                  op, name, m.rows, m.cols);
  TESSERA_EXPECTS(m.data != nullptr || m.nbytes() == 0, ValueError,
                  "{}: {} is null but has shape [{}, {}]", op, name, m.rows, m.cols);
}

// The checks gather and scatter share: `table` is indexed, `dense` has one row per index.
void validate_rows_op(const char* op, const char* table_name, const MatrixRef& table,
                      const IndexRef& idx, const char* dense_name, const MatrixRef& dense) {
  check_matrix(op, table_name, table);
  check_matrix(op, dense_name, dense);
  TESSERA_EXPECTS(idx.dtype == DType::kInt32 || idx.dtype == DType::kInt64, TypeError,
                  "{}: idx must be int32 or int64, got {}", op, dtype_name(idx.dtype));
  TESSERA_EXPECTS(idx.size >= 0, ValueError, "{}: idx has negative size {}", op, idx.size);
  TESSERA_EXPECTS(idx.data != nullptr || idx.size == 0, ValueError,
                  "{}: idx is null but has size {}", op, idx.size);
  TESSERA_EXPECTS(table.dtype == dense.dtype, TypeError, "{}: {} is {} but {} is {}", op,
                  table_name, dtype_name(table.dtype), dense_name, dtype_name(dense.dtype));
  TESSERA_EXPECTS(dense.rows == idx.size, ValueError, "{}: {} has {} rows but idx has {} entries",
                  op, dense_name, dense.rows, idx.size);
  TESSERA_EXPECTS(dense.cols == table.cols, ValueError, "{}: {} has {} columns but {} has {}", op,
                  dense_name, dense.cols, table_name, table.cols);
  const bool gpu = table.memory == Memory::kDevice || dense.memory == Memory::kDevice ||
                   idx.memory == Memory::kDevice;
  if (gpu) {
    TESSERA_EXPECTS(device_readable(table.memory) && device_readable(dense.memory) &&
                        device_readable(idx.memory),
                    ValueError,
                    "{}: operands mix device memory with pageable host memory ({}: {}, idx: {}, "
                    "{}: {}); pin the host operand (PinnedBuffer / HostRegistration) or copy it",
                    op, table_name, memory_name(table.memory), memory_name(idx.memory), dense_name,
                    memory_name(dense.memory));
  }
  if (host_readable(idx.memory)) {
    for (int64_t i = 0; i < idx.size; ++i) {
      const int64_t r = index_at(idx, i);
      TESSERA_EXPECTS(r >= 0 && r < table.rows, IndexError, "{}: idx[{}] = {} is outside [0, {})",
                      op, i, r, table.rows);
    }
  }
}

bool runs_on_gpu(const MatrixRef& a, const IndexRef& idx, const MatrixRef& b) {
  return a.memory == Memory::kDevice || b.memory == Memory::kDevice ||
         idx.memory == Memory::kDevice;
}

// A device flag for the kernel's first out-of-range position, read back only when asked.
class BadIndexFlag {
 public:
  BadIndexFlag(bool enabled, cuda::StreamHandle stream) : stream_(stream) {
    if (!enabled) return;
    buf_.emplace(cuda::scratch_allocator(), sizeof(unsigned long long), stream);
    cuda::memset_async(buf_->data(), 0xff, sizeof(unsigned long long), stream);
  }
  unsigned long long* get() const {
    return buf_ ? static_cast<unsigned long long*>(buf_->data()) : nullptr;
  }
  // Synchronizes the stream; throws IndexError naming the first bad position.
  void check(const char* op, const IndexRef& idx, int64_t rows) {
    if (!buf_) return;
    unsigned long long first = cuda::kNoBadIndex;
    cuda::copy_async(&first, buf_->data(), sizeof first, stream_);
    cuda::synchronize(stream_);
    if (first == cuda::kNoBadIndex) return;
    const size_t es = dtype_size(idx.dtype);
    int64_t value = 0;
    int32_t v32 = 0;
    const void* at = static_cast<const char*>(idx.data) + first * es;
    cuda::copy_async(es == 4 ? static_cast<void*>(&v32) : static_cast<void*>(&value), at, es,
                     stream_);
    cuda::synchronize(stream_);
    if (es == 4) value = v32;
    TESSERA_FAIL(IndexError, "{}: idx[{}] = {} is outside [0, {})", op, first, value, rows);
  }

 private:
  cuda::StreamHandle stream_;
  std::optional<cuda::ScratchBuffer> buf_;
};

void gather_cpu(const MatrixRef& src, const IndexRef& idx, const MatrixRef& out) {
  const size_t rb = static_cast<size_t>(src.row_bytes());
  if (rb == 0 || idx.size == 0) return;
  const auto* s = static_cast<const char*>(src.data);
  auto* o = static_cast<char*>(out.data);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / static_cast<int64_t>(rb));
  parallel_for(0, idx.size, grain, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i)
      std::memcpy(o + i * rb, s + index_at(idx, i) * rb, rb);
  });
}

void scatter_cpu(const MatrixRef& src, const IndexRef& idx, const MatrixRef& dst) {
  const size_t rb = static_cast<size_t>(src.row_bytes());
  if (rb == 0 || idx.size == 0) return;
  const auto* s = static_cast<const char*>(src.data);
  auto* d = static_cast<char*>(dst.data);
  // Sequential: with duplicate indices the last row wins, as documented.
  for (int64_t i = 0; i < idx.size; ++i)
    std::memcpy(d + index_at(idx, i) * rb, s + i * rb, rb);
}

}  // namespace

const char* memory_name(Memory m) {
  switch (m) {
    case Memory::kHost:
      return "host";
    case Memory::kPinned:
      return "pinned";
    case Memory::kDevice:
      return "device";
  }
  return "?";
}

MatrixRef MatrixRef::of(Array& a, Memory memory) {
  TESSERA_EXPECTS(a.ndim() == 1 || a.ndim() == 2, ValueError,
                  "MatrixRef: expected a 1-D or 2-D array, got shape {}", a.shape_str());
  return {a.numel() ? a.raw_mut() : nullptr, a.dtype(), a.dim(0), a.ndim() == 2 ? a.dim(1) : 1,
          memory};
}

MatrixRef MatrixRef::of(const Array& a, Memory memory) {
  TESSERA_EXPECTS(a.ndim() == 1 || a.ndim() == 2, ValueError,
                  "MatrixRef: expected a 1-D or 2-D array, got shape {}", a.shape_str());
  return {const_cast<void*>(a.raw()), a.dtype(), a.dim(0), a.ndim() == 2 ? a.dim(1) : 1, memory};
}

IndexRef IndexRef::of(const Array& a, Memory memory) {
  TESSERA_EXPECTS(a.dtype() == DType::kInt32 || a.dtype() == DType::kInt64, TypeError,
                  "IndexRef: indices must be int32 or int64, got {}", dtype_name(a.dtype()));
  TESSERA_EXPECTS(a.ndim() == 1, ValueError, "IndexRef: indices must be 1-D, got shape {}",
                  a.shape_str());
  return {a.raw(), a.dtype(), a.dim(0), memory};
}

void validate_gather(const MatrixRef& src, const IndexRef& idx, const MatrixRef& out) {
  validate_rows_op("gather_rows", "src", src, idx, "out", out);
}

void validate_scatter(const MatrixRef& src, const IndexRef& idx, const MatrixRef& dst) {
  validate_rows_op("scatter_rows", "dst", dst, idx, "src", src);
}

void gather_rows(const MatrixRef& src, const IndexRef& idx, const MatrixRef& out,
                 const ExecOptions& opts) {
  validate_gather(src, idx, out);
  if (!runs_on_gpu(src, idx, out)) return gather_cpu(src, idx, out);
  cuda::require_cuda("gather_rows");
  BadIndexFlag flag(opts.check_indices && idx.memory == Memory::kDevice, opts.stream);
  cuda::gather_rows_impl(src.data, src.rows, src.row_bytes(), idx.data, index_type(idx), idx.size,
                         out.data, flag.get(), opts.stream);
  flag.check("gather_rows", idx, src.rows);
}

Array gather_rows(const Array& src, const Array& idx) {
  TESSERA_EXPECTS(src.ndim() >= 1, ValueError, "gather_rows: src must have at least 1 dimension");
  TESSERA_EXPECTS(idx.ndim() == 1, ValueError, "gather_rows: idx must be 1-D, got shape {}",
                  idx.shape_str());
  int64_t cols = 1;
  for (int d = 1; d < src.ndim(); ++d)
    cols *= src.dim(d);
  std::vector<int64_t> shape = src.shape();
  shape[0] = idx.dim(0);
  Array out = Array::zeros(src.dtype(), shape);
  const MatrixRef s{const_cast<void*>(src.raw()), src.dtype(), src.rows(), cols, Memory::kHost};
  const MatrixRef o{out.numel() ? out.raw_mut() : nullptr, out.dtype(), out.rows(), cols,
                    Memory::kHost};
  gather_rows(s, IndexRef::of(idx), o);
  return out;
}

void scatter_rows(const MatrixRef& src, const IndexRef& idx, const MatrixRef& dst,
                  const ExecOptions& opts) {
  validate_scatter(src, idx, dst);
  if (!runs_on_gpu(src, idx, dst)) return scatter_cpu(src, idx, dst);
  cuda::require_cuda("scatter_rows");
  BadIndexFlag flag(opts.check_indices && idx.memory == Memory::kDevice, opts.stream);
  cuda::scatter_rows_impl(src.data, idx.size, src.row_bytes(), idx.data, index_type(idx), dst.data,
                          dst.rows, flag.get(), opts.stream);
  flag.check("scatter_rows", idx, dst.rows);
}

void gather_rows_cached(const cuda::FeatureCache& cache, const MatrixRef& src, const IndexRef& idx,
                        const MatrixRef& out, const ExecOptions& opts) {
  validate_gather(src, idx, out);
  cuda::require_cuda("gather_rows_cached");
  TESSERA_EXPECTS(out.memory != Memory::kHost, ValueError,
                  "gather_rows_cached: out must be device or pinned memory, got {}",
                  memory_name(out.memory));
  TESSERA_EXPECTS(cache.src() == src.data && cache.src_rows() == src.rows &&
                      cache.row_bytes() == src.row_bytes(),
                  ValueError,
                  "gather_rows_cached: the cache was built over another matrix ({} rows of {} "
                  "bytes at {}), not src ({} rows of {} bytes at {})",
                  cache.src_rows(), cache.row_bytes(), cache.src(), src.rows, src.row_bytes(),
                  src.data);
  BadIndexFlag flag(opts.check_indices && idx.memory == Memory::kDevice, opts.stream);
  cuda::gather_rows_cached_impl(src.data, src.rows, src.row_bytes(), cache.cache(), cache.slot_of(),
                                idx.data, index_type(idx), idx.size, out.data, cache.d_counters(),
                                flag.get(), opts.stream);
  flag.check("gather_rows_cached", idx, src.rows);
}

void gather_rows_cached_cpu(const cuda::FeatureCachePlan& plan, const MatrixRef& src,
                            const IndexRef& idx, const MatrixRef& out, cuda::CacheStats& stats) {
  validate_gather(src, idx, out);
  TESSERA_EXPECTS(static_cast<int64_t>(plan.slot_of.size()) == src.rows, ValueError,
                  "gather_rows_cached_cpu: the plan covers {} rows but src has {}",
                  plan.slot_of.size(), src.rows);
  TESSERA_EXPECTS(!runs_on_gpu(src, idx, out), ValueError,
                  "gather_rows_cached_cpu: operands must be host-readable");
  gather_cpu(src, idx, out);
  int64_t hits = 0;
  for (int64_t i = 0; i < idx.size; ++i)
    hits += plan.slot_of[index_at(idx, i)] >= 0;
  stats.lookups += idx.size;
  stats.hits += hits;
}

}  // namespace tessera::ops
