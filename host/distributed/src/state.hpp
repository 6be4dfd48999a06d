// SPDX-License-Identifier: Apache-2.0
// Internal state shared by the dist sources: the runtime's registries, a tensor's storage, the
// graph's sampling structure, and the wire format of the dist protocol.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/graph/graph.hpp"

namespace tessera::dist {
struct DevicePlacement;
}  // namespace tessera::dist

namespace tessera::dist::detail {

// Message ids of the dist protocol (Tessera's reserved range).
constexpr transport::MessageId kMsgRead = 0xF0001001;
constexpr transport::MessageId kMsgWrite = 0xF0001002;
constexpr transport::MessageId kMsgSample = 0xF0001003;
/// A read whose one-sided copy kept failing its stamp check: the owner answers under its row
/// lock and re-stamps rows whose stamp does not match their bytes (changed via local_data()).
constexpr transport::MessageId kMsgReadRepair = 0xF0001004;

/// The local rows of a Placement::kDevice tensor (tensor_device.cpp).
struct DeviceShard {
  /// Set by the destructor: `device` while the members below are freed, then the caller's
  /// device again (the last member destroyed).
  std::optional<cuda::DeviceGuard> on_device;
  int device = -1;          // the CUDA device holding `rows`
  cuda::DeviceBuffer rows;  // (hi - lo) * row_bytes bytes
  /// The owner's own work on its rows: init, answering peers' requests, reads into host memory.
  /// Shared by threads; each one synchronizes it before using what it enqueued.
  cuda::Stream stream;
  DeviceShard();
  ~DeviceShard();  // frees on `device`, then restores the calling thread's device
};

/// A read-only copy of a tensor's local rows for this rank's GPU (DistTensor::mirror_on_device):
/// in device memory (kGpu), or in pinned host memory read through UVA (kPinnedHost) with the
/// hottest rows also in a device cache. Reads of local rows into device memory use it.
struct DeviceMirror {
  std::optional<cuda::DeviceGuard> on_device;  // as DeviceShard's
  int device = -1;
  cuda::Placement placement = cuda::Placement::kGpu;
  cuda::DeviceBuffer rows;                    // kGpu
  cuda::PinnedBuffer pinned;                  // kPinnedHost
  std::unique_ptr<cuda::FeatureCache> cache;  // kPinnedHost with hot rows
  /// The local rows as the device reads them ((hi - lo) * row_bytes bytes).
  const void* src() const { return rows.data() ? rows.data() : pinned.data(); }
  DeviceMirror();
  ~DeviceMirror();  // frees on `device`, then restores the calling thread's device
};

/// One tensor's local rows and what peers need to read them.
struct TensorStore {
  uint64_t id = 0;  // same on every rank (creation order)
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  PartPolicy policy;
  bool persistent = false;
  size_t row_bytes = 0;
  int64_t lo = 0, hi = 0;  // this rank's rows
  Placement placement = Placement::kHost;
  uint8_t* data = nullptr;           // this rank's rows: host memory, or device memory of `dev`
  std::unique_ptr<DeviceShard> dev;  // kDevice storage (data = dev->rows)
  /// A device copy of the local rows of a kHost tensor for reads into device memory; writes to
  /// a mirrored tensor are refused (it would go stale). Set once, before training starts.
  std::shared_ptr<DeviceMirror> mirror;
  std::unique_ptr<transport::MemoryRegion> region;  // registered (one-sided) storage
  std::unique_ptr<uint8_t[]> heap;                  // plain storage (request/response only)
  /// Rows of the machine's trainers in memory they share (MachineRows): [machine_lo,
  /// machine_hi) at machine_rows; `data` points into it. Null otherwise.
  std::shared_ptr<void> machine_hold;
  const uint8_t* machine_rows = nullptr;
  int64_t machine_lo = 0, machine_hi = 0;
  int machine_trainers = 1, machine_local = 0;
  std::vector<std::unique_ptr<transport::RemoteMemory>> remotes;  // per rank (one-sided)
  bool one_sided = false;    // registered memory, remote keys exchanged
  size_t min_get_bytes = 0;  // rows smaller than this are read by request even so
  /// Row atomicity (docs/dist.md, "Consistency of rows written concurrently"): every copy into
  /// or out of this rank's rows made by this process (its own reads and writes, and the server
  /// answering peers) holds `rows_mu`, writers exclusively, readers shared.
  mutable std::shared_mutex rows_mu;
  /// One-sided tensors: one stamp per local row (row_stamp of its bytes) in the registered
  /// region after the rows, at byte offset stamps_offset(hi - lo); a peer's get checks the rows
  /// it copied against the stamps it copied with them.
  uint64_t* stamps = nullptr;
  /// One-sided tensors: a sequence count of the writes into this rank's rows, in the registered
  /// region after the stamps (seq_offset(hi - lo)): odd while a write changes rows (see
  /// RowWrites). A peer whose gets of rows saw the same even count before and after knows no
  /// write overlapped them and skips the stamp check.
  std::atomic<uint64_t>* write_seq = nullptr;
  Runtime* rt = nullptr;
  std::weak_ptr<void> handle;  // the per-rank Ref shared by every handle of this tensor
  /// Pinned host staging of device transfers (rows to or from the GPU), grown on demand and
  /// kept; a thread that finds it busy allocates its own (see StagingLease).
  mutable std::mutex staging_mu;
  mutable cuda::PinnedBuffer staging;
};

/// One edge feature as sampling weights of this rank's rows, in SampleGraph::rows storage order.
struct EdgeWeights {
  std::vector<float> w;
  /// SampleGraph::rows' arrays with `w`, prepared once for weighted sampling (per-row prefix
  /// sums).
  std::unique_ptr<ops::SamplingGraph> graph;
};

/// What the owner needs to sample the nodes it owns.
struct SampleGraph {
  /// This rank's rows [lo, hi) in new-ID order, row v - lo for node v, each row in the
  /// unpartitioned graph's storage order (original source, original edge ID) and keyed by the
  /// node's original ID (row_keys = inner_orig): a node's sample is the whole graph's sample of
  /// it. indptr is this object's (from 0); indices and eids are the partition's memory-mapped
  /// files when it stores its rows in that order (format version 2: nothing copied), else copies
  /// sorted at load (version 1). eids are global new edge IDs.
  ops::GraphArrays arrays;
  std::vector<int64_t> indptr;
  Array indices, eids;  // what arrays.indices / arrays.eids point into (kept alive here)
  /// Stored neighbor IDs that are local IDs (a version-2 partition with halo): nid.npy names the
  /// new ID of each (local_nid, checked at load); null when they are new IDs already.
  Array nid_file;
  const int64_t* local_nid = nullptr;
  /// `arrays` as stored, for uniform sampling.
  std::unique_ptr<ops::SamplingGraph> rows;
  std::vector<int64_t> inner_orig;  // original ID of owned node (new ID - lo)
  int64_t lo = 0, hi = 0;
  int64_t num_nodes = 0;  // the whole graph's
  /// Weighted sampling: this rank's edge data (row r = new edge ID elo + r; shared with the
  /// partition's memory-mapped files), and the weights built from it on first use, by name.
  std::string graph_name;
  int64_t elo = 0;
  std::map<std::string, Array> edata;
  mutable std::mutex weights_mu;
  mutable std::map<std::string, std::shared_ptr<const EdgeWeights>> weights;

  /// The new ID of the neighbor at stored position k of `arrays` (its local ID renamed).
  int64_t neighbor(int64_t k) const {
    const int64_t u = arrays.indices[k];
    return local_nid ? local_nid[u] : u;
  }
  /// The rows as a GPU places them (DistDeviceSampler): `arrays` (row v - lo for node v, keyed
  /// by original ID) with every neighbor as a new ID: renamed into `renamed` when they are stored
  /// as local IDs (8 bytes an edge), else the stored array itself. Valid while this object and
  /// `renamed` live.
  ops::GraphArrays placed_arrays(std::vector<int64_t>& renamed) const;
};

/// The weights named `name` on `sg` (built and validated on first use; ValueError naming the
/// feature when it is absent, not float32 / float64, not one value per edge, or a weight is
/// negative or not finite). Thread-safe.
std::shared_ptr<const EdgeWeights> edge_weights(const SampleGraph& sg, const std::string& name);
/// The weights named `name` in the storage order of sg.arrays (and of placed_arrays), validated
/// as edge_weights does, for a GPU placement to copy: a copy of edge_weights' when the CPU path
/// built them, else built without preparing (or keeping) the CPU's prefix sums.
std::vector<float> placed_weights(const SampleGraph& sg, const std::string& name);

struct GraphState {
  std::shared_ptr<Runtime> rt;
  uint64_t id = 0;
  std::string name;
  PartitionConfig config;
  /// One partition per rank: the config's book, or with several trainers per machine each
  /// machine's ranges cut into one contiguous range per trainer (what routes reads and
  /// sampling). machine_book: the config's, one partition per machine.
  PartitionBook book;
  PartitionBook machine_book;
  int trainers_per_machine = 1;
  int machine = 0;
  /// The machine's partition data shared by its trainers (null with one trainer per machine).
  std::shared_ptr<void> shared;
  int64_t shared_bytes = 0;
  LocalPartition part;
  std::map<std::string, DistTensor> ndata, edata;
  DistTensor orig_nid;
  DistTensor orig_eid;        // int64 [E], edge policy
  DistTensor edge_endpoints;  // int64 [E, 2] (src, dst) new node IDs, edge policy
  /// Creates orig_eid and edge_endpoints (collective): run by the constructor with several
  /// ranks, on first use of either with one (graph.cpp, ensure_edge_tables).
  std::function<void()> build_edge_tables;
  std::once_flag edge_tables_once;
  DistTensor new_nid;  // int64 [N] by ORIGINAL node ID, even policy
  std::shared_ptr<SampleGraph> sg = std::make_shared<SampleGraph>();
  /// Sampling structures placed on a GPU (device_sampling.cpp), shared by the samplers of this
  /// graph with the same device, placement and weights while any of them lives.
  std::mutex placed_mu;
  std::map<std::string, std::weak_ptr<const void>> placed;
  /// place_on_device's last plan (null before; under placed_mu), the GPU bytes its budget has
  /// left for structures it did not reserve (another placement or weights; DistDeviceSampler
  /// charges them), and whether the structure it reserved was placed.
  std::shared_ptr<const DevicePlacement> device_plan;
  int64_t device_spare_bytes = 0;
  bool device_reserved_used = false;
};

struct RuntimeState {
  std::unique_ptr<transport::Transport> t;
  /// Optional device-memory transport (nccl) for read_collective_into_device.
  std::unique_ptr<transport::Transport> dt;
  int rank = 0;  // kept apart from `t`: handlers may still run while `t` is being destroyed
  bool one_sided = false;
  size_t min_get_bytes = 0;                                  // see auto_min_get_bytes
  std::mutex mu;                                             // guards the registries
  std::map<uint64_t, std::shared_ptr<TensorStore>> tensors;  // by id
  std::map<std::string, std::shared_ptr<TensorStore>> by_name;
  /// Released names whose memory is kept: a peer may still read the rows until every rank has
  /// dropped the tensor (reclaim_dropped frees it then).
  std::vector<std::shared_ptr<TensorStore>> retired;
  uint64_t next_tensor_id = 1;
  std::map<uint64_t, std::shared_ptr<const SampleGraph>> graphs;  // what handlers sample
  uint64_t next_graph_id = 1;
  /// Handlers serve under a shared lock; tearing down (a graph, the runtime) takes it exclusively
  /// so no handler touches memory that is being freed. `closing`: refuse further requests.
  std::shared_mutex serve_mu;
  bool closing = false;
  /// Takes the shared serve lock, or throws when the runtime is shutting down.
  std::shared_lock<std::shared_mutex> serving(int from);

  std::shared_ptr<TensorStore> tensor(uint64_t id, int from);
  std::shared_ptr<const SampleGraph> graph(uint64_t id, int from);
};

/// IDs of the retired tensors whose every handle on this rank is gone.
std::vector<uint64_t> dropped_tensor_ids(RuntimeState& st);
/// Frees the retired tensors every rank dropped: `dropped_by[r]` is rank r's
/// dropped_tensor_ids, exchanged in a collective (a DistTensor's creation). Safe because a rank
/// reaches that collective only after its last handle went, so after its last read or write of
/// the rows (reads and writes complete before they return) and it never asks for them again.
void reclaim_dropped(RuntimeState& st, const std::vector<std::vector<uint64_t>>& dropped_by);

// --- little-endian wire helpers ----------------------------------------------------------------

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const size_t o = buf.size();
    buf.resize(o + sizeof(T));
    std::memcpy(buf.data() + o, &v, sizeof(T));
  }
  void put_bytes(const void* p, size_t n) {
    const size_t o = buf.size();
    buf.resize(o + n);
    if (n) {
      std::memcpy(buf.data() + o, p, n);
    }
  }
  transport::Bytes buf;
};

class Reader {
 public:
  Reader(transport::ByteView v, const char* what) : p_(v.bytes()), n_(v.size), what_(what) {}
  template <typename T>
  T get() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, p_ + o_, sizeof(T));
    o_ += sizeof(T);
    return v;
  }
  const uint8_t* take(size_t n) {
    need(n);
    const uint8_t* r = p_ + o_;
    o_ += n;
    return r;
  }
  size_t left() const { return n_ - o_; }

 private:
  void need(size_t k) const;
  const uint8_t* p_;
  size_t n_, o_ = 0;
  const char* what_;
};

/// Rethrows a transport error with `context` prepended, keeping its type (and peer).
[[noreturn]] void rethrow_with_context(const std::string& context);

/// The 64-bit stamp of a row's bytes (a multiply-xorshift hash over 8-byte words, 4 lanes).
uint64_t row_stamp(const uint8_t* p, size_t n);
/// Byte offset of the stamps in an owner's registered region of `rows` rows of `row_bytes`.
inline size_t stamps_offset(int64_t rows, size_t row_bytes) {
  return (static_cast<size_t>(rows) * row_bytes + 7) / 8 * 8;
}
/// Byte offset of the write sequence count, after the stamps of `rows` rows.
inline size_t seq_offset(int64_t rows, size_t row_bytes) {
  return stamps_offset(rows, row_bytes) + static_cast<size_t>(rows) * 8;
}

/// Brackets a change of this rank's rows for peers' one-sided readers (a sequence lock: the
/// count is odd while rows change). Held under rows_mu exclusively; no-op without one-sided
/// reads.
class RowWrites {
 public:
  explicit RowWrites(const TensorStore& s) : seq_(s.write_seq) {
    if (seq_ != nullptr) {
      seq_->fetch_add(1, std::memory_order_relaxed);  // odd: the rows below may change
      // The odd count is visible before any row store below: an acq_rel increment alone lets
      // later stores pass its store half on weakly ordered CPUs (aarch64's LL/SC), so a reader
      // could copy a changed row between two equal even counts.
      std::atomic_thread_fence(std::memory_order_release);
    }
  }
  ~RowWrites() {
    if (seq_ != nullptr) {
      seq_->fetch_add(1, std::memory_order_release);  // even: after every row store above
    }
  }
  RowWrites(const RowWrites&) = delete;
  RowWrites& operator=(const RowWrites&) = delete;

 private:
  std::atomic<uint64_t>* seq_;
};

/// Re-stamps local rows [rel_begin, rel_end) (relative to s.lo); no-op without stamps. The
/// caller holds rows_mu exclusively or knows nobody writes these rows.
void restamp(const TensorStore& s, int64_t rel_begin, int64_t rel_end);

/// Reads rows of a DistTensor (the shared implementation of read/read_into).
void read_rows(const TensorStore& s, const int64_t* ids, int64_t n, uint8_t* out);

// --- saved tensors (io.cpp) ----------------------------------------------------------------------

/// The first two phases of load_dist_tensor (collective): every rank's files checked and this
/// rank's rows read, nothing written to `t`; every rank throws when any fails.
Array read_saved_rows(const DistTensor& t, const std::filesystem::path& dir);
/// The last phase (collective): this rank's rows of `t` become `rows`, then a barrier.
void store_loaded_rows(DistTensor& t, const Array& rows, const std::string& context);

/// Checks that every ID is a row of the tensor (IndexError naming the first bad one).
void check_ids(const TensorStore& s, const int64_t* ids, int64_t n, const char* what);

/// The first exchange of a collective read (collective): every owner gets the IDs this rank
/// asks of it (pos[p]: their positions in `ids`); returns the IDs every rank asks of this one.
/// `check` validates this rank's call first; a rank whose check throws sends its error in
/// place of its requests, so every rank throws after this one exchange (the failing rank its
/// own exception, the others the same type with "DistTensor '<name>' <what>: rank r failed:
/// <message>") instead of waiting for it in the next.
std::vector<transport::Bytes> exchange_read_requests(const TensorStore& s, const int64_t* ids,
                                                     int64_t n, const char* what,
                                                     const std::function<void()>& check,
                                                     std::vector<std::vector<int64_t>>& pos);

// --- device rows (tensor_device.cpp) ------------------------------------------------------------
// Every function below needs a CUDA build with a device (NotCompiledError / ValueError otherwise).
// `rel` are row indices relative to s.lo, already validated; host pointers are pageable memory.

/// Allocates s.dev on the current device and fills it: `init` writes a zero-filled host staging
/// buffer that is copied to the device (zeros without `init`). Sets s.data.
void init_device_shard(TensorStore& s, const InitFn& init);
/// out_host[k] = row rel[k] of a kDevice shard, for k in [0, n): one gather kernel on the
/// shard's stream into device scratch, one copy into pinned staging, then into `out_host`.
void gather_device_rows(const TensorStore& s, const int64_t* rel, int64_t n, uint8_t* out_host);
/// Row rel[k] of a kDevice shard = rows_host[k]; with repeated rows the last one wins (as on the
/// host). Returns once the rows are stored.
void scatter_device_rows(const TensorStore& s, const int64_t* rel, int64_t n,
                         const uint8_t* rows_host);
/// Throws ValueError naming `what` when the tensor's local device rows (its shard or its
/// mirror) are on another device than the calling thread's current one; no-op for host rows.
void check_rows_on_current_device(const TensorStore& s, const char* what);
/// DistTensor::read_into_device (ids already validated).
void read_rows_device(const TensorStore& s, const int64_t* ids, int64_t n, void* out_device,
                      cuda::StreamHandle stream);
/// Builds s.mirror on the current device (see DistTensor::mirror_on_device).
void make_mirror(TensorStore& s, cuda::Placement where, const int64_t* hot_rows, int64_t num_hot);
/// out[k] = local row rel[k] of the mirror for k in [0, n), `rel` int64 in device memory, one
/// gather kernel on `stream` (asynchronous). A rel outside [0, hi - lo) zero-fills its row.
void gather_mirror(const TensorStore& s, const int64_t* d_rel, int64_t n, void* out_device,
                   cuda::StreamHandle stream);
/// DistTensor::read_collective_into_device; `check` validates the call (the IDs, the output,
/// the device transport) as exchange_read_requests runs it.
void read_collective_device(const TensorStore& s, const int64_t* ids, int64_t n, void* out_device,
                            cuda::StreamHandle stream, const std::function<void()>& check);

// --- sampling (sampling.cpp) --------------------------------------------------------------------

/// An owner's sample of the seeds it was asked for: per seed (in request order) its edge count,
/// then every seed's sources and edge IDs (global new IDs), grouped by seed in that order.
struct OwnedSample {
  std::vector<int64_t> counts;
  std::vector<int64_t> src, eid;
};

/// The distinct seeds of a request (first-appearance order), their original IDs, and each
/// request position's index among them.
struct UniqueSeeds {
  std::vector<int64_t> ids, rows, slot;  // rows: ids - lo, the seeds' rows in SampleGraph::arrays
};

/// Deduplicates the seeds `ids` this rank owns (IndexError naming rank `from` for another's).
UniqueSeeds unique_seeds(const SampleGraph& sg, const int64_t* ids, int64_t n, int from, int me);
/// The OwnedSample of the request from edges sampled for `u`'s distinct seeds, grouped by seed
/// in order, the edges of distinct seed j carrying dst == keys[j] (u.ids or u.rows: what the
/// sampler was given).
OwnedSample expand_unique(const UniqueSeeds& u, const std::vector<int64_t>& keys,
                          const std::vector<int64_t>& dst, const std::vector<int64_t>& src,
                          const std::vector<int64_t>& eid);
/// Samples seeds this rank owns on the CPU (ops::sample_neighbors on sg.rows, keyed by original
/// ID).
OwnedSample sample_owned(const SampleGraph& sg, const int64_t* ids, int64_t n, int64_t fanout,
                         bool replace, const EdgeWeights* weights, const RngKey& key, int from,
                         int me);
/// Samples this rank's seeds (new IDs, repeats allowed) the way the caller chooses (CPU or GPU).
using LocalSampler = std::function<OwnedSample(const int64_t* ids, int64_t n)>;
/// dist::sample_neighbors with this rank's seeds sampled by `local`: remote owners get one
/// batched request each, in flight while `local` runs; the edges come back in seed order.
ops::SampledEdges sample_neighbors_with(const DistGraph& g, ops::Span<const int64_t> seeds,
                                        const DistSampleOptions& opts, const LocalSampler& local);

/// The handler of kMsgSample (sampling.cpp).
transport::Bytes serve_sample(RuntimeState& st, int from, transport::ByteView payload);

/// The tpm + 1 cuts of a machine's ni nodes into its trainers' ranges (graph.cpp): about equal
/// shares of node_bytes a node plus edge_bytes an in-edge (indptr: the in-edge offsets).
std::vector<int64_t> trainer_cuts(const int64_t* indptr, int64_t ni, int tpm, int64_t node_bytes,
                                  int64_t edge_bytes);

}  // namespace tessera::dist::detail
