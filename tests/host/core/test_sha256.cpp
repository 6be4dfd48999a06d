// SPDX-License-Identifier: Apache-2.0
// SHA-256 and HMAC-SHA256 against published vectors (FIPS 180-4, RFC 4231).
#include "tessera/core/sha256.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace tessera::test {
namespace {

std::string sha(const std::string& m) {
  Sha256 s;
  s.update(m.data(), m.size());
  return to_hex(s.finish());
}

TEST(Sha256, PublishedVectors) {  // FIPS 180-4 examples
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 s;  // one million 'a', fed in uneven pieces
  const std::string a(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, a.size());
    s.update(a.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(s.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, Rfc4231Vectors) {
  const std::string key1(20, '\x0b'), msg1 = "Hi There";
  const ByteSpan p1[] = {{msg1.data(), msg1.size()}};
  EXPECT_EQ(to_hex(hmac_sha256(key1.data(), key1.size(), p1, 1)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // The message in two parts gives the same MAC.
  const std::string key2 = "Jefe", m2a = "what do ya want ", m2b = "for nothing?";
  const ByteSpan p2[] = {{m2a.data(), m2a.size()}, {m2b.data(), m2b.size()}};
  EXPECT_EQ(to_hex(hmac_sha256(key2.data(), key2.size(), p2, 2)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  const std::string key6(131, '\xaa'),
      msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  const ByteSpan p6[] = {{msg6.data(), msg6.size()}};
  EXPECT_EQ(to_hex(hmac_sha256(key6.data(), key6.size(), p6, 1)),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

}  // namespace
}  // namespace tessera::test
