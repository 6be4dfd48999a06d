// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/provenance.hpp"

#include <cstdlib>
#include <string>

#include "build_commit.hpp"  // generated on every build: TESSERA_BUILD_COMMIT

namespace tessera {

std::string source_commit() {
  if (const char* env = std::getenv("TESSERA_COMMIT"); env != nullptr && *env != '\0') {
    return env;
  }
  return TESSERA_BUILD_COMMIT;
}

}  // namespace tessera
