// SPDX-License-Identifier: Apache-2.0
// The UCX backend's module: no UCX library is in the process until the first UCX transport is
// created (loading libucs installs UCX's memory hooks, which patch libc), the module is loaded
// with UCX_MEM_EVENTS=no unless the user set it, and a module that cannot be found is named.
// Every case runs in forked ranks, so the test process itself never loads UCX.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "multiprocess.hpp"
#include "tessera/transport/transport.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

using namespace tessera::transport;

#ifdef TESSERA_WITH_UCX

/// The shared objects of this process whose path contains `needle`, one per line.
std::string mapped(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line, out;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos && line.find(needle, slash) != std::string::npos &&
        out.find(line.substr(slash)) == std::string::npos) {
      out += line.substr(slash) + "\n";
    }
  }
  return out;
}

/// The UCX libraries this process has mapped (libucs, libucm, libucp, libuct).
std::string ucx_libraries() {
  return mapped("/libucs.") + mapped("/libucm.") + mapped("/libucp.") + mapped("/libuct.");
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

/// Returns what a rank saw: UCX libraries before and after creating a UCX transport, and
/// UCX_MEM_EVENTS after.
std::string ucx_rank_body() {
  RANK_CHECK(ucx_libraries().empty(), "UCX is loaded before any transport:\n{}", ucx_libraries());
  const auto backends = list_backends();
  RANK_CHECK(backends[0].name == "ucx" && backends[0].available, "ucx is not available: {}",
             backends[0].reason);
  RANK_CHECK(ucx_libraries().empty() && mapped("libtessera_transport_ucx").empty(),
             "listing the backends loaded UCX:\n{}", ucx_libraries());
  auto t = create_transport("ucx");
  RANK_CHECK(!mapped("libtessera_transport_ucx.so").empty(), "the module is not mapped");
  RANK_CHECK(!mapped("/libucs.").empty(), "libucs is not mapped");
  std::string events = env_or("UCX_MEM_EVENTS", "(unset)");
  t->barrier();
  return events;
}

TEST(UcxModule, IsLoadedByTheFirstUcxTransportOnly) {
  JobSpec spec;
  spec.env["UCX_TLS"] = "tcp";
  const auto res = run_ranks(spec, [](int) { return ucx_rank_body(); });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
    EXPECT_EQ(r.message, "no") << "UCX_MEM_EVENTS after loading the module\n" << describe(res);
  }
}

TEST(UcxModule, KeepsTheUsersMemoryEventsSetting) {
  JobSpec spec;
  spec.env["UCX_TLS"] = "tcp";
  spec.env["UCX_MEM_EVENTS"] = "yes";
  const auto res = run_ranks(spec, [](int) { return ucx_rank_body(); });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
    EXPECT_EQ(r.message, "yes") << describe(res);
  }
}

TEST(UcxModule, MissingModuleIsNamed) {
  JobSpec spec;
  spec.world = 1;
  spec.env["TESSERA_UCX_MODULE"] = "/nonexistent/libtessera_transport_ucx.so";
  const auto res = run_ranks(spec, [](int) -> std::string {
    const auto backends = list_backends();
    RANK_CHECK(!backends[0].available, "ucx claims to be available without its module");
    RANK_CHECK(backends[0].reason.find("/nonexistent/") != std::string::npos,
               "the reason does not name the path: {}", backends[0].reason);
    try {
      create_transport("ucx");
    } catch (const IOError& e) {
      RANK_CHECK(ucx_libraries().empty(), "UCX was loaded anyway");
      return e.what();
    }
    return "no IOError";
  });
  ASSERT_EQ(res[0].exit_code, 0) << describe(res);
  EXPECT_NE(res[0].message.find("looked for /nonexistent/libtessera_transport_ucx.so"),
            std::string::npos)
      << describe(res);
}

#else

TEST(UcxModule, WithoutUcxTheBackendSaysSo) {
  const auto backends = list_backends();
  EXPECT_FALSE(backends[0].available);
  TESSERA_EXPECT_THROW_MSG(create_transport("ucx"), NotCompiledError, "not compiled");
}

#endif

}  // namespace
}  // namespace tessera::test
