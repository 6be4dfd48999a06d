// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/provenance.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif

namespace tessera {
namespace {

// stdout of `git -C <source tree> <args>`, trailing newlines removed; empty on any failure.
std::string git(const std::string& args) {
  std::string dir = TESSERA_SOURCE_DIR;
  std::string quoted = "'";
  for (char c : dir) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  quoted += "'";
  const std::string cmd = "git -C " + quoted + " " + args + " 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) {
      out += buf;
    }
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

}  // namespace

std::string source_commit() {
  if (const char* env = std::getenv("TESSERA_COMMIT"); env != nullptr && *env != '\0') {
    return env;
  }
  std::string c = git("rev-parse --short HEAD");
  if (c.empty()) {
    return "unknown";
  }
  if (!git("status --porcelain --untracked-files=no").empty()) {
    c += "+dirty";
  }
  return c;
}

}  // namespace tessera
