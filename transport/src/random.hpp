// SPDX-License-Identifier: Apache-2.0
// Secrets and nonces for the rendezvous store. Internal to transport/.
#pragma once

#include <cstddef>

namespace tessera::transport::detail {

/// Fills `out` with `n` bytes from the kernel's CSPRNG (getrandom); throws IOError on failure.
void random_bytes(void* out, size_t n);

}  // namespace tessera::transport::detail
