// SPDX-License-Identifier: Apache-2.0
// The transports' framing of what peers send: a UCX message's tag (kind, sender, sequence) and a
// request's payload (message id, body) as the handler thread splits them, a handler's encoded
// response, and the blob naming a peer's registered memory. The first byte picks the piece.
#include <cstring>

#include "backends.hpp"
#include "fuzz_target.hpp"
#include "tags.hpp"

TESSERA_FUZZ_TARGET(transport_framing) {
  using namespace tessera::transport;
  using namespace tessera::transport::detail;
  if (size == 0) {
    return 0;
  }
  const int piece = data[0] % 4;
  const Bytes rest(data + 1, data + size);
  switch (piece) {
    case 0: {  // a tagged message arriving at rank 1 of a world of 3
      uint64_t tag = 0;
      if (!rest.empty()) {  // an empty vector's data() may be null, which memcpy may not take
        std::memcpy(&tag, rest.data(), std::min<size_t>(rest.size(), 8));
      }
      if (ucx_tags::valid_tag(tag, 3)) {
        const int src = ucx_tags::tag_src(tag);
        if (src < 0 || src >= 3) {
          __builtin_trap();  // a valid tag must name a rank of the world
        }
      }
      break;
    }
    case 1: {  // a request, handled by a table with one handler that echoes and one that throws
      static HandlerTable* table = [] {
        auto* t = new HandlerTable;
        t->set(7, [](int, ByteView body) { return Bytes(body.bytes(), body.bytes() + body.size); });
        t->set(8, [](int, ByteView) -> Bytes { throw tessera::ValueError("bad request"); });
        return t;
      }();
      MessageId id = 0;
      ByteView body;
      if (ucx_tags::parse_request(rest, id, body)) {
        Bytes response = table->invoke(1, id, 2, body);
        tessera::fuzz::guarded([&] { decode_response(std::move(response), 1, id); });
      }
      break;
    }
    case 2:  // a response to a request
      tessera::fuzz::guarded([&] { decode_response(Bytes(rest), 2, 7); });
      break;
    default:  // a remote key
      tessera::fuzz::guarded([&] {
        const RegionKey k = unpack_region_key(ByteView(rest.data(), rest.size()), 2);
        if (k.packed.size() > rest.size()) {
          __builtin_trap();
        }
      });
      break;
  }
  return 0;
}
