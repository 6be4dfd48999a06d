// SPDX-License-Identifier: Apache-2.0
// Internal helpers shared by the text readers (OGB CSV, SNAP, METIS, Matrix Market): a chunked
// line reader over plain or gzip files and fast number parsing. Not a public header.
#pragma once

#include <zlib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tessera::detail {

/// Streams a text file line by line, plain or gzip-compressed (detected by the gzip magic
/// bytes, not the file name). Reads fixed-size chunks with gzread on a background thread that
/// stays at most two chunks ahead of the parser (inflating overlaps parsing); only those chunks
/// (plus a line that crosses a chunk boundary) are held in memory, never the whole text. Errors
/// are reported when the parser reaches the chunk that failed, as a sequential read would.
/// Throws IOError if the file cannot be opened or read, ValueError naming the file if the gzip
/// stream is corrupt or truncated.
class TextReader {
 public:
  explicit TextReader(const std::filesystem::path& path, size_t chunk_bytes = 1 << 20);
  ~TextReader();
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;

  /// The next line without its '\n' (a trailing '\r' is stripped too); false at end of file.
  /// The view stays valid until the next call.
  bool next_line(std::string_view& line);
  /// 1-based number of the line last returned.
  int64_t line_no() const { return line_no_; }
  /// The file's path as a string, for error messages.
  const std::string& name() const { return name_; }
  bool gzipped() const { return gzipped_; }
  /// Size of the file on disk (compressed size for gzip), and how much of it has been consumed.
  int64_t file_size() const { return file_size_; }
  int64_t file_offset() const;

 private:
  // One gzread result, handed from the reading thread to the parser.
  struct Chunk {
    std::vector<char> data;
    int n = 0;          // gzread's return value
    int errnum = Z_OK;  // gzerror after the read
    std::string msg;    // gzerror's message
    bool has_msg = false;
    int sys_errno = 0;   // errno after the read (for Z_ERRNO)
    int64_t offset = 0;  // gzoffset after the read
  };
  void read_ahead();
  bool fill();
  [[noreturn]] void raise_failure() const;
  std::string name_;
  gzFile gz_ = nullptr;
  bool gzipped_ = false, eof_ = false;
  // The error of the last chunk read, raised once the data before it has been parsed.
  bool failed_ = false;
  int fail_errnum_ = Z_OK, fail_errno_ = 0;
  std::string fail_msg_;
  int64_t file_size_ = 0, line_no_ = 0, offset_ = 0;
  size_t chunk_bytes_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> ready_;               // read, not yet parsed (at most kAhead)
  std::vector<std::vector<char>> spare_;  // buffers to read into
  bool stop_ = false;
  std::thread reader_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  std::string carry_;  // a line that crosses a chunk boundary
};

/// The most bytes of text `path` can hold: its size, or for a gzip file (by its magic bytes) its
/// size times deflate's largest ratio (1032:1). A count a header announces is checked against
/// it before anything is sized from it, so an absurd count is refused, never allocated.
int64_t text_capacity(const std::filesystem::path& path);
/// The same for the file `in` reads.
inline int64_t text_capacity(const TextReader& in) {
  constexpr int64_t kMaxInflate = 1032;
  const int64_t b = in.file_size();
  if (!in.gzipped()) {
    return b;
  }
  return b > INT64_MAX / kMaxInflate ? INT64_MAX : b * kMaxInflate;
}

/// True if `c` separates tokens in whitespace-separated formats (space, tab, '\r', '\v', '\f').
inline bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/// True if the line holds only blanks.
inline bool is_blank_line(std::string_view s) {
  for (char c : s)
    if (!is_blank(c)) return false;
  return true;
}

/// Splits whitespace-separated tokens off a line, left to right.
class Tokens {
 public:
  explicit Tokens(std::string_view s) : p_(s.data()), e_(s.data() + s.size()) {}
  /// The next token; false when none is left.
  bool next(std::string_view& tok) {
    while (p_ < e_ && is_blank(*p_))
      ++p_;
    if (p_ == e_) return false;
    const char* b = p_;
    while (p_ < e_ && !is_blank(*p_))
      ++p_;
    tok = std::string_view(b, static_cast<size_t>(p_ - b));
    return true;
  }
  /// True if only blanks remain.
  bool at_end() {
    while (p_ < e_ && is_blank(*p_))
      ++p_;
    return p_ == e_;
  }

 private:
  const char* p_;
  const char* e_;
};

/// Parses a whole token as a base-10 int64 (optional sign). False if the token is empty, has
/// any other character, or overflows.
bool parse_int64(std::string_view tok, int64_t& out);
/// Parses a whole token as a double (decimal or scientific notation, "nan", "inf"). Exact for
/// the common short decimals (Clinger's fast path), falls back to std::from_chars otherwise.
bool parse_double(std::string_view tok, double& out);
/// Strips blanks on both sides.
std::string_view trim(std::string_view s);
/// A token for an error message: quoted and cut to 40 characters.
std::string show_token(std::string_view tok);

}  // namespace tessera::detail
