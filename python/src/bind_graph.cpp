// SPDX-License-Identifier: Apache-2.0
// Graph (CSC) and Dataset: reading datasets, building graphs from arrays, zero-copy views.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/graph/graph.hpp"

namespace tessera::python {

namespace {

BuildOptions build_options(bool symmetrize, bool drop_self_loops, bool deduplicate) {
  BuildOptions b;
  b.symmetrize = symmetrize;
  b.drop_self_loops = drop_self_loops;
  b.deduplicate = deduplicate;
  return b;
}

nb::dict arrays_to_dict(const std::map<std::string, Array>& m) {
  nb::dict d;
  for (const auto& [name, a] : m)
    d[name.c_str()] = to_numpy(a);
  return d;
}

std::map<std::string, Array> dict_to_arrays(const nb::dict& d, const char* what) {
  std::map<std::string, Array> out;
  for (auto [k, v] : d) {
    std::string name = nb::cast<std::string>(k);
    AnyArray a;
    if (!nb::try_cast(v, a))
      TESSERA_FAIL(TypeError, "{}['{}']: expected a C-contiguous CPU array (numpy or torch)", what,
                   name);
    out.emplace(name, array_from_buffer(a, std::string(what) + "['" + name + "']"));
  }
  return out;
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<Graph>(m, "Graph",
                    "Compressed adjacency (CSC: row v lists the sources of v's in-edges).")
      .def(
          "__init__",
          [](Graph* g, const AnyArray& indptr, const AnyArray& indices, nb::object eids) {
            new (g) Graph();
            g->indptr = int64_vector(indptr, "indptr");
            g->indices = int64_vector(indices, "indices");
            if (!eids.is_none()) g->eids = int64_vector(nb::cast<AnyArray>(eids), "eids");
            TESSERA_EXPECTS(!g->indptr.empty(), ValueError,
                            "indptr: needs num_nodes + 1 >= 1 entries, got 0");
            g->num_nodes = static_cast<int64_t>(g->indptr.size()) - 1;
            validate_graph(*g, "Graph");
          },
          nb::arg("indptr"), nb::arg("indices"), nb::arg("eids") = nb::none(),
          "Builds a graph from CSC arrays (copied); validates them.")
      .def_prop_ro("num_nodes", [](const Graph& g) { return g.num_nodes; })
      .def_prop_ro("num_edges", [](const Graph& g) { return g.num_edges(); })
      .def_prop_ro(
          "indptr",
          [](nb::handle self) {
            auto& g = nb::cast<Graph&>(self);
            return view_numpy_readonly(g.indptr.data(), g.indptr.size(), self);
          },
          "int64 [num_nodes + 1] (a read-only view; no copy)")
      .def_prop_ro(
          "indices",
          [](nb::handle self) {
            auto& g = nb::cast<Graph&>(self);
            return view_numpy_readonly(g.indices.data(), g.indices.size(), self);
          },
          "int64 [num_edges] (a read-only view)")
      .def_prop_ro(
          "eids",
          [](nb::handle self) {
            auto& g = nb::cast<Graph&>(self);
            return view_numpy_readonly(g.eids.data(), g.eids.size(), self);
          },
          "int64 [num_edges], or empty for the identity (a read-only view)")
      .def("nbytes", &Graph::nbytes)
      .def(
          "transpose", [](const Graph& g) { return transpose(g); }, "CSC <-> CSR (keeps edge IDs)")
      .def("__repr__", [](const Graph& g) {
        return "Graph(num_nodes=" + std::to_string(g.num_nodes) +
               ", num_edges=" + std::to_string(g.num_edges()) + ")";
      });

  m.def(
      "build_csc",
      [](const AnyArray& src, const AnyArray& dst, int64_t num_nodes, bool symmetrize,
         bool drop_self_loops, bool deduplicate) {
        EdgeList el;
        el.num_nodes = num_nodes;
        el.src = int64_vector(src, "src");
        el.dst = int64_vector(dst, "dst");
        TESSERA_EXPECTS(el.src.size() == el.dst.size(), ValueError,
                        "src and dst differ in length ({} vs {})", el.src.size(), el.dst.size());
        TESSERA_EXPECTS(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got {}", num_nodes);
        nb::gil_scoped_release nogil;
        return build_csc(std::move(el), build_options(symmetrize, drop_self_loops, deduplicate),
                         "edge_index");
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("num_nodes"), nb::arg("symmetrize") = false,
      nb::arg("drop_self_loops") = false, nb::arg("deduplicate") = false,
      "CSC of the edges src[i] -> dst[i]; IndexError for an ID outside [0, num_nodes).");

  nb::class_<Dataset>(m, "Dataset", "A graph with node and edge arrays (finalized: CSC built).")
      .def_rw("name", &Dataset::name)
      .def_ro("format", &Dataset::format)
      .def_ro("num_nodes", &Dataset::num_nodes)
      .def_ro("num_input_edges", &Dataset::num_input_edges)
      .def_prop_ro("num_edges", [](const Dataset& d) { return d.graph.num_edges(); })
      .def_prop_ro(
          "graph", [](Dataset& d) -> Graph& { return d.graph; }, nb::rv_policy::reference_internal)
      .def_prop_ro(
          "ndata", [](const Dataset& d) { return arrays_to_dict(d.ndata); },
          "dict of NumPy views (masks of S splits are [N, S])")
      .def_prop_ro("edata", [](const Dataset& d) { return arrays_to_dict(d.edata); })
      .def_prop_ro("meta_json", [](const Dataset& d) { return d.meta.dump(); })
      .def_prop_ro(
          "edge_storage", [](const Dataset& d) { return edge_storage_name(edge_storage(d.meta)); },
          "what the input says of its edges: 'unknown', 'directed', 'undirected, each pair "
          "stored once' or 'both directions stored'")
      .def_prop_ro("build_options",
                   [](const Dataset& d) {
                     nb::dict o;
                     o["symmetrize"] = d.build.symmetrize;
                     o["drop_self_loops"] = d.build.drop_self_loops;
                     o["deduplicate"] = d.build.deduplicate;
                     return o;
                   })
      .def("__repr__", [](const Dataset& d) {
        return "Dataset(name='" + d.name + "', num_nodes=" + std::to_string(d.num_nodes) +
               ", num_edges=" + std::to_string(d.graph.num_edges()) + ")";
      });

  m.def(
      "read_dataset",
      [](const std::string& path, const std::string& format, std::optional<bool> symmetrize,
         bool drop_self_loops, bool deduplicate, const std::string& ogb_split) {
        ReadOptions ro;
        ro.build = build_options(symmetrize.value_or(false), drop_self_loops, deduplicate);
        ro.symmetrize_if_undirected = !symmetrize.has_value();
        ro.ogb_split = ogb_split;
        const Format f = parse_format(format);
        nb::gil_scoped_release nogil;
        return read_dataset(path, f, ro);
      },
      nb::arg("path"), nb::arg("format") = "auto", nb::arg("symmetrize").none() = nb::none(),
      nb::arg("drop_self_loops") = false, nb::arg("deduplicate") = false, nb::arg("ogb_split") = "",
      "Reads a dataset (npy, ogb, snap, metis, mtx or an rmat: spec) and builds its CSC. "
      "symmetrize None: as the input says (its undirected edges stored once are symmetrized).");

  m.def(
      "dataset_fingerprint",
      [](const std::string& path) {
        nb::gil_scoped_release nogil;
        return dataset_fingerprint(path);
      },
      nb::arg("path"),
      "SHA-256 (hex) of the relative path, size and modification time of every file of a "
      "dataset: what a partitioning records of its source (config's source.fingerprint).");

  m.def(
      "dataset_from_arrays",
      [](const AnyArray& src, const AnyArray& dst, int64_t num_nodes, nb::dict ndata,
         nb::dict edata, const std::string& name, bool symmetrize, bool drop_self_loops,
         bool deduplicate) {
        Dataset ds;
        ds.name = name;
        ds.format = "arrays";
        ds.num_nodes = num_nodes;
        ds.edges.num_nodes = num_nodes;
        ds.edges.src = int64_vector(src, "edge_index[0]");
        ds.edges.dst = int64_vector(dst, "edge_index[1]");
        TESSERA_EXPECTS(ds.edges.src.size() == ds.edges.dst.size(), ValueError,
                        "edge_index: source and destination rows differ in length ({} vs {})",
                        ds.edges.src.size(), ds.edges.dst.size());
        TESSERA_EXPECTS(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got {}", num_nodes);
        ds.num_input_edges = ds.edges.num_edges();
        ds.ndata = dict_to_arrays(ndata, "ndata");
        ds.edata = dict_to_arrays(edata, "edata");
        {
          nb::gil_scoped_release nogil;
          finalize(ds, build_options(symmetrize, drop_self_loops, deduplicate));
        }
        return ds;
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("num_nodes"), nb::arg("ndata"), nb::arg("edata"),
      nb::arg("name") = "graph", nb::arg("symmetrize") = false, nb::arg("drop_self_loops") = false,
      nb::arg("deduplicate") = false,
      "A finalized Dataset from edge arrays and node/edge data (arrays are copied).");
}

}  // namespace tessera::python
