// SPDX-License-Identifier: Apache-2.0
// Internal: backend factories and helpers shared by the backends.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/transport/rendezvous.hpp"
#include "tessera/transport/transport.hpp"

namespace tessera::transport::detail {

std::unique_ptr<Transport> make_local(const Options& options);

/// Whether the UCX backend was compiled (as the module libtessera_transport_ucx.so), and why it
/// cannot serve here ("" if it can: the module was found). Neither loads UCX.
bool ucx_compiled();
std::string ucx_unavailable_reason();
/// Loads the UCX module on the first call (ucx/ucx_loader.cpp), then creates a UCX transport;
/// NotCompiledError without UCX, IOError when the module cannot be found or loaded.
std::unique_ptr<Transport> make_ucx(const LaunchEnv& env, const Options& options);

/// Whether the NCCL backend was compiled in, and why it cannot serve here ("" if it can).
bool nccl_compiled();
std::string nccl_unavailable_reason();
std::unique_ptr<Transport> make_nccl(const LaunchEnv& env, const Options& options);

/// acc[i] = op(acc[i], src[i]) for count elements of dtype.
void reduce_into(void* acc, const void* src, size_t count, DType dtype, ReduceOp op);

/// Handlers by message id, shared by the backends that answer requests.
class HandlerTable {
 public:
  void set(MessageId id, Handler h);
  /// Runs the handler for `id`; returns the encoded response (status byte + body), never throws.
  Bytes invoke(int self_rank, MessageId id, int source, ByteView payload) const;

 private:
  mutable std::mutex mu_;
  std::map<MessageId, std::shared_ptr<Handler>> handlers_;
};

/// Decodes a response made by HandlerTable::invoke; throws RemoteError for an error response.
Bytes decode_response(Bytes&& encoded, int peer, MessageId id);

/// The blob of a registered region: owner, address, size and the backend's packed key.
Bytes pack_region_key(int owner, uint64_t address, uint64_t size, ByteView packed);
struct RegionKey {
  int owner = -1;
  uint64_t address = 0, size = 0;
  Bytes packed;
};
/// Parses and checks a blob (ValueError naming `expected_owner` on mismatch or corruption).
RegionKey unpack_region_key(ByteView blob, int expected_owner);

/// Checks get ranges against a remote region of `size` bytes (IndexError).
void check_ranges(const RemoteMemory& remote, const GetRange* ranges, size_t n);

}  // namespace tessera::transport::detail
