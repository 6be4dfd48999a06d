// SPDX-License-Identifier: Apache-2.0
// Internal: backend factories and helpers shared by the backends.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

/// What one rank called at one step of the collectives: every rank sends its own in front of
/// the step's payload and compares it with each peer's before using the payload.
enum class CollKind : uint8_t { barrier = 1, all_reduce = 2, all_gather = 3, all_to_all_v = 4 };
struct CollectiveId {
  CollKind kind = CollKind::barrier;
  DType dtype = DType::f32;     ///< all_reduce
  ReduceOp op = ReduceOp::sum;  ///< all_reduce
  uint64_t count = 0;           ///< all_reduce: elements; all_gather: bytes per rank
  std::string_view label;       ///< Transport::collective_label()
};
/// Labels longer than this are cut (the same way on every rank) on the wire.
constexpr size_t kMaxCollectiveLabel = 1024;
/// The identity as it travels: a 16-byte header, then the label.
Bytes encode_collective_id(const CollectiveId& id);
/// Reads an identity from the front of `msg`; returns the number of bytes it takes, 0 when
/// `msg` does not start with a well-formed one. `label_out` receives the label.
size_t decode_collective_id(ByteView msg, CollectiveId* id, std::string* label_out);
/// "node_split (all_to_all_v)", "all_reduce (float64 sum of 2)", "barrier".
std::string describe_collective(const CollectiveId& id);
/// The CollectiveMismatchError's message seen by rank `me` at collective `seq`: what each rank
/// called (calls[r]; ranks that called the same are listed together).
std::string collective_mismatch_message(int me, uint64_t seq,
                                        const std::vector<std::string>& calls);

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
