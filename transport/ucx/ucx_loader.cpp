// SPDX-License-Identifier: Apache-2.0
// The 'ucx' backend as the registry sees it: finds the module that holds it
// (libtessera_transport_ucx.so, built from ucx.cpp) and loads it when the first UCX transport is
// created, never earlier.
//
// Why a module: libucs's constructor installs UCX's memory hooks as soon as the library is
// loaded. With UCX's default UCX_MEM_MMAP_HOOK_MODE=bistro it rewrites the first instructions of
// libc's mmap, munmap, mremap, madvise, brk, sbrk, shmat and shmdt into jumps into libucm. Linked
// into tessera._C, that happened on `import tessera`, in processes that never create a UCX
// transport (the launcher, one-process runs), and `import tessera; import torch` aborted in
// free() on a GPU machine (glibc 2.39, Debian 12's UCX 1.13). For the same reason the module is
// loaded with UCX_MEM_EVENTS=no unless the environment says otherwise (see transport/README.md).
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "../src/backends.hpp"
#include "ucx_module.hpp"

namespace tessera::transport::detail {

namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Where the module may be, in the order tried.
std::vector<std::string> module_candidates() {
  const char* explicit_path = std::getenv("TESSERA_UCX_MODULE");
  if (explicit_path && *explicit_path) {
    return {explicit_path};
  }
  std::vector<std::string> out;
  // The binary holding this code: tessera._C in an installed package keeps the module beside it.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&module_candidates), &info) != 0 && info.dli_fname &&
      info.dli_fname[0] == '/') {
    out.push_back(folder_of(info.dli_fname) + "/" + kUcxModuleFile);
  }
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    out.push_back(folder_of(std::string(exe, static_cast<size_t>(n))) + "/" + kUcxModuleFile);
  }
#ifdef TESSERA_UCX_MODULE_BUILD_PATH
  out.push_back(TESSERA_UCX_MODULE_BUILD_PATH);  // binaries run from the build folder
#endif
  return out;
}

/// The module's path, or "" with `searched` listing where it was looked for.
std::string find_module(std::string* searched) {
  for (const std::string& c : module_candidates()) {
    if (is_file(c)) {
      return c;
    }
    if (searched) {
      *searched += (searched->empty() ? "" : ", ") + c;
    }
  }
  return "";
}

/// Loads the module on the first successful call; later calls return the same entry. A failure
/// is not remembered, so a fixed environment (TESSERA_UCX_MODULE, LD_LIBRARY_PATH) can retry.
const UcxModule& load_module() {
  static std::mutex mu;
  static const UcxModule* loaded = nullptr;
  std::lock_guard<std::mutex> lk(mu);
  if (loaded) {
    return *loaded;
  }
  std::string searched;
  const std::string path = find_module(&searched);
  TESSERA_EXPECTS(!path.empty(), IOError,
                  "the 'ucx' transport's module {} was not found (looked for {}); reinstall "
                  "Tessera, or set TESSERA_UCX_MODULE to its path",
                  kUcxModuleFile, searched);
  // Before libucs's constructor reads it: no memory hooks unless the user asks for them.
  ::setenv("UCX_MEM_EVENTS", "no", /*overwrite=*/0);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    TESSERA_FAIL(IOError, "the 'ucx' transport cannot load {}: {}", path,
                 why ? why : "unknown error");
  }
  auto entry = reinterpret_cast<UcxModuleEntry>(::dlsym(handle, kUcxModuleSymbol));
  const UcxModule* m = entry ? entry() : nullptr;
  const char* abi = m && m->abi ? m->abi : "missing";
  TESSERA_EXPECTS(m && std::string(abi) == TESSERA_TRANSPORT_ABI && m->make, IOError,
                  "{} does not belong to this build of Tessera (its stamp is '{}', this build's "
                  "is '{}'); reinstall Tessera, or set TESSERA_UCX_MODULE to the module built "
                  "with it",
                  path, abi, TESSERA_TRANSPORT_ABI);
  loaded = m;  // never unloaded: libucm pins itself in memory anyway (NODELETE)
  return *loaded;
}

}  // namespace

bool ucx_compiled() {
  return true;
}

std::string ucx_unavailable_reason() {
  std::string searched;
  if (!find_module(&searched).empty()) {
    return "";
  }
  return fmt::format("its module {} was not found (looked for {})", kUcxModuleFile, searched);
}

std::unique_ptr<Transport> make_ucx(const LaunchEnv& env, const Options& options) {
  return load_module().make(env, options);
}

}  // namespace tessera::transport::detail
