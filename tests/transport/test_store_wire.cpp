// SPDX-License-Identifier: Apache-2.0
// The store's handshake pieces: SHA-256 and HMAC-SHA256 against published vectors, and the
// server side of the handshake fed byte by byte.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "sha256.hpp"
#include "store_wire.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test {
namespace {

using namespace tessera::transport::detail;

std::string hex(const Digest& d) {
  static const char* x = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += x[b >> 4];
    s += x[b & 15];
  }
  return s;
}

std::string sha(const std::string& m) {
  Sha256 s;
  s.update(m.data(), m.size());
  return hex(s.finish());
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
  EXPECT_EQ(hex(s.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, Rfc4231Vectors) {
  const std::string key1(20, '\x0b'), msg1 = "Hi There";
  const Span p1[] = {{msg1.data(), msg1.size()}};
  EXPECT_EQ(hex(hmac_sha256(key1.data(), key1.size(), p1, 1)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // The message in two parts gives the same MAC.
  const std::string key2 = "Jefe", m2a = "what do ya want ", m2b = "for nothing?";
  const Span p2[] = {{m2a.data(), m2a.size()}, {m2b.data(), m2b.size()}};
  EXPECT_EQ(hex(hmac_sha256(key2.data(), key2.size(), p2, 2)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  const std::string key6(131, '\xaa'),
      msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  const Span p6[] = {{msg6.data(), msg6.size()}};
  EXPECT_EQ(hex(hmac_sha256(key6.data(), key6.size(), p6, 1)),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(StoreHandshake, TheRightMacIsAcceptedByteByByte) {
  const std::string token = "the-job-token-0123456789";
  const wire::Challenge c = wire::make_challenge();
  const wire::Hello h = wire::make_hello(c, token, 3, 8, wire::kRoleWatch);
  wire::ServerHandshake hs(&token, c);
  const auto* b = reinterpret_cast<const uint8_t*>(&h);
  for (size_t i = 0; i < sizeof h; ++i) {
    ASSERT_EQ(hs.state(), wire::ServerHandshake::State::kReading) << i;
    EXPECT_EQ(hs.feed(b + i, 1), 1u);
  }
  ASSERT_EQ(hs.state(), wire::ServerHandshake::State::kAuthenticated);
  EXPECT_EQ(hs.hello().rank, 3);
  EXPECT_EQ(hs.feed(b, 1), 0u);  // nothing more is taken
  // The accept proves the server knows the token; it is bound to this hello's nonce.
  const wire::Accept a = wire::make_accept(wire::kAccepted, token, c.nonce, h);
  const Digest want = wire::accept_mac(token, c.nonce, h);
  EXPECT_EQ(std::memcmp(a.mac, want.data(), 32), 0);
}

TEST(StoreHandshake, AnotherTokenOrChallengeIsRefused) {
  const std::string token = "the-job-token-0123456789", other = "the-job-token-0123456780";
  const wire::Challenge c = wire::make_challenge();
  {
    const wire::Hello h = wire::make_hello(c, other, 0, 2, wire::kRoleClient);
    wire::ServerHandshake hs(&token, c);
    EXPECT_EQ(hs.feed(reinterpret_cast<const uint8_t*>(&h), sizeof h), sizeof h);
    EXPECT_EQ(hs.state(), wire::ServerHandshake::State::kRefused);
    EXPECT_EQ(hs.status(), wire::kAuthFailed);
    EXPECT_EQ(hs.reason().find(other), std::string::npos);
  }
  {  // a hello recorded for one challenge does not answer another (no replay)
    const wire::Hello h = wire::make_hello(wire::make_challenge(), token, 0, 2, wire::kRoleClient);
    wire::ServerHandshake hs(&token, c);
    hs.feed(reinterpret_cast<const uint8_t*>(&h), sizeof h);
    EXPECT_EQ(hs.status(), wire::kAuthFailed);
  }
  {  // a rank changed after signing is caught
    wire::Hello h = wire::make_hello(c, token, 0, 2, wire::kRoleClient);
    h.rank = 1;
    wire::ServerHandshake hs(&token, c);
    hs.feed(reinterpret_cast<const uint8_t*>(&h), sizeof h);
    EXPECT_EQ(hs.status(), wire::kAuthFailed);
  }
}

TEST(StoreHandshake, JunkIsRefusedAtTheFirstWrongField) {
  const std::string token = "the-job-token-0123456789";
  const wire::Challenge c = wire::make_challenge();
  wire::ServerHandshake hs(&token, c);
  const std::string junk = "GET / HTTP/1.1\r\n";
  EXPECT_EQ(hs.feed(reinterpret_cast<const uint8_t*>(junk.data()), 4), 4u);
  EXPECT_EQ(hs.state(), wire::ServerHandshake::State::kRefused);
  EXPECT_EQ(hs.status(), wire::kMalformed);
  EXPECT_NE(hs.reason().find("bad magic"), std::string::npos);
}

TEST(StoreWire, HeadersOverTheLimitsAreRefusedByName) {
  wire::Header h{wire::kMagic, wire::kVersion, wire::kSet, 0, 1, 5, wire::kMaxValue + 1};
  try {
    wire::check_header(h, "rank 1");
    ADD_FAILURE() << "accepted";
  } catch (const tessera::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exceeds the limit"), std::string::npos) << e.what();
  }
  h.val_len = 8;
  EXPECT_NO_THROW(wire::check_header(h, "rank 1"));
  h.op = wire::kHello;  // only ever in the fixed-size handshake
  EXPECT_THROW(wire::check_header(h, "rank 1"), tessera::ValueError);
}

}  // namespace
}  // namespace tessera::test
