// SPDX-License-Identifier: Apache-2.0
// Sampling ops, blocks, the neighbor sampler and the node/edge loaders.
#include <algorithm>
#include <cmath>
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/gather.hpp"
#include "tessera/ops/loader.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"
#include "tessera/ops/spmm.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera::python {

namespace {

using namespace tessera::ops;

Span<const int64_t> span_of(const I64Array& a) {
  return {a.data(), static_cast<int64_t>(a.shape(0))};
}

EdgeDir parse_dir(const std::string& s) {
  if (s == "in") return EdgeDir::kIn;
  if (s == "out") return EdgeDir::kOut;
  TESSERA_FAIL(ValueError, "edge_dir must be 'in' or 'out', got '{}'", s);
}

template <typename T>
nb::object field_view(nb::handle self, std::vector<T> Block::*field) {
  auto& b = nb::cast<Block&>(self);
  auto& v = b.*field;
  return view_numpy(v.data(), v.size(), self);
}

// Runs `op_fn(opts)` where an op over buffers of device `dev` runs: the stream handed over from
// Python as an integer (torch's Stream.cuda_stream), the GIL released, the operands' device
// current. A CUDA op in a build without CUDA is NotCompiledError, without a device ValueError,
// before anything touches the (device) pointers.
template <typename F>
void run_buffers_op(const char* op, const OpDevice& dev, uintptr_t stream, F&& op_fn,
                    bool check_indices = true) {
  ExecOptions opts;
  opts.stream = reinterpret_cast<cuda::StreamHandle>(stream);  // NOLINT(performance-no-int-to-ptr)
  opts.check_indices = check_indices;
  if (dev.cuda) {
    cuda::require_cuda(op);
  }
  nb::gil_scoped_release nogil;
  cuda::DeviceGuard guard(dev.cuda ? dev.device : -1);  // kernels run on the operands' device
  op_fn(opts);
}

enum class RowsOp { kGather, kScatter };

// gather_rows / scatter_rows over buffers of any device: `table` is the indexed matrix (src of
// a gather, dst of a scatter), `dense` has one row per index. Shapes are checked here in full
// (the op's validator sees them flattened to 2-D); dtypes, index values and memory kinds by
// the op's one validator (host/ops gather.cpp), which also picks the CPU or the CUDA twin.
void rows_op(RowsOp kind, const BufferInfo& table, const BufferInfo& idx, const BufferInfo& dense,
             uintptr_t stream, bool check_indices) {
  const char* op = kind == RowsOp::kGather ? "gather_rows" : "scatter_rows";
  const OpDevice dev = common_device(op, {&table, &idx, &dense});
  TESSERA_EXPECTS(!table.shape.empty(), ValueError, "{}: {} must have at least 1 dimension", op,
                  table.name);
  TESSERA_EXPECTS(idx.shape.size() == 1, ValueError, "{}: idx must be 1-D, got shape {}", op,
                  shape_string(idx.shape));
  std::vector<int64_t> want = table.shape;
  want[0] = idx.shape[0];
  TESSERA_EXPECTS(dense.shape == want, ValueError,
                  "{}: {} has shape {} but {} of shape {} and {} indices need {}", op, dense.name,
                  shape_string(dense.shape), table.name, shape_string(table.shape), idx.shape[0],
                  shape_string(want));
  const Memory mem = dev.cuda ? Memory::kDevice : Memory::kHost;
  const MatrixRef t{table.data, table.dtype, table.shape[0], table.row_elems(), mem};
  const MatrixRef d{dense.data, dense.dtype, dense.shape[0], dense.row_elems(), mem};
  const IndexRef i{idx.data, idx.dtype, idx.shape[0], mem};
  run_buffers_op(
      op, dev, stream,
      [&](const ExecOptions& opts) {
        if (kind == RowsOp::kGather) {
          gather_rows(t, i, d, opts);
        } else {
          scatter_rows(d, i, t, opts);
        }
      },
      check_indices);
}

// spmm over buffers of any device: C = op(A) * B for the CSR pattern (indptr, indices) of
// indptr.size - 1 rows and `num_cols` columns. Shapes here; dtypes, index values (when host
// readable) and memory kinds by the op's one validator (host/ops spmm.cpp).
void spmm_op(const BufferInfo& indptr, const BufferInfo& indices, int64_t num_cols,
             const BufferInfo& b, const BufferInfo& c, const std::string& reduce, bool transpose,
             uintptr_t stream, const std::string& engine, int num_threads) {
  const char* op = "spmm";
  const OpDevice dev = common_device(op, {&indptr, &indices, &b, &c});
  TESSERA_EXPECTS(reduce == "sum" || reduce == "mean", ValueError,
                  "spmm: reduce must be 'sum' or 'mean', got '{}'", reduce);
  TESSERA_EXPECTS(engine == "cusparse" || engine == "rows", ValueError,
                  "spmm: engine must be 'cusparse' or 'rows', got '{}'", engine);
  TESSERA_EXPECTS(indptr.shape.size() == 1 && indptr.shape[0] >= 1, ValueError,
                  "spmm: indptr must be 1-D with at least one entry, got shape {}",
                  shape_string(indptr.shape));
  TESSERA_EXPECTS(indices.shape.size() == 1, ValueError, "spmm: indices must be 1-D, got shape {}",
                  shape_string(indices.shape));
  TESSERA_EXPECTS(indptr.dtype == indices.dtype &&
                      (indptr.dtype == DType::kInt64 || indptr.dtype == DType::kInt32),
                  TypeError,
                  "spmm: indptr and indices must both be int32 or both int64, got {} and {}",
                  dtype_name(indptr.dtype), dtype_name(indices.dtype));
  TESSERA_EXPECTS(num_cols >= 0, ValueError, "spmm: num_cols is negative ({})", num_cols);
  for (const BufferInfo* m : {&b, &c}) {
    TESSERA_EXPECTS(m->shape.size() == 2, ValueError, "spmm: {} must be 2-D, got shape {}", m->name,
                    shape_string(m->shape));
  }
  const Memory mem = dev.cuda ? Memory::kDevice : Memory::kHost;
  CsrRef a;
  a.indptr = IndexRef{indptr.data, indptr.dtype, indptr.shape[0], mem};
  a.indices = IndexRef{indices.data, indices.dtype, indices.shape[0], mem};
  a.num_rows = indptr.shape[0] - 1;
  a.num_cols = num_cols;
  const MatrixRef bm{b.data, b.dtype, b.shape[0], b.shape[1], mem};
  const MatrixRef cm{c.data, c.dtype, c.shape[0], c.shape[1], mem};
  TESSERA_EXPECTS(num_threads >= 0, ValueError, "spmm: num_threads is negative ({})", num_threads);
  run_buffers_op(op, dev, stream, [&](ExecOptions opts) {
    opts.num_threads = num_threads;
    spmm(a, bm, cm, reduce == "mean" ? Reduce::kMean : Reduce::kSum, transpose, opts,
         engine == "rows" ? SpmmEngine::kRows : SpmmEngine::kCusparse);
  });
}

// Weights given by edge ID (a 1-D float32 or float64 array with one entry per edge ID of
// `graph`: max(num_edges, largest edge ID + 1), so every stored edge finds its weight and no
// modulo wraps) reordered into storage order. Errors name the edge ID, which is what the
// caller indexed by (validate_weights, run again by the sampler, names storage positions).
std::vector<float> storage_order_weights(const Graph& graph, const AnyArray& by_eid,
                                         const char* what) {
  TESSERA_EXPECTS(by_eid.ndim() == 1, ValueError,
                  "{}: weights must be a 1-D array (one per edge ID), got {} dimensions", what,
                  by_eid.ndim());
  const DType dt = from_dlpack(by_eid.dtype(), std::string(what) + " weights");
  TESSERA_EXPECTS(dt == DType::kFloat32 || dt == DType::kFloat64, TypeError,
                  "{}: weights must be float32 or float64, got {}", what, dtype_name(dt));
  int64_t num_ids = graph.num_edges();
  for (const int64_t e : graph.eids) {
    num_ids = std::max(num_ids, e + 1);
  }
  const auto n = static_cast<int64_t>(by_eid.shape(0));
  TESSERA_EXPECTS(n == num_ids, ValueError,
                  "{}: {} weights for a graph with {} edge IDs (one weight per edge, "
                  "indexed by edge ID)",
                  what, n, num_ids);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const double x = dt == DType::kFloat32 ? static_cast<const float*>(by_eid.data())[e]
                                           : static_cast<const double*>(by_eid.data())[e];
    w[e] =
        sampling_weight(x, [&] { return fmt::format("{}: weight {} of edge ID {}", what, x, e); });
  }
  return weights_in_storage_order(graph, w);
}

}  // namespace

LoaderOptions loader_options(int64_t batch_size, bool shuffle, bool drop_last, int num_workers,
                             int prefetch, int64_t seed) {
  TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
  LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.num_workers = num_workers;
  o.prefetch = prefetch;
  o.seed = static_cast<uint64_t>(seed);
  return o;
}

nb::list blocks_to_py(std::vector<Block>&& blocks) {
  nb::list out;
  for (auto& b : blocks)
    out.append(nb::cast(std::move(b)));
  return out;
}

ExcludeMode parse_exclude(const std::string& s) {
  if (s.empty() || s == "none") return ExcludeMode::kNone;
  if (s == "self") return ExcludeMode::kSelf;
  if (s == "reverse_id") return ExcludeMode::kReverseId;
  TESSERA_FAIL(ValueError, "exclude must be None, 'self' or 'reverse_id', got '{}'", s);
}

nb::dict edge_batch_to_py(EdgeMiniBatch&& b) {
  nb::dict d;
  d["epoch"] = b.epoch;
  d["index"] = b.index;
  d["eids"] = vector_to_numpy(std::move(b.eids));
  d["pos_src"] = vector_to_numpy(std::move(b.pos_src));
  d["pos_dst"] = vector_to_numpy(std::move(b.pos_dst));
  d["neg_src"] = vector_to_numpy(std::move(b.neg_src));
  d["neg_dst"] = vector_to_numpy(std::move(b.neg_dst));
  d["seeds"] = vector_to_numpy(std::move(b.seeds));
  d["pos_src_local"] = vector_to_numpy(std::move(b.pos_src_local));
  d["pos_dst_local"] = vector_to_numpy(std::move(b.pos_dst_local));
  d["neg_src_local"] = vector_to_numpy(std::move(b.neg_src_local));
  d["neg_dst_local"] = vector_to_numpy(std::move(b.neg_dst_local));
  d["input_nodes"] = vector_to_numpy(std::move(b.input_nodes));
  d["blocks"] = blocks_to_py(std::move(b.blocks));
  return d;
}

nb::dict node_batch_to_py(NodeMiniBatch&& b) {
  nb::dict d;
  d["epoch"] = b.epoch;
  d["index"] = b.index;
  d["seeds"] = vector_to_numpy(std::move(b.seeds));
  d["input_nodes"] = vector_to_numpy(std::move(b.input_nodes));
  d["blocks"] = blocks_to_py(std::move(b.blocks));
  d["sample_seconds"] = b.stats.sample_seconds;
  d["compact_seconds"] = b.stats.compact_seconds;
  return d;
}

void bind_ops(nb::module_& m) {
  m.def("num_threads", &tessera::num_threads, "Threads Tessera's parallel loops use.");
  m.def("set_num_threads", &tessera::set_num_threads, nb::arg("n"),
        "Sets the threads of Tessera's parallel loops (0: all cores).");

  nb::class_<Block>(m, "Block",
                    "A message-flow graph over local IDs: the first num_dst source nodes are "
                    "the destination nodes; edge i runs src[i] -> dst[i].")
      .def_ro("num_dst", &Block::num_dst)
      .def_prop_ro("num_src", &Block::num_src)
      .def_prop_ro("num_edges", &Block::num_edges)
      .def_prop_ro(
          "src_nodes", [](nb::handle s) { return field_view(s, &Block::src_nodes); },
          "global IDs of the source nodes (a view; no copy)")
      .def_prop_ro("dst_nodes",
                   [](nb::handle s) {
                     auto& b = nb::cast<Block&>(s);
                     return view_numpy(b.src_nodes.data(), static_cast<size_t>(b.num_dst), s);
                   })
      .def_prop_ro("src", [](nb::handle s) { return field_view(s, &Block::src); })
      .def_prop_ro("dst", [](nb::handle s) { return field_view(s, &Block::dst); })
      .def_prop_ro("eids", [](nb::handle s) { return field_view(s, &Block::eids); })
      .def("__repr__", [](const Block& b) {
        return "Block(num_src=" + std::to_string(b.num_src()) +
               ", num_dst=" + std::to_string(b.num_dst) +
               ", num_edges=" + std::to_string(b.num_edges()) + ")";
      });

  m.def(
      "sample_neighbors",
      [](const Graph& g, const I64Array& seeds, int64_t fanout, bool replace, int64_t seed,
         int64_t epoch, int64_t batch, int64_t layer, const std::string& edge_dir, int num_threads,
         std::optional<AnyArray> weights) {
        std::vector<float> w;
        if (weights) {
          w = storage_order_weights(g, *weights, "sample_neighbors");
        }
        SampleOptions o;
        o.fanout = fanout;
        o.replace = replace;
        o.dir = parse_dir(edge_dir);
        TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
        o.key = make_rng_key(static_cast<uint64_t>(seed), epoch, batch, layer);
        o.num_threads = num_threads;
        SampledEdges e;
        {
          nb::gil_scoped_release nogil;
          e = sample_neighbors(SamplingGraph::as_stored(g, w), span_of(seeds), o);
        }
        return nb::make_tuple(vector_to_numpy(std::move(e.src)), vector_to_numpy(std::move(e.dst)),
                              vector_to_numpy(std::move(e.eid)));
      },
      nb::arg("graph"), nb::arg("seeds"), nb::arg("fanout"), nb::arg("replace") = false,
      nb::arg("seed") = 0, nb::arg("epoch") = 0, nb::arg("batch") = 0, nb::arg("layer") = 0,
      nb::arg("edge_dir") = "in", nb::arg("num_threads") = 0, nb::arg("weights") = nb::none(),
      "Samples up to `fanout` neighbors of every seed (read in place); returns (src, dst, "
      "eid) arrays. The sample is a function of (seed, epoch, batch, layer, node). `weights` "
      "(one float32/float64 per edge ID, as NeighborSampler's): draws proportional to them, "
      "from each row's weights re-added at every visit (no cached prefix sums).");

  m.def(
      "to_block",
      [](const I64Array& src, const I64Array& dst, const I64Array& eid, const I64Array& dst_nodes) {
        SampledEdges e;
        e.src = span_of(src).to_vector();
        e.dst = span_of(dst).to_vector();
        e.eid = span_of(eid).to_vector();
        TESSERA_EXPECTS(e.src.size() == e.dst.size() && e.src.size() == e.eid.size(), ValueError,
                        "to_block: src, dst and eid differ in length ({}, {}, {})", e.src.size(),
                        e.dst.size(), e.eid.size());
        return to_block(e, span_of(dst_nodes));
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("eid"), nb::arg("dst_nodes"),
      "Compacts sampled edges into a Block whose destination nodes are `dst_nodes`.");

  m.def(
      "philox_permutation",
      [](int64_t n, int64_t seed, int64_t epoch) {
        TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
        auto k = make_rng_key(static_cast<uint64_t>(seed), epoch, 0, 0);
        return vector_to_numpy(philox_permutation(n, k.seed, k.epoch));
      },
      nb::arg("n"), nb::arg("seed"), nb::arg("epoch"),
      "The loaders' shuffle: a permutation of 0..n-1 keyed by (seed, epoch).");

  m.def(
      "gather_rows",
      [](const DeviceArray& src, const DeviceArray& idx, nb::object out, uintptr_t stream,
         bool check_indices) -> nb::object {
        const BufferInfo s = buffer_info(src, "gather_rows", "src");
        const BufferInfo i = buffer_info(idx, "gather_rows", "idx");
        if (out.is_none()) {
          // The host convenience: a new NumPy array (the CPU twin only).
          TESSERA_EXPECTS(!s.is_cuda() && !i.is_cuda(), TypeError,
                          "gather_rows: src is on {} and idx on {}; without `out` the result is "
                          "a new host array, so pass `out` (an array on the device) for device "
                          "operands (tessera.ops.gather_rows allocates it)",
                          s.device(), i.device());
          TESSERA_EXPECTS(!s.shape.empty(), ValueError,
                          "gather_rows: src must have at least 1 dimension");
          TESSERA_EXPECTS(i.shape.size() == 1, ValueError,
                          "gather_rows: idx must be 1-D, got shape {}", shape_string(i.shape));
          std::vector<int64_t> shape = s.shape;
          shape[0] = i.shape[0];
          Array result = Array::zeros(s.dtype, shape);
          BufferInfo o = s;
          o.name = "out";
          o.data = result.numel() ? result.raw_mut() : nullptr;
          o.shape = shape;
          rows_op(RowsOp::kGather, s, i, o, stream, check_indices);
          return to_numpy(result);
        }
        const BufferInfo o =
            buffer_info(writable_buffer(out, "gather_rows", "out"), "gather_rows", "out");
        rows_op(RowsOp::kGather, s, i, o, stream, check_indices);
        return out;
      },
      nb::arg("src"), nb::arg("idx"), nb::arg("out") = nb::none(), nb::arg("stream") = 0,
      nb::arg("check_indices") = true,
      "out[i] = src[idx[i]] for rows of any width (src [R, ...], idx int32/int64 [n], out "
      "[n, ...] of src's dtype), read and written in place through DLPack. All on the CPU: the "
      "CPU twin; all on one CUDA device: the CUDA twin on `stream` (a cudaStream_t as an "
      "integer; 0 = the legacy default stream), which with check_indices synchronizes the "
      "stream to turn a bad index into IndexError. Mixed devices: TypeError. Without `out` "
      "(CPU only) returns a new NumPy array; otherwise returns `out`.");

  m.def(
      "scatter_rows",
      [](const DeviceArray& src, const DeviceArray& idx, nb::object dst, uintptr_t stream,
         bool check_indices) -> nb::object {
        const BufferInfo s = buffer_info(src, "scatter_rows", "src");
        const BufferInfo i = buffer_info(idx, "scatter_rows", "idx");
        const BufferInfo d =
            buffer_info(writable_buffer(dst, "scatter_rows", "dst"), "scatter_rows", "dst");
        rows_op(RowsOp::kScatter, d, i, s, stream, check_indices);
        return dst;
      },
      nb::arg("src"), nb::arg("idx"), nb::arg("dst"), nb::arg("stream") = 0,
      nb::arg("check_indices") = true,
      "dst[idx[i]] = src[i] (src [n, ...], idx int32/int64 [n], dst [R, ...] of src's dtype), "
      "in place; devices, streams and errors as gather_rows. With repeated indices the CPU "
      "twin keeps the last row and the CUDA twin an unspecified one. Returns `dst`.");

  m.def(
      "spmm",
      [](const DeviceArray& indptr, const DeviceArray& indices, int64_t num_cols,
         const DeviceArray& b, nb::object c, const std::string& reduce, bool transpose,
         uintptr_t stream, const std::string& engine, int num_threads) -> nb::object {
        const BufferInfo p = buffer_info(indptr, "spmm", "indptr");
        const BufferInfo i = buffer_info(indices, "spmm", "indices");
        const BufferInfo bi = buffer_info(b, "spmm", "B");
        const BufferInfo ci = buffer_info(writable_buffer(c, "spmm", "C"), "spmm", "C");
        spmm_op(p, i, num_cols, bi, ci, reduce, transpose, stream, engine, num_threads);
        return c;
      },
      nb::arg("indptr"), nb::arg("indices"), nb::arg("num_cols"), nb::arg("B"), nb::arg("C"),
      nb::arg("reduce") = "sum", nb::arg("transpose") = false, nb::arg("stream") = 0,
      nb::arg("engine") = "cusparse", nb::arg("num_threads") = 0,
      "C = op(A) B in place for the CSR pattern A (indptr [R + 1], indices [nnz], both int32 or "
      "both int64) of R rows and num_cols columns whose values are 1 ('sum') or 1 / the row's "
      "degree ('mean'); op(A) = A^T with transpose (the backward of the forward aggregation). "
      "B and C float32, 2-D, C-contiguous. All on the CPU: the CPU twin (deterministic; on "
      "num_threads threads, 0: tessera.num_threads()); all on "
      "one CUDA device: on `stream`, cuSPARSE (engine 'cusparse') or Tessera's row kernels "
      "('rows': two launches, no scratch; the forward has the CPU twin's bits). Returns C.");

  nb::class_<ClusterGcnSampler>(m, "ClusterGcnSampler",
                                "Cluster-GCN batches: parts shuffled per epoch by (seed, epoch, "
                                "rank), parts_per_batch at a time; a batch is the subgraph "
                                "induced by its parts' nodes (edges within and between them).")
      .def(
          "__init__",
          [](ClusterGcnSampler* self, const Graph& g, const I64Array& part_of_node,
             int64_t parts_per_batch, int64_t seed, int64_t rank) {
            TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
            new (self) ClusterGcnSampler(g, span_of(part_of_node).to_vector(), parts_per_batch,
                                         static_cast<uint64_t>(seed), rank);
          },
          nb::arg("graph"), nb::arg("part_of_node"), nb::arg("parts_per_batch") = 1,
          nb::arg("seed") = 0, nb::arg("rank") = 0, nb::keep_alive<1, 2>(),
          "`part_of_node` (int64, one part in [0, P) per node, none empty) is copied; the graph "
          "is kept alive by the sampler.")
      .def_prop_ro("num_parts", &ClusterGcnSampler::num_parts)
      .def_prop_ro("num_batches", &ClusterGcnSampler::num_batches)
      .def(
          "batch_parts",
          [](const ClusterGcnSampler& s, int64_t epoch, int64_t batch) {
            return vector_to_numpy(s.batch_parts(epoch, batch));
          },
          nb::arg("epoch"), nb::arg("batch"), "The parts of a batch, in drawn order.")
      .def(
          "sample",
          [](const ClusterGcnSampler& s, int64_t epoch, int64_t batch, int num_threads) {
            Subgraph sg;
            {
              nb::gil_scoped_release nogil;
              sg = s.sample(epoch, batch, num_threads);
            }
            return nb::make_tuple(vector_to_numpy(std::move(sg.nodes)),
                                  vector_to_numpy(std::move(sg.graph.indptr)),
                                  vector_to_numpy(std::move(sg.graph.indices)),
                                  vector_to_numpy(std::move(sg.graph.eids)));
          },
          nb::arg("epoch"), nb::arg("batch"), nb::arg("num_threads") = 1,
          "(nodes, indptr, indices, eids): the batch's nodes (graph IDs) and its induced "
          "subgraph as CSC over positions in `nodes` (eids: the graph's edge IDs).");

  m.def(
      "random_clustering",
      [](int64_t num_nodes, int64_t num_parts, int64_t seed, int64_t epoch, int64_t rank) {
        TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
        return vector_to_numpy(
            random_clustering(num_nodes, num_parts, static_cast<uint64_t>(seed), epoch, rank));
      },
      nb::arg("num_nodes"), nb::arg("num_parts"), nb::arg("seed") = 0, nb::arg("epoch") = 0,
      nb::arg("rank") = 0,
      "A balanced random clustering (part of every node), a function of (seed, epoch, rank).");

  m.def(
      "metis_clustering",
      [](const Graph& g, int64_t num_parts, int64_t seed) {
        PartitionOptions o;
        o.num_parts = num_parts;
        o.seed = seed;
        Assignment a;
        {
          nb::gil_scoped_release nogil;
          a = assign_metis(g, num_parts, {}, 1, o);
        }
        std::vector<int64_t> part(a.part.begin(), a.part.end());
        return vector_to_numpy(std::move(part));
      },
      nb::arg("graph"), nb::arg("num_parts"), nb::arg("seed") = -1,
      "METIS k-way parts of the graph's symmetric adjacency (part of every node; METIS may "
      "leave a part empty).");

  nb::class_<NeighborSampler>(m, "NeighborSampler")
      .def(
          "__init__",
          [](NeighborSampler* s, const Graph& g, std::vector<int64_t> fanouts, bool replace,
             const std::string& edge_dir, int num_threads, const std::string& device,
             const std::string& placement, std::optional<AnyArray> weights) {
            NeighborSamplerOptions o;
            o.fanouts = std::move(fanouts);
            o.replace = replace;
            o.dir = parse_dir(edge_dir);
            o.num_threads = num_threads;
            TESSERA_EXPECTS(device == "cpu" || device == "cuda", ValueError,
                            "NeighborSampler: device must be 'cpu' or 'cuda', got '{}'", device);
            // The graph prepared once, as every entry point prepares it (SamplingGraph's
            // defaults: the interleaved adjacency, per-row prefix sums of the weights), or
            // placed on the GPU.
            SamplingGraphOptions prep;
            prep.device = device == "cuda" ? Device::kCuda : Device::kCpu;
            prep.placement = cuda::parse_placement(placement, "NeighborSampler placement");
            std::vector<float> w;
            if (weights) w = storage_order_weights(g, *weights, "NeighborSampler");
            nb::gil_scoped_release nogil;
            auto graph = std::make_shared<const SamplingGraph>(g, std::move(w), prep);
            new (s) NeighborSampler(std::move(graph), std::move(o));
          },
          nb::arg("graph"), nb::arg("fanouts"), nb::arg("replace") = false,
          nb::arg("edge_dir") = "in", nb::arg("num_threads") = 1, nb::arg("device") = "cpu",
          nb::arg("placement") = "gpu", nb::arg("weights") = nb::none(), nb::keep_alive<1, 2>(),
          "device='cuda': the graph is copied once into `placement` ('gpu' = HBM, 'uva' = "
          "pinned host memory read in place) and every batch is sampled and compacted by the "
          "CUDA twins; the blocks equal the CPU sampler's bit for bit. On the CPU the sampler "
          "keeps an interleaved copy of the adjacency (8 bytes per edge; 16 when an ID needs more "
          "than 32 bits) and compacts over a table of 4 bytes per node. `num_threads`: threads "
          "per hop of one sample_blocks call (the blocks do not depend on it). `weights`: one "
          "float32 or float64 weight per edge ID (non-negative, finite; TypeError for other "
          "dtypes, ValueError for a wrong length or a bad value, naming the edge ID): neighbors "
          "are drawn with probability proportional to their edge's weight, weight 0 never. The "
          "sampler keeps its own copy in storage order (and, on the CPU, its per-row prefix "
          "sums: 12 bytes per edge).")
      .def_prop_ro("weighted", &NeighborSampler::weighted)
      .def_prop_ro("fanouts", [](const NeighborSampler& s) { return s.options().fanouts; })
      .def(
          "sample_blocks",
          [](const NeighborSampler& s, const I64Array& seeds, int64_t seed, int64_t epoch,
             int64_t batch) {
            TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
            const RngKey key = make_rng_key(static_cast<uint64_t>(seed), epoch, batch, 0);
            std::vector<Block> blocks;
            {
              nb::gil_scoped_release nogil;
              blocks = s.sample_blocks(span_of(seeds), key);
            }
            return blocks_to_py(std::move(blocks));
          },
          nb::arg("seeds"), nb::arg("seed") = 0, nb::arg("epoch") = 0, nb::arg("batch") = 0,
          "The blocks of one mini-batch, input layer first.");

  nb::class_<NodeDataLoader>(m, "NodeDataLoader")
      .def(
          "__init__",
          [](NodeDataLoader* l, const NeighborSampler& s, const AnyArray& seeds, int64_t batch_size,
             bool shuffle, bool drop_last, int num_workers, int prefetch, int64_t seed) {
            new (l) NodeDataLoader(
                s, int64_vector(seeds, "seed nodes"),
                loader_options(batch_size, shuffle, drop_last, num_workers, prefetch, seed));
          },
          nb::arg("sampler"), nb::arg("seeds"), nb::arg("batch_size") = 1024,
          nb::arg("shuffle") = true, nb::arg("drop_last") = false, nb::arg("num_workers") = 1,
          nb::arg("prefetch") = 4, nb::arg("seed") = 0, nb::keep_alive<1, 2>())
      .def_prop_ro("num_batches", &NodeDataLoader::num_batches)
      .def(
          "batch_seeds",
          [](const NodeDataLoader& l, int64_t epoch, int64_t b) {
            return vector_to_numpy(l.batch_seeds(epoch, b));
          },
          nb::arg("epoch"), nb::arg("batch"))
      .def(
          "sample_batch",
          [](const NodeDataLoader& l, int64_t epoch, int64_t b) {
            NodeMiniBatch mb;
            {
              nb::gil_scoped_release nogil;
              mb = l.sample_batch(epoch, b);
            }
            return node_batch_to_py(std::move(mb));
          },
          nb::arg("epoch"), nb::arg("batch"), "Samples batch `batch` of `epoch` synchronously.")
      .def(
          "start_epoch",
          [](NodeDataLoader& l, int64_t epoch) {
            nb::gil_scoped_release nogil;
            l.start_epoch(epoch);
          },
          nb::arg("epoch"))
      .def("stop", &NodeDataLoader::stop, nb::call_guard<nb::gil_scoped_release>(),
           "Stops the epoch's sampler threads and frees their prefetched batches.")
      .def("next",
           [](NodeDataLoader& l) { return next_batch_to_py<NodeMiniBatch>(l, node_batch_to_py); });

  m.def("symmetrized_reverse_eids",
        [](int64_t n) { return vector_to_numpy(symmetrized_reverse_eids(n)); });
  m.def(
      "symmetrized_reverse_eids_of",
      [](const I64Array& orig_eid, int64_t num_input_edges, const std::string& what) {
        return vector_to_numpy(symmetrized_reverse_eids(
            orig_eid.data(), static_cast<int64_t>(orig_eid.shape(0)), num_input_edges, what));
      },
      nb::arg("orig_eid"), nb::arg("num_input_edges"), nb::arg("what"),
      "reverse_eids in relabelled edge IDs from each edge's original ID (ops::"
      "symmetrized_reverse_eids); ValueError starting with `what` for an ID outside [0, 2E).");

  nb::class_<EdgeDataLoader>(m, "EdgeDataLoader")
      .def(
          "__init__",
          [](EdgeDataLoader* l, const NeighborSampler& s, const AnyArray& seed_eids,
             int64_t batch_size, bool shuffle, bool drop_last, int num_workers, int prefetch,
             int64_t seed, int64_t negatives, const std::string& exclude, nb::object reverse_eids) {
            EdgeLoaderOptions eo;
            eo.negatives = negatives;
            eo.exclude = parse_exclude(exclude);
            if (!reverse_eids.is_none())
              eo.reverse_eids = int64_vector(nb::cast<AnyArray>(reverse_eids), "reverse_eids");
            std::vector<int64_t> seeds = int64_vector(seed_eids, "seed edges");
            const LoaderOptions lo =
                loader_options(batch_size, shuffle, drop_last, num_workers, prefetch, seed);
            nb::gil_scoped_release nogil;  // O(edges): the endpoint tables of every edge ID
            new (l) EdgeDataLoader(s, std::move(seeds), lo, std::move(eo));
          },
          nb::arg("sampler"), nb::arg("seed_eids"), nb::arg("batch_size") = 1024,
          nb::arg("shuffle") = true, nb::arg("drop_last") = false, nb::arg("num_workers") = 1,
          nb::arg("prefetch") = 4, nb::arg("seed") = 0, nb::arg("negatives") = 0,
          nb::arg("exclude") = "none", nb::arg("reverse_eids") = nb::none(), nb::keep_alive<1, 2>())
      .def_prop_ro("num_batches", &EdgeDataLoader::num_batches)
      .def(
          "batch_eids",
          [](const EdgeDataLoader& l, int64_t epoch, int64_t b) {
            return vector_to_numpy(l.batch_eids(epoch, b));
          },
          nb::arg("epoch"), nb::arg("batch"), "The seed edges of batch `batch` of `epoch`.")
      .def(
          "sample_batch",
          [](const EdgeDataLoader& l, int64_t epoch, int64_t b) {
            EdgeMiniBatch mb;
            {
              nb::gil_scoped_release nogil;
              mb = l.sample_batch(epoch, b);
            }
            return edge_batch_to_py(std::move(mb));
          },
          nb::arg("epoch"), nb::arg("batch"))
      .def(
          "start_epoch",
          [](EdgeDataLoader& l, int64_t epoch) {
            nb::gil_scoped_release nogil;
            l.start_epoch(epoch);
          },
          nb::arg("epoch"))
      .def("stop", &EdgeDataLoader::stop, nb::call_guard<nb::gil_scoped_release>(),
           "Stops the epoch's sampler threads and frees their prefetched batches.")
      .def("next",
           [](EdgeDataLoader& l) { return next_batch_to_py<EdgeMiniBatch>(l, edge_batch_to_py); });
}

}  // namespace tessera::python
