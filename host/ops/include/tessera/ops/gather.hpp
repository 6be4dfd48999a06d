// SPDX-License-Identifier: Apache-2.0
// Row gather and scatter of feature tensors: validated once, then run by the CPU twin (host
// data) or the CUDA twin (tessera::cuda::gather_rows_impl) when an operand lives on the GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/graph/npy.hpp"

namespace tessera::cuda {
class FeatureCache;
}

namespace tessera::ops {

/// Where an operand's memory is.
enum class Memory : uint8_t {
  kHost,    ///< pageable host memory: CPU twins only
  kPinned,  ///< pinned host memory (PinnedBuffer / HostRegistration): the pointer is valid on
            ///< the CPU and, through UVA, in kernels
  kDevice   ///< GPU memory: CUDA twins only
};
/// "host", "pinned", "device".
const char* memory_name(Memory m);

/// A non-owning, C-contiguous 2-D matrix: `rows` x `cols` elements of `dtype`, row-major.
/// The memory must outlive every use. Inputs are only read even though `data` is mutable.
struct MatrixRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t cols = 0;
  Memory memory = Memory::kHost;

  int64_t row_bytes() const { return cols * static_cast<int64_t>(dtype_size(dtype)); }
  int64_t nbytes() const { return rows * row_bytes(); }
  /// Views a host Array of 1 (as rows x 1) or 2 dimensions.
  static MatrixRef of(Array& a, Memory memory = Memory::kHost);
  /// Read-only view of a host Array (the op only reads it).
  static MatrixRef of(const Array& a, Memory memory = Memory::kHost);
};

/// A non-owning index vector of int32 or int64 elements.
struct IndexRef {
  const void* data = nullptr;
  DType dtype = DType::kInt64;
  int64_t size = 0;
  Memory memory = Memory::kHost;

  /// Views a 1-D host int32/int64 Array (TypeError otherwise).
  static IndexRef of(const Array& a, Memory memory = Memory::kHost);
  static IndexRef of(const int64_t* p, int64_t n, Memory memory = Memory::kHost) {
    return {p, DType::kInt64, n, memory};
  }
  static IndexRef of(const int32_t* p, int64_t n, Memory memory = Memory::kHost) {
    return {p, DType::kInt32, n, memory};
  }
};

/// How an op runs on the GPU.
struct ExecOptions {
  /// The CUDA stream the op is enqueued on (nullptr: the legacy default stream).
  cuda::StreamHandle stream = nullptr;
  /// Check every index against its range. On the CPU this is always done. On the GPU the kernel
  /// always stays in bounds (out-of-range rows are zero-filled or skipped); with this flag the
  /// op also reads the kernel's error flag back and throws IndexError, which SYNCHRONIZES the
  /// stream. Hot loops that trust their indices turn it off.
  bool check_indices = true;
  /// Worker threads of the CPU twins that honour it (spmm): 0 takes tessera::num_threads()
  /// (TESSERA_NUM_THREADS, set_num_threads, else every hardware thread).
  int num_threads = 0;
};

/// The one validator of gather_rows: out = src[idx]. Checks dtypes (src and out equal; index
/// int32/int64), shapes (out.rows == idx.size, out.cols == src.cols), null pointers of
/// non-empty operands, that host and device memory are not mixed in a way no twin can run
/// (pageable host with device), and, for host-readable indices, every index in [0, src.rows).
/// Throws TypeError / ValueError / IndexError naming the argument.
void validate_gather(const MatrixRef& src, const IndexRef& idx, const MatrixRef& out);

/// out[i, :] = src[idx[i], :]. Runs the CUDA twin when any operand is Memory::kDevice (src may
/// then be kDevice or kPinned, read through UVA; out must be kDevice or kPinned), otherwise the
/// CPU twin. Bit-identical on both. Asynchronous on the GPU unless opts.check_indices.
void gather_rows(const MatrixRef& src, const IndexRef& idx, const MatrixRef& out,
                 const ExecOptions& opts = {});

/// Host convenience: a new Array of shape [idx.size, cols...] gathered from `src` (CPU twin).
Array gather_rows(const Array& src, const Array& idx);

/// The one validator of scatter_rows: dst[idx] = src (shapes mirror gather's).
void validate_scatter(const MatrixRef& src, const IndexRef& idx, const MatrixRef& dst);

/// dst[idx[i], :] = src[i, :]. With duplicate indices the CPU twin keeps the last row and the
/// CUDA twin an unspecified one (bit-identity is promised only for unique indices).
void scatter_rows(const MatrixRef& src, const IndexRef& idx, const MatrixRef& dst,
                  const ExecOptions& opts = {});

/// Gather through a GPU cache of hot rows (cuda::FeatureCache in front of `src`): same result
/// as gather_rows(src, idx, out); lookups and hits accumulate in the cache's device counters.
/// `src` must be the matrix the cache was built over. CUDA only (out in device memory).
void gather_rows_cached(const cuda::FeatureCache& cache, const MatrixRef& src, const IndexRef& idx,
                        const MatrixRef& out, const ExecOptions& opts = {});

/// CPU twin of the cached gather's accounting: gathers like gather_rows and adds this batch's
/// lookups and hits under `plan` to `stats`.
void gather_rows_cached_cpu(const cuda::FeatureCachePlan& plan, const MatrixRef& src,
                            const IndexRef& idx, const MatrixRef& out, cuda::CacheStats& stats);

}  // namespace tessera::ops
