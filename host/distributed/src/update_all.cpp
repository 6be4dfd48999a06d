// SPDX-License-Identifier: Apache-2.0
// Distributed update_all: the plan (columns of the rank's aggregation matrix, remote sources),
// one exchange of remote rows, then the local SpMM (CPU twin or cuSPARSE) or, for weighted
// messages and max, the row aggregation (aggregate_rows_cpu or its CUDA twin) over the rank's
// owned rows.
#include "tessera/dist/update_all.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/aggregate_rows.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/ops/spmm.hpp"

namespace tessera::dist {
namespace {

std::atomic<int64_t> g_calls{0};

cuda::RowReduce row_reduce(Aggregate a) {
  return a == Aggregate::kMax    ? cuda::RowReduce::kMax
         : a == Aggregate::kMean ? cuda::RowReduce::kMean
                                 : cuda::RowReduce::kSum;
}

// The weights of the rank's aggregation matrix's entries (w of each entry's local edge): w itself
// when the entries are the local edges in order (what `tessera partition` writes), else gathered
// into `scratch`; null without weights.
const float* entry_weights(const float* w, const std::vector<int64_t>& edge_local, bool in_order,
                           std::vector<float>& scratch) {
  if (w == nullptr || in_order) {
    return w;
  }
  scratch.resize(edge_local.size());
  for (size_t e = 0; e < edge_local.size(); ++e) {
    scratch[e] = w[edge_local[e]];
  }
  return scratch.data();
}

// out[r] = reduce over row r's entries e of (w ? w[e] : 1) * B[col(e)], in storage order with
// float32 accumulation (aggregate_rows_cpu, the CPU twin of the device path; for unweighted
// sum and mean the same sums as the SpMM's CPU twin).
void aggregate_cpu(const std::vector<int64_t>& indptr, const std::vector<int64_t>& cols,
                   const float* w, const float* B, int64_t F, Aggregate reduce, float* C) {
  const auto rows = static_cast<int64_t>(indptr.size()) - 1;
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(F, 1)),
               [&](int64_t lo, int64_t hi, int64_t) {
                 cuda::aggregate_rows_cpu(indptr.data(), cols.data(), w, B, F, row_reduce(reduce),
                                          lo, hi, C);
               });
}

}  // namespace

Message parse_message(const std::string& s) {
  if (s == "copy_src" || s == "copy_u") {
    return Message::kCopySrc;
  }
  if (s == "u_mul_e") {
    return Message::kUMulE;
  }
  throw ValueError(fmt::format("update_all: message '{}' is not one of 'copy_src', 'u_mul_e'", s));
}

Aggregate parse_aggregate(const std::string& s) {
  if (s == "sum") {
    return Aggregate::kSum;
  }
  if (s == "mean") {
    return Aggregate::kMean;
  }
  if (s == "max") {
    return Aggregate::kMax;
  }
  throw ValueError(fmt::format("update_all: reduce '{}' is not one of 'sum', 'mean', 'max'", s));
}

struct UpdateAllPlan::DeviceState {
  std::mutex mu;
  int device = -1;                  ///< where the buffers live (the first device run's device)
  cuda::DeviceBuffer indptr, cols;  ///< indptr_ and cols_, uploaded once
  cuda::DeviceBuffer rows;          ///< [owned; remote] rows when there are remote rows
};

UpdateAllPlan::UpdateAllPlan(const DistGraph& g)
    : device_(std::make_shared<DeviceState>()), g_(&g) {
  const LocalPartition& lp = g.local_partition();
  const auto [lo, hi] = g.local_node_range();
  const int64_t edge_lo = g.local_edge_range().first;
  owned_ = hi - lo;
  // This rank's rows of its machine's partition: all of them, or with several trainers per
  // machine its own contiguous range of them (rows row_lo.., whose in-edges are numbered
  // consecutively from edge_lo: DistGraph checks it at load).
  const int64_t row_lo = lo - g.machine_book().node_range(g.machine()).first;
  TESSERA_ASSERT(row_lo >= 0 && row_lo + owned_ <= lp.num_inner_nodes,
                 "owned rows [{}, {}) outside the partition's {} inner nodes", row_lo,
                 row_lo + owned_, lp.num_inner_nodes);
  const auto* ip = lp.indptr.data<int64_t>() + row_lo;
  const auto* ind = lp.indices.data<int64_t>();
  const auto* eid = lp.eid.data<int64_t>();
  const auto* nid = lp.nid.data<int64_t>();
  const bool local_ids = g.config().local_indices;
  const int64_t nnz = ip[owned_] - ip[0];
  indptr_.resize(static_cast<size_t>(owned_) + 1);
  for (int64_t r = 0; r <= owned_; ++r) {
    indptr_[r] = ip[r] - ip[0];
  }
  // Global ID of every inner edge's source; owned sources map to their local row.
  cols_.resize(static_cast<size_t>(nnz));
  edge_local_.resize(static_cast<size_t>(nnz));
  std::vector<int64_t> global(static_cast<size_t>(nnz));
  for (int64_t e = 0; e < nnz; ++e) {
    const int64_t k = ip[0] + e;
    const int64_t u = local_ids ? nid[ind[k]] : ind[k];
    global[e] = u;
    edge_local_[e] = eid[k] - edge_lo;
    edges_in_order_ = edges_in_order_ && edge_local_[e] == e;
  }
  for (int64_t e = 0; e < nnz; ++e) {
    if (global[e] < lo || global[e] >= hi) {
      remote_.push_back(global[e]);
    }
  }
  std::sort(remote_.begin(), remote_.end());
  remote_.erase(std::unique(remote_.begin(), remote_.end()), remote_.end());
  for (int64_t e = 0; e < nnz; ++e) {
    const int64_t u = global[e];
    if (u >= lo && u < hi) {
      cols_[e] = u - lo;
    } else {
      cols_[e] = owned_ + (std::lower_bound(remote_.begin(), remote_.end(), u) - remote_.begin());
    }
  }
}

DistTensor UpdateAllPlan::run(const DistTensor& x, const UpdateAllOptions& opts) const {
  const DistGraph& g = *g_;
  const char* op = "update_all";
  const transport::CollectiveLabel label(g.runtime()->transport(), op);
  TESSERA_EXPECTS(x.defined(), ValueError, "{}: the feature tensor is undefined", op);
  TESSERA_EXPECTS(x.dtype() == DType::kFloat32, TypeError,
                  "{}: features '{}' must be float32, got {}", op, x.name(), dtype_name(x.dtype()));
  TESSERA_EXPECTS(
      x.num_rows() == g.num_nodes() && x.policy().offsets == PartPolicy::node(g.book()).offsets,
      ValueError,
      "{}: features '{}' ({} rows, policy '{}') are not over the node policy of "
      "graph '{}' ({} nodes)",
      op, x.name(), x.num_rows(), x.policy().kind, g.graph_name(), g.num_nodes());
  TESSERA_EXPECTS(&x.runtime() == g.runtime().get(), ValueError,
                  "{}: features '{}' belong to another runtime than graph '{}'", op, x.name(),
                  g.graph_name());
  const float* w = nullptr;
  if (opts.message == Message::kUMulE) {
    TESSERA_EXPECTS(opts.edge_weight != nullptr && opts.edge_weight->defined(), ValueError,
                    "{}: message 'u_mul_e' needs edge_weight", op);
    const DistTensor& ew = *opts.edge_weight;
    const bool one_col = ew.shape().size() == 1 || (ew.shape().size() == 2 && ew.shape()[1] == 1);
    TESSERA_EXPECTS(ew.dtype() == DType::kFloat32, TypeError,
                    "{}: edge_weight '{}' must be float32, got {}", op, ew.name(),
                    dtype_name(ew.dtype()));
    TESSERA_EXPECTS(one_col && ew.num_rows() == g.num_edges() &&
                        ew.policy().offsets == PartPolicy::edge(g.book()).offsets,
                    ValueError,
                    "{}: edge_weight '{}' must be [num_edges] or [num_edges, 1] over the edge "
                    "policy of graph '{}' ({} edges), got {} rows",
                    op, ew.name(), g.graph_name(), g.num_edges(), ew.num_rows());
    TESSERA_EXPECTS(ew.placement() == Placement::kHost, ValueError,
                    "{}: edge_weight '{}' must be host-placed", op, ew.name());
    w = static_cast<const float*>(ew.local_data());
  } else {
    TESSERA_EXPECTS(opts.edge_weight == nullptr, ValueError,
                    "{}: edge_weight is given but message is 'copy_src' (use 'u_mul_e')", op);
  }
  const bool device = x.placement() == Placement::kDevice;

  const auto rb = static_cast<int64_t>(x.row_bytes());
  const int64_t F = rb / 4;
  const int64_t ncols = owned_ + static_cast<int64_t>(remote_.size());
  const int64_t call = g_calls.fetch_add(1);
  const std::string name =
      opts.out_name.empty() ? fmt::format("{}:update_all:{}", x.name(), call) : opts.out_name;
  const ops::Span<const int64_t> remote(remote_.data(), remote_.size());

  if (!device) {
    // B = [owned rows of x; remote rows], exchanged once (collective).
    std::vector<float> B(static_cast<size_t>(ncols * F));
    const Array rows = x.read_collective(remote);
    if (owned_ > 0) {
      std::memcpy(B.data(), x.local_data(), static_cast<size_t>(owned_ * rb));
    }
    if (!remote_.empty()) {
      std::memcpy(B.data() + (owned_ * F), rows.raw(), rows.nbytes());
    }
    DistTensor out(g.runtime(), name, x.shape(), DType::kFloat32, x.policy());
    auto* C = static_cast<float*>(out.local_data());
    if (owned_ > 0 && opts.message == Message::kCopySrc && opts.reduce != Aggregate::kMax) {
      ops::CsrRef a;
      a.indptr = ops::IndexRef::of(indptr_.data(), owned_ + 1);
      a.indices = ops::IndexRef::of(cols_.data(), static_cast<int64_t>(cols_.size()));
      a.num_rows = owned_;
      a.num_cols = ncols;
      const ops::MatrixRef b{B.data(), DType::kFloat32, ncols, F, ops::Memory::kHost};
      const ops::MatrixRef c{C, DType::kFloat32, owned_, F, ops::Memory::kHost};
      ops::spmm(a, b, c, opts.reduce == Aggregate::kMean ? ops::Reduce::kMean : ops::Reduce::kSum);
    } else if (owned_ > 0) {
      std::vector<float> scratch;
      aggregate_cpu(indptr_, cols_, entry_weights(w, edge_local_, edges_in_order_, scratch),
                    B.data(), F, opts.reduce, C);
    }
    g.runtime()->barrier();  // every rank's rows are in place before anyone reads them
    return out;
  }

  // Device rows: the owned rows of x read in place when no row is remote, else [owned; remote]
  // staged (remote rows over the device transport, or the owners' servers without one); then
  // cuSPARSE, or the row aggregation kernel, into the result's device rows. The pattern is in
  // device memory from the plan's first device run on.
  cuda::Stream stream;
  const cuda::StreamHandle st = stream.get();
  DeviceState& d = *device_;
  const std::lock_guard<std::mutex> lock(d.mu);
  const int dev = cuda::current_device();
  TESSERA_EXPECTS(d.device < 0 || d.device == dev, ValueError,
                  "{}: this plan's device buffers are on GPU {} but the current device is {} "
                  "(make a plan per device)",
                  op, d.device, dev);
  d.device = dev;
  const void* B = x.local_device_data();
  char* b_remote = nullptr;
  if (!remote_.empty()) {
    const auto need = static_cast<size_t>(ncols * rb);
    if (d.rows.size() < need) {
      d.rows = cuda::DeviceBuffer();  // the old staging first: both may not fit at once
      d.rows = cuda::DeviceBuffer(need);
    }
    B = d.rows.data();
    b_remote = static_cast<char*>(d.rows.data()) + (owned_ * rb);
    if (owned_ > 0) {
      cuda::copy_async(d.rows.data(), x.local_device_data(), static_cast<size_t>(owned_ * rb), st);
    }
  }
  if (g.runtime()->has_device_transport()) {
    x.read_collective_into_device(remote, b_remote, st);
  } else if (!remote_.empty()) {
    x.read_into_device(remote, b_remote, st);
  }
  DistTensor out(g.runtime(), name, x.shape(), DType::kFloat32, x.policy(), nullptr, false,
                 Placement::kDevice);
  // u_mul_e's weights (gathered on the host when not in entry order, then uploaded), kept until
  // the stream is done with them.
  std::vector<float> scratch;
  cuda::DeviceBuffer d_vals;
  if (owned_ > 0) {
    if (d.indptr.size() == 0) {
      cuda::DeviceBuffer ip(indptr_.size() * sizeof(int64_t));
      cuda::DeviceBuffer cols(std::max<size_t>(cols_.size(), 1) * sizeof(int64_t));
      cuda::copy_async(ip.data(), indptr_.data(), indptr_.size() * sizeof(int64_t), st);
      if (!cols_.empty()) {
        cuda::copy_async(cols.data(), cols_.data(), cols_.size() * sizeof(int64_t), st);
      }
      stream.synchronize();  // kept only once complete: a failed upload is retried next run
      d.indptr = std::move(ip);
      d.cols = std::move(cols);
    }
    const auto* d_indptr = static_cast<const int64_t*>(d.indptr.data());
    const auto* d_cols = static_cast<const int64_t*>(d.cols.data());
    ops::CsrRef a;
    a.indptr = ops::IndexRef::of(d_indptr, owned_ + 1, ops::Memory::kDevice);
    a.indices = ops::IndexRef::of(d_cols, static_cast<int64_t>(cols_.size()), ops::Memory::kDevice);
    a.num_rows = owned_;
    a.num_cols = ncols;
    if (opts.message == Message::kCopySrc && opts.reduce != Aggregate::kMax) {
      const ops::MatrixRef b{const_cast<void*>(B), DType::kFloat32, ncols, F, ops::Memory::kDevice};
      const ops::MatrixRef c{out.local_device_data(), DType::kFloat32, owned_, F,
                             ops::Memory::kDevice};
      ops::ExecOptions eo;
      eo.stream = st;
      ops::spmm(a, b, c, opts.reduce == Aggregate::kMean ? ops::Reduce::kMean : ops::Reduce::kSum,
                false, eo);
    } else {
      // Weighted messages or max: the row aggregation kernel (the CPU path's twin). The weights
      // are the edge tensor's current host values, uploaded every run.
      const float* vals = entry_weights(w, edge_local_, edges_in_order_, scratch);
      if (vals != nullptr) {
        d_vals = cuda::DeviceBuffer(std::max<size_t>(cols_.size(), 1) * sizeof(float));
        if (!cols_.empty()) {
          cuda::copy_async(d_vals.data(), vals, cols_.size() * sizeof(float), st);
        }
      }
      cuda::aggregate_rows_impl(
          d_indptr, d_cols, vals == nullptr ? nullptr : static_cast<const float*>(d_vals.data()),
          owned_, static_cast<const float*>(B), F, static_cast<float*>(out.local_device_data()),
          row_reduce(opts.reduce), st);
    }
  }
  stream.synchronize();  // the staging is reused by the next run; the weights' upload is freed
  g.runtime()->barrier();
  return out;
}

DistTensor update_all(const DistGraph& g, const DistTensor& x, const UpdateAllOptions& opts) {
  return UpdateAllPlan(g).run(x, opts);
}

}  // namespace tessera::dist
