// SPDX-License-Identifier: Apache-2.0
// The 'local' transport: a world of one process. Collectives are copies, requests call the
// handler directly (on the caller's thread), gets are memcpy from the registered region.
#include <cstring>

#include "../src/backends.hpp"

namespace tessera::transport::detail {
namespace {

class LocalRegion final : public MemoryRegion {
 public:
  LocalRegion(void* data, size_t size) : MemoryRegion(data, size) {}
  explicit LocalRegion(size_t size) : MemoryRegion(nullptr, size), owned_(size, 0) {
    data_ = owned_.data();
  }
  Bytes remote_key() const override {
    return pack_region_key(0, reinterpret_cast<uint64_t>(data_), size_, ByteView());
  }

 private:
  Bytes owned_;
};

class LocalRemote final : public RemoteMemory {
 public:
  LocalRemote(const uint8_t* base, size_t size) : RemoteMemory(0, size), base_(base) {}
  const uint8_t* base_;
};

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(const Options& o) : Transport(o) {}
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.collectives = c.request_response = c.one_sided_get = c.host_memory = true;
    c.fabric = "local";
    return c;
  }
  void barrier() override {}
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp) override {
    TESSERA_EXPECTS(data != nullptr || count == 0, ValueError, "all_reduce: null buffer");
    (void)dtype_size(dtype);
  }
  void all_gather(const void* send, size_t bytes, void* recv) override {
    if (bytes && send != recv) {
      std::memmove(recv, send, bytes);
    }
  }
  void all_to_all_v(const void* send, const size_t* sc, const size_t* so, void* recv,
                    const size_t* rc, const size_t* ro) override {
    TESSERA_EXPECTS(sc[0] == rc[0], ValueError,
                    "all_to_all_v: rank 0 sends {} bytes to itself but expects to receive {}",
                    sc[0], rc[0]);
    if (sc[0]) {
      std::memmove(static_cast<uint8_t*>(recv) + ro[0], static_cast<const uint8_t*>(send) + so[0],
                   sc[0]);
    }
  }
  void register_handler(MessageId id, Handler h) override { handlers_.set(id, std::move(h)); }
  PendingResponse request_async(int peer, MessageId id, ByteView payload) override {
    TESSERA_EXPECTS(peer == 0, IndexError, "request: rank {} is outside the world of 1 rank", peer);
    auto encoded = std::make_shared<Bytes>(handlers_.invoke(0, id, 0, payload));
    return PendingResponse([encoded, id] { return decode_response(std::move(*encoded), 0, id); });
  }
  std::unique_ptr<MemoryRegion> register_memory(void* data, size_t bytes) override {
    TESSERA_EXPECTS(data != nullptr || bytes == 0, ValueError, "register_memory: null pointer");
    return std::make_unique<LocalRegion>(data, bytes);
  }
  std::unique_ptr<MemoryRegion> allocate_memory(size_t bytes) override {
    return std::make_unique<LocalRegion>(bytes);
  }
  std::unique_ptr<RemoteMemory> attach(int owner, ByteView key) override {
    TESSERA_EXPECTS(owner == 0, IndexError, "attach: rank {} is outside the world of 1 rank",
                    owner);
    RegionKey k = unpack_region_key(key, owner);
    return std::make_unique<LocalRemote>(reinterpret_cast<const uint8_t*>(k.address), k.size);
  }
  void get(const RemoteMemory& remote, const GetRange* ranges, size_t n) override {
    check_ranges(remote, ranges, n);
    const auto& r = dynamic_cast<const LocalRemote&>(remote);
    for (size_t i = 0; i < n; ++i) {
      if (ranges[i].bytes) {
        std::memcpy(ranges[i].local, r.base_ + ranges[i].remote_offset, ranges[i].bytes);
      }
    }
  }

 private:
  HandlerTable handlers_;
};

}  // namespace

std::unique_ptr<Transport> make_local(const Options& options) {
  return std::make_unique<LocalTransport>(options);
}

}  // namespace tessera::transport::detail
