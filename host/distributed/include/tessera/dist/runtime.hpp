// SPDX-License-Identifier: Apache-2.0
// The distributed runtime of one rank: its Transport and the server that answers other ranks'
// requests for the rows and nodes this rank owns (reads, writes, sampling).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/transport/transport.hpp"

namespace tessera::dist {

namespace detail {
struct RuntimeState;
}

/// The row size from which TESSERA_DIST_GET=auto reads remote rows with one-sided gets rather
/// than one request per owner, for a transport fabric (Capabilities::fabric, e.g. UCX_TLS),
/// from bench dist-gather (docs/dist.md): 4 KiB over tcp alone ("tcp", "tcp,self"), where a
/// get costs about the same at any size and requests were 3-13x faster for 1-2 KB rows; 256 B
/// over shared memory alone ("posix,sysv,cma", "sm", ...), where a get is a copy and won from
/// 256 B rows; 1 KiB otherwise (RDMA, UCX's own choice, mixed lists: not measured here).
size_t auto_min_get_bytes(const std::string& fabric);

/// One rank's runtime (DGL's `dgl.distributed.initialize`). Created collectively by every rank
/// of the job; registers the request handlers of the distributed store on the transport (they
/// run on the transport's handler thread) and waits until every rank has done so. A world of one
/// process (no launcher environment) uses the `local` transport: the same program runs
/// standalone without a code change. Thread safety: DistTensor reads/writes and sampling may be
/// issued from any thread; collective calls (creating tensors and graphs, split, barrier) from
/// one thread at a time, in the same order on every rank.
class Runtime {
 public:
  /// Creates the transport (`backend` as in transport::create_transport: "" picks from
  /// TESSERA_TRANSPORT, else local for one process, else ucx) and the runtime. Collective.
  static std::shared_ptr<Runtime> create(
      const std::string& backend = "",
      const transport::Options& options = transport::Options::from_env());
  /// Wraps an existing transport (the runtime owns it from now on). Collective.
  static std::shared_ptr<Runtime> create(std::unique_ptr<transport::Transport> t);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const;
  int world_size() const;
  transport::Transport& transport() const;
  /// Whether remote host rows may be read with one-sided gets: the transport can, and
  /// TESSERA_DIST_GET is not "0". With TESSERA_DIST_GET=auto (default) only rows of at least
  /// min_get_bytes() are; smaller rows, and every row with "0", are read by one request per
  /// owner. "1": always gets.
  bool one_sided_reads() const;
  /// Rows of at least this many bytes are read with one-sided gets when one_sided_reads():
  /// auto_min_get_bytes(fabric) with TESSERA_DIST_GET=auto, else 0.
  size_t min_get_bytes() const;
  /// Forces the read path: true = always one-sided gets (where the transport can), false =
  /// always requests (tests and benchmarks compare both). Call on every rank before creating
  /// tensors: tensors created afterwards follow it.
  void set_one_sided_reads(bool on);
  /// Collective barrier over the transport.
  void barrier();
  /// Non-persistent DistTensors whose every handle on this rank is gone but whose rows this
  /// rank still holds, since a peer may read them: the first DistTensor creation after every
  /// rank dropped one frees it.
  size_t dropped_tensors_held() const;

  /// Adds a second, device-memory transport (capabilities().device_memory, e.g. nccl) for the
  /// device collectives of DistTensor::read_collective_into_device; the host transport keeps
  /// serving everything else. `t` must have this runtime's rank and world size; one device
  /// transport per runtime (ValueError otherwise). Attach on every rank before the first device
  /// collective. The runtime owns it and destroys it before the host transport.
  void attach_device_transport(std::unique_ptr<transport::Transport> t);
  /// Collective: creates `backend` (default nccl) for this job and attaches it. Its rendezvous
  /// store needs a port of its own: rank 0 picks a free one and sends it to every rank over the
  /// host transport; the address, ranks and job token are the launcher's (as for the host
  /// transport), the timeouts the host transport's. NotCompiledError without NCCL, ValueError
  /// without a GPU.
  void attach_device_transport(const std::string& backend = "nccl");
  /// Whether a device transport is attached.
  bool has_device_transport() const;
  /// The device transport (ValueError naming attach_device_transport when there is none).
  transport::Transport& device_transport() const;

  detail::RuntimeState& state() const { return *state_; }

 private:
  explicit Runtime(std::unique_ptr<transport::Transport> t);
  std::unique_ptr<detail::RuntimeState> state_;
};

}  // namespace tessera::dist
