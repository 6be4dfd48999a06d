// SPDX-License-Identifier: Apache-2.0
// Chunked line reader over plain or gzip files, and number parsing, for the text readers.
#include "read_text.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "tessera/core/error.hpp"

namespace tessera::detail {

namespace fs = std::filesystem;

TextReader::TextReader(const fs::path& path, size_t chunk_bytes) : name_(path.string()) {
  std::error_code ec;
  TESSERA_EXPECTS(fs::exists(path, ec), IOError, "{}: no such file", name_);
  TESSERA_EXPECTS(!fs::is_directory(path, ec), IOError, "{}: is a folder, expected a file", name_);
  file_size_ = static_cast<int64_t>(fs::file_size(path, ec));
  {
    // Detect gzip by its magic bytes (1f 8b), whatever the file is called.
    std::ifstream in(path, std::ios::binary);
    TESSERA_EXPECTS(in.good(), IOError, "{}: cannot open: {}", name_, std::strerror(errno));
    unsigned char m[2] = {0, 0};
    in.read(reinterpret_cast<char*>(m), 2);
    gzipped_ = in.gcount() == 2 && m[0] == 0x1f && m[1] == 0x8b;
  }
  gz_ = gzopen(name_.c_str(), "rb");
  TESSERA_EXPECTS(gz_ != nullptr, IOError, "{}: cannot open: {}", name_, std::strerror(errno));
  gzbuffer(gz_, 256 * 1024);
  chunk_bytes_ = std::max<size_t>(chunk_bytes, 64);
  for (int i = 0; i < 2; ++i)
    spare_.emplace_back(chunk_bytes_);
  try {
    reader_ = std::thread([this] { read_ahead(); });
  } catch (...) {
    gzclose(gz_);
    throw;
  }
}

TextReader::~TextReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (gz_) gzclose(gz_);
}

int64_t TextReader::file_offset() const {
  return offset_;
}

// The reading thread: gzread into a spare buffer, queue the result, until end of file, an
// error, or the destructor. Only this thread touches gz_ while it runs.
void TextReader::read_ahead() {
  for (;;) {
    Chunk c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !spare_.empty(); });
      if (stop_) return;
      c.data = std::move(spare_.back());
      spare_.pop_back();
    }
    c.data.resize(chunk_bytes_);
    errno = 0;
    c.n = gzread(gz_, c.data.data(), static_cast<unsigned>(c.data.size()));
    c.sys_errno = errno;
    const char* msg = gzerror(gz_, &c.errnum);
    c.has_msg = msg != nullptr;
    if (msg) c.msg = msg;
    const z_off_t off = gzoffset(gz_);
    c.offset = off < 0 ? 0 : static_cast<int64_t>(off);
    const bool last = c.n <= 0 || (c.errnum != Z_OK && c.errnum != Z_STREAM_END);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(std::move(c));
    }
    cv_.notify_all();
    if (last) return;
  }
}

// Throws the error of the chunk that failed, once the lines before it have been parsed.
void TextReader::raise_failure() const {
  // zlib reports a gzip stream that ends early as Z_BUF_ERROR after returning what it had.
  if (fail_errnum_ == Z_BUF_ERROR) {
    TESSERA_FAIL(ValueError, "{}: truncated gzip stream (unexpected end of file after line {})",
                 name_, line_no_);
  }
  if (fail_errnum_ == Z_ERRNO) {
    TESSERA_FAIL(IOError, "{}: read failed after line {}: {}", name_, line_no_,
                 std::strerror(fail_errno_));
  }
  std::string what = fail_msg_.empty() ? "unknown zlib error" : fail_msg_;
  if (what.rfind(name_ + ": ", 0) == 0) {
    what.erase(0, name_.size() + 2);  // zlib adds the path
  }
  TESSERA_FAIL(ValueError, "{}: corrupt gzip data after line {}: {}", name_, line_no_, what);
}

bool TextReader::fill() {
  if (failed_) {
    raise_failure();
  }
  if (eof_) return false;
  Chunk c;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !ready_.empty(); });
    c = std::move(ready_.front());
    ready_.pop_front();
    if (!buf_.empty()) spare_.push_back(std::move(buf_));
  }
  cv_.notify_all();
  buf_ = std::move(c.data);
  offset_ = c.offset;
  const int n = c.n;
  if (n < 0 || (c.errnum != Z_OK && c.errnum != Z_STREAM_END)) {
    eof_ = true;  // the reading thread has stopped
    failed_ = true;
    fail_errnum_ = c.errnum;
    fail_errno_ = c.sys_errno;
    fail_msg_ = c.has_msg ? c.msg : "";
    // What zlib returned before the error is parsed first, so the error names the last line
    // read in full (a truncated stream's lines up to the cut are all there).
    if (n <= 0) {
      raise_failure();
    }
  }
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  pos_ = 0;
  end_ = static_cast<size_t>(n);
  return true;
}

bool TextReader::next_line(std::string_view& line) {
  carry_.clear();
  bool have_carry = false;
  for (;;) {
    if (pos_ == end_ && !fill()) {
      if (!have_carry) return false;
      break;  // last line without a trailing newline
    }
    const char* b = buf_.data() + pos_;
    const void* nl = std::memchr(b, '\n', end_ - pos_);
    if (nl) {
      const size_t len = static_cast<size_t>(static_cast<const char*>(nl) - b);
      pos_ += len + 1;
      ++line_no_;
      if (have_carry) {
        carry_.append(b, len);
        line = carry_;
      } else {
        line = std::string_view(b, len);
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      return true;
    }
    carry_.append(b, end_ - pos_);
    have_carry = true;
    pos_ = end_;
  }
  ++line_no_;
  line = carry_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return true;
}

int64_t text_capacity(const fs::path& path) {
  constexpr int64_t kMaxInflate = 1032;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const int64_t b = ec ? 0 : static_cast<int64_t>(size);
  std::ifstream in(path, std::ios::binary);
  unsigned char m[2] = {0, 0};
  in.read(reinterpret_cast<char*>(m), 2);
  if (in.gcount() != 2 || m[0] != 0x1f || m[1] != 0x8b) {
    return b;
  }
  return b > INT64_MAX / kMaxInflate ? INT64_MAX : b * kMaxInflate;
}

bool parse_int64(std::string_view tok, int64_t& out) {
  const char* p = tok.data();
  const char* e = p + tok.size();
  if (p == e) return false;
  if (*p == '+') {
    ++p;  // from_chars accepts '-' but not '+'
    if (p != e && *p == '-') {
      return false;  // "+-5" is no number
    }
  }
  if (p == e) {
    return false;
  }
  const auto r = std::from_chars(p, e, out);
  return r.ec == std::errc() && r.ptr == e;
}

namespace {

constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

bool ieq(std::string_view a, const char* b) {
  const size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if ((a[i] | 0x20) != b[i]) return false;
  return true;
}

}  // namespace

bool parse_double(std::string_view tok, double& out) {
  const char* p = tok.data();
  const char* e = p + tok.size();
  if (p == e) return false;
  bool neg = false;
  const char* q = p;
  if (*q == '+' || *q == '-') neg = *q++ == '-';
  // Fast path: [digits][.digits][e[+-]digits] with at most 19 significant digits and a small
  // exponent is exactly representable as mantissa * 10^k with one correctly rounded operation.
  uint64_t mant = 0;
  int digits = 0, frac = 0;
  bool any = false;
  while (q < e && *q >= '0' && *q <= '9') {
    if (digits < 19) {
      mant = mant * 10 + static_cast<uint64_t>(*q - '0');
      if (mant) ++digits;
    } else {
      digits = 99;  // too many digits: let from_chars handle it
    }
    ++q;
    any = true;
  }
  if (q < e && *q == '.') {
    ++q;
    while (q < e && *q >= '0' && *q <= '9') {
      if (digits < 19) {
        mant = mant * 10 + static_cast<uint64_t>(*q - '0');
        if (mant) ++digits;
        ++frac;
      } else {
        digits = 99;
      }
      ++q;
      any = true;
    }
  }
  if (any) {
    int exp10 = 0;
    if (q < e && (*q == 'e' || *q == 'E')) {
      ++q;
      bool eneg = false;
      if (q < e && (*q == '+' || *q == '-')) eneg = *q++ == '-';
      if (q == e) return false;
      int x = 0;
      while (q < e && *q >= '0' && *q <= '9') {
        if (x < 100000) x = x * 10 + (*q - '0');
        ++q;
      }
      exp10 = eneg ? -x : x;
    }
    if (q != e) return false;  // trailing garbage
    const int k = exp10 - frac;
    if (digits <= 15 && k >= -22 && k <= 22) {
      double v = static_cast<double>(mant);
      v = k < 0 ? v / kPow10[-k] : v * kPow10[k];
      out = neg ? -v : v;
      return true;
    }
  }
  // Slow path: general syntax, nan/inf, many digits, large exponents.
  const char* s = p;
  if (*s == '+') {
    ++s;
    if (s != e && *s == '-') {
      return false;  // "+-5" is no number
    }
  }
  std::string_view rest(s, static_cast<size_t>(e - s));
  if (ieq(rest, "nan") || ieq(rest, "-nan")) {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  double v = 0;
  const auto r = std::from_chars(s, e, v);
  if (r.ptr != e) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // Underflow to 0 or overflow to +-inf, as strtod would.
    v = std::strtod(std::string(s, e).c_str(), nullptr);
  } else if (r.ec != std::errc()) {
    return false;
  }
  out = v;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back()))
    s.remove_suffix(1);
  return s;
}

std::string show_token(std::string_view tok) {
  std::string t(tok.substr(0, 40));
  for (char& c : t)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + t + (tok.size() > 40 ? "...'" : "'");
}

}  // namespace tessera::detail
