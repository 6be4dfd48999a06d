// SPDX-License-Identifier: Apache-2.0
// Where `tessera train` runs: the libtorch trainer is the separate executable `tessera-train`
// beside `tessera` (built with TESSERA_WITH_TORCH), so the graph tools never load libtorch.
#pragma once

#include <filesystem>
#include <string>

namespace tessera::tools {

/// The `tessera-train` executable beside the running one, or an empty path when there is none.
std::filesystem::path train_executable();

/// Replaces this process with `tessera-train` and the same arguments; returns only on failure,
/// with the reason.
std::string exec_train(int argc, char** argv);

}  // namespace tessera::tools
