// SPDX-License-Identifier: Apache-2.0
// The rendezvous store's wire format (internal to transport/; the fuzz target drives it too).
//
// A connection starts with a fixed-size handshake in which no length field is read:
//   server -> client  Challenge  40 bytes: magic, version, a 32-byte random nonce
//   client -> server  Hello      80 bytes: magic, version, op, role, rank, world, a 32-byte
//                                client nonce, and HMAC-SHA256(token, "tessera-store-hello" ||
//                                server nonce || client nonce || role || rank || world)
//   server -> client  Accept     40 bytes: magic, version, status, and (status ok)
//                                HMAC-SHA256(token, "tessera-store-accept" || client nonce ||
//                                server nonce || rank), proving the server knows the token too
// The token itself never crosses the wire. Only then come framed messages: a 24-byte Header,
// key_len bytes of key and val_len bytes of value, both bounded (kMaxKey, kMaxValue).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/core/sha256.hpp"

namespace tessera::transport::detail::wire {

constexpr uint32_t kMagic = 0x54535356;  // "TSSV"
constexpr uint8_t kVersion = 2;
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = 64ull << 20;
constexpr size_t kNonce = 32;

enum Op : uint8_t {
  kHello = 1,   // the handshake's hello (fixed size, never framed)
  kSet = 2,     // key, value
  kGet = 3,     // key, value = u64 timeout in ms
  kOk = 4,      // value = result
  kErr = 5,     // value = message
  kLost = 6,    // rank = lost rank, value = reason
  kBye = 7,     // finishing cleanly
  kAllBye = 8,  // every rank finished or was lost
  kLeft = 9,    // rank = a rank that said goodbye (others stop waiting for it after a grace)
  kPing = 10,   // heartbeat on a watch connection (rank = sender)
};
enum Role : uint8_t { kRoleClient = 0, kRoleWatch = 1 };
enum Status : uint8_t { kAccepted = 0, kAuthFailed = 1, kMalformed = 2 };

#pragma pack(push, 1)
struct Challenge {
  uint32_t magic;
  uint8_t version;
  uint8_t reserved[3];
  uint8_t nonce[kNonce];
};
struct Hello {
  uint32_t magic;
  uint8_t version;
  uint8_t op;
  uint8_t role;
  uint8_t reserved;
  int32_t rank;
  uint32_t world;
  uint8_t nonce[kNonce];
  uint8_t mac[32];
};
struct Accept {
  uint32_t magic;
  uint8_t version;
  uint8_t status;
  uint8_t reserved[2];
  uint8_t mac[32];
};
struct Header {
  uint32_t magic;
  uint8_t version;
  uint8_t op;
  uint16_t reserved;
  int32_t rank;
  uint32_t key_len;
  uint64_t val_len;
};
#pragma pack(pop)
static_assert(sizeof(Challenge) == 40 && sizeof(Hello) == 80 && sizeof(Accept) == 40 &&
              sizeof(Header) == 24);

/// A fresh challenge with a random nonce.
Challenge make_challenge();
/// The client's hello answering `c` (a fresh client nonce, the MAC under `token`).
Hello make_hello(const Challenge& c, const std::string& token, int rank, uint32_t world,
                 uint8_t role);
/// The MAC a hello must carry.
Sha256Digest hello_mac(const std::string& token, const uint8_t* server_nonce, const Hello& h);
/// The server's proof in an Accept for hello `h`.
Sha256Digest accept_mac(const std::string& token, const uint8_t* server_nonce, const Hello& h);
Accept make_accept(uint8_t status, const std::string& token, const uint8_t* server_nonce,
                   const Hello& h);

/// The server's side of one handshake, fed the bytes a peer sends, as they arrive. It never
/// holds more than sizeof(Hello) bytes and rejects a peer at the first wrong byte it can tell.
class ServerHandshake {
 public:
  enum class State { kReading, kAuthenticated, kRefused };
  ServerHandshake(const std::string* token, const Challenge& challenge)
      : token_(token), challenge_(challenge) {}
  /// Consumes up to `n` bytes; returns how many it took (it takes nothing once decided).
  size_t feed(const uint8_t* data, size_t n);
  /// How many more bytes the hello needs.
  size_t wanted() const { return sizeof(Hello) - got_; }
  State state() const { return state_; }
  /// Why the peer was refused (kRefused), for the server's log.
  const std::string& reason() const { return reason_; }
  uint8_t status() const { return status_; }
  /// The authenticated hello (kAuthenticated).
  const Hello& hello() const { return hello_; }
  /// The nonce of the challenge this handshake answers.
  const uint8_t* challenge_nonce() const { return challenge_.nonce; }

 private:
  void refuse(uint8_t status, std::string why);
  const std::string* token_;
  Challenge challenge_;
  Hello hello_{};
  size_t got_ = 0;
  State state_ = State::kReading;
  uint8_t status_ = kAccepted;
  std::string reason_;
};

/// Checks a framed message's header; throws ValueError naming `who` for a bad magic, version,
/// operation or a length over the limits.
void check_header(const Header& h, const std::string& who);

/// Checks a Challenge from a server; throws ValueError when it is not one.
void check_challenge(const Challenge& c);

/// Checks the store's answer `a` to hello `h` (which answered challenge `c`), as rank `rank`
/// connecting to `where`: throws ValueError when the store refused the token, IOError when the
/// answer is malformed, calls the hello malformed, or does not prove the store knows `token`.
void check_accept(const Accept& a, const std::string& token, const Challenge& c, const Hello& h,
                  const std::string& where, int rank);

}  // namespace tessera::transport::detail::wire
