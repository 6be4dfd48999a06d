// SPDX-License-Identifier: Apache-2.0
// The 'nccl' transport: GPU collectives on device memory, enqueued on a CUDA stream, and
// all-to-all-v as grouped ncclSend/ncclRecv. The NCCL unique id travels through the rendezvous
// store. The communicator is non-blocking so that every wait can poll a deadline and the store's
// lost-rank notices, and abort the communicator instead of hanging when a peer dies.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "../src/backends.hpp"
#include "../src/socket_util.hpp"

/// Checks an NCCL call; throws tessera::Error with the call text and NCCL's error string.
/// ncclInProgress is not an error on a non-blocking communicator (completion is polled).
#define TESSERA_NCCL_TRY(call)                                                                \
  do {                                                                                        \
    const ncclResult_t tessera_nr_ = (call);                                                  \
    if (tessera_nr_ != ncclSuccess && tessera_nr_ != ncclInProgress)                          \
      throw ::tessera::Error(fmt::format("NCCL call `{}` failed at {}:{}: {} ({})", #call,    \
                                         __FILE__, __LINE__, ncclGetErrorString(tessera_nr_), \
                                         ncclGetLastError(nullptr)));                         \
  } while (0)

#define TESSERA_NCCL_CUDA_TRY(call)                                                         \
  do {                                                                                      \
    const cudaError_t tessera_ce_ = (call);                                                 \
    if (tessera_ce_ != cudaSuccess)                                                         \
      throw ::tessera::Error(fmt::format("CUDA call `{}` failed at {}:{}: {} ({})", #call,  \
                                         __FILE__, __LINE__, cudaGetErrorName(tessera_ce_), \
                                         cudaGetErrorString(tessera_ce_)));                 \
  } while (0)

namespace tessera::transport::detail {

bool nccl_compiled() {
  return true;
}

std::string nccl_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return fmt::format("no usable CUDA driver or device ({})", cudaGetErrorName(e));
  }
  if (n == 0) {
    return "no CUDA device is visible";
  }
  return "";
}

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u64:
      return ncclUint64;
  }
  TESSERA_FAIL(ValueError, "nccl: unknown dtype code {}", static_cast<int>(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  TESSERA_FAIL(ValueError, "nccl: unknown reduce op code {}", static_cast<int>(op));
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(const LaunchEnv& env, const Options& options)
      : Transport(options), rank_(env.rank), world_(env.world_size) {
    const std::string why = nccl_unavailable_reason();
    TESSERA_EXPECTS(why.empty(), ValueError, "rank {}: the 'nccl' transport cannot run here: {}",
                    rank_, why);
    int ndev = 0;
    TESSERA_NCCL_CUDA_TRY(cudaGetDeviceCount(&ndev));
    device_ = env.local_rank % ndev;
    TESSERA_NCCL_CUDA_TRY(cudaSetDevice(device_));
    TESSERA_NCCL_CUDA_TRY(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
    stream_ = own_stream_;
    lost_.assign(world_, 0);
    lost_reason_.assign(world_, "");

    rv_ = rendezvous(env, options_.rendezvous_timeout_s, options_.heartbeat_timeout_s);
    rv_.client->watch([this](int r, const std::string& why) { mark_lost(r, why); });
    try {
      ncclUniqueId id;
      if (rank_ == 0) {
        TESSERA_NCCL_TRY(ncclGetUniqueId(&id));
        rv_.client->set("nccl/unique_id", ByteView(&id, sizeof id));
      } else {
        const Bytes b = rv_.client->get("nccl/unique_id", options_.rendezvous_timeout_s,
                                        "the NCCL unique id from rank 0", 0);
        TESSERA_EXPECTS(b.size() == sizeof id, ValueError,
                        "rank {}: the NCCL unique id from the store has {} bytes, expected {}",
                        rank_, b.size(), sizeof id);
        std::memcpy(&id, b.data(), sizeof id);
      }
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      TESSERA_NCCL_TRY(ncclCommInitRankConfig(&comm_, world_, id, rank_, &config));
      wait_comm(Clock::now() + seconds(options_.rendezvous_timeout_s), "ncclCommInitRankConfig");
    } catch (...) {
      // Say goodbye first so that (on rank 0) the store outlives the other ranks' deadlines.
      rv_.client->finish(options_.rendezvous_timeout_s);
      if (comm_) {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
      cudaStreamDestroy(own_stream_);
      own_stream_ = nullptr;
      throw;
    }
  }

  ~NcclTransport() override {
    if (comm_) {
      bool clean = true;
      try {
        synchronize();
      } catch (const std::exception&) {
        clean = false;
      }
      rv_.client->finish(std::min(options_.op_timeout_s, 60.0));
      if (clean && ncclCommFinalize(comm_) == ncclSuccess) {
        try {
          wait_comm(Clock::now() + std::chrono::seconds(10), "ncclCommFinalize");
        } catch (const std::exception&) {
          clean = false;
        }
      }
      if (clean) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (barrier_buf_) {
      cudaFree(barrier_buf_);
    }
    if (own_stream_) {
      cudaStreamDestroy(own_stream_);
    }
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.collectives = c.device_memory = c.detects_peer_loss = true;
    c.fabric = "nccl";
    return c;
  }
  void* stream() const override { return stream_; }
  // A null handle is CUDA's: the legacy default stream (torch's default stream reports 0). It used
  // to select the transport's own non-blocking stream, which does not wait for the default
  // stream, so a collective on torch's default stream raced with the work that filled its buffer.
  void set_stream(void* s) override {
    stream_ = s ? static_cast<cudaStream_t>(s) : cudaStreamLegacy;
  }

  void synchronize() override {
    const auto deadline = op_deadline();
    wait_comm(deadline, "synchronize");  // every operation enqueued on the stream first
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) {
        break;
      }
      if (e != cudaErrorNotReady) {
        abort_comm();
        TESSERA_NCCL_CUDA_TRY(e);
      }
      poll_health(deadline, "synchronize");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ncclResult_t state = ncclSuccess;
    TESSERA_NCCL_TRY(ncclCommGetAsyncError(comm_, &state));
    TESSERA_NCCL_TRY(state);
  }

  void barrier() override {
    std::lock_guard<std::mutex> lk(barrier_mu_);
    if (!barrier_buf_) {
      TESSERA_NCCL_CUDA_TRY(cudaMalloc(&barrier_buf_, sizeof(float)));
    }
    TESSERA_NCCL_TRY(
        ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_));
    enqueued("barrier");
    synchronize();
  }

  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override {
    if (count == 0) {
      return;
    }
    check_device(data, "all_reduce");
    TESSERA_NCCL_TRY(
        ncclAllReduce(data, data, count, nccl_type(dtype), nccl_op(op), comm_, stream_));
    enqueued("all_reduce");
  }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    if (bytes == 0) {
      return;
    }
    check_device(send, "all_gather (send)");
    check_device(recv, "all_gather (recv)");
    TESSERA_NCCL_TRY(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream_));
    enqueued("all_gather");
  }

  void all_to_all_v(const void* send, const size_t* sc, const size_t* so, void* recv,
                    const size_t* rc, const size_t* ro) override {
    const auto* s = static_cast<const uint8_t*>(send);
    auto* r = static_cast<uint8_t*>(recv);
    bool any_send = false, any_recv = false;
    for (int p = 0; p < world_; ++p) {
      any_send |= sc[p] > 0;
      any_recv |= rc[p] > 0;
    }
    if (any_send) {
      check_device(send, "all_to_all_v (send)");
    }
    if (any_recv) {
      check_device(recv, "all_to_all_v (recv)");
    }
    TESSERA_EXPECTS(sc[rank_] == rc[rank_], ValueError,
                    "all_to_all_v: rank {} sends {} bytes to itself but expects to receive {}",
                    rank_, sc[rank_], rc[rank_]);
    TESSERA_NCCL_TRY(ncclGroupStart());
    for (int p = 0; p < world_; ++p) {
      if (sc[p]) {
        TESSERA_NCCL_TRY(ncclSend(s + so[p], sc[p], ncclUint8, p, comm_, stream_));
      }
      if (rc[p]) {
        TESSERA_NCCL_TRY(ncclRecv(r + ro[p], rc[p], ncclUint8, p, comm_, stream_));
      }
    }
    TESSERA_NCCL_TRY(ncclGroupEnd());
    enqueued("all_to_all_v");
  }
  using Transport::all_gather;
  using Transport::all_to_all_v;

  void mark_lost(int peer, const std::string& reason) {
    if (peer < 0 || peer >= world_) {
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    if (lost_[peer]) {
      return;
    }
    lost_[peer] = 1;
    lost_reason_[peer] = reason;
    any_lost_ = true;
  }

 private:
  void check_device(const void* p, const char* what) const {
    TESSERA_EXPECTS(p != nullptr, ValueError, "nccl {}: null buffer", what);
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error of a bad pointer
    }
    TESSERA_EXPECTS(
        e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged),
        ValueError,
        "nccl {}: the buffer at {} is not CUDA device memory (the 'nccl' transport "
        "moves device buffers; use 'ucx' or 'local' for host memory)",
        what, p);
  }

  void abort_comm() {
    if (comm_) {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }

  // Throws (after aborting the communicator) if a peer was lost, NCCL reported an error, or the
  // deadline passed.
  void poll_health(Clock::time_point deadline, const std::string& what) {
    if (any_lost_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      for (int p = 0; p < world_; ++p) {
        if (!lost_[p]) {
          continue;
        }
        abort_comm();
        throw PeerLostError(fmt::format("rank {}: nccl {} failed because rank {} was lost ({})",
                                        rank_, what, p, lost_reason_[p]),
                            p);
      }
    }
    if (comm_) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        const std::string msg = ncclGetErrorString(state);
        abort_comm();
        TESSERA_FAIL(Error, "rank {}: nccl {} failed: {}", rank_, what, msg);
      }
    }
    if (Clock::now() >= deadline) {
      abort_comm();
      throw TimeoutError(fmt::format("rank {}: nccl {} timed out after {:.1f} s (a peer did not "
                                     "join the collective)",
                                     rank_, what, options_.op_timeout_s),
                         -1);
    }
  }

  // Waits until the communicator is no longer ncclInProgress. On a non-blocking communicator a
  // call that returned ncclInProgress has not necessarily enqueued its kernels on the stream yet:
  // until the state is ncclSuccess, a stream query or event recorded after it can complete before
  // the operation ran (a read_collective at one rank then returned zeros).
  void wait_comm(Clock::time_point deadline, const std::string& what) {
    for (int spin = 0;; ++spin) {
      ncclResult_t state = ncclInProgress;
      TESSERA_NCCL_TRY(ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) {
        return;
      }
      if (state != ncclInProgress) {
        abort_comm();
        TESSERA_FAIL(Error, "rank {}: {} failed: {}", rank_, what, ncclGetErrorString(state));
      }
      poll_health(deadline, what);
      if (spin < 200) {
        std::this_thread::yield();  // enqueueing usually finishes within microseconds
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(spin < 2000 ? 20 : 1000));
      }
    }
  }

  // After an operation was issued: returns once it is enqueued on the stream (see wait_comm).
  void enqueued(const char* what) { wait_comm(op_deadline(), std::string("enqueueing ") + what); }

  int rank_, world_, device_ = 0;
  Rendezvous rv_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t own_stream_ = nullptr, stream_ = nullptr;
  std::mutex mu_, barrier_mu_;
  std::vector<char> lost_;
  std::vector<std::string> lost_reason_;
  std::atomic<bool> any_lost_{false};
  void* barrier_buf_ = nullptr;
};

}  // namespace

std::unique_ptr<Transport> make_nccl(const LaunchEnv& env, const Options& options) {
  return std::make_unique<NcclTransport>(env, options);
}

}  // namespace tessera::transport::detail
