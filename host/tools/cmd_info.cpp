// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "commands.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/transport/transport.hpp"
#include "train_exec.hpp"

namespace tessera::tools {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print what this build and machine support");
  cmd->callback([] {
    fmt::print("tessera {}\n", TESSERA_VERSION);
    fmt::print("threads: {}\n", num_threads());
    fmt::print("cuda: {}\n", cuda::describe());
    const auto trainer = train_executable();
    fmt::print("train: {}\n",
               !trainer.empty() ? "libtorch trainer (tessera train: " + trainer.string() + ")"
                                : std::string("not compiled (-DTESSERA_WITH_TORCH=ON builds it)"));
    for (const auto& b : transport::list_backends())
      fmt::print("transport {}: {}\n", b.name,
                 b.available ? std::string("available") : "unavailable: " + b.reason);
  });
}

}  // namespace tessera::tools
