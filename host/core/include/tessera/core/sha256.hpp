// SPDX-License-Identifier: Apache-2.0
// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104): the rendezvous store's challenge-response
// authentication and the trainer's parameter and batch digests (the first 16 hex digits of
// Python's hashlib.sha256). Small and dependency-free, so neither needs a crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256. `finish()` may be called once; the object is spent afterwards.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  Sha256Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// Lower-case hex of a digest (64 characters).
std::string to_hex(const Sha256Digest& d);

/// A piece of an HMAC message: pointer and length.
struct ByteSpan {
  const void* data;
  size_t size;
};

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
Sha256Digest hmac_sha256(const void* key, size_t key_len, const ByteSpan* parts, size_t n_parts);

/// Constant-time comparison of two digests.
bool digest_equal(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace tessera
