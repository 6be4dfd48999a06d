// SPDX-License-Identifier: Apache-2.0
// Reader for SNAP edge lists: "# comment" lines, then one "src<tab or spaces>dst" pair a line,
// plain or gzip (detected by magic bytes). Node IDs may be sparse and are then renumbered.
//
// Numbering: new IDs follow the *sorted order* of the original IDs (not first appearance), so
// a file whose IDs are already 0..N-1 keeps them unchanged, and the mapping does not depend on
// edge order. ndata["orig_id"][v] is the ID node v had in the file. If the header declares
// "# Nodes: N" and every ID is in [0, N), IDs are kept as they are with N nodes (so isolated
// nodes the header counts survive).
//
// Memory: src/dst are filled in one pass; they are reserved exactly when the header gives
// "Edges: E", and grow geometrically otherwise (at most 1.5x slack; the text is never kept).
// Renumbering sparse IDs takes one extra array of 2E IDs (sorted) or a dense rank table when
// the largest ID is below 2E; peak stays about 2x the edge list.
#include <algorithm>
#include <numeric>

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

// Parses "Nodes: 123 Edges: 456" out of a SNAP header comment; leaves -1 where absent.
void parse_header_counts(std::string_view line, int64_t& nodes, int64_t& edges) {
  auto grab = [&](std::string_view key, int64_t& out) {
    const size_t k = line.find(key);
    if (k == std::string_view::npos) return;
    Tokens t(line.substr(k + key.size()));
    std::string_view tok;
    int64_t v = 0;
    if (t.next(tok) && detail::parse_int64(tok, v) && v >= 0) out = v;
  };
  grab("Nodes:", nodes);
  grab("Edges:", edges);
}

std::string stem_without_gz(const fs::path& p) {
  std::string n = p.filename().string();
  for (const char* suf : {".gz", ".txt", ".tsv", ".edges", ".el"}) {
    const std::string s(suf);
    if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0)
      n.resize(n.size() - s.size());
  }
  return n;
}

}  // namespace

Dataset read_snap(const fs::path& file, const ReadOptions& opts) {
  (void)opts;
  TextReader in(file);
  const std::string& f = in.name();
  Dataset ds;
  ds.format = "snap";
  ds.name = stem_without_gz(file);

  int64_t hdr_nodes = -1, hdr_edges = -1, hdr_line = 0;
  bool seen_data = false;
  std::vector<int64_t>& src = ds.edges.src;
  std::vector<int64_t>& dst = ds.edges.dst;
  int64_t max_id = -1;
  Progress prog("reading " + file.filename().string(), in.file_size(), "bytes");
  std::string_view line;
  while (in.next_line(line)) {
    if (line.empty() || line[0] == '#' || line[0] == '%') {
      if (!seen_data && !line.empty()) {
        int64_t n = hdr_nodes, e = hdr_edges;
        parse_header_counts(line, n, e);
        if (n != hdr_nodes || e != hdr_edges) hdr_line = in.line_no();
        hdr_nodes = n;
        hdr_edges = e;
        if (line.find("Undirected") != std::string_view::npos ||
            line.find("undirected") != std::string_view::npos)
          ds.meta["directed"] = false;
        else if (line.find("Directed") != std::string_view::npos)
          ds.meta["directed"] = true;
      }
      continue;
    }
    Tokens t(line);
    std::string_view a, b;
    if (!t.next(a)) continue;  // blank line
    if (!seen_data) {
      seen_data = true;
      // The header's count sizes the arrays only as far as the file can hold edges ("0 1\n").
      if (hdr_edges > 0 && hdr_edges <= (detail::text_capacity(in) + 1) / 4) {
        src.reserve(static_cast<size_t>(hdr_edges));
        dst.reserve(static_cast<size_t>(hdr_edges));
      }
    }
    TESSERA_EXPECTS(t.next(b), ValueError,
                    "{}:{}: expected two node IDs (source and destination), got one token {}", f,
                    in.line_no(), detail::show_token(a));
    TESSERA_EXPECTS(t.at_end(), ValueError,
                    "{}:{}: expected two node IDs (source and destination), got more tokens: {}", f,
                    in.line_no(), detail::show_token(line));
    int64_t u = 0, v = 0;
    TESSERA_EXPECTS(detail::parse_int64(a, u), ValueError, "{}:{}: node ID {} is not an integer", f,
                    in.line_no(), detail::show_token(a));
    TESSERA_EXPECTS(detail::parse_int64(b, v), ValueError, "{}:{}: node ID {} is not an integer", f,
                    in.line_no(), detail::show_token(b));
    TESSERA_EXPECTS(u >= 0 && v >= 0, IndexError, "{}:{}: negative node ID {}", f, in.line_no(),
                    u < 0 ? u : v);
    max_id = std::max(max_id, std::max(u, v));
    if (src.size() == src.capacity()) {
      // Grow by 1.5x rather than 2x to bound the slack of an unannounced edge count.
      const size_t cap = std::max<size_t>(1024, src.capacity() + src.capacity() / 2);
      src.reserve(cap);
      dst.reserve(cap);
    }
    src.push_back(u);
    dst.push_back(v);
    if ((src.size() & 0xffff) == 0) prog.update(in.file_offset());
  }
  prog.update(in.file_size());
  prog.done();
  const int64_t e = static_cast<int64_t>(src.size());
  if (hdr_edges >= 0)
    TESSERA_EXPECTS(e == hdr_edges, ValueError,
                    "{}: header (line {}) says Edges: {} but the file has {} edge lines", f,
                    hdr_line, hdr_edges, e);

  // Renumber (see the comment at the top).
  std::vector<int64_t> orig;
  int64_t n = 0;
  // A header's node count beyond the edges' IDs means isolated nodes; one far beyond what the
  // edges could name (the renumbering's own dense limit) is no count of this file's graph.
  TESSERA_EXPECTS(hdr_nodes <= std::max(max_id + 1, 2 * e + 1024), ValueError,
                  "{}: header (line {}) says Nodes: {} but the {} edge lines name IDs up to {}: "
                  "a count that large would be almost only isolated nodes (fix or remove it)",
                  f, hdr_line, hdr_nodes, e, max_id);
  if (hdr_nodes >= 0 && max_id < hdr_nodes) {
    n = hdr_nodes;  // identity
  } else if (max_id < 2 * e + 1024) {
    std::vector<int64_t> rank(static_cast<size_t>(max_id + 1), 0);
    for (int64_t i = 0; i < e; ++i) {
      rank[src[i]] = 1;
      rank[dst[i]] = 1;
    }
    int64_t c = 0;
    for (auto& r : rank) {
      const int64_t present = r;
      r = present ? c : -1;
      c += present;
    }
    n = c;
    if (n != max_id + 1) {
      orig.resize(static_cast<size_t>(n));
      for (int64_t id = 0; id <= max_id; ++id)
        if (rank[id] >= 0) orig[rank[id]] = id;
      parallel_for(0, e, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
        for (int64_t i = lo; i < hi; ++i) {
          src[i] = rank[src[i]];
          dst[i] = rank[dst[i]];
        }
      });
    }
  } else {
    orig.reserve(static_cast<size_t>(2 * e));
    orig.insert(orig.end(), src.begin(), src.end());
    orig.insert(orig.end(), dst.begin(), dst.end());
    std::sort(orig.begin(), orig.end());
    orig.erase(std::unique(orig.begin(), orig.end()), orig.end());
    orig.shrink_to_fit();
    n = static_cast<int64_t>(orig.size());
    parallel_for(0, e, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
      for (int64_t i = lo; i < hi; ++i) {
        src[i] = std::lower_bound(orig.begin(), orig.end(), src[i]) - orig.begin();
        dst[i] = std::lower_bound(orig.begin(), orig.end(), dst[i]) - orig.begin();
      }
    });
  }
  if (hdr_nodes >= 0)
    TESSERA_EXPECTS(n <= hdr_nodes, ValueError,
                    "{}: header (line {}) says Nodes: {} but the edges name {} distinct nodes", f,
                    hdr_line, hdr_nodes, n);
  if (orig.empty() && n > 0) {
    orig.resize(static_cast<size_t>(n));
    std::iota(orig.begin(), orig.end(), int64_t{0});
  }
  ds.edges.num_nodes = n;
  ds.ndata["orig_id"] = Array::from_vector(std::move(orig), {n});
  ds.meta["source_file"] = f;
  return ds;
}

}  // namespace tessera
