// SPDX-License-Identifier: Apache-2.0
// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), for the rendezvous store's challenge-response
// authentication. Internal to transport/; small and dependency-free so the store needs no
// crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tessera::transport::detail {

using Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// HMAC-SHA256 of the concatenation of `parts` (pointer, length pairs) under `key`.
struct Span {
  const void* data;
  size_t size;
};
Digest hmac_sha256(const void* key, size_t key_len, const Span* parts, size_t n_parts);

/// Constant-time comparison of two digests.
bool digest_equal(const Digest& a, const Digest& b);

/// Fills `out` with `n` bytes from the kernel's CSPRNG (getrandom); throws IOError on failure.
void random_bytes(void* out, size_t n);

}  // namespace tessera::transport::detail
