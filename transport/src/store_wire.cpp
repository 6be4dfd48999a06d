// SPDX-License-Identifier: Apache-2.0
#include "store_wire.hpp"

#include <algorithm>
#include <cstring>

#include "random.hpp"
#include "tessera/core/error.hpp"

namespace tessera::transport::detail::wire {

namespace {

constexpr char kHelloLabel[] = "tessera-store-hello";
constexpr char kAcceptLabel[] = "tessera-store-accept";

}  // namespace

Challenge make_challenge() {
  Challenge c{};
  c.magic = kMagic;
  c.version = kVersion;
  random_bytes(c.nonce, sizeof c.nonce);
  return c;
}

Sha256Digest hello_mac(const std::string& token, const uint8_t* server_nonce, const Hello& h) {
  const ByteSpan parts[] = {{kHelloLabel, sizeof kHelloLabel - 1},
                            {server_nonce, kNonce},
                            {h.nonce, kNonce},
                            {&h.role, 1},
                            {&h.rank, sizeof h.rank},
                            {&h.world, sizeof h.world}};
  return hmac_sha256(token.data(), token.size(), parts, std::size(parts));
}

Sha256Digest accept_mac(const std::string& token, const uint8_t* server_nonce, const Hello& h) {
  const ByteSpan parts[] = {{kAcceptLabel, sizeof kAcceptLabel - 1},
                            {h.nonce, kNonce},
                            {server_nonce, kNonce},
                            {&h.rank, sizeof h.rank}};
  return hmac_sha256(token.data(), token.size(), parts, std::size(parts));
}

Hello make_hello(const Challenge& c, const std::string& token, int rank, uint32_t world,
                 uint8_t role) {
  Hello h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.op = kHello;
  h.role = role;
  h.rank = rank;
  h.world = world;
  random_bytes(h.nonce, sizeof h.nonce);
  const Sha256Digest mac = hello_mac(token, c.nonce, h);
  std::memcpy(h.mac, mac.data(), mac.size());
  return h;
}

Accept make_accept(uint8_t status, const std::string& token, const uint8_t* server_nonce,
                   const Hello& h) {
  Accept a{};
  a.magic = kMagic;
  a.version = kVersion;
  a.status = status;
  if (status == kAccepted) {
    const Sha256Digest mac = accept_mac(token, server_nonce, h);
    std::memcpy(a.mac, mac.data(), mac.size());
  }
  return a;
}

void ServerHandshake::refuse(uint8_t status, std::string why) {
  state_ = State::kRefused;
  status_ = status;
  reason_ = std::move(why);
}

size_t ServerHandshake::feed(const uint8_t* data, size_t n) {
  if (state_ != State::kReading) {
    return 0;
  }
  const size_t take = std::min(n, wanted());
  auto* raw = reinterpret_cast<uint8_t*>(&hello_);
  std::memcpy(raw + got_, data, take);
  const size_t before = got_;
  got_ += take;
  // Refuse at the first field that is complete and wrong: a stranger's bytes free the slot at once.
  if (before < 4 && got_ >= 4 && hello_.magic != kMagic) {
    refuse(kMalformed,
           fmt::format("not a Tessera rendezvous client (bad magic 0x{:08x})", hello_.magic));
  } else if (before < 5 && got_ >= 5 && hello_.version != kVersion) {
    refuse(kMalformed, fmt::format("protocol version {} (expected {})", hello_.version, kVersion));
  } else if (before < 6 && got_ >= 6 && hello_.op != kHello) {
    refuse(kMalformed, fmt::format("expected a hello, got operation {}", hello_.op));
  } else if (got_ == sizeof(Hello)) {
    const Sha256Digest want = hello_mac(*token_, challenge_.nonce, hello_);
    Sha256Digest have;
    std::memcpy(have.data(), hello_.mac, have.size());
    if (digest_equal(want, have)) {
      state_ = State::kAuthenticated;
    } else {
      refuse(kAuthFailed,
             fmt::format("job token mismatch (authentication failed) from a peer claiming rank {}",
                         hello_.rank));
    }
  }
  return take;
}

void check_header(const Header& h, const std::string& who) {
  TESSERA_EXPECTS(h.magic == kMagic, ValueError,
                  "malformed message from {}: bad magic 0x{:08x} (not a Tessera rendezvous peer?)",
                  who, h.magic);
  TESSERA_EXPECTS(h.version == kVersion, ValueError,
                  "malformed message from {}: protocol version {} (expected {})", who, h.version,
                  kVersion);
  TESSERA_EXPECTS(h.op > kHello && h.op <= kPing, ValueError,
                  "malformed message from {}: unknown operation {}", who, h.op);
  TESSERA_EXPECTS(h.key_len <= kMaxKey && h.val_len <= kMaxValue, ValueError,
                  "malformed message from {}: key of {} bytes / value of {} bytes exceeds the "
                  "limit ({} / {})",
                  who, h.key_len, h.val_len, kMaxKey, kMaxValue);
}

void check_challenge(const Challenge& c) {
  TESSERA_EXPECTS(c.magic == kMagic, ValueError, "bad magic 0x{:08x} in its first message",
                  c.magic);
  TESSERA_EXPECTS(c.version == kVersion, ValueError,
                  "it speaks rendezvous protocol version {}, this build speaks {}", c.version,
                  kVersion);
}

void check_accept(const Accept& a, const std::string& token, const Challenge& c, const Hello& h,
                  const std::string& where, int rank) {
  TESSERA_EXPECTS(a.magic == kMagic && a.version == kVersion, IOError,
                  "the server at {} is not a Tessera rendezvous store (bad answer to hello)",
                  where);
  TESSERA_EXPECTS(a.status != kAuthFailed, ValueError,
                  "the rendezvous store at {} refused rank {}: job token mismatch (authentication "
                  "failed; every rank needs the same TESSERA_JOB_TOKEN)",
                  where, rank);
  TESSERA_EXPECTS(a.status == kAccepted, IOError,
                  "the rendezvous store at {} refused rank {} as malformed (status {})", where,
                  rank, a.status);
  const Sha256Digest want = accept_mac(token, c.nonce, h);
  Sha256Digest have;
  std::memcpy(have.data(), a.mac, have.size());
  TESSERA_EXPECTS(digest_equal(want, have), IOError,
                  "the rendezvous store at {} did not prove that it knows the job token (another "
                  "job's store on this port?)",
                  where);
}

}  // namespace tessera::transport::detail::wire
