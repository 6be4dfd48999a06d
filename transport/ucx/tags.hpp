// SPDX-License-Identifier: Apache-2.0
// The UCX backend's message framing (no UCX types, so the fuzz target can drive it): how a tag
// names the kind, sender and sequence of a message, and how a request's payload names its
// handler.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/transport/transport.hpp"

namespace tessera::transport::detail::ucx_tags {

// Tag layout: [63..60 kind][59..40 source rank][39..0 sequence].
enum Kind : uint64_t { kColl = 1, kReq = 2, kResp = 3 };
constexpr uint64_t kSeqMask = (uint64_t{1} << 40) - 1;
constexpr int kMaxRanks = 1 << 20;

inline uint64_t make_tag(uint64_t kind, int src, uint64_t seq) {
  return (kind << 60) | (static_cast<uint64_t>(src) << 40) | (seq & kSeqMask);
}
inline uint64_t tag_kind(uint64_t t) {
  return t >> 60;
}
inline int tag_src(uint64_t t) {
  return static_cast<int>((t >> 40) & 0xFFFFF);
}
inline uint64_t tag_seq(uint64_t t) {
  return t & kSeqMask;
}

/// Whether an incoming tag can come from a rank of a world of `world`: a known kind and a sender
/// inside the world. Messages with other tags are received and dropped (a sender index outside
/// the world would otherwise index the endpoint table when the answer is sent).
inline bool valid_tag(uint64_t t, int world) {
  const uint64_t k = tag_kind(t);
  return (k == kColl || k == kReq || k == kResp) && tag_src(t) < world;
}

/// Splits a request's payload, [u32 message id][body]; false when it is shorter than the id.
inline bool parse_request(const Bytes& payload, MessageId& id, ByteView& body) {
  if (payload.size() < sizeof id) {
    return false;
  }
  std::memcpy(&id, payload.data(), sizeof id);
  body = ByteView(payload.data() + sizeof id, payload.size() - sizeof id);
  return true;
}

}  // namespace tessera::transport::detail::ucx_tags
