// SPDX-License-Identifier: Apache-2.0
// Reader for OGB node-property dataset folders, the layout ogbn-arxiv/products are shipped in:
//   raw/num-node-list.csv.gz   one line: N
//   raw/num-edge-list.csv.gz   one line: E
//   raw/edge.csv.gz            E lines "src,dst" (0-based)
//   raw/node-feat.csv.gz       N lines of F comma-separated floats (optional)
//   raw/node-label.csv.gz      N lines of C labels; empty or NaN means unlabelled (-> -1)
//   raw/edge-feat.csv.gz       E lines of floats (optional) -> edata["feat"]
//   raw/node_<key>.csv.gz      other per-node values (optional; e.g. node_year) -> ndata[key]
//   split/<name>/{train,valid,test}.csv.gz   node IDs, one a line
// Files may also be plain .csv. Every file is streamed through zlib in chunks and parsed in
// place into arrays sized from the counts (N, E, and F from the first row); no file's text is
// ever held whole.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "read_text.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"

namespace tessera {

namespace fs = std::filesystem;
using detail::TextReader;

namespace {

// raw/<base>.csv.gz, else raw/<base>.csv, else empty.
fs::path find_csv(const fs::path& dir, const std::string& base) {
  for (const char* ext : {".csv.gz", ".csv"}) {
    const fs::path p = dir / (base + ext);
    if (fs::exists(p)) return p;
  }
  return {};
}

fs::path need_csv(const fs::path& dir, const std::string& base) {
  fs::path p = find_csv(dir, base);
  TESSERA_EXPECTS(!p.empty(), IOError, "{}: missing {}.csv.gz", dir.string(), base);
  return p;
}

// Reads a headerless CSV file of `rows` rows (-1: any number) with the same number of fields
// on every row (taken from the first row). Calls begin(cols) once before the first cell, then
// cell(in, row, col, token) for every field. Returns the number of rows.
template <typename Begin, typename Cell>
int64_t read_csv(const fs::path& path, int64_t rows, Begin&& begin, Cell&& cell) {
  TextReader in(path);
  const std::string& f = in.name();
  std::unique_ptr<Progress> prog;
  if (in.file_size() > (64 << 20))
    prog =
        std::make_unique<Progress>("reading " + path.filename().string(), in.file_size(), "bytes");
  std::string_view line;
  int64_t cols = -1, r = 0;
  while (in.next_line(line)) {
    const char* p = line.data();
    const char* e = p + line.size();
    if (cols < 0) {
      cols = 1 + std::count(p, e, ',');
      // Every field takes two bytes ("7," or "7\n"): a row count no file of this size can hold
      // is refused before begin() sizes anything from it.
      TESSERA_EXPECTS(rows < 0 || rows <= (detail::text_capacity(in) + 1) / (2 * cols), ValueError,
                      "{}: {} rows of {} fields are more than a file of {} bytes can hold", f, rows,
                      cols, in.file_size());
      begin(cols);
    }
    TESSERA_EXPECTS(rows < 0 || r < rows, ValueError, "{}:{}: more than the {} rows expected", f,
                    in.line_no(), rows);
    int64_t c = 0;
    for (;;) {
      const char* q = static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(e - p)));
      if (!q) q = e;
      TESSERA_EXPECTS(c < cols, ValueError,
                      "{}:{}: ragged row: more than {} comma-separated fields (line 1 has {})", f,
                      in.line_no(), cols, cols);
      cell(in, r, c, detail::trim(std::string_view(p, static_cast<size_t>(q - p))));
      ++c;
      if (q == e) break;
      p = q + 1;
    }
    TESSERA_EXPECTS(c == cols, ValueError,
                    "{}:{}: ragged row: {} comma-separated fields, but line 1 has {}", f,
                    in.line_no(), c, cols);
    ++r;
    if (prog && (r & 0xfff) == 0) prog->update(in.file_offset());
  }
  if (cols < 0) begin(0);
  TESSERA_EXPECTS(rows < 0 || r == rows, ValueError, "{}: has {} rows, expected {}", f, r, rows);
  return r;
}

int64_t read_count(const fs::path& path) {
  int64_t value = -1;
  const int64_t rows = read_csv(
      path, -1,
      [&](int64_t cols) {
        TESSERA_EXPECTS(cols == 1, ValueError, "{}: expected one number a line, got {} fields",
                        path.string(), cols);
      },
      [&](TextReader& in, int64_t r, int64_t, std::string_view tok) {
        int64_t x = 0;
        TESSERA_EXPECTS(detail::parse_int64(tok, x) && x >= 0, ValueError,
                        "{}:{}: count {} is not a non-negative integer", in.name(), in.line_no(),
                        detail::show_token(tok));
        if (r == 0) value = x;
      });
  TESSERA_EXPECTS(rows >= 1, ValueError, "{}: empty file, expected a count", path.string());
  TESSERA_EXPECTS(rows == 1, ValueError,
                  "{}: lists {} graphs; only node-property datasets (one graph) are supported",
                  path.string(), rows);
  return value;
}

// Float matrix [rows, F] from CSV.
Array read_float_matrix(const fs::path& path, int64_t rows) {
  std::vector<float> data;
  int64_t cols = 0;
  read_csv(
      path, rows,
      [&](int64_t c) {
        cols = c;
        data.resize(static_cast<size_t>(rows * c));
      },
      [&](TextReader& in, int64_t r, int64_t c, std::string_view tok) {
        double v = 0;
        TESSERA_EXPECTS(detail::parse_double(tok, v), ValueError,
                        "{}:{}: field {} is not a number: {}", in.name(), in.line_no(), c + 1,
                        detail::show_token(tok));
        data[static_cast<size_t>(r * cols + c)] = static_cast<float>(v);
      });
  return Array::from_vector(std::move(data), {rows, cols});
}

// Labels [N] (one column) or [N, C]; empty or NaN -> -1.
Array read_labels(const fs::path& path, int64_t rows) {
  std::vector<int64_t> data;
  int64_t cols = 0;
  read_csv(
      path, rows,
      [&](int64_t c) {
        cols = c;
        data.resize(static_cast<size_t>(rows * c));
      },
      [&](TextReader& in, int64_t r, int64_t c, std::string_view tok) {
        int64_t x = 0;
        if (!detail::parse_int64(tok, x)) {
          double v = 0;
          if (tok.empty()) {
            x = -1;
          } else {
            TESSERA_EXPECTS(detail::parse_double(tok, v), ValueError,
                            "{}:{}: label {} is not a number", in.name(), in.line_no(),
                            detail::show_token(tok));
            if (std::isnan(v)) {
              x = -1;
            } else {
              TESSERA_EXPECTS(std::floor(v) == v && std::fabs(v) < 9.0e18, ValueError,
                              "{}:{}: label {} is not an integer", in.name(), in.line_no(),
                              detail::show_token(tok));
              x = static_cast<int64_t>(v);
            }
          }
        }
        TESSERA_EXPECTS(x >= -1, ValueError, "{}:{}: negative label {} (only -1 = unlabelled)",
                        in.name(), in.line_no(), x);
        data[static_cast<size_t>(r * cols + c)] = x;
      });
  if (cols == 1) return Array::from_vector(std::move(data), {rows});
  return Array::from_vector(std::move(data), {rows, cols});
}

// Any other per-node file (e.g. ogbn-arxiv's node_year.csv.gz) -> int64 if every value is an
// integer, else float32; [N] for one column, [N, C] otherwise.
Array read_extra_node_array(const fs::path& path, int64_t rows) {
  std::vector<double> data;
  int64_t cols = 0;
  bool integral = true;
  read_csv(
      path, rows,
      [&](int64_t c) {
        cols = c;
        data.resize(static_cast<size_t>(rows * c));
      },
      [&](TextReader& in, int64_t r, int64_t c, std::string_view tok) {
        double v = 0;
        TESSERA_EXPECTS(detail::parse_double(tok, v), ValueError,
                        "{}:{}: field {} is not a number: {}", in.name(), in.line_no(), c + 1,
                        detail::show_token(tok));
        integral = integral && std::floor(v) == v && std::fabs(v) < 9.0e15;
        data[static_cast<size_t>(r * cols + c)] = v;
      });
  std::vector<int64_t> shape = {rows};
  if (cols != 1) shape.push_back(cols);
  if (integral) {
    std::vector<int64_t> out(data.begin(), data.end());
    return Array::from_vector(std::move(out), shape);
  }
  std::vector<float> out(data.begin(), data.end());
  return Array::from_vector(std::move(out), shape);
}

Array read_split(const fs::path& path, int64_t n) {
  Array mask = Array::zeros(DType::kBool, {n});
  auto* m = mask.mut_data<uint8_t>();
  read_csv(
      path, -1,
      [&](int64_t cols) {
        TESSERA_EXPECTS(cols <= 1, ValueError, "{}: expected one node ID a line, got {} fields",
                        path.string(), cols);
      },
      [&](TextReader& in, int64_t, int64_t, std::string_view tok) {
        int64_t x = 0;
        TESSERA_EXPECTS(detail::parse_int64(tok, x), ValueError,
                        "{}:{}: node ID {} is not an integer", in.name(), in.line_no(),
                        detail::show_token(tok));
        TESSERA_EXPECTS(x >= 0 && x < n, IndexError, "{}:{}: node ID {} is outside [0, {})",
                        in.name(), in.line_no(), x, n);
        m[x] = 1;
      });
  return mask;
}

}  // namespace

Dataset read_ogb_dir(const fs::path& dir, const ReadOptions& opts) {
  TESSERA_EXPECTS(fs::is_directory(dir), IOError, "{}: not a folder", dir.string());
  const fs::path raw = dir / "raw";
  TESSERA_EXPECTS(fs::is_directory(raw), IOError, "{}: missing raw/ (not an OGB dataset folder)",
                  dir.string());
  Dataset ds;
  ds.format = "ogb";
  ds.name = fs::absolute(dir).lexically_normal().filename().string();
  if (ds.name.empty())
    ds.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  if (ds.name.empty()) ds.name = "graph";

  // Pick the split before the heavy reading, so a wrong --ogb-split fails fast.
  fs::path split_dir;
  const fs::path splits = dir / "split";
  if (fs::is_directory(splits)) {
    std::vector<std::string> names;
    for (const auto& ent : fs::directory_iterator(splits))
      if (ent.is_directory()) names.push_back(ent.path().filename().string());
    std::sort(names.begin(), names.end());
    std::string list;
    for (const auto& s : names)
      list += (list.empty() ? "" : ", ") + s;
    if (!opts.ogb_split.empty()) {
      TESSERA_EXPECTS(std::find(names.begin(), names.end(), opts.ogb_split) != names.end(),
                      ValueError, "{}: no split named '{}' (available: {})", splits.string(),
                      opts.ogb_split, list.empty() ? "none" : list);
      split_dir = splits / opts.ogb_split;
    } else if (names.size() == 1) {
      split_dir = splits / names[0];
    } else if (names.size() > 1) {
      TESSERA_FAIL(ValueError,
                   "{}: several splits ({}); choose one with the ogb_split option "
                   "(--ogb-split NAME)",
                   splits.string(), list);
    }
  } else {
    TESSERA_EXPECTS(opts.ogb_split.empty(), ValueError,
                    "{}: split '{}' requested but the dataset has no split/ folder", dir.string(),
                    opts.ogb_split);
  }

  TESSERA_EXPECTS(!fs::exists(raw / "data.npz") || !find_csv(raw, "edge").empty(), ValueError,
                  "{}: holds data.npz, OGB's binary layout (ogbn-papers100M); convert it to an npy "
                  "folder (edge_index.npy, feat.npy, ...) and read that instead",
                  raw.string());
  TESSERA_EXPECTS(!fs::is_directory(raw / "relations"), ValueError,
                  "{}: heterogeneous OGB dataset (raw/relations/, e.g. ogbn-mag) is not supported",
                  raw.string());
  const fs::path nodes_file = need_csv(raw, "num-node-list");
  const fs::path edges_count_file = need_csv(raw, "num-edge-list");
  const fs::path edge_file = need_csv(raw, "edge");
  const int64_t n = read_count(nodes_file);
  const int64_t e = read_count(edges_count_file);

  TESSERA_EXPECTS(e <= (detail::text_capacity(edge_file) + 1) / 4, ValueError,
                  "{}: {} edges are more than {} ({} bytes) can hold", edges_count_file.string(), e,
                  edge_file.filename().string(), fs::file_size(edge_file));
  ds.edges.num_nodes = n;
  ds.edges.src.resize(static_cast<size_t>(e));
  ds.edges.dst.resize(static_cast<size_t>(e));
  {
    int64_t* sd[2] = {ds.edges.src.data(), ds.edges.dst.data()};
    read_csv(
        edge_file, e,
        [&](int64_t cols) {
          TESSERA_EXPECTS(cols == 2 || e == 0, ValueError,
                          "{}:1: expected 2 comma-separated node IDs a line, got {} fields",
                          edge_file.string(), cols);
        },
        [&](TextReader& in, int64_t r, int64_t c, std::string_view tok) {
          int64_t x = 0;
          TESSERA_EXPECTS(detail::parse_int64(tok, x), ValueError,
                          "{}:{}: node ID {} is not an integer", in.name(), in.line_no(),
                          detail::show_token(tok));
          TESSERA_EXPECTS(x >= 0 && x < n, IndexError,
                          "{}:{}: node ID {} is outside [0, {}) (N from {})", in.name(),
                          in.line_no(), x, n, nodes_file.filename().string());
          sd[c][r] = x;
        });
  }
  if (find_csv(raw, "node-feat").empty() && find_csv(raw, "node-label").empty()) {
    // Without a per-node file (whose reader bounds N by its size), nodes beyond the edges' IDs
    // are isolated; a count far beyond what the edges could name is no count of this dataset,
    // as read_snap rules for a header's node count.
    int64_t max_id = -1;
    for (int64_t i = 0; i < e; ++i) {
      max_id = std::max(max_id, std::max(ds.edges.src[i], ds.edges.dst[i]));
    }
    TESSERA_EXPECTS(n <= std::max(max_id + 1, 2 * e + 1024), ValueError,
                    "{}: {} nodes, but the {} edges name IDs up to {} and no node-feat or "
                    "node-label file lists the nodes: a count that large would be almost only "
                    "isolated nodes",
                    nodes_file.string(), n, e, max_id);
  }
  if (const fs::path p = find_csv(raw, "node-feat"); !p.empty())
    ds.ndata["feat"] = read_float_matrix(p, n);
  if (const fs::path p = find_csv(raw, "node-label"); !p.empty())
    ds.ndata["label"] = read_labels(p, n);
  if (const fs::path p = find_csv(raw, "edge-feat"); !p.empty())
    ds.edata["feat"] = read_float_matrix(p, e);
  // Other per-node files, named node_<key> or node-<key> (e.g. node_year -> ndata["year"]).
  std::vector<fs::path> extras;
  for (const auto& ent : fs::directory_iterator(raw)) {
    std::string nm = ent.path().filename().string();
    for (const char* ext : {".csv.gz", ".csv"}) {
      const std::string x(ext);
      if (nm.size() > x.size() && nm.compare(nm.size() - x.size(), x.size(), x) == 0) {
        nm.resize(nm.size() - x.size());
        if (nm.size() > 5 && (nm.rfind("node_", 0) == 0 || nm.rfind("node-", 0) == 0) &&
            nm != "node-feat" && nm != "node-label")
          extras.push_back(ent.path());
        break;
      }
    }
  }
  std::sort(extras.begin(), extras.end());
  for (const auto& p : extras) {
    std::string key = p.filename().string().substr(5);
    key.resize(key.find(".csv"));
    if (ds.ndata.count(key)) continue;  // node_x.csv.gz and node_x.csv: the first wins
    ds.ndata[key] = read_extra_node_array(p, n);
  }

  if (!split_dir.empty()) {
    const std::pair<const char*, const char*> parts[] = {
        {"train", "train_mask"}, {"valid", "val_mask"}, {"test", "test_mask"}};
    for (const auto& [file, key] : parts)
      ds.ndata[key] = read_split(need_csv(split_dir, file), n);
    ds.meta["ogb_split"] = split_dir.filename().string();
  }
  ds.meta["source_dir"] = dir.string();
  return ds;
}

}  // namespace tessera
