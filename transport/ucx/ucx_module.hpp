// SPDX-License-Identifier: Apache-2.0
// Internal: the one entry point of the UCX module (libtessera_transport_ucx.so, built from
// ucx.cpp), shared by the module and its loader (ucx_loader.cpp).
#pragma once

#include <memory>

#include "../src/backends.hpp"

namespace tessera::transport::detail {

/// The file name of the module and the C symbol it exports: a function returning its UcxModule.
inline constexpr const char* kUcxModuleFile = "libtessera_transport_ucx.so";
inline constexpr const char* kUcxModuleSymbol = "tessera_transport_ucx_module";

/// What the module offers. `abi` comes first and keeps its place in every version: the loader
/// reads it before anything else and refuses a module whose stamp differs from its own
/// (TESSERA_TRANSPORT_ABI: the version and the headers both sides are compiled from).
struct UcxModule {
  const char* abi;
  std::unique_ptr<Transport> (*make)(const LaunchEnv& env, const Options& options);
};
using UcxModuleEntry = const UcxModule* (*)();

}  // namespace tessera::transport::detail
