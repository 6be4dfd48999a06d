// SPDX-License-Identifier: Apache-2.0
#include "train_exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

namespace tessera::tools {

std::filesystem::path train_executable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return {};
  }
  std::filesystem::path p = self.parent_path() / "tessera-train";
  return ::access(p.c_str(), X_OK) == 0 ? p : std::filesystem::path{};
}

std::string exec_train(int argc, char** argv) {
  const std::filesystem::path exe = train_executable();
  if (exe.empty()) {
    return "no tessera-train executable beside this tessera";
  }
  std::vector<char*> args(argv, argv + argc);
  std::string arg0 = exe.string();
  args[0] = arg0.data();
  args.push_back(nullptr);
  ::execv(exe.c_str(), args.data());
  return "cannot run " + exe.string() + ": " + std::strerror(errno);
}

}  // namespace tessera::tools
