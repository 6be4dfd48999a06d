// SPDX-License-Identifier: Apache-2.0
// Partitioning, the partition config and book, loading one partition, the validator.
#include <algorithm>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/book.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/partition/validate.hpp"

namespace tessera::python {

namespace {

nb::dict arrays_to_dict(const std::map<std::string, Array>& m) {
  nb::dict d;
  for (const auto& [name, a] : m)
    d[name.c_str()] = to_numpy(a);
  return d;
}

// {name: [N] integer array} (non-zero: in the set) as PartitionOptions::balance_sets.
std::vector<std::pair<std::string, std::vector<uint8_t>>> balance_sets_from(const nb::dict& d) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  for (auto [k, v] : d) {
    const std::string name = nb::cast<std::string>(k);
    const std::string what = "balance_sets['" + name + "']";
    AnyArray a;
    if (!nb::try_cast(v, a))
      TESSERA_FAIL(TypeError, "{}: expected a C-contiguous CPU array (numpy or torch)", what);
    const std::vector<int64_t> vals = int64_vector(a, what);
    std::vector<uint8_t> set(vals.size());
    std::transform(vals.begin(), vals.end(), set.begin(), [](int64_t x) { return x != 0; });
    out.emplace_back(name, std::move(set));
  }
  return out;
}

}  // namespace

void bind_partition(nb::module_& m) {
  m.def(
      "partition_dataset",
      [](Dataset& ds, const std::string& out_dir, const std::string& name, int64_t num_parts,
         const std::string& method, std::vector<std::string> balance_masks, bool balance_edges,
         int halo_hops, int64_t seed, int ufactor, bool overwrite, const std::string& source_path,
         bool low_memory, const std::string& node_order, nb::dict balance_sets) {
        PartitionOptions o;
        o.num_parts = num_parts;
        o.method = parse_part_method(method);
        o.balance_masks = std::move(balance_masks);
        o.balance_sets = balance_sets_from(balance_sets);
        o.balance_edges = balance_edges;
        o.halo_hops = halo_hops;
        o.seed = seed;
        o.ufactor = ufactor;
        o.low_memory = low_memory;
        o.node_order = parse_node_order(node_order);
        WriteOptions w;
        w.out_dir = out_dir;
        w.name = name;
        w.overwrite = overwrite;
        w.source_path = source_path;
        PartitionStats st;
        {
          nb::gil_scoped_release nogil;
          PhaseTimer timer("tessera");
          // low_memory consumes the dataset (its CSC is not read back): the Python side passes
          // only datasets it made itself, which nothing else can see.
          st = low_memory ? partition_dataset(std::move(ds), o, w, timer)
                          : partition_dataset(static_cast<const Dataset&>(ds), o, w, timer);
        }
        return std::make_pair(st.to_json().dump(), st.summary());
      },
      nb::arg("dataset"), nb::arg("out_dir"), nb::arg("name"), nb::arg("num_parts"),
      nb::arg("method") = "metis", nb::arg("balance_masks") = std::vector<std::string>{},
      nb::arg("balance_edges") = false, nb::arg("halo_hops") = 1, nb::arg("seed") = -1,
      nb::arg("ufactor") = -1, nb::arg("overwrite") = false, nb::arg("source_path") = "",
      nb::arg("low_memory") = false, nb::arg("node_order") = "degree",
      nb::arg("balance_sets") = nb::dict(),
      "Partitions a finalized dataset and writes <out_dir>/<name>.json and part<p>/ "
      "atomically. Returns (stats as JSON text, summary table). low_memory (METIS only) parks "
      "the CSC on disk during METIS and leaves the dataset's graph empty afterwards. "
      "balance_sets: {name: [N] integer array, non-zero in the set}, node sets to balance that "
      "no node array holds (not written).");

  m.def(
      "validate_partitions",
      [](const std::string& config, const Dataset* original, bool verify_checksums,
         int64_t max_errors) {
        ValidateOptions vo;
        vo.verify_checksums = verify_checksums;
        vo.max_errors = max_errors;
        ValidationReport r;
        {
          nb::gil_scoped_release nogil;
          r = validate_partitions(config, original, vo);
        }
        nb::dict d;
        d["ok"] = r.ok();
        d["errors"] = r.errors;
        d["num_errors"] = r.num_errors;
        d["summary"] = r.summary;
        return d;
      },
      nb::arg("config"), nb::arg("original") = nb::none(), nb::arg("verify_checksums") = true,
      nb::arg("max_errors") = 50,
      "Checks a partitioning against every partition contract (the `tessera validate` "
      "checks); returns {'ok', 'errors', 'num_errors', 'summary'}.");

  m.def(
      "load_partition_config",
      [](const std::string& path) { return config_to_json(load_partition_config(path)).dump(); },
      nb::arg("path"), "Reads and checks a partition config; returns it as JSON text.");

  nb::class_<PartitionBook>(m, "PartitionBook",
                            "Which partition owns a (relabelled) node or edge ID.")
      .def(nb::init<std::vector<int64_t>, std::vector<int64_t>>(), nb::arg("node_offsets"),
           nb::arg("edge_offsets"))
      .def_static("load", &PartitionBook::load, nb::arg("config"))
      .def_prop_ro("num_parts", &PartitionBook::num_parts)
      .def_prop_ro("num_nodes", &PartitionBook::num_nodes)
      .def_prop_ro("num_edges", &PartitionBook::num_edges)
      .def_prop_ro("node_offsets", &PartitionBook::node_offsets)
      .def_prop_ro("edge_offsets", &PartitionBook::edge_offsets)
      .def("node_range", &PartitionBook::node_range, nb::arg("part"))
      .def("edge_range", &PartitionBook::edge_range, nb::arg("part"))
      .def(
          "nid2part",
          [](const PartitionBook& b, const I64Array& ids) {
            std::vector<int32_t> out(ids.shape(0));
            b.nid2part(ids.data(), static_cast<int64_t>(ids.shape(0)), out.data());
            return vector_to_numpy(std::move(out));
          },
          nb::arg("ids"), "Owner of every node ID (int32 array); IndexError when out of range.")
      .def(
          "eid2part",
          [](const PartitionBook& b, const I64Array& ids) {
            std::vector<int32_t> out(ids.shape(0));
            for (size_t i = 0; i < ids.shape(0); ++i)
              out[i] = b.eid2part(ids.data()[i]);
            return vector_to_numpy(std::move(out));
          },
          nb::arg("ids"));

  nb::class_<LocalPartition>(m, "LocalPartition",
                             "One partition as stored on disk (arrays memory-mapped).")
      .def_ro("part_id", &LocalPartition::part_id)
      .def_ro("num_inner_nodes", &LocalPartition::num_inner_nodes)
      .def_ro("num_inner_edges", &LocalPartition::num_inner_edges)
      .def_prop_ro("num_nodes", &LocalPartition::num_nodes)
      .def_prop_ro("num_edges", &LocalPartition::num_edges)
      .def_prop_ro("indptr", [](const LocalPartition& p) { return to_numpy(p.indptr); })
      .def_prop_ro("indices", [](const LocalPartition& p) { return to_numpy(p.indices); })
      .def_prop_ro("eid", [](const LocalPartition& p) { return to_numpy(p.eid); })
      .def_prop_ro("nid", [](const LocalPartition& p) { return to_numpy(p.nid); })
      .def_prop_ro("inner_node", [](const LocalPartition& p) { return to_numpy(p.inner_node); })
      .def_prop_ro("inner_edge", [](const LocalPartition& p) { return to_numpy(p.inner_edge); })
      .def_prop_ro("orig_nid", [](const LocalPartition& p) { return to_numpy(p.orig_nid); })
      .def_prop_ro("orig_eid", [](const LocalPartition& p) { return to_numpy(p.orig_eid); })
      .def_prop_ro("ndata", [](const LocalPartition& p) { return arrays_to_dict(p.ndata); })
      .def_prop_ro("edata", [](const LocalPartition& p) { return arrays_to_dict(p.edata); });

  m.def(
      "is_partition_folder", [](const std::string& dir) { return is_partition_folder(dir); },
      nb::arg("dir"),
      "Whether dir is a part<N>/ folder of .npy files only (what --overwrite may replace).");
  m.def(
      "is_partition_config", [](const std::string& file) { return is_partition_config(file); },
      nb::arg("file"), "Whether file is a .json that reads as a partition config.");

  m.def(
      "load_partition",
      [](const std::string& config, int64_t part, bool mmap, bool verify_checksums) {
        LoadOptions lo;
        lo.mmap = mmap;
        lo.verify_checksums = verify_checksums;
        PartitionConfig c = load_partition_config(config);
        TESSERA_EXPECTS(part >= 0 && part < c.num_parts, IndexError,
                        "{}: partition {} out of range [0, {})", config, part, c.num_parts);
        nb::gil_scoped_release nogil;
        return load_partition(c, part, lo);
      },
      nb::arg("config"), nb::arg("part"), nb::arg("mmap") = true,
      nb::arg("verify_checksums") = true,
      "Loads partition `part` of the partitioning described by `config`; every file is checked "
      "against the size and CRC-32 the config lists unless verify_checksums=False.");
}

}  // namespace tessera::python
