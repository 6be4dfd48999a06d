// SPDX-License-Identifier: Apache-2.0
// DistTensor: a tensor whose rows are spread over the ranks by a partition policy and that any
// rank reads and writes by global row ID (DGL's dgl.distributed.DistTensor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/ops/span.hpp"
#include "tessera/partition/book.hpp"

namespace tessera::dist {

class Runtime;
namespace detail {
struct TensorStore;
}

/// Which rank owns which rows: rank r owns the contiguous rows [offsets[r], offsets[r+1]).
struct PartPolicy {
  /// "node" (the partition book's node ranges), "edge" (its edge ranges) or "even".
  std::string kind = "even";
  std::vector<int64_t> offsets{0};  ///< world_size + 1 entries, non-decreasing from 0

  /// Rows of nodes / edges as a PartitionBook assigns them (one partition per rank).
  static PartPolicy node(const PartitionBook& book);
  static PartPolicy edge(const PartitionBook& book);
  /// `rows` split into `world` contiguous ranges whose sizes differ by at most one.
  static PartPolicy even(int64_t rows, int world);

  int64_t num_rows() const { return offsets.back(); }
  int world_size() const { return static_cast<int>(offsets.size()) - 1; }
  /// Owner of `row` (in [0, num_rows); not checked here).
  int owner(int64_t row) const;
  std::pair<int64_t, int64_t> range(int r) const { return {offsets[r], offsets[r + 1]}; }
  bool operator==(const PartPolicy& o) const { return kind == o.kind && offsets == o.offsets; }
};

/// Fills this rank's rows of a new tensor: rows [row_begin, row_end) (global IDs) into `dst`,
/// (row_end - row_begin) * row_bytes bytes, C-contiguous, already zero-filled.
using InitFn = std::function<void(int64_t row_begin, int64_t row_end, void* dst)>;

/// Where a tensor's local rows live (docs/dist.md, "Device placement").
enum class Placement : uint8_t {
  /// Host memory (registered with the transport for one-sided gets where it can).
  kHost,
  /// Device memory (cuda::DeviceBuffer) on the creating thread's current CUDA device. Peers
  /// never read these rows one-sidedly: the owner's server answers their requests (a gather
  /// kernel into pinned staging, then the response). CUDA builds only: a build without CUDA
  /// throws NotCompiledError, a CUDA build without a device ValueError.
  kDevice
};

/// Host memory that holds the rows [lo, hi) of every trainer of this rank's machine, shared by
/// them (several trainers per machine, docs/dist.md): a tensor created over it keeps its own rows
/// at base + (own lo - lo) * row_bytes instead of allocating them, and reads the rows of the
/// machine's other trainers straight from it. `hold` keeps the memory alive.
struct MachineRows {
  std::shared_ptr<void> hold;
  uint8_t* base = nullptr;
  int64_t lo = 0, hi = 0;
  int trainers = 1;  ///< trainers of the machine
  int local = 0;     ///< this rank's index among them
  /// The memory already holds this rank's rows (a copy-on-write mapping of a partition's file,
  /// for a job of one rank): the tensor neither zero-fills them nor calls `init`.
  bool filled = false;
};

/// What DistTensor::mirror_on_device holds on this rank.
struct DeviceMirrorInfo {
  bool mirrored = false;
  cuda::Placement placement = cuda::Placement::kGpu;
  int device = -1;
  int64_t gpu_bytes = 0;     ///< device memory: the rows (kGpu) or the hot-row cache
  int64_t pinned_bytes = 0;  ///< pinned host memory read through UVA (kPinnedHost)
  int64_t cache_rows = 0;    ///< rows of the device cache in front of pinned rows
};

/// Lookups and hits of a mirror's hot-row cache.
struct CacheCounters {
  int64_t lookups = 0;
  int64_t hits = 0;
};

/// A distributed tensor of shape [num_rows, ...]. A handle: copies share the same tensor.
/// Created collectively (every rank, same order) and idempotently by name: creating a name that
/// exists with the same shape, dtype, policy and placement returns the existing tensor; a
/// different one throws ValueError naming both. Attaching is collective too: ranks where the name
/// exists and ranks where it does not (a non-persistent tensor dropped on some ranks only) all
/// throw ValueError naming which ranks create and which attach. Reads and writes are batched per
/// owner: local rows are copied directly (kDevice: by the CUDA gather / scatter kernels), remote
/// rows of kHost owners are read with one-sided gets of the owner's registered memory where the
/// transport supports them (else one request per owner), those of kDevice owners always by one
/// request per owner; writes send one request per owner that is acknowledged before write()
/// returns.
class DistTensor {
 public:
  DistTensor() = default;
  /// Collective. `shape[0]` must equal policy.num_rows() and the policy must cover the world.
  /// `init` (optional) fills this rank's rows (host memory; for kDevice a host staging buffer
  /// that is then copied to the device); otherwise they are zero. A non-persistent
  /// tensor's name is released when the last handle on this rank is destroyed; its memory is
  /// kept while peers may still read it, and freed by the first creation of a DistTensor
  /// (collective) after every rank dropped it. A persistent one lives as long as the runtime.
  /// `machine` (kHost only): the rows live in memory shared by the trainers of this machine (see
  /// MachineRows); this rank zero-fills and `init`s only its own rows there (neither when
  /// `machine.filled`), and other machines read them by request, never one-sidedly.
  DistTensor(const std::shared_ptr<Runtime>& rt, const std::string& name,
             std::vector<int64_t> shape, DType dtype, PartPolicy policy,
             const InitFn& init = nullptr, bool persistent = false,
             Placement placement = Placement::kHost, const MachineRows& machine = {});

  bool defined() const { return static_cast<bool>(s_); }
  /// Whether constructing this handle created the tensor (false: it attached to a tensor of
  /// the same name that already existed, whose rows it did not touch; DGL's init_func rule).
  bool created() const { return created_; }
  const std::string& name() const;
  const std::vector<int64_t>& shape() const;
  DType dtype() const;
  int64_t num_rows() const;
  /// Bytes of one row (product of shape[1:] times the element size).
  size_t row_bytes() const;
  const PartPolicy& policy() const;
  bool persistent() const;
  /// Releases the tensor's name now, persistent or not, as dropping the last handle of a
  /// non-persistent tensor does: creating the name again creates a new tensor, while the rows
  /// stay readable through existing handles until the runtime ends. For a creator whose
  /// initialization of the rows failed: called on every rank (every rank learned of the
  /// failure), it leaves no tensor of half-initialized rows behind. Local.
  void release_name();
  Placement placement() const;
  /// The runtime the tensor was created on.
  Runtime& runtime() const;

  /// t[ids]: a new host Array of shape [ids.size(), shape[1:]...]. IDs may repeat and come in
  /// any order; IndexError names the first one outside [0, num_rows).
  Array read(ops::Span<const int64_t> ids) const;
  /// t[ids] into `out` (host memory of ids.size() * row_bytes() bytes).
  void read_into(ops::Span<const int64_t> ids, void* out) const;
  /// t[ids] = rows (`rows`: ids.size() * row_bytes() host bytes). Returns once every owner has
  /// stored its rows. With repeated IDs the last row wins among rows going to one owner.
  void write(ops::Span<const int64_t> ids, const void* rows);
  /// t[ids] = rows with an Array of shape [ids.size(), shape[1:]...] and the tensor's dtype.
  void write(ops::Span<const int64_t> ids, const Array& rows);

  /// Collective gather in which every rank takes part in the same step, over the runtime's host
  /// transport (two all_to_all_v: IDs out, rows back): each rank gets t[ids] of its own `ids`.
  /// Same result as read().
  Array read_collective(ops::Span<const int64_t> ids) const;

  /// t[ids] into `out_device`: ids.size() * row_bytes() bytes of device memory (or pinned host
  /// memory, written through UVA) of the calling thread's current device, row-major. Any
  /// placement: local device rows are gathered by the CUDA gather kernel on `stream` straight
  /// into `out_device`; host rows (local, one-sided gets, or the owners' answers, which for
  /// kDevice owners come from their GPUs) are gathered into pinned staging and copied to the
  /// device in one host-to-device copy on `stream`. On return the rows are in `out_device` for
  /// every later operation on `stream`; when some rows came through host staging the call has
  /// synchronized `stream` (it waits for its staging copy), otherwise it returns without waiting.
  /// IndexError / ValueError as read(); ValueError for a null or pageable `out_device`, or a
  /// kDevice tensor on another device than the calling thread's. NotCompiledError without CUDA.
  void read_into_device(ops::Span<const int64_t> ids, void* out_device,
                        cuda::StreamHandle stream) const;

  /// read_collective with the result on the device: collective (every rank, same step). The IDs
  /// go to their owners over the runtime's host transport; each owner gathers the asked rows on
  /// its GPU (kDevice: gather kernel; kHost: pinned staging and one copy) and the rows are
  /// exchanged with the device transport's all_to_all_v (Runtime::attach_device_transport, e.g.
  /// nccl) ordered after earlier work on `stream`, then put in `ids` order by a gather kernel on
  /// `stream`. Waits (with the transport's deadline and lost-rank checks) for the exchange, not
  /// for the final kernel. `out_device` as read_into_device. ValueError when no device transport
  /// is attached.
  void read_collective_into_device(ops::Span<const int64_t> ids, void* out_device,
                                   cuda::StreamHandle stream) const;

  /// t[ids] into device memory, with the `n` IDs themselves in device memory of the calling
  /// thread's current device (e.g. the sampler's input nodes). When this rank owns every row
  /// (a world of one) and the rows are on the device (a mirror or Placement::kDevice), one gather
  /// kernel on `stream`, asynchronous, with no host round trip; an ID outside [0, num_rows)
  /// zero-fills its row there (IDs from the sampler are in range). Otherwise the IDs are copied
  /// to the host (synchronizing `stream`) and read_into_device runs.
  void read_into_device_ids(const int64_t* d_ids, int64_t n, void* out_device,
                            cuda::StreamHandle stream) const;

  /// Makes a read-only copy of this rank's rows for the calling thread's current GPU: in device
  /// memory (cuda::Placement::kGpu), or in pinned host memory that kernels read through UVA
  /// (kPinnedHost), where the local rows `hot_rows` (relative to local_range().first, in cache
  /// slot order, distinct) are also cached in device memory. read_into_device and
  /// read_into_device_ids then gather local rows from it with one kernel; host reads and peers'
  /// reads keep using the host rows. While mirrored, writes (local or from peers) are refused
  /// with ValueError. Replaces an earlier mirror. Not collective. ValueError for kHost or a
  /// Placement::kDevice tensor; NotCompiledError without CUDA.
  void mirror_on_device(cuda::Placement where, ops::Span<const int64_t> hot_rows = {});
  /// Frees the mirror (writes are accepted again). No-op without one.
  void drop_mirror();
  DeviceMirrorInfo mirror_info() const;
  /// The hot-row cache's lookup and hit counters since the last reset (zeros without a cache).
  /// Synchronizes a stream of its own: call between epochs.
  CacheCounters mirror_cache_counters(bool reset = false) const;

  /// This rank's rows [first, second) (global IDs).
  std::pair<int64_t, int64_t> local_range() const;
  /// Their host memory (row-major, writable; other ranks read it concurrently). ValueError for a
  /// kDevice tensor, whose rows are not in host memory (see local_device_data()). Writes made
  /// here are outside the row-atomic contract of write(): the caller orders them against
  /// readers (e.g. by a barrier) and then calls local_rows_changed.
  void* local_data() const;
  /// Tells the tensor that local rows [begin, end) (global IDs) were changed through
  /// local_data(): re-stamps them, so that peers' one-sided reads of them pass their
  /// consistency check at the first copy (they would otherwise be re-read by request, which
  /// is correct but slower). Not collective; no-op for tensors read by requests only.
  void local_rows_changed(int64_t begin, int64_t end);
  /// The device memory of a kDevice tensor's rows (row-major, on device_index()); ValueError for
  /// a kHost tensor.
  void* local_device_data() const;
  /// The CUDA device holding a kDevice tensor's rows; -1 for kHost.
  int device_index() const;
  /// The machine-shared rows of this tensor (MachineRows; base null when it has none).
  MachineRows machine_rows() const;

 private:
  std::shared_ptr<detail::TensorStore> s_;
  bool created_ = false;
  /// Keeps the runtime alive; for a non-persistent tensor, releases its name when the last
  /// handle on this rank is dropped.
  std::shared_ptr<void> ref_;
};

}  // namespace tessera::dist
