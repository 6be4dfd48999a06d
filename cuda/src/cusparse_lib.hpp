// SPDX-License-Identifier: Apache-2.0
// cuSPARSE, loaded on first use. Linking it would load it (and the nvJitLink it needs) into
// every process that links Tessera's CUDA library: about 30 MB of resident memory and the
// loader's relocation time at start-up, for the CLI's partitioner and every `import tessera`
// alike, though only the cuSPARSE SpMM engine calls it. So the calls go through this table,
// filled by dlopen / dlsym the first time one is needed.
#pragma once

#include <cusparse.h>

#include <fmt/format.h>

#include "tessera/core/error.hpp"

namespace tessera::cuda::detail {

/// The cuSPARSE entry points Tessera calls.
struct CusparseLib {
  decltype(&::cusparseCreate) create = nullptr;
  decltype(&::cusparseDestroy) destroy = nullptr;
  decltype(&::cusparseSetStream) set_stream = nullptr;
  decltype(&::cusparseCreateCsr) create_csr = nullptr;
  decltype(&::cusparseDestroySpMat) destroy_sp_mat = nullptr;
  decltype(&::cusparseCreateDnMat) create_dn_mat = nullptr;
  decltype(&::cusparseDestroyDnMat) destroy_dn_mat = nullptr;
  decltype(&::cusparseSpMM_bufferSize) spmm_buffer_size = nullptr;
  decltype(&::cusparseSpMM) spmm = nullptr;
  decltype(&::cusparseGetErrorName) get_error_name = nullptr;
  decltype(&::cusparseGetErrorString) get_error_string = nullptr;
};

/// The soname loaded: libcusparse.so.<major> of the toolkit compiled against.
const char* cusparse_soname();

/// The table, loaded once (thread-safe): by soname, as the dynamic loader finds it, else from
/// the folder libcudart was loaded from. Throws tessera::Error naming the library and the
/// loader's message when it cannot be loaded or lacks an entry point.
const CusparseLib& cusparse_lib();

/// Whether this process has loaded cuSPARSE yet (for tests).
bool cusparse_loaded();

}  // namespace tessera::cuda::detail

/// Checks a cuSPARSE call made through cusparse_lib(); throws tessera::Error with the call text
/// and cuSPARSE's status name.
#define TESSERA_CUSPARSE_TRY(call)                                                                \
  do {                                                                                            \
    const cusparseStatus_t tessera_st_ = (call);                                                  \
    if (tessera_st_ != CUSPARSE_STATUS_SUCCESS) {                                                 \
      const auto& tessera_lib_ = ::tessera::cuda::detail::cusparse_lib();                         \
      throw ::tessera::Error(fmt::format(                                                         \
          "cuSPARSE call `{}` failed at {}:{}: {} ({})", #call, __FILE__, __LINE__,               \
          tessera_lib_.get_error_name(tessera_st_), tessera_lib_.get_error_string(tessera_st_))); \
    }                                                                                             \
  } while (0)
