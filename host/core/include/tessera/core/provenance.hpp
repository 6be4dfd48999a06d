// SPDX-License-Identifier: Apache-2.0
// Where a result came from: the commit of the sources a binary was built from.
#pragma once

#include <string>

namespace tessera {

/// The short commit of the source tree this binary was built from, with "+dirty" when tracked
/// files differed from it at the build (stamped by every build, cmake/TesseraCommitStamp.cmake);
/// $TESSERA_COMMIT when set (a copy of the tree without its git metadata, as on a lent GPU
/// machine); "unknown" when git could not tell.
std::string source_commit();

}  // namespace tessera
