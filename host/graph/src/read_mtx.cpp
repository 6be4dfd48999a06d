// SPDX-License-Identifier: Apache-2.0
// Reader for Matrix Market files (NIST format), plain or gzip:
//   "%%MatrixMarket matrix coordinate <pattern|integer|real> <general|symmetric|skew-symmetric>"
//   '%' comments, a size line "rows cols nnz", then nnz lines "i j [value]" (1-based).
// Entry (i, j) is the directed edge i -> j (row = source). Symmetric files store one triangle:
// every off-diagonal entry (i, j) is followed by its mirror (j, i) (value negated for
// skew-symmetric). Values become edata["edge_weight"] (float64). Only square matrices are
// graphs. Memory: arrays are sized from the size line (2*nnz when symmetric), one pass.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "read_text.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"

namespace tessera {

namespace fs = std::filesystem;
using detail::TextReader;
using detail::Tokens;

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

Dataset read_mtx(const fs::path& file, const ReadOptions& opts) {
  (void)opts;
  TextReader in(file);
  const std::string& f = in.name();
  Dataset ds;
  ds.format = "mtx";
  std::string name = file.filename().string();
  for (const char* suf : {".gz", ".mtx"})
    if (name.size() > std::strlen(suf) &&
        name.compare(name.size() - std::strlen(suf), std::strlen(suf), suf) == 0)
      name.resize(name.size() - std::strlen(suf));
  ds.name = name;

  std::string_view line, tok;
  TESSERA_EXPECTS(in.next_line(line), ValueError,
                  "{}: empty file, expected a \"%%MatrixMarket matrix coordinate ...\" banner", f);
  std::string banner[5];
  {
    Tokens t(line);
    int i = 0;
    while (i < 5 && t.next(tok))
      banner[i++] = lower(tok);
    TESSERA_EXPECTS(i == 5 && banner[0] == "%%matrixmarket" && t.at_end(), ValueError,
                    "{}:1: not a Matrix Market banner (expected \"%%MatrixMarket matrix "
                    "coordinate <field> <symmetry>\"), got {}",
                    f, detail::show_token(line));
  }
  TESSERA_EXPECTS(banner[1] == "matrix", ValueError,
                  "{}:1: object '{}' is not supported (only "
                  "'matrix')",
                  f, banner[1]);
  TESSERA_EXPECTS(banner[2] == "coordinate", ValueError,
                  "{}:1: format '{}' is not supported: a graph needs the sparse 'coordinate' "
                  "format, not dense 'array'",
                  f, banner[2]);
  const std::string& field = banner[3];
  const bool pattern = field == "pattern";
  TESSERA_EXPECTS(pattern || field == "integer" || field == "real" || field == "double", TypeError,
                  "{}:1: field '{}' is not supported (expected pattern, integer or real)", f,
                  field);
  const std::string& sym = banner[4];
  const bool symmetric = sym == "symmetric", skew = sym == "skew-symmetric";
  TESSERA_EXPECTS(symmetric || skew || sym == "general", ValueError,
                  "{}:1: symmetry '{}' is not supported (expected general, symmetric or "
                  "skew-symmetric)",
                  f, sym);

  bool have_size = false;
  while (in.next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    if (detail::is_blank_line(line)) continue;
    have_size = true;
    break;
  }
  TESSERA_EXPECTS(have_size, ValueError, "{}: missing the size line \"rows cols nnz\"", f);
  const int64_t size_line = in.line_no();
  int64_t dims[3] = {0, 0, 0};
  {
    Tokens t(line);
    for (int i = 0; i < 3; ++i) {
      TESSERA_EXPECTS(t.next(tok), ValueError, "{}:{}: size line must be \"rows cols nnz\", got {}",
                      f, size_line, detail::show_token(line));
      TESSERA_EXPECTS(detail::parse_int64(tok, dims[i]) && dims[i] >= 0, ValueError,
                      "{}:{}: size field {} is not a non-negative integer: {}", f, size_line, i + 1,
                      detail::show_token(tok));
    }
    TESSERA_EXPECTS(t.at_end(), ValueError, "{}:{}: size line has more than 3 fields: {}", f,
                    size_line, detail::show_token(line));
  }
  const int64_t n = dims[0], nnz = dims[2];
  TESSERA_EXPECTS(dims[0] == dims[1], ValueError,
                  "{}:{}: matrix is {} x {}; only square matrices are graphs", f, size_line,
                  dims[0], dims[1]);

  // Every entry takes at least four bytes ("1 1\n"): a count no file of this size can hold is
  // refused before anything is sized from it.
  TESSERA_EXPECTS(nnz <= (detail::text_capacity(in) + 1) / 4, ValueError,
                  "{}:{}: the size line's {} entries are more than a file of {} bytes can hold", f,
                  size_line, nnz, in.file_size());
  const int64_t cap = (symmetric || skew) ? 2 * nnz : nnz;
  std::vector<int64_t>& src = ds.edges.src;
  std::vector<int64_t>& dst = ds.edges.dst;
  src.resize(static_cast<size_t>(cap));
  dst.resize(static_cast<size_t>(cap));
  std::vector<double> w(pattern ? 0 : static_cast<size_t>(cap));

  Progress prog("reading " + file.filename().string(), nnz, "entries");
  int64_t read = 0, k = 0;
  while (in.next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    Tokens t(line);
    std::string_view a, b, c;
    if (!t.next(a)) continue;  // blank line
    TESSERA_EXPECTS(read < nnz, ValueError,
                    "{}:{}: more entries than the {} the size line (line {}) declares", f,
                    in.line_no(), nnz, size_line);
    TESSERA_EXPECTS(t.next(b), ValueError, "{}:{}: expected \"i j{}\", got {}", f, in.line_no(),
                    pattern ? "" : " value", detail::show_token(line));
    int64_t i = 0, j = 0;
    TESSERA_EXPECTS(detail::parse_int64(a, i), ValueError, "{}:{}: row index {} is not an integer",
                    f, in.line_no(), detail::show_token(a));
    TESSERA_EXPECTS(detail::parse_int64(b, j), ValueError,
                    "{}:{}: column index {} is not an integer", f, in.line_no(),
                    detail::show_token(b));
    TESSERA_EXPECTS(i >= 1 && i <= n && j >= 1 && j <= n, IndexError,
                    "{}:{}: entry ({}, {}) is outside [1, {}] (indices are 1-based)", f,
                    in.line_no(), i, j, n);
    double val = 1.0;
    if (!pattern) {
      TESSERA_EXPECTS(t.next(c), ValueError, "{}:{}: entry ({}, {}) has no value (field {})", f,
                      in.line_no(), i, j, field);
      if (field == "integer") {
        int64_t iv = 0;
        TESSERA_EXPECTS(detail::parse_int64(c, iv), ValueError,
                        "{}:{}: value {} is not an integer (field integer)", f, in.line_no(),
                        detail::show_token(c));
        val = static_cast<double>(iv);
      } else {
        TESSERA_EXPECTS(detail::parse_double(c, val), ValueError,
                        "{}:{}: value {} is not a real number", f, in.line_no(),
                        detail::show_token(c));
      }
    }
    TESSERA_EXPECTS(t.at_end(), ValueError, "{}:{}: too many fields for field '{}': {}", f,
                    in.line_no(), field, detail::show_token(line));
    src[k] = i - 1;
    dst[k] = j - 1;
    if (!pattern) w[k] = val;
    ++k;
    if ((symmetric || skew) && i != j) {
      src[k] = j - 1;
      dst[k] = i - 1;
      if (!pattern) w[k] = skew ? -val : val;
      ++k;
    }
    ++read;
    if ((read & 0xffff) == 0) prog.update(read);
  }
  prog.update(read);
  prog.done();
  TESSERA_EXPECTS(read == nnz, ValueError,
                  "{}: file has {} entries but the size line (line {}) declares nnz = {}", f, read,
                  size_line, nnz);
  // Rows beyond every entry's are isolated nodes; a count far beyond what the entries could
  // touch is no graph of this file (and would size gigabytes from one number), as read_snap
  // rules for a header's node count.
  int64_t max_id = -1;
  for (int64_t q = 0; q < k; ++q) {
    max_id = std::max(max_id, std::max(src[q], dst[q]));
  }
  TESSERA_EXPECTS(n <= std::max(max_id + 1, 2 * nnz + 1024), ValueError,
                  "{}:{}: the size line says {} rows but the {} entries name rows up to {}: a "
                  "matrix that large would be almost only empty rows (fix the size line)",
                  f, size_line, n, nnz, max_id + 1);
  src.resize(static_cast<size_t>(k));
  dst.resize(static_cast<size_t>(k));
  ds.edges.num_nodes = n;
  if (!pattern) {
    w.resize(static_cast<size_t>(k));
    ds.edata["edge_weight"] = Array::from_vector(std::move(w), {k});
  }
  ds.meta["source_file"] = f;
  ds.meta["mtx_field"] = field;
  ds.meta["mtx_symmetry"] = sym;
  return ds;
}

}  // namespace tessera
