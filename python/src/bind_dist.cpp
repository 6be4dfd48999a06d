// SPDX-License-Identifier: Apache-2.0
// The distributed runtime (host/distributed over transport/): Runtime, DistTensor, DistGraph,
// node_split / edge_split, distributed sampling, the distributed node and edge loaders,
// update_all, and the launcher. Every call that may wait on other ranks releases the GIL, so a
// rank's Python threads keep running while it waits and the transport's handler thread never needs
// the GIL.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/edge_loader.hpp"
#include "tessera/dist/embedding.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/io.hpp"
#include "tessera/dist/loader.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/dist/update_all.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/transport/launch.hpp"

namespace tessera::python {

namespace {

using dist::DistGraph;
using dist::DistTensor;
using dist::Runtime;

/// A writable, C-contiguous host buffer (all_reduce in place).
using MutArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

ops::Span<const int64_t> span_of(const I64Array& a) {
  return {a.data(), static_cast<int64_t>(a.shape(0))};
}

transport::DType reduce_dtype(nb::dlpack::dtype t) {
  const DType d = from_dlpack(t, "all_reduce buffer");
  switch (d) {
    case DType::kFloat32:
      return transport::DType::f32;
    case DType::kFloat64:
      return transport::DType::f64;
    case DType::kInt32:
      return transport::DType::i32;
    case DType::kInt64:
      return transport::DType::i64;
    case DType::kUInt64:
      return transport::DType::u64;
    default:
      TESSERA_FAIL(TypeError,
                   "all_reduce: dtype {} is not reducible (float32, float64, int32, "
                   "int64, uint64)",
                   dtype_name(d));
  }
}

transport::ReduceOp reduce_op(const std::string& op) {
  if (op == "sum") return transport::ReduceOp::sum;
  if (op == "max") return transport::ReduceOp::max;
  if (op == "min") return transport::ReduceOp::min;
  TESSERA_FAIL(ValueError, "all_reduce: op must be 'sum', 'max' or 'min', got '{}'", op);
}

dist::PartPolicy make_policy(const std::string& kind, std::vector<int64_t> offsets) {
  dist::PartPolicy p;
  p.kind = kind;
  p.offsets = std::move(offsets);
  return p;
}

/// The methods DistNodeDataLoader and DistEdgeDataLoader share; `to_py` converts a mini-batch.
template <typename Loader, typename Batch, typename ToPy>
void add_loader_methods(nb::class_<Loader>& c, ToPy to_py) {
  c.def_prop_ro("num_batches", &Loader::num_batches)
      .def_prop_ro("num_global_batches", &Loader::num_global_batches)
      .def("global_batch_index", &Loader::global_batch_index, nb::arg("b"))
      .def(
          "sample_batch",
          [to_py](const Loader& l, int64_t epoch, int64_t b) {
            Batch mb;
            {
              nb::gil_scoped_release nogil;
              mb = l.sample_batch(epoch, b);
            }
            return to_py(std::move(mb));
          },
          nb::arg("epoch"), nb::arg("batch"))
      .def("start_epoch", &Loader::start_epoch, nb::arg("epoch"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("stop", &Loader::stop, nb::call_guard<nb::gil_scoped_release>(),
           "Stops the epoch's sampler threads and frees their prefetched batches.")
      .def("next", [to_py](Loader& l) { return next_batch_to_py<Batch>(l, to_py); });
}

nb::dict tensors_to_py(const std::map<std::string, DistTensor>& m) {
  nb::dict d;
  for (const auto& [k, v] : m)
    d[k.c_str()] = nb::cast(v);
  return d;
}

}  // namespace

void bind_dist(nb::module_& m) {
  nb::class_<Runtime>(m, "Runtime",
                      "This rank's distributed runtime (transport, request servers). Created "
                      "collectively by every rank with Runtime.create().")
      .def_static(
          "create",
          [](const std::string& backend) {
            nb::gil_scoped_release nogil;
            return Runtime::create(backend);
          },
          nb::arg("backend") = "",
          "Joins the job described by the environment (RANK/WORLD_SIZE, Slurm, OpenMPI; "
          "TESSERA_TRANSPORT picks the backend). Collective.")
      .def_prop_ro("rank", &Runtime::rank)
      .def_prop_ro("world_size", &Runtime::world_size)
      .def_prop_ro("backend", [](const Runtime& r) { return r.transport().name(); })
      .def_prop_ro("fabric", [](const Runtime& r) { return r.transport().capabilities().fabric; })
      .def(
          "barrier",
          [](Runtime& r, const std::string& what) {
            nb::gil_scoped_release nogil;
            const transport::CollectiveLabel label(r.transport(), what);
            r.barrier();
          },
          nb::arg("what") = "barrier",
          "Returns once every rank has entered it. `what` names the call in the error every rank "
          "gets when the ranks called different collectives.")
      .def(
          "all_reduce",
          [](Runtime& r, MutArray a, const std::string& op, const std::string& what) {
            const transport::DType dt = reduce_dtype(a.dtype());
            const transport::ReduceOp o = reduce_op(op);
            void* data = a.data();
            const size_t n = a.size();
            nb::gil_scoped_release nogil;
            const transport::CollectiveLabel label(r.transport(), what);
            r.transport().all_reduce(data, n, dt, o);
          },
          nb::arg("array"), nb::arg("op") = "sum", nb::arg("what") = "all_reduce",
          "In-place reduction of a C-contiguous CPU array over all ranks (every rank gets the "
          "same bits: the reduction runs in rank order). Collective; `what` names the call in "
          "the error every rank gets when the ranks called different collectives.")
      .def(
          "all_gather_bytes",
          [](Runtime& r, nb::bytes mine, const std::string& what) {
            const size_t w = static_cast<size_t>(r.world_size());
            std::string own(mine.c_str(), mine.size());
            std::vector<int64_t> sizes(w);
            std::vector<char> all;
            size_t width = 0;
            {
              nb::gil_scoped_release nogil;
              const transport::CollectiveLabel label(r.transport(), what);
              const int64_t n = static_cast<int64_t>(own.size());
              r.transport().all_gather(&n, sizeof n, sizes.data());
              for (int64_t s : sizes)
                width = std::max(width, static_cast<size_t>(s));
              own.resize(width);
              all.resize(width * w);
              if (width > 0) r.transport().all_gather(own.data(), width, all.data());
            }
            nb::list out;
            for (size_t i = 0; i < w; ++i)
              out.append(nb::bytes(all.data() + width * i, static_cast<size_t>(sizes[i])));
            return out;
          },
          nb::arg("data"), nb::arg("what") = "all_gather_object",
          "Every rank's bytes, in rank order. Collective; `what` as for all_reduce.")
      .def("set_one_sided_reads", &Runtime::set_one_sided_reads, nb::arg("on"))
      .def_prop_ro("one_sided_reads", &Runtime::one_sided_reads)
      .def_prop_ro("min_get_bytes", &Runtime::min_get_bytes);

  nb::class_<DistTensor>(m, "DistTensor",
                         "Rows spread over the ranks by a partition policy, read and written "
                         "by global row ID from any rank.")
      .def(
          "__init__",
          [](DistTensor* self, const std::shared_ptr<Runtime>& rt, const std::string& name,
             std::vector<int64_t> shape, const std::string& dtype, const std::string& kind,
             std::vector<int64_t> offsets, bool persistent, const std::string& placement) {
            const DType dt = parse_dtype(dtype, "DistTensor dtype");
            dist::PartPolicy p = make_policy(kind, std::move(offsets));
            TESSERA_EXPECTS(placement == "host" || placement == "device", ValueError,
                            "DistTensor '{}': placement must be 'host' or 'device', got '{}'", name,
                            placement);
            const auto where =
                placement == "device" ? dist::Placement::kDevice : dist::Placement::kHost;
            nb::gil_scoped_release nogil;
            new (self) DistTensor(rt, name, std::move(shape), dt, std::move(p), nullptr, persistent,
                                  where);
          },
          nb::arg("runtime"), nb::arg("name"), nb::arg("shape"), nb::arg("dtype"),
          nb::arg("policy_kind"), nb::arg("offsets"), nb::arg("persistent") = false,
          nb::arg("placement") = "host",
          "Creates (or attaches to, by name) a tensor; rows start at zero. Collective. "
          "placement 'device': this rank's rows in GPU memory (CUDA builds).")
      .def_prop_ro("name", &DistTensor::name)
      .def_prop_ro("created", &DistTensor::created)
      .def_prop_ro("shape", &DistTensor::shape)
      .def_prop_ro("dtype", [](const DistTensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_prop_ro("num_rows", &DistTensor::num_rows)
      .def_prop_ro("persistent", &DistTensor::persistent)
      .def("release_name", &DistTensor::release_name,
           "Releases the name now, persistent or not (see DistTensor::release_name): called on "
           "every rank after a failed initialization. Local.")
      .def_prop_ro("policy_kind", [](const DistTensor& t) { return t.policy().kind; })
      .def_prop_ro("offsets", [](const DistTensor& t) { return t.policy().offsets; })
      .def_prop_ro("local_range", &DistTensor::local_range)
      .def(
          "read",
          [](const DistTensor& t, const I64Array& ids) {
            Array out;
            {
              nb::gil_scoped_release nogil;
              out = t.read(span_of(ids));
            }
            return to_numpy(out);
          },
          nb::arg("ids"), "t[ids] as a new NumPy array (rows of remote owners fetched).")
      .def(
          "read_into",
          [](const DistTensor& t, const I64Array& ids, nb::object out,
             uintptr_t stream) -> nb::object {
            const std::string op = "DistTensor '" + t.name() + "' read_into";
            const BufferInfo o = buffer_info(writable_buffer(out, op, "out"), op, "out");
            TESSERA_EXPECTS(o.dtype == t.dtype(), TypeError, "{}: out is {}, the tensor is {}", op,
                            dtype_name(o.dtype), dtype_name(t.dtype()));
            std::vector<int64_t> want = t.shape();
            want[0] = static_cast<int64_t>(ids.shape(0));
            TESSERA_EXPECTS(o.shape == want, ValueError,
                            "{}: out has shape {} but {} IDs of a tensor of shape {} need {}", op,
                            shape_string(o.shape), ids.shape(0), shape_string(t.shape()),
                            shape_string(want));
            const OpDevice dev = common_device(op, {&o});
            {
              nb::gil_scoped_release nogil;
              if (!dev.cuda) {
                t.read_into(span_of(ids), o.data);
              } else {
                // read_into_device writes memory of the calling thread's current device.
                // Without CUDA compiled in it throws NotCompiledError naming the tensor (no
                // guard then: the guard's own error would name only itself); without a device,
                // require_cuda's ValueError names the tensor.
                const bool compiled = cuda::compiled_with_cuda();
                if (compiled) {
                  cuda::require_cuda(op.c_str());
                }
                cuda::DeviceGuard guard(compiled ? dev.device : -1);
                // NOLINTNEXTLINE(performance-no-int-to-ptr): a cudaStream_t from Python
                const auto st = reinterpret_cast<cuda::StreamHandle>(stream);
                t.read_into_device(span_of(ids), o.data, st);
              }
            }
            return out;
          },
          nb::arg("ids"), nb::arg("out"), nb::arg("stream") = 0,
          "t[ids] into `out` (shape [len(ids), ...], the tensor's dtype, C-contiguous), in place "
          "through DLPack: a CPU `out` by read_into; a CUDA `out` by read_into_device on "
          "`stream` (a cudaStream_t as an integer, 0 = legacy default stream): local device "
          "rows by a gather kernel straight into `out`, host rows through pinned staging and "
          "one host-to-device copy (then the stream is synchronized). IDs are host memory (they "
          "route the read). Returns `out`.")
      .def(
          "read_into_ids",
          [](const DistTensor& t, nb::object ids, nb::object out, uintptr_t stream) -> nb::object {
            const std::string op = "DistTensor '" + t.name() + "' read_into_ids";
            const BufferInfo i = buffer_info(nb::cast<DeviceArray>(ids), op, "ids");
            const BufferInfo o = buffer_info(writable_buffer(out, op, "out"), op, "out");
            TESSERA_EXPECTS(i.dtype == DType::kInt64 && i.shape.size() == 1, TypeError,
                            "{}: ids must be a 1-D int64 tensor, got {} of shape {}", op,
                            dtype_name(i.dtype), shape_string(i.shape));
            TESSERA_EXPECTS(o.dtype == t.dtype(), TypeError, "{}: out is {}, the tensor is {}", op,
                            dtype_name(o.dtype), dtype_name(t.dtype()));
            std::vector<int64_t> want = t.shape();
            want[0] = i.shape[0];
            TESSERA_EXPECTS(o.shape == want, ValueError, "{}: out has shape {}, expected {}", op,
                            shape_string(o.shape), shape_string(want));
            const OpDevice dev = common_device(op, {&i, &o});
            TESSERA_EXPECTS(dev.cuda, ValueError, "{}: ids and out must be CUDA tensors", op);
            nb::gil_scoped_release nogil;
            cuda::DeviceGuard guard(dev.device);
            // NOLINTNEXTLINE(performance-no-int-to-ptr): a cudaStream_t from Python
            const auto st = reinterpret_cast<cuda::StreamHandle>(stream);
            t.read_into_device_ids(static_cast<const int64_t*>(i.data), i.shape[0], o.data, st);
            return out;
          },
          nb::arg("ids"), nb::arg("out"), nb::arg("stream") = 0,
          "t[ids] with `ids` a CUDA int64 tensor, into the CUDA tensor `out` on `stream`: one "
          "gather kernel from the device mirror when this rank owns every row (no host trip), "
          "else the IDs are copied to the host to route the read.")
      .def(
          "mirror_on_device",
          [](DistTensor& t, const std::string& placement, const I64Array& hot_rows) {
            const cuda::Placement p = cuda::parse_placement(placement, "mirror placement");
            nb::gil_scoped_release nogil;
            t.mirror_on_device(p, span_of(hot_rows));
          },
          nb::arg("placement"), nb::arg("hot_rows"),
          "A read-only copy of this rank's rows on the current GPU ('gpu', or 'uva': pinned host "
          "memory with `hot_rows` cached on the GPU); writes are refused while it exists.")
      .def("drop_mirror", &DistTensor::drop_mirror)
      .def_prop_ro("mirror",
                   [](const DistTensor& t) -> nb::object {
                     const dist::DeviceMirrorInfo i = t.mirror_info();
                     if (!i.mirrored) return nb::none();
                     nb::dict d;
                     d["placement"] = cuda::placement_name(i.placement);
                     d["device"] = i.device;
                     d["gpu_bytes"] = i.gpu_bytes;
                     d["pinned_bytes"] = i.pinned_bytes;
                     d["cache_rows"] = i.cache_rows;
                     return d;
                   })
      .def(
          "mirror_cache_counters",
          [](const DistTensor& t, bool reset) {
            dist::CacheCounters c;
            {
              nb::gil_scoped_release nogil;
              c = t.mirror_cache_counters(reset);
            }
            return std::make_pair(c.lookups, c.hits);
          },
          nb::arg("reset") = false)
      .def(
          "read_collective",
          [](const DistTensor& t, const I64Array& ids) {
            Array out;
            {
              nb::gil_scoped_release nogil;
              out = t.read_collective(span_of(ids));
            }
            return to_numpy(out);
          },
          nb::arg("ids"), "t[ids] where every rank gathers in the same step. Collective.")
      .def(
          "write",
          [](DistTensor& t, const I64Array& ids, const AnyArray& rows) {
            const DType dt = from_dlpack(rows.dtype(), "DistTensor write rows");
            TESSERA_EXPECTS(dt == t.dtype(), TypeError,
                            "DistTensor '{}' write: rows are {}, the tensor is {}", t.name(),
                            dtype_name(dt), dtype_name(t.dtype()));
            const size_t n = ids.shape(0);
            TESSERA_EXPECTS(rows.nbytes() == n * t.row_bytes(), ValueError,
                            "DistTensor '{}' write: {} IDs need {} bytes of rows, got {}", t.name(),
                            n, n * t.row_bytes(), rows.nbytes());
            const void* data = rows.data();
            nb::gil_scoped_release nogil;
            t.write(span_of(ids), data);
          },
          nb::arg("ids"), nb::arg("rows"),
          "t[ids] = rows; returns once every owner stored its rows.")
      .def(
          "local_view",
          [](nb::handle self) {
            auto& t = nb::cast<DistTensor&>(self);
            const auto [lo, hi] = t.local_range();
            std::vector<size_t> shape(t.shape().begin(), t.shape().end());
            shape[0] = static_cast<size_t>(hi - lo);
            nb::ndarray<nb::numpy> arr(t.local_data(), shape.size(), shape.data(), self, nullptr,
                                       to_dlpack(t.dtype()), nb::device::cpu::value);
            return nb::cast(arr, nb::rv_policy::reference);
          },
          "This rank's rows (local_range) as a writable NumPy view (no copy). Writes made "
          "through it are outside write()'s row-atomic contract: call local_rows_changed after.")
      .def(
          "local_rows_changed",
          [](DistTensor& t, int64_t begin, int64_t end) {
            nb::gil_scoped_release nogil;
            t.local_rows_changed(begin, end);
          },
          nb::arg("begin"), nb::arg("end"),
          "Re-stamps local rows [begin, end) (global IDs) changed through local_view(), so "
          "peers' one-sided reads of them pass their consistency check at the first copy.");

  nb::class_<DistGraph>(m, "DistGraph", "This rank's partition of a partitioned graph.")
      .def(
          "__init__",
          [](DistGraph* self, const std::shared_ptr<Runtime>& rt, const std::string& name,
             const std::string& config, bool verify) {
            dist::DistGraphOptions o;
            o.verify_checksums = verify;
            nb::gil_scoped_release nogil;
            new (self) DistGraph(rt, name, config, o);
          },
          nb::arg("runtime"), nb::arg("graph_name"), nb::arg("part_config"),
          nb::arg("verify_checksums") = true,
          "Loads partition `rank` (checking its files' CRC-32 unless verify_checksums=False). "
          "Collective.")
      .def_prop_ro("graph_name", &DistGraph::graph_name)
      .def_prop_ro("num_nodes", &DistGraph::num_nodes)
      .def_prop_ro("num_edges", &DistGraph::num_edges)
      .def_prop_ro("part_id", &DistGraph::part_id)
      .def_prop_ro("local_node_range", &DistGraph::local_node_range)
      .def_prop_ro("local_edge_range", &DistGraph::local_edge_range)
      .def_prop_ro("book", [](const DistGraph& g) { return g.book(); })
      .def_prop_ro("machine_book", [](const DistGraph& g) { return g.machine_book(); })
      .def_prop_ro("trainers_per_machine", &DistGraph::trainers_per_machine)
      .def_prop_ro("machine", &DistGraph::machine)
      .def_prop_ro("shared_bytes", &DistGraph::shared_bytes)
      .def_prop_ro("ndata", [](const DistGraph& g) { return tensors_to_py(g.ndata()); })
      .def_prop_ro("edata", [](const DistGraph& g) { return tensors_to_py(g.edata()); })
      .def_prop_ro("orig_nid", [](const DistGraph& g) { return g.orig_nid(); })
      .def_prop_ro("orig_eid", [](const DistGraph& g) { return g.orig_eid(); })
      .def_prop_ro("edge_endpoints", [](const DistGraph& g) { return g.edge_endpoints(); })
      .def_prop_ro("new_nid", [](const DistGraph& g) { return g.new_nid(); });

  m.def(
      "dist_symmetrized_reverse_eids",
      [](const DistGraph& g) {
        std::vector<int64_t> r;
        {
          nb::gil_scoped_release nogil;
          r = dist::symmetrized_reverse_eids(g);
        }
        return vector_to_numpy(std::move(r));
      },
      nb::arg("graph"),
      "reverse_eids (new edge IDs; -1: no reverse) of a partitioning built with symmetrize.");

  m.def(
      "dist_node_split",
      [](const DistTensor& mask, bool force_even, int64_t column, int trainers_per_machine) {
        std::vector<int64_t> ids;
        {
          nb::gil_scoped_release nogil;
          ids = dist::node_split(mask, force_even, column, trainers_per_machine);
        }
        return vector_to_numpy(std::move(ids));
      },
      nb::arg("mask"), nb::arg("force_even") = true, nb::arg("column") = 0,
      nb::arg("trainers_per_machine") = 0,
      "This rank's share of the nodes selected by a mask DistTensor. Collective with "
      "force_even, or with trainers_per_machine > 1 for a mask whose rows its machine's trainers "
      "do not share.");
  m.def(
      "dist_edge_split",
      [](const DistTensor& mask, bool force_even, int64_t column, int trainers_per_machine) {
        std::vector<int64_t> ids;
        {
          nb::gil_scoped_release nogil;
          ids = dist::edge_split(mask, force_even, column, trainers_per_machine);
        }
        return vector_to_numpy(std::move(ids));
      },
      nb::arg("mask"), nb::arg("force_even") = true, nb::arg("column") = 0,
      nb::arg("trainers_per_machine") = 0);

  nb::class_<dist::DistNeighborSampler>(m, "DistNeighborSampler",
                                        "Multi-layer neighbor sampling over a DistGraph.")
      .def(nb::init<const DistGraph&, std::vector<int64_t>, bool, std::string>(), nb::arg("graph"),
           nb::arg("fanouts"), nb::arg("replace") = false, nb::arg("weights_name") = "",
           nb::keep_alive<1, 2>(),
           "weights_name: empty (uniform) or an edge feature of the graph to sample weighted by; "
           "every owner samples its nodes with its own rows of it (ValueError for an unknown "
           "name or bad weights on this rank).")
      .def_prop_ro("fanouts", &dist::DistNeighborSampler::fanouts)
      .def_prop_ro("weights_name", &dist::DistNeighborSampler::weights_name)
      .def(
          "sample_blocks",
          [](const dist::DistNeighborSampler& s, const I64Array& seeds, int64_t seed, int64_t epoch,
             int64_t batch) {
            TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
            std::vector<ops::Block> blocks;
            {
              nb::gil_scoped_release nogil;
              blocks = s.sample_blocks(
                  span_of(seeds), ops::make_rng_key(static_cast<uint64_t>(seed), epoch, batch, 0));
            }
            return blocks_to_py(std::move(blocks));
          },
          nb::arg("seeds"), nb::arg("seed") = 0, nb::arg("epoch") = 0, nb::arg("batch") = 0);

  nb::class_<dist::DistNodeDataLoader> node_loader(m, "DistNodeDataLoader");
  node_loader
      .def(
          "__init__",
          [](dist::DistNodeDataLoader* self, const dist::DistNeighborSampler& sampler,
             const I64Array& seeds, int64_t batch_size, bool shuffle, bool drop_last,
             int num_workers, int prefetch, int64_t seed, bool global_order) {
            const ops::LoaderOptions o =
                loader_options(batch_size, shuffle, drop_last, num_workers, prefetch, seed);
            std::vector<int64_t> s(seeds.data(), seeds.data() + seeds.shape(0));
            nb::gil_scoped_release nogil;
            new (self) dist::DistNodeDataLoader(
                sampler, std::move(s), o,
                global_order ? dist::BatchOrder::kGlobal : dist::BatchOrder::kLocal);
          },
          nb::arg("sampler"), nb::arg("seeds"), nb::arg("batch_size"), nb::arg("shuffle"),
          nb::arg("drop_last"), nb::arg("num_workers"), nb::arg("prefetch"), nb::arg("seed"),
          nb::arg("global_order") = false, nb::keep_alive<1, 2>())
      .def(
          "batch_seeds",
          [](const dist::DistNodeDataLoader& l, int64_t epoch, int64_t b) {
            return vector_to_numpy(l.batch_seeds(epoch, b));
          },
          nb::arg("epoch"), nb::arg("batch"));
  add_loader_methods<dist::DistNodeDataLoader, ops::NodeMiniBatch>(
      node_loader, [](ops::NodeMiniBatch&& b) { return node_batch_to_py(std::move(b)); });

  nb::class_<dist::DistEdgeDataLoader> edge_loader(m, "DistEdgeDataLoader");
  edge_loader
      .def(
          "__init__",
          [](dist::DistEdgeDataLoader* self, const dist::DistNeighborSampler& sampler,
             const I64Array& seed_eids, int64_t batch_size, bool shuffle, bool drop_last,
             int num_workers, int prefetch, int64_t seed, int64_t negatives,
             const std::string& exclude, nb::object reverse_eids, bool global_order) {
            const ops::LoaderOptions o =
                loader_options(batch_size, shuffle, drop_last, num_workers, prefetch, seed);
            ops::EdgeLoaderOptions eo;
            eo.negatives = negatives;
            eo.exclude = parse_exclude(exclude);
            if (!reverse_eids.is_none()) {
              const auto r = nb::cast<I64Array>(reverse_eids);
              eo.reverse_eids.assign(r.data(), r.data() + r.shape(0));
            }
            std::vector<int64_t> s(seed_eids.data(), seed_eids.data() + seed_eids.shape(0));
            nb::gil_scoped_release nogil;
            new (self) dist::DistEdgeDataLoader(
                sampler, std::move(s), o, std::move(eo),
                global_order ? dist::BatchOrder::kGlobal : dist::BatchOrder::kLocal);
          },
          nb::arg("sampler"), nb::arg("seed_eids"), nb::arg("batch_size"), nb::arg("shuffle"),
          nb::arg("drop_last"), nb::arg("num_workers"), nb::arg("prefetch"), nb::arg("seed"),
          nb::arg("negatives") = 0, nb::arg("exclude") = "none",
          nb::arg("reverse_eids") = nb::none(), nb::arg("global_order") = false,
          nb::keep_alive<1, 2>(),
          "Collective. seed_eids: new edge IDs (this rank's share, or with global_order the same "
          "set on every rank); reverse_eids: per new edge ID, its reverse or -1.")
      .def(
          "batch_eids",
          [](const dist::DistEdgeDataLoader& l, int64_t epoch, int64_t b) {
            return vector_to_numpy(l.batch_eids(epoch, b));
          },
          nb::arg("epoch"), nb::arg("batch"));
  add_loader_methods<dist::DistEdgeDataLoader, ops::EdgeMiniBatch>(
      edge_loader, [](ops::EdgeMiniBatch&& b) { return edge_batch_to_py(std::move(b)); });

  m.def(
      "even_offsets",
      [](int64_t rows, int world) { return dist::PartPolicy::even(rows, world).offsets; },
      nb::arg("rows"), nb::arg("world"),
      "Row ownership of the 'even' policy: world + 1 offsets, range sizes differing by at most "
      "one.");
  m.def("sanitized_tensor_name", &dist::sanitized_tensor_name, nb::arg("name"),
        "The file-name form of a DistTensor name that save_dist_tensor uses.");
  m.def(
      "save_dist_tensor",
      [](const DistTensor& t, const std::string& dir) {
        nb::gil_scoped_release nogil;
        dist::save_dist_tensor(t, dir);
      },
      nb::arg("tensor"), nb::arg("dir"),
      "Every rank writes its rows to dir (atomically); rank 0 the JSON. Collective.");
  m.def(
      "load_dist_tensor",
      [](DistTensor& t, const std::string& dir) {
        nb::gil_scoped_release nogil;
        dist::load_dist_tensor(t, dir);
      },
      nb::arg("tensor"), nb::arg("dir"),
      "Reads what save_dist_tensor wrote into the tensor (same shape, dtype and row ranges), "
      "all ranks or none. Collective.");

  using dist::SparseOptimizer;
  nb::class_<SparseOptimizer>(m, "SparseOptimizer",
                              "SparseAdagrad / SparseAdam over a float32 [N, dim] DistTensor: "
                              "gradients pushed to the rows' owners and applied there.")
      .def_static(
          "adagrad",
          [](const DistTensor& emb, double lr, double eps, double init) {
            dist::SparseAdagradOptions o;
            o.lr = lr;
            o.eps = eps;
            o.initial_accumulator_value = init;
            nb::gil_scoped_release nogil;
            return SparseOptimizer::adagrad(emb, o);
          },
          nb::arg("embedding"), nb::arg("lr") = 0.01, nb::arg("eps") = 1e-10,
          nb::arg("initial_accumulator_value") = 0.0)
      .def_static(
          "adam",
          [](const DistTensor& emb, double lr, double beta1, double beta2, double eps) {
            dist::SparseAdamOptions o;
            o.lr = lr;
            o.beta1 = beta1;
            o.beta2 = beta2;
            o.eps = eps;
            nb::gil_scoped_release nogil;
            return SparseOptimizer::adam(emb, o);
          },
          nb::arg("embedding"), nb::arg("lr") = 0.001, nb::arg("beta1") = 0.9,
          nb::arg("beta2") = 0.999, nb::arg("eps") = 1e-8)
      .def(
          "step",
          [](SparseOptimizer& o, const I64Array& ids,
             const nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>& grads) {
            const int64_t dim = o.embedding().shape().size() == 2 ? o.embedding().shape()[1] : 0;
            TESSERA_EXPECTS(
                grads.shape(0) == ids.shape(0) && static_cast<int64_t>(grads.shape(1)) == dim,
                ValueError,
                "SparseOptimizer '{}' step: gradients of shape [{}, {}] for {} IDs "
                "of a [N, {}] embedding",
                o.embedding().name(), grads.shape(0), grads.shape(1), ids.shape(0), dim);
            const float* g = grads.data();
            nb::gil_scoped_release nogil;
            o.step(span_of(ids), g);
          },
          nb::arg("ids"), nb::arg("grads"),
          "Collective: this rank's gradient rows (float32 [len(ids), dim]; repeats summed).")
      .def_prop_rw("lr", &SparseOptimizer::lr, &SparseOptimizer::set_lr)
      .def_prop_ro("num_steps", &SparseOptimizer::num_steps)
      .def_prop_ro("kind",
                   [](const SparseOptimizer& o) {
                     return o.kind() == SparseOptimizer::Kind::kAdam ? "adam" : "adagrad";
                   })
      .def_prop_ro("embedding", [](const SparseOptimizer& o) { return o.embedding(); })
      .def_prop_ro("state_tensors", [](const SparseOptimizer& o) { return o.state_tensors(); })
      .def(
          "save",
          [](const SparseOptimizer& o, const std::string& dir) {
            nb::gil_scoped_release nogil;
            o.save(dir);
          },
          nb::arg("dir"))
      .def(
          "load",
          [](SparseOptimizer& o, const std::string& dir) {
            nb::gil_scoped_release nogil;
            o.load(dir);
          },
          nb::arg("dir"));

  nb::class_<dist::UpdateAllPlan>(m, "UpdateAllPlan",
                                  "This rank's part of update_all over a DistGraph (its owned "
                                  "rows' in-edges and the remote sources they read).")
      .def(nb::init<const DistGraph&>(), nb::arg("graph"), nb::keep_alive<1, 2>())
      .def(
          "run",
          [](const dist::UpdateAllPlan& p, const DistTensor& x, const std::string& message,
             const std::string& reduce, const DistTensor* edge_weight,
             const std::string& out_name) {
            dist::UpdateAllOptions o;
            o.message = dist::parse_message(message);
            o.reduce = dist::parse_aggregate(reduce);
            o.edge_weight = edge_weight;
            o.out_name = out_name;
            nb::gil_scoped_release nogil;
            return p.run(x, o);
          },
          nb::arg("x"), nb::arg("message") = "copy_src", nb::arg("reduce") = "sum",
          nb::arg("edge_weight").none() = nb::none(), nb::arg("out_name") = "",
          "The aggregation as a new DistTensor. Collective.")
      .def_prop_ro("num_owned", &dist::UpdateAllPlan::num_owned)
      .def_prop_ro("num_edges", &dist::UpdateAllPlan::num_edges)
      .def_prop_ro("remote_ids", [](const dist::UpdateAllPlan& p) {
        return vector_to_numpy(std::vector<int64_t>(p.remote_ids()));
      });

  m.def(
      "launch",
      [](std::vector<std::string> command, int nproc_per_node, int nnodes, int node_rank,
         const std::string& master_addr, int master_port, bool prefix_output, double grace_s,
         const std::string& token_file) {
        transport::LaunchOptions o;
        o.command = std::move(command);
        o.nproc_per_node = nproc_per_node;
        o.nnodes = nnodes;
        o.node_rank = node_rank;
        o.master_addr = master_addr;
        o.master_port = master_port;
        o.prefix_output = prefix_output;
        o.grace_s = grace_s;
        o.token_file = token_file;
        nb::gil_scoped_release nogil;
        return transport::launch(o);
      },
      nb::arg("command"), nb::arg("nproc_per_node") = 1, nb::arg("nnodes") = 1,
      nb::arg("node_rank") = 0, nb::arg("master_addr") = "127.0.0.1", nb::arg("master_port") = 0,
      nb::arg("prefix_output") = true, nb::arg("grace_s") = 5.0, nb::arg("token_file") = "",
      "Runs `command` once per local rank with the rendezvous environment set (tessera "
      "launch); returns the first failing rank's exit code, else 0. `grace_s`: seconds "
      "between SIGTERM and SIGKILL when stopping the ranks. The job token comes from "
      "`token_file` (tessera launch --token-file), else TESSERA_JOB_TOKEN or "
      "TESSERA_JOB_TOKEN_FILE, else is made (single node).");
}

}  // namespace tessera::python
