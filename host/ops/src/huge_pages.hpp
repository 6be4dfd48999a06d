// SPDX-License-Identifier: Apache-2.0
// Transparent huge pages for the sampling layouts (internal).
#pragma once

#include <cstddef>

namespace tessera::ops::detail {

/// Advises the whole 2 MiB pages inside [p, p + bytes) (madvise(MADV_HUGEPAGE)); call it on
/// memory not yet touched. False where the kernel refuses or no whole page fits.
bool advise_huge_range(const void* p, size_t bytes);

}  // namespace tessera::ops::detail
