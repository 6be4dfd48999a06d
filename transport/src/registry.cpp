// SPDX-License-Identifier: Apache-2.0
// The registry: the backends this build has, and the one that serves a job (by name, or the first
// that can reach every peer). The UCX backend lives in a module loaded on first use
// (ucx/ucx_loader.cpp), so listing backends or creating a local one never loads UCX.
#include <cstdlib>

#include "backends.hpp"
#include "tessera/transport/transport.hpp"

namespace tessera::transport {

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> out;
  {
    BackendInfo b;
    b.name = "ucx";
    b.compiled = detail::ucx_compiled();
    b.reason = detail::ucx_unavailable_reason();  // looks for the module; does not load it
    b.available = b.reason.empty();
    b.capabilities.collectives = b.capabilities.request_response = b.capabilities.one_sided_get =
        b.capabilities.host_memory = b.capabilities.detects_peer_loss = true;
    out.push_back(b);
  }
  {
    BackendInfo b;
    b.name = "nccl";
    b.compiled = detail::nccl_compiled();
    b.reason = detail::nccl_unavailable_reason();
    b.available = b.reason.empty();
    b.capabilities.collectives = b.capabilities.device_memory = true;
    b.capabilities.detects_peer_loss = true;
    out.push_back(b);
  }
  {
    BackendInfo b;
    b.name = "local";
    b.compiled = b.available = true;
    b.capabilities.collectives = b.capabilities.request_response = b.capabilities.one_sided_get =
        b.capabilities.host_memory = true;
    b.capabilities.fabric = "local";
    out.push_back(b);
  }
  return out;
}

std::unique_ptr<Transport> create_transport(const std::string& backend, const Options& options) {
  return create_transport(backend, detect_launch_env(), options);
}

std::unique_ptr<Transport> create_transport(const std::string& backend, const LaunchEnv& env,
                                            const Options& options) {
  std::string name = backend;
  if (name.empty() || name == "auto") {
    const char* v = std::getenv("TESSERA_TRANSPORT");
    name = (v && *v) ? v : "auto";
  }
  if (name == "auto") {
    if (env.world_size == 1) {
      return detail::make_local(options);
    }
    std::string why;
    for (const BackendInfo& b : list_backends()) {
      if (b.name == "local") {
        continue;
      }
      if (b.available) {
        name = b.name;
      }
      if (b.available) {
        break;
      }
      why += fmt::format("; {}: {}", b.name, b.reason);
    }
    TESSERA_EXPECTS(name != "auto", NotCompiledError,
                    "no transport can serve a world of {} ranks{}", env.world_size, why);
  }
  if (name == "local") {
    TESSERA_EXPECTS(env.world_size == 1, ValueError,
                    "the 'local' transport serves one process, but the {} environment says "
                    "world size {}",
                    env.source, env.world_size);
    return detail::make_local(options);
  }
  if (name == "ucx") {
    return detail::make_ucx(env, options);
  }
  if (name == "nccl") {
    return detail::make_nccl(env, options);
  }
  TESSERA_FAIL(ValueError, "unknown transport '{}' (known: auto, ucx, nccl, local)", name);
}

}  // namespace tessera::transport
