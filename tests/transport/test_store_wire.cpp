// SPDX-License-Identifier: Apache-2.0
// The store's handshake: the server side fed byte by byte.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "store_wire.hpp"
#include "tessera/core/error.hpp"

namespace tessera::test {
namespace {

using namespace tessera::transport::detail;

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
  const Sha256Digest want = wire::accept_mac(token, c.nonce, h);
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
