// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/error.hpp"

namespace tessera::detail {

void throw_internal(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal error (a bug in Tessera): {} failed at {}:{}{}{}", cond,
                                  file, line, msg.empty() ? "" : ": ", msg));
}

}  // namespace tessera::detail
