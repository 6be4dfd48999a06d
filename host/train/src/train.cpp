// SPDX-License-Identifier: Apache-2.0
// `tessera train`: the training loop of python/examples/train_sage.py in C++ on libtorch's ATen.
// The CPU path reads batches from dist::DistNodeDataLoader (features and labels read through the
// DistTensors, as the Python loader does); built with CUDA and given a GPU it takes the GPU
// path: dist::place_on_device, DistDeviceSampler and DistDeviceNodeLoader (batches made in device
// memory on the loader's streams), gradients over Tessera's NCCL transport.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "model.hpp"
#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/loader.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/ops/loader.hpp"
#include "tessera/train/train.hpp"
#include "tessera/transport/transport.hpp"

#ifdef TESSERA_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "tessera/cuda/device.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/device_loader.hpp"
#include "tessera/dist/device_sampling.hpp"
#endif

namespace tessera::train {

bool torch_compiled() {
  return true;
}

namespace {

using detail::EpochRecord;
using detail::Model;
using detail::SplitState;
using detail::TBlock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void log0(int rank, const std::string& line) {
  if (rank == 0) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
}

at::ScalarType scalar_type(DType t, const std::string& what) {
  switch (t) {
    case DType::kBool:
      return at::kBool;
    case DType::kInt8:
      return at::kChar;
    case DType::kUInt8:
      return at::kByte;
    case DType::kInt16:
      return at::kShort;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat64:
      return at::kDouble;
    default:
      TESSERA_FAIL(TypeError, "{}: dtype {} has no torch counterpart", what, dtype_name(t));
  }
}

/// A host vector as a CPU tensor that shares its memory (kept alive by `owner`).
template <typename T>
at::Tensor view_of(const std::vector<T>& v, const std::shared_ptr<void>& owner,
                   at::ScalarType type) {
  if (v.empty()) {
    return at::empty({0}, at::TensorOptions().dtype(type));
  }
  return at::from_blob(
      const_cast<T*>(v.data()), {static_cast<int64_t>(v.size())}, [owner](void*) {},
      at::TensorOptions().dtype(type));
}

/// All rows of a DistTensor (every rank reads every row, as train_sage.py's `.numpy()`).
Array read_all(const dist::DistTensor& t) {
  std::vector<int64_t> ids(t.num_rows());
  std::iota(ids.begin(), ids.end(), 0);
  return t.read(ids);
}

/// The IDs whose entry in column `col` of a mask ([N] or [N, S]; any dtype) is nonzero.
std::vector<int64_t> nonzero_column(const Array& m, int64_t col) {
  const int64_t n = m.dim(0), s = m.ndim() == 2 ? m.dim(1) : 1;
  const size_t es = dtype_size(m.dtype());
  const auto* p = static_cast<const uint8_t*>(m.raw());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* e = p + (i * s + col) * static_cast<int64_t>(es);
    if (std::any_of(e, e + es, [](uint8_t b) { return b != 0; })) {
      out.push_back(i);
    }
  }
  return out;
}

int cuda_device_count() {
#ifdef TESSERA_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

int64_t num_splits(const Array& m) {
  return m.ndim() == 2 ? m.dim(1) : 1;
}

// --- the job ---------------------------------------------------------------------------------
struct Job {
  TrainOptions o;
  Hyper h;
  std::string metric, name, config;
  std::shared_ptr<dist::Runtime> rt;
  int rank = 0, world = 1;
  at::Device device{at::kCPU};
  bool gpu = false;
  std::string grad_sync = "none";  // none, host, nccl
  int64_t log_every = 1;
  std::unique_ptr<dist::DistGraph> g;
  nlohmann::json load;
  /// GCN: every node's out-degree in the whole graph plus its self loop, counted once per job
  /// (graph_out_degrees) for layer-wise inference.
  at::Tensor gcn_out_deg;
#ifdef TESSERA_WITH_CUDA
  dist::DevicePlacement placement;
#endif
};

/// train_sage.py's pick_device: auto is cuda when a GPU is there (and Tessera has CUDA), cuda is
/// cuda:<local rank % devices>, made the current device of torch and of Tessera.
at::Device pick_device(const std::string& choice) {
  std::string c = choice;
#ifdef TESSERA_WITH_CUDA
  const int n = cuda::device_count();
  if (c == "auto") {
    c = n > 0 ? "cuda" : "cpu";
  }
  if (c == "cpu") {
    return at::Device(at::kCPU);
  }
  if (c == "cuda" || c.rfind("cuda:", 0) == 0) {
    TESSERA_EXPECTS(n > 0, ValueError, "--device {}: no CUDA device is visible", choice);
    int idx = detail::local_rank() % n;
    if (c != "cuda") {
      char* end = nullptr;
      idx = static_cast<int>(std::strtol(c.c_str() + 5, &end, 10));
      TESSERA_EXPECTS(*end == '\0' && idx >= 0 && idx < n, ValueError,
                      "--device {}: this machine has {} CUDA device(s)", choice, n);
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(idx));
    cuda::set_device(idx);
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(idx));
  }
#else
  if (c == "auto" || c == "cpu") {
    return at::Device(at::kCPU);
  }
  if (c == "cuda" || c.rfind("cuda:", 0) == 0) {
    TESSERA_FAIL(NotCompiledError,
                 "--device {}: not_compiled_with_cuda: this tessera was built without CUDA "
                 "(rebuild with -DTESSERA_WITH_CUDA=ON for the GPU path)",
                 choice);
  }
#endif
  TESSERA_FAIL(ValueError, "--device must be auto, cpu, cuda or cuda:N, got '{}'", choice);
}

std::vector<double> all_reduce_sum(dist::Runtime& rt, std::vector<double> v, const char* what);

// --- input features ----------------------------------------------------------------------------
/// train_sage.py's Features: rows read through the feature DistTensor, normalized on the
/// training device ("row": divided by their L1 norm; "standard": (x - mean) / std with the
/// statistics of every node, computed in float64 as NumPy does, each rank reading its own rows).
class Features {
 public:
  Features(const dist::DistGraph& g, const std::string& mode, const at::Device& device)
      : t_(g.node_data("feat")), mode_(mode) {
    TESSERA_EXPECTS(t_.shape().size() == 2, ValueError,
                    "node data 'feat' must be [N, F], got {} dimension(s)", t_.shape().size());
    type_ = scalar_type(t_.dtype(), "node data 'feat'");
    if (mode_ == "standard") {
      const auto [lo, hi] = g.local_node_range();
      const int64_t n = t_.num_rows(), f = dim();
      std::vector<double> mean = column_sum(lo, hi, {});
      for (double& m : mean) {
        m /= static_cast<double>(std::max<int64_t>(n, 1));
      }
      const std::vector<double> var = column_sum(lo, hi, mean);
      std::vector<float> mean32(f), std32(f);
      for (int64_t j = 0; j < f; ++j) {
        mean32[j] = static_cast<float>(mean[j]);
        std32[j] = static_cast<float>(
            std::max(std::sqrt(var[j] / static_cast<double>(std::max<int64_t>(n, 1))), 1e-6));
      }
      mean_ = at::from_blob(mean32.data(), {f}, at::kFloat).clone().to(device);
      std_ = at::from_blob(std32.data(), {f}, at::kFloat).clone().to(device);
    }
  }
  int64_t dim() const { return t_.shape()[1]; }
  at::ScalarType dtype() const { return type_; }
  const dist::DistTensor& tensor() const { return t_; }

  /// Raw rows of `ids` (host read into a new CPU tensor).
  at::Tensor read(ops::Span<const int64_t> ids) const {
    at::Tensor x = at::empty({ids.size(), dim()}, at::TensorOptions().dtype(type_));
    if (ids.size() > 0) {
      t_.read_into(ids, x.data_ptr());
    }
    return x;
  }
  at::Tensor normalize(at::Tensor x) const {
    x = x.to(at::kFloat);
    if (mode_ == "row") {
      return x / x.abs().sum(1, true).clamp(1e-12);
    }
    if (mode_ == "standard") {
      return (x - mean_) / std_;
    }
    return x;
  }

 private:
  // train_sage.py's column_stats: per column, the sum over every node (float64) of the rows
  // (`mean` empty) or of their squared deviations from `mean`. This rank reads only its own rows
  // [lo, hi), 16 MiB of float64 at a time, and sums them row by row in node order; the ranks'
  // sums are then added in rank order (all_reduce_sum), so at one rank the result is NumPy's
  // x.sum(0) to the bit, and at any rank count train_sage.py's. Collective.
  std::vector<double> column_sum(int64_t lo, int64_t hi, const std::vector<double>& mean) const {
    const int64_t f = dim();
    const int64_t rows = std::max<int64_t>(1, (int64_t{16} << 20) / (8 * std::max<int64_t>(f, 1)));
    std::vector<double> acc(static_cast<size_t>(f), 0.0);
    std::vector<int64_t> ids;
    for (int64_t a = lo; a < hi; a += rows) {
      const int64_t b = std::min(a + rows, hi);
      ids.resize(static_cast<size_t>(b - a));
      std::iota(ids.begin(), ids.end(), a);
      const at::Tensor x = read(ids).to(at::kDouble).contiguous();
      const double* p = x.data_ptr<double>();
      for (int64_t i = 0; i < b - a; ++i) {
        for (int64_t j = 0; j < f; ++j) {
          const double v = p[i * f + j];
          if (mean.empty()) {
            acc[j] += v;
          } else {
            const double d = v - mean[j];
            acc[j] += d * d;
          }
        }
      }
    }
    return all_reduce_sum(t_.runtime(), std::move(acc),
                          mean.empty() ? "feature means" : "feature variances");
  }

  dist::DistTensor t_;
  std::string mode_;
  at::ScalarType type_ = at::kFloat;
  at::Tensor mean_, std_;
};

// --- batches ---------------------------------------------------------------------------------
/// One training batch on the training device.
struct Batch {
  int64_t index = 0;  // global batch index
  std::vector<TBlock> blocks;
  at::Tensor x, y;
  double sample_seconds = 0, gather_seconds = 0;
  std::string digest;  // with --batch-digests
  /// x not yet normalized and y not yet int64 (GPU batches): the step does both inside its
  /// forward segment, where train_sage.py does them, so the time splits compare like for like.
  bool prepare_in_step = false;
};

/// A CPU batch of DistNodeDataLoader: blocks viewed in place, features read through the
/// DistTensor (as Python's loader fills blocks[0].srcdata), labels from the host copy.
Batch cpu_batch(ops::NodeMiniBatch&& mb, const Features& f, const std::vector<int64_t>& labels,
                bool digest) {
  auto owner = std::make_shared<ops::NodeMiniBatch>(std::move(mb));
  Batch b;
  b.index = owner->index;
  if (digest) {
    b.digest = detail::batch_digest(owner->seeds, owner->blocks);
  }
  for (const ops::Block& blk : owner->blocks) {
    b.blocks.push_back({view_of(blk.src, owner, at::kLong), view_of(blk.dst, owner, at::kLong),
                        blk.num_src(), blk.num_dst});
  }
  const double t0 = now_seconds();
  b.x = f.normalize(f.read(owner->input_nodes));
  b.gather_seconds = now_seconds() - t0;
  b.y = at::empty({static_cast<int64_t>(owner->seeds.size())}, at::kLong);
  int64_t* y = b.y.data_ptr<int64_t>();
  for (size_t i = 0; i < owner->seeds.size(); ++i) {
    y[i] = labels[owner->seeds[i]];
  }
  b.sample_seconds = owner->stats.sample_seconds + owner->stats.compact_seconds;
  return b;
}

/// The CPU path's batches made ahead on a thread of their own: the loader's next batch with its
/// features gathered and normalized and its labels (cpu_batch), as train_sage.py's loader
/// gathers `prefetch_node_feats`, so the training thread waits only when this thread is behind.
/// One per epoch, after the loader's start_epoch; `depth` batches at most are ready at once.
class CpuBatchPipe {
 public:
  CpuBatchPipe(dist::DistNodeDataLoader& loader, const Features& f,
               const std::vector<int64_t>& labels, int64_t steps, int64_t depth, int64_t digests)
      : loader_(loader),
        pipe_(steps, 1, static_cast<int>(std::max<int64_t>(1, depth)),
              [this, &f, &labels, steps, digests](int64_t step, int) {
                ops::NodeMiniBatch mb;
                TESSERA_EXPECTS(loader_.next(mb), ValueError,
                                "the loader ended after {} of {} batches", step, steps);
                return cpu_batch(std::move(mb), f, labels, step < digests);
              }) {}
  ~CpuBatchPipe() {
    pipe_.cancel();
    loader_.stop();  // a next() waiting for a batch returns; pipe_'s destructor then joins
  }
  CpuBatchPipe(const CpuBatchPipe&) = delete;
  CpuBatchPipe& operator=(const CpuBatchPipe&) = delete;

  /// The next batch in order; rethrows what stopped the thread.
  Batch next() {
    Batch b;
    TESSERA_EXPECTS(pipe_.next(b), ValueError, "the loader ended before the epoch's last batch");
    return b;
  }

 private:
  dist::DistNodeDataLoader& loader_;
  ops::detail::OrderedPrefetcher<Batch> pipe_;  // one worker: the loader is read in order
};

#ifdef TESSERA_WITH_CUDA
cuda::StreamHandle current_stream(const at::Device& d) {
  return c10::cuda::getCurrentCUDAStream(d.index()).stream();
}

/// A device array of the batch as a tensor that keeps the batch alive.
at::Tensor device_view(const void* p, const std::vector<int64_t>& shape, at::ScalarType type,
                       const at::Device& d, const std::shared_ptr<dist::DeviceMiniBatch>& owner) {
  int64_t n = 1;
  for (int64_t s : shape) {
    n *= s;
  }
  if (n == 0 || p == nullptr) {
    return at::zeros(shape, at::TensorOptions().dtype(type).device(d));
  }
  return at::from_blob(
      const_cast<void*>(p), shape, [owner](void*) {}, at::TensorOptions().dtype(type).device(d));
}

/// Block l's CSR offsets of its destinations, made by the loader; undefined when it made none.
at::Tensor device_indptr(const dist::DeviceMiniBatch& mb, size_t l, const at::Device& d,
                         const std::shared_ptr<dist::DeviceMiniBatch>& owner) {
  if (l >= mb.indptr.size()) {
    return {};
  }
  return device_view(mb.indptr[l]->data(), {mb.blocks.blocks[l].num_dst + 1}, at::kLong, d, owner);
}

/// A GPU batch of DistDeviceNodeLoader: every array stays where the loader made it. Its memory
/// returns to the loader after the work queued on torch's current stream (release_after) once
/// the last tensor viewing it is gone.
Batch gpu_batch(dist::DeviceMiniBatch&& mb, const Features& f, at::ScalarType label_type,
                const at::Device& d, bool digest) {
  mb.release_after(current_stream(d));
  auto owner = std::make_shared<dist::DeviceMiniBatch>(std::move(mb));
  Batch b;
  b.index = owner->index;
  b.sample_seconds = owner->sample_seconds;
  b.gather_seconds = owner->gather_seconds;
  std::vector<ops::Block> host;
  for (size_t l = 0; l < owner->blocks.blocks.size(); ++l) {
    const cuda::DeviceBlock& blk = owner->blocks.blocks[l];
    TBlock t{device_view(blk.src_ptr(), {blk.num_edges}, at::kLong, d, owner),
             device_view(blk.dst_ptr(), {blk.num_edges}, at::kLong, d, owner), blk.num_src,
             blk.num_dst, device_indptr(*owner, l, d, owner)};
    if (digest) {
      ops::Block h;
      h.num_dst = blk.num_dst;
      auto copy = [&](const void* p, int64_t n) {
        at::Tensor c = device_view(p, {n}, at::kLong, d, owner).cpu();
        return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + n);
      };
      h.src_nodes = copy(blk.src_nodes_ptr(), blk.num_src);
      h.src = copy(blk.src_ptr(), blk.num_edges);
      h.dst = copy(blk.dst_ptr(), blk.num_edges);
      h.eids = copy(blk.eids_ptr(), blk.num_edges);
      host.push_back(std::move(h));
    }
    b.blocks.push_back(std::move(t));
  }
  if (digest) {
    b.digest = detail::batch_digest(owner->seeds, host);
  }
  const int64_t n_in = owner->num_input_nodes(),
                n_seeds = static_cast<int64_t>(owner->seeds.size());
  b.x = device_view(owner->node_rows.at(0)->data(), {n_in, f.dim()}, f.dtype(), d, owner);
  b.y = device_view(owner->label_rows.at(0)->data(), {n_seeds}, label_type, d, owner);
  b.prepare_in_step = true;
  return b;
}
#endif

// --- time split --------------------------------------------------------------------------------
/// train_sage.py's StepClock: where the training thread's time goes (wait, forward_backward,
/// all_reduce, optimizer), with CUDA events on the compute stream on a GPU (read once per
/// epoch), with the wall clock on the CPU.
class StepClock {
 public:
  explicit StepClock(const at::Device& d) : device_(d) {}
  struct Mark {
    double t = 0;
    int event = -1;
  };
  Mark mark() {
#ifdef TESSERA_WITH_CUDA
    if (device_.is_cuda()) {
      if (used_ == events_.size()) {
        events_.emplace_back();
      }
      events_[used_].record(current_stream(device_));
      return {0, static_cast<int>(used_++)};
    }
#endif
    return {now_seconds(), -1};
  }
  void add(const std::string& part, const Mark& a, const Mark& b) {
    if (a.event >= 0) {
      pairs_.push_back({part, a.event, b.event});
    } else {
      host_[part] += b.t - a.t;
    }
  }
  void add_host(const std::string& part, double seconds) {
    host_[part] += seconds;
  }
  std::map<std::string, double> totals() {
    std::map<std::string, double> out;
    for (const char* p : {"wait", "forward_backward", "all_reduce", "optimizer"}) {
      out[p] = host_[p];
    }
#ifdef TESSERA_WITH_CUDA
    if (!pairs_.empty()) {
      events_[pairs_.back().b].synchronize();
    }
    for (const Pair& p : pairs_) {
      out[p.part] += events_[p.b].elapsed_ms_since(events_[p.a]) / 1000.0;
    }
#endif
    host_.clear();
    pairs_.clear();
    used_ = 0;
    return out;
  }

 private:
  struct Pair {
    std::string part;
    int a, b;
  };
  at::Device device_;
  std::map<std::string, double> host_;
  std::vector<Pair> pairs_;
  size_t used_ = 0;
#ifdef TESSERA_WITH_CUDA
  std::vector<cuda::Event> events_;
#else
  std::vector<int> events_;
#endif
};

/// --op-time: the wall time of the ATen operators the training thread runs (forward, the
/// autograd nodes of backward, the optimizer, the batch's own tensor operations), outermost
/// operators only, observed by RecordFunction callbacks (about a microsecond per operator).
/// The same operators run in train_sage.py on the same batches, so a step's time minus this is
/// what each trainer spends outside the model's kernels.
class OpTimer {
 public:
  explicit OpTimer(bool on) {
    if (on) {
      handle_ = at::addThreadLocalCallback(
          at::RecordFunctionCallback(&OpTimer::start, &OpTimer::end)
              .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
      on_ = true;
    }
  }
  ~OpTimer() {
    if (on_) {
      at::removeCallback(handle_);
    }
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  /// Seconds observed since the last call.
  static double take() {
    const double t = total_;
    total_ = 0;
    return t;
  }

 private:
  static std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& /*fn*/) {
    if (depth_++ == 0) {
      t0_ = now_seconds();
    }
    return nullptr;
  }
  static void end(const at::RecordFunction& /*fn*/, at::ObserverContext* /*ctx*/) {
    if (--depth_ == 0) {
      total_ += now_seconds() - t0_;
    }
  }
  static thread_local int depth_;
  static thread_local double t0_, total_;
  at::CallbackHandle handle_ = 0;
  bool on_ = false;
};
thread_local int OpTimer::depth_ = 0;
thread_local double OpTimer::t0_ = 0;
thread_local double OpTimer::total_ = 0;

// --- collectives -------------------------------------------------------------------------------
/// train_sage.py's broadcast_parameters: every rank takes rank 0's bytes (an int64 sum with
/// zeros from the others keeps every bit pattern).
void broadcast_parameters(dist::Runtime& rt, Model& m) {
  if (rt.world_size() == 1) {
    return;
  }
  const transport::CollectiveLabel label(rt.transport(), "broadcast_parameters");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> cpu;
  int64_t nbytes = 0;
  for (const at::Tensor& p : m.parameters()) {
    cpu.push_back(p.detach().to(at::kCPU).contiguous());
    nbytes += cpu.back().numel() * static_cast<int64_t>(cpu.back().element_size());
  }
  std::vector<int64_t> buf((nbytes + 7) / 8, 0);
  if (rt.rank() == 0) {
    auto* dst = reinterpret_cast<uint8_t*>(buf.data());
    for (const at::Tensor& c : cpu) {
      const size_t n = c.numel() * c.element_size();
      std::memcpy(dst, c.data_ptr(), n);
      dst += n;
    }
  }
  rt.transport().all_reduce(buf.data(), buf.size(), transport::DType::i64,
                            transport::ReduceOp::sum);
  const auto* src = reinterpret_cast<const uint8_t*>(buf.data());
  std::vector<at::Tensor> params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t n = cpu[i].numel() * cpu[i].element_size();
    std::memcpy(cpu[i].data_ptr(), src, n);
    src += n;
    params[i].copy_(cpu[i]);
  }
}

/// train_sage.py's all_reduce_gradients: the gradients in one float32 buffer, summed over the
/// ranks (in rank order: the same bits everywhere) and divided by the world size. "host" goes
/// through host memory and Tessera's host transport; "nccl" stays on the device (Tessera's NCCL
/// transport, enqueued on torch's current stream).
void all_reduce_gradients(dist::Runtime& rt, const std::vector<at::Tensor>& params,
                          const std::string& mode) {
  const int world = rt.world_size();
  if (world == 1) {
    return;
  }
  at::NoGradGuard no_grad;
  const transport::CollectiveLabel label(rt.transport(), "all_reduce_gradients");
  std::vector<at::Tensor> flat_parts;
  flat_parts.reserve(params.size());
  for (const at::Tensor& p : params) {
    flat_parts.push_back(p.grad().defined() ? p.grad().reshape(-1) : at::zeros_like(p).reshape(-1));
  }
  at::Tensor flat = at::cat(flat_parts).to(at::kFloat);
  if (mode == "nccl") {
#ifdef TESSERA_WITH_CUDA
    flat = flat.contiguous();
    // On torch's current stream (the default one reports 0: CUDA's legacy default stream), so the
    // reduction runs after the cat that filled `flat` and before the division below; the
    // transport's stream is given back afterwards.
    struct OnStream {  // the device transport on `s` while in scope
      transport::Transport& t;
      void* const before;
      OnStream(transport::Transport& tr, void* s) : t(tr), before(tr.stream()) { t.set_stream(s); }
      ~OnStream() { t.set_stream(before); }
      OnStream(const OnStream&) = delete;
      OnStream& operator=(const OnStream&) = delete;
    } on(rt.device_transport(), current_stream(flat.device()));
    on.t.all_reduce(flat.data_ptr(), flat.numel(), transport::DType::f32, transport::ReduceOp::sum);
#endif
  } else {
    flat = flat.to(at::kCPU).contiguous();
    rt.transport().all_reduce(flat.data_ptr(), flat.numel(), transport::DType::f32,
                              transport::ReduceOp::sum);
  }
  flat.div_(world);
  int64_t off = 0;
  for (const at::Tensor& p : params) {
    const int64_t n = p.numel();
    at::Tensor g = flat.slice(0, off, off + n).view(p.sizes()).to(p.device(), p.scalar_type());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(g);
    } else {
      p.mutable_grad() = g.clone();
    }
    off += n;
  }
}

std::vector<double> all_reduce_sum(dist::Runtime& rt, std::vector<double> v, const char* what) {
  if (rt.world_size() > 1) {
    const transport::CollectiveLabel label(rt.transport(), what);
    rt.transport().all_reduce(v.data(), v.size(), transport::DType::f64, transport::ReduceOp::sum);
  }
  return v;
}

std::vector<std::string> all_gather_strings(dist::Runtime& rt, const std::string& mine,
                                            const char* what) {
  if (rt.world_size() == 1) {
    return {mine};
  }
  const transport::CollectiveLabel label(rt.transport(), what);
  std::vector<std::string> out;
  for (const auto& b : rt.transport().all_gather(transport::Bytes(mine.begin(), mine.end()))) {
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

// --- inference -----------------------------------------------------------------------------------
/// Outputs of every node: a tensor on the training device with one rank, else a DistTensor per
/// layer whose rows each rank wrote for the nodes it owns.
struct Outputs {
  at::Tensor local;
  dist::DistTensor dist;
  /// Rows of `nodes` as a CPU float tensor (a DistTensor reads them from their owners).
  at::Tensor rows(const std::vector<int64_t>& nodes) const {
    if (nodes.empty()) {
      return at::empty({0, local.defined() ? local.size(1) : dist.shape()[1]}, at::kFloat);
    }
    if (local.defined()) {
      at::Tensor idx = at::from_blob(const_cast<int64_t*>(nodes.data()),
                                     {static_cast<int64_t>(nodes.size())}, at::kLong)
                           .to(local.device());
      return local.index_select(0, idx).to(at::kCPU);
    }
    Array a = dist.read(nodes);
    auto keep = std::make_shared<Array>(a);
    return at::from_blob(
        const_cast<void*>(keep->raw()), {a.dim(0), a.dim(1)}, [keep](void*) {}, at::kFloat);
  }
  bool defined() const { return local.defined() || dist.defined(); }
};

struct Inference {
  Outputs logits, hidden;  // hidden: the input of the last layer (the nodes' embeddings)
  double seconds = 0;
  int64_t epoch = -1;
};

/// Every node's out-degree in the whole graph plus its self loop (float32 [num_nodes] on the
/// job's device): what GCN divides a source by in layer-wise inference, where an eval batch's
/// block, or one rank's nodes, holds only some of a source's out-edges. Collective: each rank
/// counts the sources of the edges it owns, and the counts are summed.
at::Tensor graph_out_degrees(const Job& job) {
  const dist::DistGraph& g = *job.g;
  const dist::DistTensor& ends = g.edge_endpoints();  // int64 [num_edges, 2]: (src, dst)
  const auto [e0, e1] = ends.local_range();
  const auto* pairs = static_cast<const int64_t*>(ends.local_data());
  std::vector<int64_t> deg(static_cast<size_t>(g.num_nodes()), 0);
  for (int64_t k = 0; k < e1 - e0; ++k) {
    ++deg[static_cast<size_t>(pairs[2 * k])];
  }
  if (job.world > 1) {
    const transport::CollectiveLabel label(job.rt->transport(), "graph out-degrees");
    job.rt->transport().all_reduce(deg.data(), deg.size(), transport::DType::i64,
                                   transport::ReduceOp::sum);
  }
  at::Tensor out = at::empty({g.num_nodes()}, at::kFloat);
  float* o = out.data_ptr<float>();
  for (size_t i = 0; i < deg.size(); ++i) {
    o[i] = static_cast<float>(deg[i] + 1);
  }
  return out.to(job.device);
}

/// train_sage.py's net.inference: every node's outputs with full neighborhoods, one layer at a
/// time over this rank's nodes (DGL's layer-wise inference), batches of `batch_size`. GCN
/// normalizes by whole-graph degrees, so the outputs depend on the parameters only, not on
/// the eval batches or the partitioning.
Inference inference(const Job& job, const Model& model, const Features& feats) {
  const double t0 = now_seconds();
  at::NoGradGuard no_grad;
  const dist::DistGraph& g = *job.g;
  const int64_t n = g.num_nodes();
  const at::Tensor& out_deg = job.gcn_out_deg;  // defined for GCN
  const bool several = job.world > 1;
  const auto [lo, hi] = g.local_node_range();
  std::vector<int64_t> mine(hi - lo);
  std::iota(mine.begin(), mine.end(), lo);
  ops::LoaderOptions lo_opts;
  lo_opts.batch_size = job.o.eval_batch_size;
  lo_opts.shuffle = false;
  lo_opts.num_workers = 1;
  lo_opts.prefetch = 4;
  lo_opts.seed = 0;
  Inference out;
  Outputs h, prev;
  auto output = [&](int i) {
    Outputs o;
    const int64_t dim = model.out_dim(i);
    if (several) {
      o.dist = dist::DistTensor(job.rt, fmt::format("train-inference-layer{}", i), {n, dim},
                                DType::kFloat32, dist::PartPolicy::node(g.book()));
    } else {
      o.local = at::empty({n, dim}, at::TensorOptions().dtype(at::kFloat).device(job.device));
    }
    return o;
  };
  auto store = [&](Outputs& o, const std::vector<int64_t>& seeds, const at::Tensor& idx,
                   const at::Tensor& y) {
    if (o.local.defined()) {
      o.local.index_copy_(0, idx, y);
    } else {
      const at::Tensor c = y.to(at::kCPU).contiguous();
      o.dist.write(seeds, c.data_ptr());
    }
  };
#ifdef TESSERA_WITH_CUDA
  if (job.gpu) {
    dist::DistDeviceSampler sampler(g, {-1}, false, job.placement.structure);
    for (int i = 0; i < model.num_layers(); ++i) {
      Outputs o = output(i);
      std::vector<dist::DistTensor> node_data;
      if (i == 0) {
        node_data = {feats.tensor()};
      }
      if (i > 0 && several) {
        node_data = {h.dist};
      }
      dist::DistDeviceNodeLoader loader(sampler, mine, lo_opts, dist::BatchOrder::kLocal,
                                        node_data);
      loader.start_epoch(i);
      for (dist::DeviceMiniBatch mb; loader.next(mb);) {
        mb.release_after(current_stream(job.device));
        auto owner = std::make_shared<dist::DeviceMiniBatch>(std::move(mb));
        const cuda::DeviceBlock& blk = owner->blocks.blocks.at(0);
        TBlock b{device_view(blk.src_ptr(), {blk.num_edges}, at::kLong, job.device, owner),
                 device_view(blk.dst_ptr(), {blk.num_edges}, at::kLong, job.device, owner),
                 blk.num_src, blk.num_dst, device_indptr(*owner, 0, job.device, owner)};
        const int64_t n_in = owner->num_input_nodes();
        if (out_deg.defined()) {
          b.src_out_deg = out_deg.index_select(
              0, device_view(blk.src_nodes_ptr(), {n_in}, at::kLong, job.device, owner));
        }
        at::Tensor x;
        if (i == 0) {
          x = feats.normalize(device_view(owner->node_rows.at(0)->data(), {n_in, feats.dim()},
                                          feats.dtype(), job.device, owner));
        } else if (several) {
          x = device_view(owner->node_rows.at(0)->data(), {n_in, model.out_dim(i - 1)}, at::kFloat,
                          job.device, owner);
        } else {
          x = h.local.index_select(
              0, device_view(blk.src_nodes_ptr(), {n_in}, at::kLong, job.device, owner));
        }
        const at::Tensor y = model.layer_forward(i, b, x);
        const at::Tensor idx =
            device_view(owner->d_seeds ? owner->d_seeds->data() : nullptr,
                        {static_cast<int64_t>(owner->seeds.size())}, at::kLong, job.device, owner);
        store(o, owner->seeds, idx, y);
      }
      if (several) {
        const transport::CollectiveLabel label(job.rt->transport(), "inference layer");
        job.rt->barrier();
      }
      prev = h;
      h = o;
    }
    out.logits = h;
    out.hidden = model.num_layers() > 1 ? prev : h;
    out.seconds = now_seconds() - t0;
    return out;
  }
#endif
  dist::DistNeighborSampler sampler(g, {-1});
  dist::DistNodeDataLoader loader(sampler, mine, lo_opts, dist::BatchOrder::kLocal);
  for (int i = 0; i < model.num_layers(); ++i) {
    Outputs o = output(i);
    loader.start_epoch(i);
    for (ops::NodeMiniBatch mb; loader.next(mb);) {
      auto owner = std::make_shared<ops::NodeMiniBatch>(std::move(mb));
      const ops::Block& blk = owner->blocks.at(0);
      TBlock b{view_of(blk.src, owner, at::kLong), view_of(blk.dst, owner, at::kLong),
               blk.num_src(), blk.num_dst};
      if (out_deg.defined()) {
        b.src_out_deg =
            out_deg.index_select(0, view_of(owner->input_nodes, owner, at::kLong).to(job.device));
      }
      at::Tensor x;
      if (i == 0) {
        x = feats.normalize(feats.read(owner->input_nodes));
      } else if (several) {
        x = Outputs{at::Tensor(), h.dist}.rows(owner->input_nodes);
      } else {
        x = h.local.index_select(0, view_of(owner->input_nodes, owner, at::kLong));
      }
      const at::Tensor y = model.layer_forward(i, b, x.to(job.device));
      store(o, owner->seeds, view_of(owner->seeds, owner, at::kLong), y);
    }
    if (several) {  // every rank's rows are written before anyone reads them
      const transport::CollectiveLabel label(job.rt->transport(), "inference layer");
      job.rt->barrier();
    }
    prev = h;
    h = o;
  }
  out.logits = h;
  out.hidden = model.num_layers() > 1 ? prev : h;
  out.seconds = now_seconds() - t0;
  return out;
}

/// train_sage.py's metric_of: ROC-AUC of the positive class (binary) or accuracy, in percent.
double metric_of(const Outputs& logits, const std::vector<int64_t>& labels,
                 const std::vector<int64_t>& nodes, const std::string& kind) {
  at::NoGradGuard no_grad;
  const at::Tensor rows = logits.rows(nodes);
  std::vector<int64_t> y(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    y[i] = labels[nodes[i]];
  }
  if (kind == "rocauc") {
    const at::Tensor s = at::softmax(rows, 1).select(1, 1).contiguous();
    const float* p = s.data_ptr<float>();
    std::vector<double> pos, neg;
    for (size_t i = 0; i < nodes.size(); ++i) {
      (y[i] != 0 ? pos : neg).push_back(p[i]);
    }
    return detail::roc_auc(pos, neg) * 100.0;
  }
  const at::Tensor yt =
      at::from_blob(y.data(), {static_cast<int64_t>(y.size())}, at::kLong).clone();
  return static_cast<double>(rows.argmax(1).eq(yt).to(at::kFloat).mean().item<float>()) * 100.0;
}

// --- checkpoints -------------------------------------------------------------------------------
detail::NamedBytes bytes_of(const std::string& name, const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  detail::NamedBytes b;
  b.name = name;
  b.dtype = c.scalar_type() == at::kFloat  ? "float32"
            : c.scalar_type() == at::kByte ? "uint8"
                                           : "other";
  b.shape.assign(c.sizes().begin(), c.sizes().end());
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  b.bytes.assign(p, p + c.numel() * c.element_size());
  return b;
}

void restore(const detail::Checkpoint& c, const std::string& name, const at::Tensor& dst) {
  const detail::NamedBytes& b = c.at(name);
  const std::vector<int64_t> shape(dst.sizes().begin(), dst.sizes().end());
  TESSERA_EXPECTS(
      b.shape == shape && b.bytes.size() == static_cast<size_t>(dst.numel() * dst.element_size()),
      ValueError,
      "checkpoint {}: entry '{}' has shape [{}], the model's is [{}] (a checkpoint "
      "of other hyper-parameters?)",
      c.path.string(), name, fmt::join(b.shape, ", "), fmt::join(shape, ", "));
  at::NoGradGuard no_grad;
  const at::Tensor src = at::from_blob(const_cast<uint8_t*>(b.bytes.data()), dst.sizes(),
                                       at::TensorOptions().dtype(dst.scalar_type()));
  dst.copy_(src);
}

at::Generator cpu_generator() {
  return at::globalContext().defaultGenerator(at::Device(at::kCPU));
}

/// What a checkpoint was trained on and with: the dataset (name, nodes, feature width) and every
/// option that changes the training (not epochs, outputs, threads, device). --resume refuses a
/// checkpoint whose record differs, naming each difference: it continued another run and
/// reported that run's best validation as this one's.
nlohmann::json run_record(const Job& job) {
  const dist::DistTensor& feat = job.g->node_data("feat");
  const int64_t width = feat.shape().size() > 1 ? feat.shape()[1] : 1;
  return {{"dataset", job.name},
          {"num_nodes", job.g->num_nodes()},
          {"feature width", width},
          {"metric", job.metric},
          {"batching", job.o.batching},
          {"part-method", job.o.part_method},
          {"no-symmetrize", job.o.no_symmetrize},
          {"fanouts", job.h.fanouts},
          {"batch-size", job.h.batch_size},
          {"hidden", job.h.hidden},
          {"dropout", job.h.dropout},
          {"input-dropout", job.h.input_dropout},
          {"layer-norm", job.h.layer_norm},
          {"lr", job.h.lr},
          {"weight-decay", job.h.weight_decay},
          {"feat-norm", job.h.feat_norm},
          {"eval-every", job.h.eval_every}};
}

void save_checkpoint(const Job& job, const std::string& path, const Model& model,
                     const detail::Adam& opt, const SplitState& state, int64_t split,
                     uint64_t loader_seed) {
  std::vector<detail::NamedBytes> entries;
  for (const auto& [name, t] : model.named_parameters()) {
    entries.push_back(bytes_of("model/" + name, t));
  }
  for (const auto& [name, t] : opt.state()) {
    entries.push_back(bytes_of("adam/" + name, t));
  }
  entries.push_back(bytes_of("rng/cpu", cpu_generator().get_state()));
  if (job.gpu) {
    entries.push_back(
        bytes_of("rng/cuda", at::globalContext().defaultGenerator(job.device).get_state()));
  }
  const nlohmann::json meta = {
      {"format", "tessera.train"},
      {"version", 1},
      {"split", split},
      {"rank", job.rank},
      {"world_size", job.world},
      {"model", job.o.model == ModelKind::kSage ? "sage" : "gcn"},
      {"run", run_record(job)},
      {"state", detail::to_json(state)},
      {"loader", {{"seed", loader_seed}, {"epoch", state.epoch}, {"batch", 0}}}};
  detail::write_checkpoint(path, meta, entries);
}

SplitState load_checkpoint(const Job& job, const std::string& path, Model& model, detail::Adam& opt,
                           int64_t split, uint64_t loader_seed) {
  const detail::Checkpoint c = detail::read_checkpoint(path);
  const nlohmann::json& m = c.meta;
  auto expect = [&](const char* field, const nlohmann::json& want) {
    TESSERA_EXPECTS(m.contains(field) && m[field] == want, ValueError,
                    "checkpoint {}: field '{}' is {}, this run has {}", path, field,
                    m.contains(field) ? m[field].dump() : "missing", want.dump());
  };
  expect("format", "tessera.train");
  expect("split", split);
  expect("rank", job.rank);
  expect("world_size", job.world);
  expect("model", job.o.model == ModelKind::kSage ? "sage" : "gcn");
  TESSERA_EXPECTS(m.at("loader").at("seed").get<uint64_t>() == loader_seed, ValueError,
                  "checkpoint {}: loader seed {} differs from this run's {} (another --seed?)",
                  path, m["loader"]["seed"].dump(), loader_seed);
  TESSERA_EXPECTS(m.contains("run") && m["run"].is_object(), ValueError,
                  "--resume: checkpoint {} records no run to check it against (written by an "
                  "older tessera train); start without --resume",
                  path);
  const nlohmann::json mine = run_record(job);
  std::vector<std::string> differ;
  for (const auto& [key, value] : mine.items()) {
    const nlohmann::json& theirs = m["run"].contains(key) ? m["run"][key] : nlohmann::json();
    if (theirs != value) {
      const bool option = key != "dataset" && key != "num_nodes" && key != "feature width";
      differ.push_back(fmt::format("{}{} {}, this run has {}", option ? "--" : "", key,
                                   theirs.dump(), value.dump()));
    }
  }
  TESSERA_EXPECTS(differ.empty(), ValueError,
                  "--resume: checkpoint {} was made by another run: {} (start without --resume, "
                  "or give another --checkpoint)",
                  path, fmt::join(differ, "; "));
  // SAGEConv's bias was the layer's own "bias" (first) before it took DGL's layout (fc_neigh,
  // fc_self with the bias): neither the names nor the order of the Adam state map across.
  TESSERA_EXPECTS(job.o.model != ModelKind::kSage || !c.entries.count("model/layers.0.bias"),
                  ValueError,
                  "--resume: checkpoint {} holds the SAGE layers' parameters in the layout before "
                  "DGL's (layers.<i>.bias): its model and Adam state do not map onto this "
                  "model; start without --resume",
                  path);
  for (const auto& [name, t] : model.named_parameters()) {
    restore(c, "model/" + name, t);
  }
  for (const auto& [name, t] : opt.state()) {
    restore(c, "adam/" + name, t);
  }
  auto set_state = [&](at::Generator gen, const std::string& name) {
    const detail::NamedBytes& b = c.at(name);
    at::Tensor s = at::empty({static_cast<int64_t>(b.bytes.size())}, at::kByte);
    std::memcpy(s.data_ptr(), b.bytes.data(), b.bytes.size());
    gen.set_state(s);
  };
  set_state(cpu_generator(), "rng/cpu");
  if (job.gpu) {
    set_state(at::globalContext().defaultGenerator(job.device), "rng/cuda");
  }
  return detail::split_state_from_json(m.at("state"));
}

// --- predictions ---------------------------------------------------------------------------------
/// Writes predictions (int64 [N], argmax), embeddings (float32 [N, hidden]: the input of the
/// last layer) and logits (float32 [N, C]) in ORIGINAL node order into `dir` (rank 0; the others
/// wait), each through a temporary file and a rename.
void save_predictions(const Job& job, const Inference& inf, const std::string& dir) {
  std::string error;
  if (job.rank == 0) {
    try {
      const int64_t n = job.g->num_nodes();
      std::vector<int64_t> all(n);
      std::iota(all.begin(), all.end(), 0);
      const std::vector<int64_t> orig = job.g->orig_nid().read(all).to_int64_vector("orig_nid");
      at::Tensor perm = at::from_blob(const_cast<int64_t*>(orig.data()), {n}, at::kLong);
      auto in_orig_order = [&](const Outputs& o) {
        const at::Tensor rows = o.rows(all);
        at::Tensor out = at::empty_like(rows);
        out.index_copy_(0, perm, rows);
        return out;
      };
      const at::Tensor logits = in_orig_order(inf.logits);
      const at::Tensor hidden = in_orig_order(inf.hidden);
      const at::Tensor pred = logits.argmax(1).contiguous();
      std::filesystem::create_directories(dir);
      auto write = [&](const std::string& file, const at::Tensor& t, DType dt) {
        const std::filesystem::path path = std::filesystem::path(dir) / file;
        const std::filesystem::path tmp = std::filesystem::path(dir) / ("." + file + ".tmp");
        std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
        write_npy(tmp, dt, shape, t.contiguous().data_ptr());
        std::filesystem::rename(tmp, path);
      };
      write("predictions.npy", pred, DType::kInt64);
      write("embeddings.npy", hidden, DType::kFloat32);
      write("logits.npy", logits, DType::kFloat32);
      log0(0, fmt::format("[train] predictions, embeddings [{}, {}] and logits in {} (rows by "
                          "original node ID)",
                          n, hidden.size(1), dir));
    } catch (const std::exception& e) {
      error = fmt::format("--save-predictions {}: {}", dir, e.what());
    }
  }
  detail::agree(*job.rt, "saving predictions", error);
}

// --- one split -----------------------------------------------------------------------------------
struct SplitResult {
  bool stopped = false;
  double final_test = kNaN, inference_seconds = 0;
  std::string digest;
  SplitState state;
};

struct Data {
  std::vector<int64_t> labels;
  int64_t num_classes = 0;
  at::ScalarType label_type = at::kLong;
  Array train_mask, val_mask, test_mask;
};

/// The nodes of one split: this rank's training seeds (every rank's with global batching) and
/// the validation and test nodes.
struct SplitNodes {
  std::vector<int64_t> train, val, test;
};

/// Refuses a split the run cannot train on, before any split trains: no validation or test
/// nodes (the best epoch is chosen on the one and reported on the other), or an unlabelled node
/// (label -1, data/README.md) among its training, validation or test nodes. Every rank reads
/// the same global masks and labels, so every rank refuses alike.
void check_split(const Job& job, const Data& data, int64_t split) {
  const std::vector<int64_t> train = nonzero_column(data.train_mask, split),
                             val = nonzero_column(data.val_mask, split),
                             test = nonzero_column(data.test_mask, split);
  TESSERA_EXPECTS(!val.empty() && !test.empty(), ValueError,
                  "{}: split {} has no {} nodes (its {} column is empty)", job.o.dataset, split,
                  val.empty() ? "validation" : "test", val.empty() ? "val_mask" : "test_mask");
  for (const auto& [nodes, mask] : {std::pair{&train, "train_mask"}, std::pair{&val, "val_mask"},
                                    std::pair{&test, "test_mask"}}) {
    for (int64_t v : *nodes) {
      if (data.labels[static_cast<size_t>(v)] < 0) {
        const int64_t orig = job.g->orig_nid()
                                 .read(ops::Span<const int64_t>(&v, 1))
                                 .to_int64_vector("orig_nid")
                                 .at(0);
        throw ValueError(fmt::format("{}: node {} of {} (split {}) is unlabelled (label {})",
                                     job.o.dataset, orig, mask, split,
                                     data.labels[static_cast<size_t>(v)]));
      }
    }
  }
}

SplitNodes split_nodes(const Job& job, const Data& data, int64_t split) {
  SplitNodes s;
  if (job.o.batching == "global") {
    s.train = nonzero_column(data.train_mask, split);  // the same on every rank: global batches
  } else {
    s.train = dist::node_split(data.train_mask, job.g->book(), job.rank, true, split,
                               job.g->trainers_per_machine());
  }
  s.val = nonzero_column(data.val_mask, split);
  s.test = nonzero_column(data.test_mask, split);
  return s;
}

/// The loader options of a split: the global batch shared out over the ranks, a seed per split.
ops::LoaderOptions loader_options(const Job& job, int64_t split) {
  ops::LoaderOptions lopts;
  lopts.batch_size = std::max<int64_t>(1, (job.h.batch_size + job.world - 1) / job.world);
  lopts.shuffle = true;
  lopts.drop_last = false;
  lopts.num_workers = job.o.num_workers;
  lopts.prefetch = job.o.prefetch;
  lopts.seed = static_cast<uint64_t>(job.o.seed + 1000 * split);
  return lopts;
}

/// A split's batches, in order: from the GPU loader (sampled on the GPU, rows gathered into
/// device memory) or from the CPU loader through a CpuBatchPipe per epoch. The GPU loader starts
/// an epoch's batches while the previous epoch ends (its bookkeeping, evaluation and
/// checkpoint), so the first steps of an epoch do not wait for them.
class SplitBatches {
 public:
  SplitBatches(const Job& job, const Features& feats, const Data& data,
               const std::vector<int64_t>& nids, const ops::LoaderOptions& lopts)
      : job_(job), feats_(feats), data_(data) {
    const dist::BatchOrder order =
        job.o.batching == "global" ? dist::BatchOrder::kGlobal : dist::BatchOrder::kLocal;
    const dist::DistGraph& g = *job.g;
#ifdef TESSERA_WITH_CUDA
    if (job.gpu) {
      dsampler_ = std::make_unique<dist::DistDeviceSampler>(g, job.h.fanouts, false,
                                                            job.placement.structure);
      dloader_ = std::make_unique<dist::DistDeviceNodeLoader>(
          *dsampler_, nids, lopts, order, std::vector<dist::DistTensor>{feats.tensor()},
          std::vector<dist::DistTensor>{g.node_data("label")});
      return;
    }
#endif
    sampler_ = std::make_unique<dist::DistNeighborSampler>(g, job.h.fanouts);
    loader_ = std::make_unique<dist::DistNodeDataLoader>(*sampler_, nids, lopts, order);
  }

  /// Starts `epoch` (unless end_epoch started it) and returns its number of batches.
  int64_t begin_epoch(int64_t epoch) {
#ifdef TESSERA_WITH_CUDA
    if (dloader_) {
      if (started_ != epoch) {
        dloader_->start_epoch(epoch);
        started_ = epoch;
      }
      return dloader_->num_batches();
    }
#endif
    loader_->start_epoch(epoch);
    const int64_t steps = loader_->num_batches();
    pipe_.emplace(*loader_, feats_, data_.labels, steps, job_.o.prefetch, job_.o.batch_digests);
    return steps;
  }

  /// Batch `step` of the epoch's `steps`, with its digest when asked.
  Batch next(int64_t step, int64_t steps, bool want_digest) {
#ifdef TESSERA_WITH_CUDA
    if (dloader_) {
      dist::DeviceMiniBatch mb;
      TESSERA_ASSERT(dloader_->next(mb), "the loader ended after {} of {} batches", step, steps);
      return gpu_batch(std::move(mb), feats_, data_.label_type, job_.device, want_digest);
    }
#endif
    return pipe_->next();
  }

  /// After the epoch's last step: the CPU pipe ends; the GPU loader starts the next epoch when
  /// there is one (`another`): the batches of an epoch depend only on (seed, epoch).
  void end_epoch(int64_t epoch, bool another) {
    pipe_.reset();
#ifdef TESSERA_WITH_CUDA
    if (dloader_ && another) {
      dloader_->start_epoch(epoch + 1);
      started_ = epoch + 1;
    }
#else
    (void)epoch;
    (void)another;
#endif
  }

 private:
  const Job& job_;
  const Features& feats_;
  const Data& data_;
#ifdef TESSERA_WITH_CUDA
  std::unique_ptr<dist::DistDeviceSampler> dsampler_;
  std::unique_ptr<dist::DistDeviceNodeLoader> dloader_;
  int64_t started_ = -1;  // the epoch the GPU loader runs
#endif
  std::unique_ptr<dist::DistNeighborSampler> sampler_;
  std::unique_ptr<dist::DistNodeDataLoader> loader_;
  std::optional<CpuBatchPipe> pipe_;  // destroyed before the loader it stops
};

/// What a split trains: the model, its optimizer and where the step's time goes.
struct Trainee {
  Model& model;
  const std::vector<at::Tensor>& params;
  detail::Adam& opt;
  StepClock& clock;
};

/// One epoch's steps (`another`: an epoch follows, which the GPU loader may start). Fills rec's
/// loss (the mean over every rank's steps), steps, split (without "other"), loader_sampling,
/// loader_gathering and op_seconds; returns this rank's batch digests (--batch-digests).
std::vector<std::string> run_steps(Job& job, Trainee& t, const Features& feats,
                                   SplitBatches& batches, int64_t split, bool another,
                                   EpochRecord& rec) {
  const TrainOptions& o = job.o;
  const int64_t epoch = rec.epoch;
  const int64_t steps = batches.begin_epoch(epoch);
  const int64_t log_every = std::max<int64_t>(1, job.log_every);
  detail::ProgressBar bar(steps, fmt::format("split {} epoch {:3d}", split, epoch),
                          !o.quiet && job.rank == 0);
  double loss_sum = 0;
  at::Tensor loss_sum_dev;
  if (job.gpu) {
    loss_sum_dev = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(job.device));
  }
  int64_t count = 0;
  double busy_sample = 0, busy_gather = 0, shown = kNaN;
  std::vector<std::string> digests;
  std::optional<OpTimer> op_timer;
  if (o.op_time) {
    op_timer.emplace(true);
    OpTimer::take();
  }
  StepClock& clock = t.clock;
  for (int64_t step = 0; step < steps; ++step) {
    const double w0 = now_seconds();
    const bool want_digest = step < o.batch_digests;
    Batch b = batches.next(step, steps, want_digest);
    clock.add_host("wait", now_seconds() - w0);
    busy_sample += b.sample_seconds;
    busy_gather += b.gather_seconds;
    if (want_digest) {
      digests.push_back(fmt::format("{}:{}", b.index, b.digest));
    }

    const StepClock::Mark f0 = clock.mark();
    if (b.prepare_in_step) {
      b.x = feats.normalize(b.x);
      b.y = b.y.to(at::kLong);
    }
    t.opt.zero_grad();
    const at::Tensor logits = t.model.forward(b.blocks, b.x, /*train=*/true);
    at::Tensor loss = at::cross_entropy_loss(logits, b.y);
    loss = at::stack({loss}).mean();  // as train_sage.py's mean over its trainers
    loss.backward();
    clock.add("forward_backward", f0, clock.mark());
    if (job.grad_sync != "none") {
      const StepClock::Mark a0 = clock.mark();
      const double h0 = now_seconds();
      all_reduce_gradients(*job.rt, t.params, job.grad_sync);
      if (job.grad_sync == "host") {
        clock.add_host("all_reduce", now_seconds() - h0);
      } else {
        clock.add("all_reduce", a0, clock.mark());
      }
    }
    const StepClock::Mark o0 = clock.mark();
    t.opt.step();
    clock.add("optimizer", o0, clock.mark());
    ++count;
    if (job.gpu) {
      loss_sum_dev.add_(loss.detach());
      if (step % log_every == 0 || step == steps - 1) {
        shown = loss.item<float>();
      }
    } else {
      shown = loss.item<float>();  // the CPU reads every step (log_every 1) for the sum too
      loss_sum += shown;
    }
    bar.update(shown);
  }
  bar.close();
  batches.end_epoch(epoch, another);
  rec.op_seconds = o.op_time ? OpTimer::take() : kNaN;
  op_timer.reset();
  rec.split = clock.totals();
  const double total = job.gpu ? loss_sum_dev.item<double>() : loss_sum;
  const std::vector<double> sums =
      all_reduce_sum(*job.rt, {total, static_cast<double>(count)}, "epoch loss");
  rec.loss = sums[0] / std::max(sums[1], 1.0);
  rec.steps = count;
  rec.loader_sampling = busy_sample;
  rec.loader_gathering = busy_gather;
  return digests;
}

/// Every rank's batch digests, in batch order (collective).
std::vector<std::string> all_batch_digests(Job& job, const std::vector<std::string>& mine) {
  std::vector<std::string> out;
  for (const std::string& all :
       all_gather_strings(*job.rt, fmt::format("{}", fmt::join(mine, " ")), "batch digests")) {
    std::stringstream ss(all);
    for (std::string d; ss >> d;) {
      out.push_back(d);
    }
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a.substr(0, a.find(':'))) < std::stoll(b.substr(0, b.find(':')));
  });
  return out;
}

/// At the epochs of --eval-every and the last: inference over every node into `last_eval`, the
/// validation metric, and the best one so far with the test metric there in `state`. Returns the
/// validation metric, NaN when the epoch does not evaluate.
double evaluate(const Job& job, const Model& model, const Features& feats, const Data& data,
                const SplitNodes& nodes, int64_t epoch, SplitState& state,
                std::optional<Inference>& last_eval) {
  if ((epoch + 1) % job.h.eval_every != 0 && epoch != job.h.epochs - 1) {
    return kNaN;
  }
  last_eval = inference(job, model, feats);
  last_eval->epoch = epoch;
  const double val = metric_of(last_eval->logits, data.labels, nodes.val, job.metric);
  if (val > state.best_val) {
    state.best_val = val;
    state.best_epoch = epoch;
    state.test_at_best = metric_of(last_eval->logits, data.labels, nodes.test, job.metric);
  }
  return val;
}

/// The epoch's line on rank 0: loss, validation metric, the time split and the loader's time.
void log_epoch(const Job& job, int64_t split, const EpochRecord& rec) {
  std::string parts_s;
  for (const char* k : {"wait", "forward_backward", "all_reduce", "optimizer", "other"}) {
    const auto it = rec.split.find(k);
    parts_s += fmt::format("{}{} {:.2f}", parts_s.empty() ? "" : ", ", k,
                           it == rec.split.end() ? 0.0 : it->second);
  }
  const std::string shown_val = std::isnan(rec.val) ? "     -" : fmt::format("{:6.2f}", rec.val);
  log0(job.rank,
       fmt::format("split {} epoch {:3d}  loss {:.4f}  val {} {}  ({:.2f}s: {}; loader "
                   "sampling {:.2f}, gathering {:.2f}{}",
                   split, rec.epoch, rec.loss, job.metric, shown_val, rec.seconds, parts_s,
                   rec.loader_sampling, rec.loader_gathering,
                   std::isnan(rec.val) ? ")" : fmt::format("; eval {:.2f}s)", rec.eval_seconds)));
}

/// Whether --split names one split (a number), not all of them or a list.
bool one_split_named(const TrainOptions& o) {
  return !o.split.empty() && std::all_of(o.split.begin(), o.split.end(), ::isdigit);
}

/// The split's checkpoint file (empty without --checkpoint): one per split unless --split
/// names one, one per rank with several.
std::string checkpoint_path(const Job& job, int64_t split) {
  std::string ckpt = job.o.checkpoint;
  if (!ckpt.empty() && !one_split_named(job.o)) {
    ckpt += fmt::format(".split{}", split);
  }
  if (!ckpt.empty() && job.world > 1) {
    ckpt += fmt::format(".rank{}", job.rank);
  }
  return ckpt;
}

/// Files next to --checkpoint in the per-split and per-rank forms that a run of another world
/// size or --split form writes (this run writes <base>[.split<S>][.rank<R>], R < world, with
/// .split unless --split names one split, .rank with several ranks).
std::vector<std::string> other_checkpoints(const Job& job) {
  namespace fs = std::filesystem;
  const fs::path b(job.o.checkpoint);
  const fs::path dir = b.has_parent_path() ? b.parent_path() : fs::path(".");
  const std::string stem = b.filename().string();
  const bool want_split = !one_split_named(job.o), want_rank = job.world > 1;
  const std::regex form(R"((\.split[0-9]+)?(\.rank([0-9]+))?)");
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch m;
    const std::string rest = name.rfind(stem, 0) == 0 ? name.substr(stem.size()) : "";
    if (name.rfind(stem, 0) != 0 || !std::regex_match(rest, m, form)) {
      continue;
    }
    const bool ours = m[1].matched == want_split && m[2].matched == want_rank &&
                      (!m[2].matched || std::stoll(m[3].str()) < job.world);
    if (!ours) {
      out.push_back((dir / name).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// --resume: the split's state from its checkpoint, or a fresh start when there is none yet (a
/// job restarted by its scheduler passes --resume every time). Refused on every rank when the
/// ranks disagree: a checkpoint missing on some ranks only, or ranks at different epochs (one
/// rank's save lost), or only files of another world size or --split form exist.
SplitState resume(Job& job, const std::string& ckpt, Trainee& t, int64_t split,
                  uint64_t loader_seed) {
  SplitState state;
  std::string error;
  const bool found = std::filesystem::exists(ckpt);
  try {
    if (found) {
      state = load_checkpoint(job, ckpt, t.model, t.opt, split, loader_seed);
    } else if (const auto others = other_checkpoints(job); !others.empty()) {
      throw ValueError(fmt::format(
          "--resume: no checkpoint {} for this run ({} rank(s), --split {}), but {} exist(s): "
          "written by a run of another world size or --split",
          ckpt, job.world, job.o.split, fmt::join(others, ", ")));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  detail::agree(*job.rt, "resuming", error);
  const std::string mine = found ? fmt::format("epoch {}", state.epoch) : "no checkpoint";
  const std::vector<std::string> all = all_gather_strings(*job.rt, mine, "resume epochs");
  std::string each;
  for (size_t r = 0; r < all.size(); ++r) {
    each += fmt::format("{}rank {}: {}", r ? ", " : "", r, all[r]);
  }
  TESSERA_EXPECTS(
      std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == mine; }),
      ValueError,
      "--resume: the ranks' checkpoints of split {} disagree ({}); remove them all to "
      "start again",
      split, each);
  log0(job.rank, found ? fmt::format("[train] split {}: resumed from {} at epoch {}", split, ckpt,
                                     state.epoch)
                       : fmt::format("[train] split {}: no checkpoint {} yet: starting at epoch 0",
                                     split, ckpt));
  return state;
}

/// After the last epoch: the test metric of the final parameters (evaluated again only when
/// the last epoch did not, i.e. resumed after it), the ranks' parameters checked identical,
/// and the predictions saved with --save-predictions.
SplitResult finish_split(Job& job, const Model& model, const Features& feats, const Data& data,
                         const SplitNodes& nodes, int64_t split, SplitState state,
                         const std::optional<Inference>& last_eval) {
  const TrainOptions& o = job.o;
  Inference final_eval;
  if (last_eval && last_eval->epoch == job.h.epochs - 1) {
    final_eval = *last_eval;  // the last epoch evaluated the final parameters
  } else {                    // resumed after the last epoch
    final_eval = inference(job, model, feats);
  }
  SplitResult r;
  r.final_test = metric_of(final_eval.logits, data.labels, nodes.test, job.metric);
  r.inference_seconds = final_eval.seconds;
  r.digest = model.digest();
  const std::vector<std::string> digests = all_gather_strings(*job.rt, r.digest, "model digests");
  TESSERA_EXPECTS(std::all_of(digests.begin(), digests.end(),
                              [&](const std::string& d) { return d == r.digest; }),
                  ValueError, "split {}: the ranks' parameters differ: {}", split,
                  fmt::join(digests, ", "));
  log0(
      job.rank,
      fmt::format("split {}: best val {} {:.2f} at epoch {}, test {} {:.2f} (last epoch: "
                  "{:.2f}); parameters {}{}; inference over all nodes {:.2f}s; gradients: {}",
                  split, job.metric, state.best_val, state.best_epoch, job.metric,
                  state.test_at_best, r.final_test, r.digest,
                  digests.size() > 1 ? fmt::format(" (identical on {} ranks)", digests.size()) : "",
                  r.inference_seconds, job.grad_sync));
  if (!o.save_predictions.empty()) {
    const bool one = one_split_named(o) && o.split.find(',') == std::string::npos;
    save_predictions(
        job, final_eval,
        one ? o.save_predictions
            : (std::filesystem::path(o.save_predictions) / fmt::format("split{}", split)).string());
  }
  r.state = std::move(state);
  return r;
}

SplitResult train_split(Job& job, const Features& feats, const Data& data, int64_t split) {
  const TrainOptions& o = job.o;
  const Hyper& h = job.h;
  const SplitNodes nodes = split_nodes(job, data, split);
  const ops::LoaderOptions lopts = loader_options(job, split);
  SplitBatches batches(job, feats, data, nodes.train, lopts);

  detail::manual_seed(static_cast<uint64_t>(o.seed + split));
  Model model(o.model, feats.dim(), h.hidden, data.num_classes, static_cast<int>(h.fanouts.size()),
              h.dropout, h.input_dropout, h.layer_norm);
  model.to(job.device);
  broadcast_parameters(*job.rt, model);  // the same seed gives the same init; made certain here
  const std::vector<at::Tensor> params = model.parameters();
  detail::Adam opt(params, h.lr, h.weight_decay, /*fused=*/job.gpu);
  StepClock clock(job.device);
  Trainee trainee{model, params, opt, clock};
  SplitState state;

  const std::string ckpt = checkpoint_path(job, split);
  if (o.resume) {
    state = resume(job, ckpt, trainee, split, lopts.seed);
  }

  std::optional<Inference> last_eval;
  while (state.epoch < h.epochs) {
    EpochRecord rec;
    rec.epoch = state.epoch;
    const double t0 = now_seconds();
    const bool stops_here = o.stop_after && rec.epoch + 1 >= *o.stop_after;
    const bool another = rec.epoch + 1 < h.epochs && !stops_here;
    const std::vector<std::string> digests =
        run_steps(job, trainee, feats, batches, split, another, rec);
    rec.seconds = now_seconds() - t0;
    const double e0 = now_seconds();
    rec.val = evaluate(job, model, feats, data, nodes, rec.epoch, state, last_eval);
    rec.eval_seconds = now_seconds() - e0;
    double parts = 0;
    for (const auto& [k, v] : rec.split) {
      parts += v;
    }
    rec.split["other"] = std::max(0.0, rec.seconds - parts);
    if (o.batch_digests > 0) {
      rec.batch_digests = all_batch_digests(job, digests);
    }
    state.history.push_back(rec);
    state.epoch = rec.epoch + 1;
    if (!o.quiet || rec.epoch == h.epochs - 1) {
      log_epoch(job, split, rec);
    }
    if (!ckpt.empty()) {
      save_checkpoint(job, ckpt, model, opt, state, split, lopts.seed);
    }
    if (o.stop_after && state.epoch >= *o.stop_after && state.epoch < h.epochs) {
      log0(job.rank, fmt::format("[train] split {}: stopping after epoch {} (--stop-after)", split,
                                 rec.epoch));
      SplitResult r;
      r.stopped = true;
      r.state = state;
      return r;
    }
  }
  return finish_split(job, model, feats, data, nodes, split, std::move(state), last_eval);
}

// --- results -------------------------------------------------------------------------------------
nlohmann::json args_json(const Job& job) {
  const TrainOptions& o = job.o;
  const Hyper& h = job.h;
  return {{"dataset", o.dataset},
          {"parts", o.parts == 0 ? job.world : o.parts},
          {"batching", o.batching},
          {"part_method", o.part_method},
          {"part_dir", o.part_dir},
          {"model", o.model == ModelKind::kSage ? "sage" : "gcn"},
          {"epochs", h.epochs},
          {"fanouts", h.fanouts},
          {"batch_size", h.batch_size},
          {"eval_batch_size", o.eval_batch_size},
          {"eval_every", h.eval_every},
          {"hidden", h.hidden},
          {"dropout", h.dropout},
          {"input_dropout", h.input_dropout},
          {"layer_norm", h.layer_norm},
          {"lr", h.lr},
          {"weight_decay", h.weight_decay},
          {"feat_norm", h.feat_norm},
          {"metric", o.metric},
          {"split", o.split},
          {"seed", o.seed},
          {"num_workers", o.num_workers},
          {"prefetch", o.prefetch},
          {"log_every", job.log_every},
          {"grad_sync", o.grad_sync},
          {"threads", o.threads},
          {"device", o.device},
          {"checkpoint", o.checkpoint},
          {"resume", o.resume},
          {"results", o.results},
          {"batch_digests", o.batch_digests},
          {"op_time", o.op_time}};
}

// The device-to-device copy rate counting bytes read plus written (2 x bytes / time), as
// train_sage.py's copy_bound_gbps; the gather bench's D2D bound counts each byte once.
double copy_bandwidth_gbps(const Job& job) {
#ifdef TESSERA_WITH_CUDA
  if (!job.gpu) {
    return kNaN;
  }
  at::Tensor a =
      at::empty({int64_t{1} << 30}, at::TensorOptions().dtype(at::kByte).device(job.device));
  at::Tensor b = at::empty_like(a);
  b.copy_(a);
  std::vector<double> t;
  for (int i = 0; i < 10; ++i) {
    cuda::Event s, e;
    s.record(current_stream(job.device));
    b.copy_(a);
    e.record(current_stream(job.device));
    e.synchronize();
    t.push_back(e.elapsed_ms_since(s) / 1000.0);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * static_cast<double>(int64_t{1} << 30) / t[t.size() / 2] / 1e9;
#else
  (void)job;
  return kNaN;
#endif
}

std::string gpu_name(const Job& job) {
#ifdef TESSERA_WITH_CUDA
  if (job.gpu) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, job.device.index()) == cudaSuccess) {
      return p.name;
    }
  }
#endif
  (void)job;
  return "";
}

void write_results(const Job& job, const std::map<int64_t, SplitResult>& results, double mean,
                   double stdev) {
  const int64_t parts = job.o.parts == 0 ? job.world : job.o.parts;
  // The loss curve: one row per split and epoch.
  const std::string& curve = job.o.loss_curve;  // the default filled in by run_training
  std::string csv = "split,epoch,loss,val\n";
  for (const auto& [s, r] : results) {
    for (const EpochRecord& e : r.state.history) {
      csv += fmt::format("{},{},{:.9g},{}\n", s, e.epoch, e.loss,
                         std::isnan(e.val) ? "" : fmt::format("{:.9g}", e.val));
    }
  }
  write_text_atomic(curve, csv);
  log0(0, fmt::format("[train] loss curve data: {}", curve));
  if (job.o.results.empty()) {
    return;
  }
  const double copy = copy_bandwidth_gbps(job);
  nlohmann::json splits = nlohmann::json::object();
  for (const auto& [s, r] : results) {
    nlohmann::json j = detail::to_json(r.state);
    j["stopped"] = false;
    j["final_test"] = r.final_test;
    j["digest"] = r.digest;
    j["inference_seconds"] = r.inference_seconds;
    j["grad_sync"] = job.grad_sync;
    splits[std::to_string(s)] = j;
  }
  const std::string gpu = gpu_name(job);
  const nlohmann::json out = {
      {"trainer", "tessera train (C++, libtorch)"},
      {"dataset", job.o.dataset},
      {"parts", parts},
      {"ranks", job.world},
      {"commit", source_commit()},
      {"device", job.device.str()},
      {"gpu", gpu.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu)},
      {"torch_threads", at::get_num_threads()},
      {"batching", job.o.batching},
      {"metric", job.metric},
      {"model", job.o.model == ModelKind::kSage ? "sage" : "gcn"},
      {"mean", mean},
      {"std", stdev},
      {"load", job.load},
      {"copy_bound_gbps", std::isnan(copy) ? nlohmann::json(nullptr) : nlohmann::json(copy)},
      {"splits", splits},
      {"args", args_json(job)}};
  write_text_atomic(job.o.results, out.dump(1) + "\n");
  log0(0, fmt::format("[train] results: {}", job.o.results));
}

void check_options(const TrainOptions& o) {
  TESSERA_EXPECTS(!o.dataset.empty(), ValueError, "--dataset is required");
  // What the run writes at its end (or after every epoch) is checked before it starts.
  check_output_path("--results", o.results);
  check_output_path("--loss-curve", o.loss_curve);
  check_output_path("--checkpoint", o.checkpoint);
  check_output_path("--save-predictions", o.save_predictions, /*folder=*/true);
  TESSERA_EXPECTS(std::filesystem::is_directory(o.dataset), IOError,
                  "--dataset {}: no such dataset folder", o.dataset);
  TESSERA_EXPECTS(o.parts >= 0, ValueError, "--parts must be >= 1, got {}", o.parts);
  TESSERA_EXPECTS(o.batching == "global" || o.batching == "split", ValueError,
                  "--batching must be global or split, got '{}'", o.batching);
  TESSERA_EXPECTS(o.part_method == "metis" || o.part_method == "random", ValueError,
                  "--part-method must be metis or random, got '{}'", o.part_method);
  TESSERA_EXPECTS(o.eval_batch_size >= 1, ValueError, "--eval-batch-size must be >= 1, got {}",
                  o.eval_batch_size);
  TESSERA_EXPECTS(o.num_workers >= 0, ValueError, "--num-workers must be >= 0, got {}",
                  o.num_workers);
  TESSERA_EXPECTS(o.prefetch >= 1, ValueError, "--prefetch must be >= 1, got {}", o.prefetch);
  TESSERA_EXPECTS(o.grad_sync == "auto" || o.grad_sync == "nccl" || o.grad_sync == "host",
                  ValueError, "--grad-sync must be auto, nccl or host, got '{}'", o.grad_sync);
  TESSERA_EXPECTS(o.threads >= 0, ValueError, "--threads must be >= 0, got {}", o.threads);
  TESSERA_EXPECTS(o.seed >= 0 && o.seed < (int64_t{1} << 32), ValueError,
                  "--seed must be in [0, 2^32), got {}", o.seed);
  TESSERA_EXPECTS(o.batch_digests >= 0, ValueError, "--batch-digests must be >= 0, got {}",
                  o.batch_digests);
  TESSERA_EXPECTS(!o.log_every || *o.log_every >= 1, ValueError, "--log-every must be >= 1, got {}",
                  o.log_every.value_or(0));
  TESSERA_EXPECTS(!o.stop_after || *o.stop_after >= 1, ValueError,
                  "--stop-after must be >= 1, got {}", o.stop_after.value_or(0));
  TESSERA_EXPECTS(!o.resume || !o.checkpoint.empty(), ValueError,
                  "--resume needs --checkpoint (the file to resume from)");
  TESSERA_EXPECTS(!o.gpu_budget_gb || *o.gpu_budget_gb > 0, ValueError,
                  "--gpu-budget must be > 0 GB, got {}", o.gpu_budget_gb.value_or(0));
  detail::parse_splits(o.split, -1);  // the syntax; the range once the masks are read
}

/// Loads this rank's partition and everything every split shares (labels, masks); on a GPU
/// places it first (train_sage.py's order).
void check_metric(const Job& job, int64_t num_classes) {
  TESSERA_EXPECTS(job.metric != "rocauc" || num_classes == 2, ValueError,
                  "--metric rocauc scores a binary task, but node data 'label' has {} classes "
                  "(use --metric acc)",
                  num_classes);
}

Data load_graph(Job& job) {
  const TrainOptions& o = job.o;
  // This rank's machine's part (several trainers per machine share one).
  const int64_t parts = o.parts == 0 ? job.world : o.parts;
  job.load["files_seconds"] =
      detail::read_partition_files(job.config, job.rank / (job.world / parts));
  const double t0 = now_seconds();
  job.g = std::make_unique<dist::DistGraph>(job.rt, job.name, job.config);
  job.load["seconds"] = now_seconds() - t0;
#ifdef TESSERA_WITH_CUDA
  if (job.gpu) {
    const int64_t budget = o.gpu_budget_gb ? static_cast<int64_t>(*o.gpu_budget_gb * 1e9) : -1;
    job.placement = dist::place_on_device(*job.g, {"label", "feat"}, budget);
    job.load["place_seconds"] = job.placement.seconds;
    job.load["placement"] = job.placement.describe();
    log0(job.rank, fmt::format("[train] placed on {}: {} ({:.2f}s)", job.device.str(),
                               job.placement.describe(), job.placement.seconds));
  }
#endif
  log0(job.rank, fmt::format("[train] loaded partition {} in {:.2f}s (reading its files takes "
                             "{:.2f}s)",
                             job.rank, job.load["seconds"].get<double>(),
                             job.load["files_seconds"].get<double>()));
  Data d;
  const dist::DistTensor& label = job.g->node_data("label");
  d.label_type = scalar_type(label.dtype(), "node data 'label'");
  d.labels = read_all(label).to_int64_vector("node data 'label'");
  TESSERA_EXPECTS(!d.labels.empty(), ValueError, "{}: the graph has no nodes", job.config);
  d.num_classes = *std::max_element(d.labels.begin(), d.labels.end()) + 1;
  TESSERA_EXPECTS(d.num_classes >= 2 && *std::min_element(d.labels.begin(), d.labels.end()) >= -1,
                  ValueError,
                  "node data 'label': labels must be class indices >= 0 of at least 2 classes, or "
                  "-1 for an unlabelled node");
  check_metric(job, d.num_classes);
  d.train_mask = read_all(job.g->node_data("train_mask"));
  d.val_mask = read_all(job.g->node_data("val_mask"));
  d.test_mask = read_all(job.g->node_data("test_mask"));
  return d;
}

}  // namespace

/// What load_graph refuses, checked on the dataset before it is partitioned: a --split the
/// masks lack, and ROC-AUC of a task that is not binary.
void check_dataset(const Job& job, const Dataset& ds) {
  // What training reads, named before anything is partitioned (a partition lacking it was
  // written, then refused, then reused as it was).
  for (const char* name : {"feat", "label", "train_mask", "val_mask", "test_mask"}) {
    TESSERA_EXPECTS(ds.ndata.count(name) != 0, ValueError,
                    "--dataset {}: no node data '{}' ({}.npy in an npy folder), which training "
                    "needs",
                    job.o.dataset, name, name);
  }
  if (const auto mask = ds.ndata.find("train_mask"); mask != ds.ndata.end()) {
    detail::parse_splits(job.o.split, mask->second.ndim() == 2 ? mask->second.dim(1) : 1);
  }
  if (const auto label = ds.ndata.find("label"); label != ds.ndata.end()) {
    const std::vector<int64_t> l = label->second.to_int64_vector("node data 'label'");
    if (!l.empty()) {
      check_metric(job, *std::max_element(l.begin(), l.end()) + 1);
    }
  }
}

/// Every rank evaluates its own nodes, and with --batching split trains on its own seeds: a rank
/// with none would fail in the first evaluation, or in the loader with a message about its
/// options. Refused up front, naming the rank and the way out. Collective.
void check_every_rank_has_work(const Job& job, const Data& data,
                               const std::vector<int64_t>& splits) {
  const auto [lo, hi] = job.g->local_node_range();
  std::string mine = fmt::format("{}", hi - lo);
  if (job.o.batching == "split") {
    for (int64_t s : splits) {
      mine += fmt::format(" {}", dist::node_split(data.train_mask, job.g->book(), job.rank, true, s,
                                                  job.g->trainers_per_machine())
                                     .size());
    }
  }
  const std::vector<std::string> all = all_gather_strings(*job.rt, mine, "training seed counts");
  for (int r = 0; r < job.world; ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    int64_t nodes = 0;
    in >> nodes;
    TESSERA_EXPECTS(nodes > 0, ValueError,
                    "rank {} owns no nodes ({}: its part, or its share of its machine's part, is "
                    "empty) and could not evaluate: partition into fewer parts, or run fewer "
                    "trainers per part",
                    r, job.config);
    for (int64_t s : job.o.batching == "split" ? splits : std::vector<int64_t>{}) {
      int64_t seeds = 0;
      in >> seeds;
      TESSERA_EXPECTS(seeds > 0, ValueError,
                      "--batching split: rank {} holds no training node of split {} (each rank "
                      "trains on its own); use --batching global, or --part-method metis, which "
                      "balances the training nodes",
                      r, s);
    }
  }
}

int run_training(const TrainOptions& opts) {
  Job job;
  job.o = opts;
  check_options(job.o);
  job.metric = job.o.metric == "auto" ? dataset_metric(job.o.dataset) : job.o.metric;
  job.h = resolve_hyper(job.o, job.metric);
  job.name = detail::dataset_name(job.o.dataset);
  if (job.o.threads > 0) {
    at::set_num_threads(job.o.threads);
  }
  job.device = pick_device(job.o.device);
  job.gpu = job.device.is_cuda();
  job.log_every = job.o.log_every.value_or(job.gpu ? 20 : 1);
  TESSERA_EXPECTS(job.gpu || (job.o.grad_sync != "nccl" && !job.o.gpu_budget_gb), ValueError,
                  "{} needs the GPU path, and this run trains on {}",
                  job.o.grad_sync == "nccl" ? "--grad-sync nccl" : "--gpu-budget",
                  job.device.str());

  job.rt = dist::Runtime::create();
  job.rank = job.rt->rank();
  job.world = job.rt->world_size();
  if (job.o.threads == 0 && job.world > 1) {
    // The ranks of one node share its cores (train_sage.py and DGL do the same).
    const int local = detail::local_world_size(job.world);
    at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local));
  }
  const int64_t parts = job.o.parts == 0 ? job.world : job.o.parts;
  // One part per machine, the same number of trainers on each (DGL's
  // num_trainers_per_machine); no simulated trainers in one process.
  TESSERA_EXPECTS(parts >= 1 && parts <= job.world && job.world % parts == 0, ValueError,
                  "--parts {} under a job of {} rank(s): the C++ trainer needs the ranks to be a "
                  "multiple of the parts (one part per machine, the same number of trainers on "
                  "each; launch {} ranks, or leave --parts out)",
                  parts, job.world, parts);
  if (job.world > 1) {
    if (job.o.grad_sync == "host" || !job.gpu) {
      TESSERA_EXPECTS(job.o.grad_sync != "nccl", ValueError,
                      "--grad-sync nccl needs the GPU path (--device cuda)");
      job.grad_sync = "host";
    } else {
      // NCCL refuses two ranks on one GPU: auto takes it only when every local rank has one.
      const bool own_gpu = detail::local_world_size(job.world) <= cuda_device_count();
      job.grad_sync = "host";
      if (job.o.grad_sync == "nccl" || own_gpu) {
        try {
          job.rt->attach_device_transport("nccl");
          job.grad_sync = "nccl";
        } catch (const NotCompiledError&) {
          if (job.o.grad_sync == "nccl") {
            throw;  // auto falls back to the host all-reduce
          }
        }
      }
    }
  }
  if (job.o.loss_curve.empty()) {  // the default, checked before any work as the others are
    job.o.loss_curve =
        (std::filesystem::path("out") / fmt::format("{}-p{}-cpp-loss.csv", job.name, parts))
            .string();
    check_output_path("--loss-curve (default)", job.o.loss_curve);
  }
  job.config = detail::prepare_partitions(*job.rt, job.o, parts,
                                          [&](const Dataset& ds) { check_dataset(job, ds); });
  Data data = load_graph(job);
  Features feats(*job.g, job.h.feat_norm, job.device);
  const std::vector<int64_t> splits =
      detail::parse_splits(job.o.split, num_splits(data.train_mask));
  for (int64_t s : splits) {
    check_split(job, data, s);  // the same verdict on every rank: the masks are global
  }
  check_every_rank_has_work(job, data, splits);
  if (job.o.model == ModelKind::kGcn) {
    job.gcn_out_deg = graph_out_degrees(job);  // collective
  }
  log0(job.rank,
       fmt::format("[train] {} ({} nodes, {} edges); {} rank(s) on {}; {}; {} model; splits [{}]; "
                   "fanouts [{}], batch {} ({} per rank), hidden {}, lr {}, epochs {}; torch "
                   "threads {}",
                   job.name, job.g->num_nodes(), job.g->num_edges(), job.world, job.device.str(),
                   job.metric, job.o.model == ModelKind::kSage ? "GraphSAGE" : "GCN",
                   fmt::join(splits, ", "), fmt::join(job.h.fanouts, ", "), job.h.batch_size,
                   std::max<int64_t>(1, (job.h.batch_size + job.world - 1) / job.world),
                   job.h.hidden, job.h.lr, job.h.epochs, at::get_num_threads()));

  std::map<int64_t, SplitResult> results;
  const double t0 = now_seconds();
  for (int64_t s : splits) {
    SplitResult r = train_split(job, feats, data, s);
    if (r.stopped) {
      return 0;
    }
    results.emplace(s, std::move(r));
  }
  std::vector<double> tests;
  tests.reserve(results.size());
  for (const auto& [s, r] : results) {
    tests.push_back(r.state.test_at_best);
  }
  const double mean = std::accumulate(tests.begin(), tests.end(), 0.0) / tests.size();
  double var = 0;
  for (double t : tests) {
    var += (t - mean) * (t - mean);
  }
  const double stdev = std::sqrt(var / tests.size());
  std::string each;
  for (double t : tests) {
    each += fmt::format("{}{:.2f}", each.empty() ? "" : ", ", t);
  }
  log0(job.rank, fmt::format("[train] test {} (at best validation): {:.2f} +- {:.2f} over {} "
                             "split(s) [{}]; {:.1f}s",
                             job.metric, mean, stdev, tests.size(), each, now_seconds() - t0));
  if (job.rank == 0) {
    write_results(job, results, mean, stdev);
  }
  return 0;
}

}  // namespace tessera::train
