// SPDX-License-Identifier: Apache-2.0
// Reader for METIS graph files (the format of gpmetis, METIS manual section 4.1.1):
//   header "n m [fmt [ncon]]", then one line per vertex (1-based neighbor IDs), '%' comments.
//   fmt is up to three digits "abc": a = vertex sizes, b = vertex weights (ncon of them, default
//   1), c = edge weights. A vertex line is [size] [w_1 .. w_ncon] (u_1 [ew_1]) (u_2 [ew_2]) ...
// Every undirected edge appears in the lines of both its ends; both are kept as directed
// edges (u -> v for neighbor u on the line of v), so the CSC equals the file's adjacency and
// is symmetric. The number of entries must be exactly 2m, and the adjacency symmetric (u listed
// on v's line as often as v on u's): an asymmetric file is refused, naming a pair.
// Memory: src/dst (and edge weights) are sized from the header once; the text is streamed.
#include <fmt/format.h>

#include <algorithm>

#include "read_text.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"

namespace tessera {

namespace fs = std::filesystem;
using detail::TextReader;
using detail::Tokens;

namespace {

// A METIS adjacency lists every undirected edge on the lines of both its ends: u must appear on
// v's line exactly as often as v on u's. Entry k is neighbor src[k] on the line of dst[k], the
// lines in order (dst non-decreasing), as read_metis stores them; `n` vertices. Throws
// ValueError naming the first pair found listed on one side only (or a different number of
// times). Costs one copy of src and a sort of each line.
void check_symmetric(const std::vector<int64_t>& src, const std::vector<int64_t>& dst, int64_t n,
                     const std::string& f) {
  std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
  for (const int64_t v : dst) {
    ++off[static_cast<size_t>(v) + 1];
  }
  for (int64_t v = 0; v < n; ++v) {
    off[v + 1] += off[v];
  }
  std::vector<int64_t> adj = src;
  parallel_for(0, n, 1 << 12, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      std::sort(adj.begin() + off[v], adj.begin() + off[v + 1]);
    }
  });
  parallel_for(0, n, 1 << 12, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      const auto end = adj.begin() + off[v + 1];
      for (auto it = adj.begin() + off[v]; it != end;) {
        const int64_t u = *it;
        const auto next = std::upper_bound(it, end, u);
        const auto back = std::equal_range(adj.begin() + off[u], adj.begin() + off[u + 1], v);
        const int64_t here = next - it, there = back.second - back.first;
        TESSERA_EXPECTS(here == there, ValueError,
                        "{}: the adjacency is not symmetric: vertex {} lists neighbor {} {} "
                        "time(s), vertex {} lists {} {} time(s) (a METIS graph lists every edge "
                        "on the lines of both its ends)",
                        f, v + 1, u + 1, here, u + 1, v + 1, there);
        it = next;
      }
    }
  });
}

}  // namespace

Dataset read_metis(const fs::path& file, const ReadOptions& opts) {
  (void)opts;
  TextReader in(file);
  const std::string& f = in.name();
  Dataset ds;
  ds.format = "metis";
  ds.name = file.stem().string();
  if (file.extension() == ".gz") ds.name = fs::path(ds.name).stem().string();

  std::string_view line, tok;
  // Header: the first line that is not a comment.
  bool have_header = false;
  while (in.next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    if (detail::is_blank_line(line)) continue;
    have_header = true;
    break;
  }
  TESSERA_EXPECTS(have_header, ValueError,
                  "{}: empty file, expected a METIS header line \"n m [fmt [ncon]]\"", f);
  const int64_t hdr_line = in.line_no();
  int64_t hv[4] = {0, 0, 0, 1};
  int nh = 0;
  {
    Tokens t(line);
    while (t.next(tok)) {
      TESSERA_EXPECTS(nh < 4, ValueError,
                      "{}:{}: header has more than 4 fields (expected \"n m [fmt [ncon]]\")", f,
                      hdr_line);
      TESSERA_EXPECTS(detail::parse_int64(tok, hv[nh]), ValueError,
                      "{}:{}: header field {} is not an integer: {}", f, hdr_line, nh + 1,
                      detail::show_token(tok));
      ++nh;
    }
  }
  TESSERA_EXPECTS(nh >= 2, ValueError,
                  "{}:{}: header must be \"n m [fmt [ncon]]\", got {} field(s)", f, hdr_line, nh);
  const int64_t n = hv[0], m = hv[1];
  TESSERA_EXPECTS(n >= 0 && m >= 0, ValueError, "{}:{}: negative vertex or edge count ({} {})", f,
                  hdr_line, n, m);
  const int64_t fmtv = nh >= 3 ? hv[2] : 0;
  TESSERA_EXPECTS(fmtv >= 0 && fmtv <= 111 && fmtv % 10 <= 1 && (fmtv / 10) % 10 <= 1, ValueError,
                  "{}:{}: fmt field must be up to three 0/1 digits (e.g. 011), got {}", f, hdr_line,
                  fmtv);
  const bool has_size = fmtv / 100 == 1, has_vw = (fmtv / 10) % 10 == 1, has_ew = fmtv % 10 == 1;
  const int64_t ncon = has_vw ? hv[3] : 0;
  TESSERA_EXPECTS(!has_vw || (ncon >= 1 && ncon <= 1024), ValueError,
                  "{}:{}: ncon must be in [1, 1024], got {}", f, hdr_line, hv[3]);
  TESSERA_EXPECTS(nh < 4 || has_vw, ValueError,
                  "{}:{}: ncon is given but fmt {} declares no vertex weights", f, hdr_line, fmtv);

  // Every vertex line takes a byte, every adjacency entry two ("7 "), every weight two: counts
  // no file of this size can hold are refused before anything is sized from them.
  const int64_t cap = detail::text_capacity(in) + 1;
  TESSERA_EXPECTS(n <= cap && m <= cap / 4 && (!has_vw || n <= cap / (2 * ncon)), ValueError,
                  "{}:{}: the header's counts (n = {}, m = {}{}) are more than a file of {} bytes "
                  "can hold",
                  f, hdr_line, n, m, has_vw ? fmt::format(", ncon = {}", ncon) : "",
                  in.file_size());
  const int64_t entries = 2 * m;
  std::vector<int64_t>& src = ds.edges.src;
  std::vector<int64_t>& dst = ds.edges.dst;
  src.resize(static_cast<size_t>(entries));
  dst.resize(static_cast<size_t>(entries));
  std::vector<int64_t> ew(has_ew ? static_cast<size_t>(entries) : 0);
  std::vector<int64_t> vw(static_cast<size_t>(n * ncon));
  std::vector<int64_t> vsize(has_size ? static_cast<size_t>(n) : 0);

  Progress prog("reading " + file.filename().string(), n, "nodes");
  int64_t k = 0, v = 0;
  auto need_int = [&](std::string_view t, const char* what) {
    int64_t x = 0;
    TESSERA_EXPECTS(detail::parse_int64(t, x), ValueError,
                    "{}:{}: {} of vertex {} is not an integer: {}", f, in.line_no(), what, v + 1,
                    detail::show_token(t));
    return x;
  };
  while (v < n && in.next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    // An empty line is a vertex without neighbors.
    Tokens t(line);
    if (has_size) {
      TESSERA_EXPECTS(t.next(tok), ValueError, "{}:{}: vertex {} has no size (fmt {})", f,
                      in.line_no(), v + 1, fmtv);
      vsize[v] = need_int(tok, "size");
    }
    for (int64_t c = 0; c < ncon; ++c) {
      TESSERA_EXPECTS(t.next(tok), ValueError,
                      "{}:{}: vertex {} has {} of its {} weights (fmt {}, ncon {})", f,
                      in.line_no(), v + 1, c, ncon, fmtv, ncon);
      vw[v * ncon + c] = need_int(tok, "weight");
    }
    while (t.next(tok)) {
      const int64_t u = need_int(tok, "neighbor");
      TESSERA_EXPECTS(u >= 1 && u <= n, IndexError,
                      "{}:{}: neighbor {} of vertex {} is outside [1, {}] (IDs are 1-based)", f,
                      in.line_no(), u, v + 1, n);
      TESSERA_EXPECTS(k < entries, ValueError,
                      "{}:{}: more adjacency entries than the header's 2*m = {} (m = {})", f,
                      in.line_no(), entries, m);
      src[k] = u - 1;
      dst[k] = v;
      if (has_ew) {
        TESSERA_EXPECTS(t.next(tok), ValueError,
                        "{}:{}: neighbor {} of vertex {} has no edge weight (fmt {})", f,
                        in.line_no(), u, v + 1, fmtv);
        ew[k] = need_int(tok, "edge weight");
      }
      ++k;
    }
    ++v;
    if ((v & 0xffff) == 0) prog.update(v);
  }
  prog.update(v);
  prog.done();
  TESSERA_EXPECTS(v == n, ValueError,
                  "{}: file ends after {} vertex lines but the header (line {}) says n = {}", f, v,
                  hdr_line, n);
  while (in.next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    TESSERA_EXPECTS(detail::is_blank_line(line), ValueError,
                    "{}:{}: extra data after the {} vertex lines the header (line {}) declares", f,
                    in.line_no(), n, hdr_line);
  }
  TESSERA_EXPECTS(k == entries, ValueError,
                  "{}: {} adjacency entries, but the header (line {}) says m = {} undirected "
                  "edges, so 2*m = {} are expected",
                  f, k, hdr_line, m, entries);

  check_symmetric(src, dst, n, f);

  ds.edges.num_nodes = n;
  if (has_vw) ds.ndata["node_weight"] = Array::from_vector(std::move(vw), {n, ncon});
  if (has_size) ds.ndata["node_size"] = Array::from_vector(std::move(vsize), {n});
  if (has_ew) ds.edata["edge_weight"] = Array::from_vector(std::move(ew), {entries});
  ds.meta["source_file"] = f;
  ds.meta["metis_fmt"] = fmtv;
  ds.meta["undirected_edges"] = m;
  return ds;
}

}  // namespace tessera
