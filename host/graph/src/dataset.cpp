// SPDX-License-Identifier: Apache-2.0
#include "tessera/graph/dataset.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/sha256.hpp"
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
  // Labels are class indices or -1 (unlabelled), whichever reader made them (the OGB reader
  // checks as it parses; npy files and arrays from Python are checked here).
  const auto label = ds.ndata.find("label");
  if (label != ds.ndata.end() && label->second.numel() > 0) {
    const Array& a = label->second;
    int64_t low = 0, at = 0;  // the smallest signed label and its element, read in place
    auto scan = [&](const auto* v) {
      const auto* m = std::min_element(v, v + a.numel());
      // NOLINTNEXTLINE(bugprone-signed-char-misuse): int8 labels are numbers, not characters
      low = static_cast<int64_t>(*m);
      at = m - v;
    };
    switch (a.dtype()) {  // unsigned labels are never below -1; floats are not class indices
      case DType::kInt8:
        scan(a.data<int8_t>());
        break;
      case DType::kInt16:
        scan(a.data<int16_t>());
        break;
      case DType::kInt32:
        scan(a.data<int32_t>());
        break;
      case DType::kInt64:
        scan(a.data<int64_t>());
        break;
      default:
        break;
    }
    TESSERA_EXPECTS(low >= -1, ValueError,
                    "{}: node array 'label' holds {} in row {} (labels are class indices >= 0, "
                    "or -1 for an unlabelled node)",
                    ds.name, low, at / (a.numel() / a.rows()));
  }
  for (const auto& [k, a] : ds.edata)
    TESSERA_EXPECTS(a.rows() == ds.num_input_edges, ValueError,
                    "{}: edge array '{}' has {} rows but the graph has {} edges", ds.name, k,
                    a.rows(), ds.num_input_edges);
  ds.graph = build_csc(std::move(ds.edges), opts, ds.name);
  ds.build = opts;
  ds.finalized = true;
}

namespace {

// meta[key] when it is a boolean.
std::optional<bool> flag(const nlohmann::json& meta, const char* key) {
  const auto it = meta.find(key);
  if (it == meta.end() || !it->is_boolean()) {
    return std::nullopt;
  }
  return it->get<bool>();
}

}  // namespace

EdgeStorage edge_storage(const nlohmann::json& meta) {
  if (!meta.is_object()) {
    return EdgeStorage::kUnknown;
  }
  const std::optional<bool> symmetrized = flag(meta, "symmetrized");
  if (symmetrized == true) {
    return EdgeStorage::kBothDirections;
  }
  if (const auto directed = flag(meta, "directed")) {
    return *directed ? EdgeStorage::kDirected : EdgeStorage::kUndirectedOnce;
  }
  if (const auto undirected = flag(meta, "undirected")) {
    return *undirected ? EdgeStorage::kUndirectedOnce : EdgeStorage::kDirected;
  }
  const auto edges = meta.find("edges");
  if (edges != meta.end() && edges->is_string()) {
    const std::string note = edges->get<std::string>();
    if (note.find("undirected edge is stored once") != std::string::npos ||
        note.find("symmetrize") != std::string::npos) {
      return EdgeStorage::kUndirectedOnce;
    }
  }
  if (symmetrized == false) {
    return EdgeStorage::kDirected;
  }
  return EdgeStorage::kUnknown;
}

const char* edge_storage_name(EdgeStorage s) {
  switch (s) {
    case EdgeStorage::kUnknown:
      return "unknown";
    case EdgeStorage::kDirected:
      return "directed";
    case EdgeStorage::kUndirectedOnce:
      return "undirected, each pair stored once";
    case EdgeStorage::kBothDirections:
      return "both directions stored";
  }
  return "?";
}

std::string dataset_fingerprint(const fs::path& path) {
  std::vector<std::string> lines;
  auto add = [&](const fs::path& file, const std::string& rel) {
    struct stat st {};
    TESSERA_EXPECTS(::stat(file.c_str(), &st) == 0, IOError, "{}: cannot stat: {}", file.string(),
                    std::strerror(errno));
    const int64_t ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    lines.push_back(fmt::format("{}\t{}\t{}\n", rel, static_cast<int64_t>(st.st_size), ns));
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
    TESSERA_EXPECTS(!ec, IOError, "{}: cannot list: {}", path.string(), ec.message());
    for (; it != end; it.increment(ec)) {
      TESSERA_EXPECTS(!ec, IOError, "{}: cannot list: {}", path.string(), ec.message());
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) {
          it.disable_recursion_pending();
        }
        continue;
      }
      if (it->is_regular_file(ec)) {
        add(it->path(), it->path().lexically_relative(path).generic_string());
      }
    }
  } else {
    add(path, path.filename().string());
  }
  std::sort(lines.begin(), lines.end());
  Sha256 h;
  for (const std::string& l : lines) {
    h.update(l);
  }
  return to_hex(h.finish());
}

BuildOptions resolve_build_options(const Dataset& ds, const ReadOptions& opts) {
  BuildOptions b = opts.build;
  switch (edge_storage(ds.meta)) {
    case EdgeStorage::kBothDirections:
      b.symmetrize = false;
      break;
    case EdgeStorage::kUndirectedOnce:
      b.symmetrize = b.symmetrize || opts.symmetrize_if_undirected;
      break;
    case EdgeStorage::kUnknown:
    case EdgeStorage::kDirected:
      break;
  }
  return b;
}

Dataset read_unfinalized(const fs::path& path, Format format, const ReadOptions& opts) {
  // "rmat:SCALE,EF[,SEED]" generates a graph instead of reading one (format auto only).
  if (format == Format::kAuto && is_rmat_spec(path.string())) {
    return generate_rmat(parse_rmat_spec(path.string()));
  }
  Dataset ds;
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
  return ds;
}

Dataset read_dataset(const fs::path& path, Format format, const ReadOptions& opts) {
  Dataset ds = read_unfinalized(path, format, opts);
  finalize(ds, resolve_build_options(ds, opts));
  return ds;
}

}  // namespace tessera
