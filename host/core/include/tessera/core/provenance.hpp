// SPDX-License-Identifier: Apache-2.0
// Where a result came from: the commit of the sources a binary was built from.
#pragma once

#include <string>

namespace tessera {

/// The short commit of the source tree this binary was built from, with "+dirty" when tracked
/// files differ from it; $TESSERA_COMMIT when set (a copy of the tree without its git metadata,
/// as on a lent GPU machine); "unknown" when git cannot tell. Asked of the tree the build was
/// configured from, not of the current folder, so a run from elsewhere records the right one.
std::string source_commit();

}  // namespace tessera
