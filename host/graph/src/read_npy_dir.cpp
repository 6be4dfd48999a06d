// SPDX-License-Identifier: Apache-2.0
// Reader for npy dataset folders (edge_index.npy + node arrays + meta.json).
#include <algorithm>
#include <cstring>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"

namespace tessera {

namespace fs = std::filesystem;

namespace {

// The largest node count meta.json may declare: far above any real graph, far below what would
// overflow the arrays sized from it.
constexpr uint64_t kMaxMetaNodes = uint64_t{1} << 40;

bool is_mask_name(const std::string& n) {
  return n.size() > 5 && n.compare(n.size() - 5, 5, "_mask") == 0;
}

// [S, N] -> [N, S] (masks with several fixed splits are stored split-major).
Array transpose2d(const Array& a) {
  const int64_t r = a.dim(0), c = a.dim(1);
  Array out = Array::zeros(a.dtype(), {c, r});
  const size_t es = dtype_size(a.dtype());
  const auto* src = static_cast<const char*>(a.raw());
  auto* dst = static_cast<char*>(out.raw_mut());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      std::memcpy(dst + (j * r + i) * es, src + (i * c + j) * es, es);
  return out;
}

}  // namespace

Dataset read_npy_dir(const fs::path& dir, const ReadOptions& opts) {
  TESSERA_EXPECTS(fs::is_directory(dir), IOError, "{}: not a folder", dir.string());
  Dataset ds;
  ds.format = "npy";
  ds.name = fs::absolute(dir).lexically_normal().filename().string();
  if (ds.name.empty()) ds.name = "graph";

  const fs::path meta_path = dir / "meta.json";
  if (fs::exists(meta_path)) {
    std::ifstream in(meta_path);
    try {
      ds.meta = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      TESSERA_FAIL(ValueError, "{}: malformed JSON: {}", meta_path.string(), e.what());
    }
    TESSERA_EXPECTS(ds.meta.is_object(), ValueError, "{}: expected a JSON object",
                    meta_path.string());
  }

  const fs::path ei_path = dir / "edge_index.npy";
  TESSERA_EXPECTS(fs::exists(ei_path), IOError, "{}: missing edge_index.npy", dir.string());
  {
    const Array ei = read_npy(ei_path);
    TESSERA_EXPECTS(dtype_is_integer(ei.dtype()), TypeError,
                    "{}: edge_index must be an integer array, got {}", ei_path.string(),
                    dtype_name(ei.dtype()));
    TESSERA_EXPECTS(ei.ndim() == 2 && ei.dim(0) == 2, ValueError,
                    "{}: edge_index must have shape [2, E], got {}", ei_path.string(),
                    ei.shape_str());
    std::vector<int64_t> flat = ei.to_int64_vector(ei_path.string());
    const int64_t e = ei.dim(1);
    ds.edges.src.assign(flat.begin(), flat.begin() + e);
    ds.edges.dst.assign(flat.begin() + e, flat.end());
  }

  // Node count: meta.json num_nodes, else the rows of feat/label, else max ID + 1.
  int64_t n = -1;
  if (ds.meta.contains("num_nodes")) {
    const nlohmann::json& v = ds.meta["num_nodes"];
    TESSERA_EXPECTS(v.is_number_integer(), ValueError,
                    "{}: num_nodes must be a whole number, got {}", meta_path.string(), v.dump());
    TESSERA_EXPECTS(v.is_number_unsigned() && v.get<uint64_t>() <= kMaxMetaNodes, ValueError,
                    "{}: num_nodes {} is outside [0, 2^40]", meta_path.string(), v.dump());
    n = v.get<int64_t>();
  }
  std::vector<fs::path> arrays;
  for (const auto& ent : fs::directory_iterator(dir)) {
    const fs::path p = ent.path();
    if (p.extension() != ".npy" || p.filename() == "edge_index.npy") continue;
    arrays.push_back(p);
  }
  std::sort(arrays.begin(), arrays.end());
  std::map<std::string, NpyHeader> headers;
  for (const auto& p : arrays)
    headers[p.stem().string()] = read_npy_header(p);
  for (const char* key : {"feat", "label"}) {
    auto it = headers.find(key);
    if (n < 0 && it != headers.end() && !it->second.shape.empty()) n = it->second.shape[0];
  }
  if (n < 0) {
    int64_t mx = -1;
    for (int64_t v : ds.edges.src)
      mx = std::max(mx, v);
    for (int64_t v : ds.edges.dst)
      mx = std::max(mx, v);
    n = mx + 1;
  }
  ds.edges.num_nodes = n;

  for (const auto& p : arrays) {
    const std::string key = p.stem().string();
    const NpyHeader& h = headers[key];
    const bool standard = key == "feat" || key == "label" || is_mask_name(key);
    if (!standard && opts.npy_strict) continue;
    TESSERA_EXPECTS(!h.shape.empty(), ValueError, "{}: a node array cannot be a scalar",
                    p.string());
    if (is_mask_name(key)) {
      TESSERA_EXPECTS(h.dtype == DType::kBool || dtype_is_integer(h.dtype), TypeError,
                      "{}: a mask must be bool or integer, got {}", p.string(),
                      dtype_name(h.dtype));
    }
    if (is_mask_name(key) && h.shape.size() == 2 && h.shape[1] == n && h.shape[0] != n) {
      ds.ndata[key] = transpose2d(read_npy(p));  // [S, N] -> [N, S]
      continue;
    }
    TESSERA_EXPECTS(h.shape[0] == n, ValueError, "{}: has {} rows, but the graph has {} nodes",
                    p.string(), h.shape[0], n);
    if (key == "label")
      TESSERA_EXPECTS(dtype_is_integer(h.dtype), TypeError, "{}: labels must be integers, got {}",
                      p.string(), dtype_name(h.dtype));
    ds.ndata[key] = read_npy(p);
  }
  return ds;
}

}  // namespace tessera
