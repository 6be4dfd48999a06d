// SPDX-License-Identifier: Apache-2.0
#include "cusparse_lib.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>
#include <type_traits>

namespace tessera::cuda::detail {

namespace {

#define TESSERA_STR2(x) #x
#define TESSERA_STR(x) TESSERA_STR2(x)
constexpr const char* kSoname = "libcusparse.so." TESSERA_STR(CUSPARSE_VER_MAJOR);
#undef TESSERA_STR
#undef TESSERA_STR2

std::atomic<bool> g_loaded{false};

// dlerror()'s message, or a placeholder when it has none.
std::string loader_error() {
  const char* e = dlerror();
  return e ? e : "no message from the dynamic loader";
}

// The folder (with a trailing '/') of the object that holds libcudart's cudaGetDeviceCount, or
// "" when the loader cannot say.
std::string cudart_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

CusparseLib load() {
  void* h = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  std::string why = h ? "" : loader_error();
  if (!h) {
    const std::string folder = cudart_folder();
    if (!folder.empty()) {
      h = dlopen((folder + kSoname).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        why += "; " + loader_error();
      }
    }
  }
  TESSERA_EXPECTS(h != nullptr, IOError,
                  "cuSPARSE ({}) could not be loaded: {} (the cuSPARSE SpMM engine needs the CUDA "
                  "toolkit's library; spmm engine 'rows' runs without it)",
                  kSoname, why);
  CusparseLib lib;
  auto sym = [&](auto& fn, const char* name) {
    void* p = dlsym(h, name);
    TESSERA_EXPECTS(p != nullptr, IOError, "cuSPARSE ({}) lacks {}: {}", kSoname, name,
                    loader_error());
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(lib.create, "cusparseCreate");
  sym(lib.destroy, "cusparseDestroy");
  sym(lib.set_stream, "cusparseSetStream");
  sym(lib.create_csr, "cusparseCreateCsr");
  sym(lib.destroy_sp_mat, "cusparseDestroySpMat");
  sym(lib.create_dn_mat, "cusparseCreateDnMat");
  sym(lib.destroy_dn_mat, "cusparseDestroyDnMat");
  sym(lib.spmm_buffer_size, "cusparseSpMM_bufferSize");
  sym(lib.spmm, "cusparseSpMM");
  sym(lib.get_error_name, "cusparseGetErrorName");
  sym(lib.get_error_string, "cusparseGetErrorString");
  return lib;  // the handle stays open for the process's life
}

}  // namespace

const char* cusparse_soname() {
  return kSoname;
}

const CusparseLib& cusparse_lib() {
  static std::once_flag once;
  static CusparseLib lib;
  std::call_once(once, [] {
    lib = load();
    g_loaded = true;
  });
  return lib;
}

bool cusparse_loaded() {
  return g_loaded.load();
}

}  // namespace tessera::cuda::detail
