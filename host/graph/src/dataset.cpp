#include "tessera/graph/dataset.hpp"

#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/graph/rmat.hpp"

namespace tessera {

namespace fs = std::filesystem;

Format parse_format(const std::string& s) {
  if (s == "auto") return Format::kAuto;
  if (s == "npy") return Format::kNpy;
  if (s == "ogb") return Format::kOgb;
  if (s == "snap") return Format::kSnap;
  if (s == "metis") return Format::kMetis;
  if (s == "mtx") return Format::kMtx;
  TESSERA_FAIL(ValueError, "unknown format '{}' (expected auto, npy, ogb, snap, metis or mtx)", s);
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kAuto:
      return "auto";
    case Format::kNpy:
      return "npy";
    case Format::kOgb:
      return "ogb";
    case Format::kSnap:
      return "snap";
    case Format::kMetis:
      return "metis";
    case Format::kMtx:
      return "mtx";
  }
  return "?";
}

Format detect_format(const fs::path& path) {
  TESSERA_EXPECTS(fs::exists(path), IOError, "{}: no such file or folder", path.string());
  if (fs::is_directory(path)) {
    if (fs::exists(path / "edge_index.npy")) return Format::kNpy;
    if (fs::exists(path / "raw")) return Format::kOgb;
    TESSERA_FAIL(ValueError,
                 "{}: folder is neither an npy dataset (no edge_index.npy) nor an OGB dataset (no "
                 "raw/); pass --format",
                 path.string());
  }
  std::string name = path.filename().string();
  if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") name.resize(name.size() - 3);
  auto ends = [&](const char* suf) {
    const std::string s(suf);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".graph")) return Format::kMetis;
  if (ends(".mtx")) return Format::kMtx;
  return Format::kSnap;
}

void finalize(Dataset& ds, const BuildOptions& opts) {
  TESSERA_ASSERT(!ds.finalized, "dataset finalized twice");
  ds.num_nodes = ds.edges.num_nodes;
  ds.num_input_edges = ds.edges.num_edges();
  for (const auto& [k, a] : ds.ndata)
    TESSERA_EXPECTS(a.rows() == ds.num_nodes, ValueError,
                    "{}: node array '{}' has {} rows but the graph has {} nodes", ds.name, k,
                    a.rows(), ds.num_nodes);
  for (const auto& [k, a] : ds.edata)
    TESSERA_EXPECTS(a.rows() == ds.num_input_edges, ValueError,
                    "{}: edge array '{}' has {} rows but the graph has {} edges", ds.name, k,
                    a.rows(), ds.num_input_edges);
  ds.graph = build_csc(std::move(ds.edges), opts, ds.name);
  ds.build = opts;
  ds.finalized = true;
}

Dataset read_dataset(const fs::path& path, Format format, const ReadOptions& opts) {
  Dataset ds;
  // "rmat:SCALE,EF[,SEED]" generates a graph instead of reading one (format auto only).
  if (format == Format::kAuto && is_rmat_spec(path.string())) {
    ds = generate_rmat(parse_rmat_spec(path.string()));
    finalize(ds, opts.build);
    return ds;
  }
  if (format == Format::kAuto) format = detect_format(path);
  switch (format) {
    case Format::kNpy:
      ds = read_npy_dir(path, opts);
      break;
    case Format::kOgb:
      ds = read_ogb_dir(path, opts);
      break;
    case Format::kSnap:
      ds = read_snap(path, opts);
      break;
    case Format::kMetis:
      ds = read_metis(path, opts);
      break;
    case Format::kMtx:
      ds = read_mtx(path, opts);
      break;
    case Format::kAuto:
      TESSERA_ASSERT(false, "unreachable");
  }
  finalize(ds, opts.build);
  return ds;
}

}  // namespace tessera
