// SPDX-License-Identifier: Apache-2.0
// The GPU training path (host/distributed device_sampling / device_loader): device placement of a
// DistGraph, its GPU sampler, and the device node loader whose batches reach Python as torch CUDA
// tensors over DLPack without a copy. A batch's tensors keep its C++ memory alive; when the last
// one goes, the memory returns to the loader's stream after the consumer stream's queued work.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/dist/device_loader.hpp"
#include "tessera/dist/device_sampling.hpp"
#include "tessera/dist/graph.hpp"

namespace tessera::python {

namespace {

using dist::DeviceMiniBatch;
using dist::DistDeviceNodeLoader;
using dist::DistDeviceSampler;
using dist::DistGraph;
using dist::DistTensor;

using I64 = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// A torch CUDA tensor over `bytes` of device memory at `data`, viewed as [rows, bytes / rows]
/// uint8 (Python views it with the right dtype), kept alive by `owner`; None when empty.
nb::object device_bytes(const void* data, int64_t rows, int64_t row_bytes, int device,
                        nb::handle owner) {
  if (rows == 0 || row_bytes == 0 || data == nullptr) return nb::none();
  size_t shape[2] = {static_cast<size_t>(rows), static_cast<size_t>(row_bytes)};
  nb::ndarray<nb::pytorch, uint8_t> a(const_cast<void*>(data), 2, shape, owner, nullptr,
                                      nb::dtype<uint8_t>(), nb::device::cuda::value, device);
  return nb::cast(a, nb::rv_policy::reference);
}

/// A torch CUDA int64 vector of `n` elements at `data` kept alive by `owner`; None when empty.
nb::object device_i64(const void* data, int64_t n, int device, nb::handle owner) {
  if (n == 0 || data == nullptr) return nb::none();
  size_t shape[1] = {static_cast<size_t>(n)};
  nb::ndarray<nb::pytorch, int64_t> a(const_cast<void*>(data), 1, shape, owner, nullptr,
                                      nb::dtype<int64_t>(), nb::device::cuda::value, device);
  return nb::cast(a, nb::rv_policy::reference);
}

nb::object hand_out(DeviceMiniBatch&& mb, uintptr_t consumer) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a cudaStream_t from Python
  mb.release_after(reinterpret_cast<cuda::StreamHandle>(consumer));
  return nb::cast(std::move(mb), nb::rv_policy::move);
}

}  // namespace

void bind_device(nb::module_& m) {
  m.def(
      "place_on_device",
      [](const DistGraph& g, const std::vector<std::string>& node_data, int64_t gpu_budget,
         bool weighted) {
        dist::DevicePlacement p;
        {
          nb::gil_scoped_release nogil;
          p = dist::place_on_device(g, node_data, gpu_budget, weighted);
        }
        nb::dict d;
        d["structure"] = cuda::placement_name(p.structure);
        d["weighted"] = p.weighted;
        d["structure_bytes"] = p.structure_bytes;
        nb::list ts;
        for (const auto& t : p.tensors) {
          nb::dict e;
          e["name"] = t.name;
          e["placement"] = cuda::placement_name(t.placement);
          e["bytes"] = t.bytes;
          e["cache_rows"] = t.cache_rows;
          ts.append(e);
        }
        d["tensors"] = ts;
        d["gpu_budget_bytes"] = p.gpu_budget_bytes;
        d["gpu_bytes"] = p.gpu_bytes;
        d["gpu_bytes_left"] = p.gpu_bytes_left;
        d["pinned_bytes"] = p.pinned_bytes;
        d["seconds"] = p.seconds;
        d["describe"] = p.describe();
        return d;
      },
      nb::arg("graph"), nb::arg("node_data"), nb::arg("gpu_budget") = -1,
      nb::arg("weighted") = false,
      "Places this rank's DistGraph for the GPU path within `gpu_budget` bytes (negative: half "
      "the free device memory): mirrors the node data and says where the sampling structure "
      "goes (create the DistDeviceSampler with it). Not collective.");

  nb::class_<DistDeviceSampler>(m, "DistDeviceSampler",
                                "Multi-layer neighbor sampling over a DistGraph on this rank's "
                                "GPU; blocks equal DistNeighborSampler's bit for bit.")
      .def(
          "__init__",
          [](DistDeviceSampler* self, const DistGraph& g, std::vector<int64_t> fanouts,
             bool replace, const std::string& placement, const std::string& weights_name) {
            const cuda::Placement p = cuda::parse_placement(placement, "structure placement");
            nb::gil_scoped_release nogil;
            new (self) DistDeviceSampler(g, std::move(fanouts), replace, p, weights_name);
          },
          nb::arg("graph"), nb::arg("fanouts"), nb::arg("replace") = false,
          nb::arg("placement") = "gpu", nb::arg("weights_name") = "", nb::keep_alive<1, 2>())
      .def_prop_ro("fanouts", &DistDeviceSampler::fanouts)
      .def_prop_ro("weights_name", &DistDeviceSampler::weights_name)
      .def_prop_ro("placement",
                   [](const DistDeviceSampler& s) { return cuda::placement_name(s.placement()); })
      .def_prop_ro("bytes", &DistDeviceSampler::bytes)
      .def_prop_ro("device", &DistDeviceSampler::device)
      .def(
          "sample_blocks",
          [](const DistDeviceSampler& s, const I64& seeds, int64_t seed, int64_t epoch,
             int64_t batch) {
            TESSERA_EXPECTS(seed >= 0, ValueError, "seed must be in [0, 2^32), got {}", seed);
            std::vector<ops::Block> blocks;
            {
              nb::gil_scoped_release nogil;
              blocks = s.sample_blocks_host(
                  ops::Span<const int64_t>(seeds.data(), static_cast<int64_t>(seeds.shape(0))),
                  ops::make_rng_key(static_cast<uint64_t>(seed), epoch, batch, 0));
            }
            return blocks_to_py(std::move(blocks));
          },
          nb::arg("seeds"), nb::arg("seed") = 0, nb::arg("epoch") = 0, nb::arg("batch") = 0,
          "Host seeds in, host blocks out (for checks; the loader keeps batches on the GPU).");

  nb::class_<DeviceMiniBatch>(m, "DeviceBatch",
                              "One mini-batch in device memory. Its arrays are torch CUDA "
                              "tensors sharing the batch's memory.")
      .def_ro("epoch", &DeviceMiniBatch::epoch)
      .def_ro("index", &DeviceMiniBatch::index)
      .def_ro("device", &DeviceMiniBatch::device)
      .def_ro("sample_seconds", &DeviceMiniBatch::sample_seconds)
      .def_ro("gather_seconds", &DeviceMiniBatch::gather_seconds)
      .def_prop_ro("sampled_edges",
                   [](const DeviceMiniBatch& b) { return b.blocks.stats.sampled_edges; })
      .def_prop_ro("num_blocks", [](const DeviceMiniBatch& b) { return b.blocks.blocks.size(); })
      .def_prop_ro("num_seeds",
                   [](const DeviceMiniBatch& b) { return static_cast<int64_t>(b.seeds.size()); })
      .def_prop_ro("num_input_nodes", &DeviceMiniBatch::num_input_nodes)
      .def(
          "seeds_host",
          [](nb::pointer_and_handle<DeviceMiniBatch> ph) {
            const DeviceMiniBatch& b = *ph.p;
            const nb::handle self = ph.h;
            return view_numpy(b.seeds.data(), b.seeds.size(), self);
          },
          "The seeds as a NumPy view (host copy).")
      .def(
          "seeds",
          [](nb::pointer_and_handle<DeviceMiniBatch> ph) {
            const DeviceMiniBatch& b = *ph.p;
            const nb::handle self = ph.h;
            return device_i64(b.d_seeds ? b.d_seeds->data() : nullptr,
                              static_cast<int64_t>(b.seeds.size()), b.device, self);
          },
          "The seeds on the device (None when empty).")
      .def(
          "block",
          [](nb::pointer_and_handle<DeviceMiniBatch> ph, size_t l) {
            const DeviceMiniBatch& b = *ph.p;
            const nb::handle self = ph.h;
            TESSERA_EXPECTS(l < b.blocks.blocks.size(), IndexError, "block {} of {}", l,
                            b.blocks.blocks.size());
            const cuda::DeviceBlock& d = b.blocks.blocks[l];
            nb::dict out;
            out["num_src"] = d.num_src;
            out["num_dst"] = d.num_dst;
            out["num_edges"] = d.num_edges;
            out["src"] = device_i64(d.src_ptr(), d.num_edges, b.device, self);
            out["dst"] = device_i64(d.dst_ptr(), d.num_edges, b.device, self);
            out["src_nodes"] = device_i64(d.src_nodes_ptr(), d.num_src, b.device, self);
            out["eids"] = device_i64(d.eids_ptr(), d.num_edges, b.device, self);
            if (l < b.indptr.size()) {
              out["indptr"] = device_i64(b.indptr[l]->data(), d.num_dst + 1, b.device, self);
            }
            return out;
          },
          nb::arg("layer"),
          "Block `layer` (input layer first): counts and CUDA int64 tensors (None when empty), "
          "with `indptr`, the CSR offsets of the destination nodes (num_dst + 1).")
      .def(
          "node_rows",
          [](nb::pointer_and_handle<DeviceMiniBatch> ph, size_t i, int64_t row_bytes) {
            const DeviceMiniBatch& b = *ph.p;
            const nb::handle self = ph.h;
            TESSERA_EXPECTS(i < b.node_rows.size(), IndexError, "node data {} of {}", i,
                            b.node_rows.size());
            return device_bytes(b.node_rows[i]->data(), b.num_input_nodes(), row_bytes, b.device,
                                self);
          },
          nb::arg("i"), nb::arg("row_bytes"),
          "Rows of prefetched node tensor `i` for the input nodes, as uint8 [n, row_bytes].")
      .def(
          "label_rows",
          [](nb::pointer_and_handle<DeviceMiniBatch> ph, size_t i, int64_t row_bytes) {
            const DeviceMiniBatch& b = *ph.p;
            const nb::handle self = ph.h;
            TESSERA_EXPECTS(i < b.label_rows.size(), IndexError, "label {} of {}", i,
                            b.label_rows.size());
            return device_bytes(b.label_rows[i]->data(), static_cast<int64_t>(b.seeds.size()),
                                row_bytes, b.device, self);
          },
          nb::arg("i"), nb::arg("row_bytes"),
          "Rows of label tensor `i` for the seeds, as uint8 [n, row_bytes].");

  nb::class_<DistDeviceNodeLoader>(m, "DistDeviceNodeLoader",
                                   "DistNodeDataLoader whose batches are prepared in device "
                                   "memory on the loader's own streams.")
      .def(
          "__init__",
          [](DistDeviceNodeLoader* self, const DistDeviceSampler& sampler, const I64& seeds,
             int64_t batch_size, bool shuffle, bool drop_last, int num_workers, int prefetch,
             int64_t seed, bool global_order, std::vector<DistTensor> node_data,
             std::vector<DistTensor> labels) {
            const ops::LoaderOptions o =
                loader_options(batch_size, shuffle, drop_last, num_workers, prefetch, seed);
            std::vector<int64_t> s(seeds.data(), seeds.data() + seeds.shape(0));
            nb::gil_scoped_release nogil;
            new (self) DistDeviceNodeLoader(
                sampler, std::move(s), o,
                global_order ? dist::BatchOrder::kGlobal : dist::BatchOrder::kLocal,
                std::move(node_data), std::move(labels));
          },
          nb::arg("sampler"), nb::arg("seeds"), nb::arg("batch_size"), nb::arg("shuffle"),
          nb::arg("drop_last"), nb::arg("num_workers"), nb::arg("prefetch"), nb::arg("seed"),
          nb::arg("global_order") = false, nb::arg("node_data") = std::vector<DistTensor>{},
          nb::arg("labels") = std::vector<DistTensor>{}, nb::keep_alive<1, 2>())
      .def_prop_ro("num_batches", &DistDeviceNodeLoader::num_batches)
      .def_prop_ro("num_global_batches", &DistDeviceNodeLoader::num_global_batches)
      .def("global_batch_index", &DistDeviceNodeLoader::global_batch_index, nb::arg("b"))
      .def(
          "batch_seeds",
          [](const DistDeviceNodeLoader& l, int64_t epoch, int64_t b) {
            return vector_to_numpy(l.batch_seeds(epoch, b));
          },
          nb::arg("epoch"), nb::arg("batch"))
      .def("start_epoch", &DistDeviceNodeLoader::start_epoch, nb::arg("epoch"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("stop", &DistDeviceNodeLoader::stop, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "sample_batch",
          [](const DistDeviceNodeLoader& l, int64_t epoch, int64_t b, uintptr_t consumer) {
            DeviceMiniBatch mb;
            {
              nb::gil_scoped_release nogil;
              mb = l.sample_batch(epoch, b, 0);
            }
            return hand_out(std::move(mb), consumer);
          },
          nb::arg("epoch"), nb::arg("batch"), nb::arg("consumer_stream") = 0)
      .def(
          "next",
          [](DistDeviceNodeLoader& l, uintptr_t consumer) -> nb::object {
            DeviceMiniBatch mb;
            bool ok = false, raised = false;
            {
              nb::gil_scoped_release nogil;
              ok = l.next(mb, [&raised] {
                nb::gil_scoped_acquire gil;
                raised = PyErr_CheckSignals() != 0;
                return raised;
              });
            }
            if (raised) throw nb::python_error();
            if (!ok) return nb::none();
            return hand_out(std::move(mb), consumer);
          },
          nb::arg("consumer_stream") = 0,
          "The next batch (None at the end of the epoch). Its memory is reused only after the "
          "work enqueued on `consumer_stream` (a cudaStream_t as an integer) when its last tensor "
          "is freed.");
}

}  // namespace tessera::python
