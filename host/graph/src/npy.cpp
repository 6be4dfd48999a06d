// SPDX-License-Identifier: Apache-2.0
#include "tessera/graph/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

struct DTypeInfo {
  DType t;
  const char* name;
  const char* descr;
  size_t size;
};

constexpr DTypeInfo kTypes[] = {
    {DType::kBool, "bool", "|b1", 1},         {DType::kInt8, "int8", "|i1", 1},
    {DType::kUInt8, "uint8", "|u1", 1},       {DType::kInt16, "int16", "<i2", 2},
    {DType::kUInt16, "uint16", "<u2", 2},     {DType::kInt32, "int32", "<i4", 4},
    {DType::kUInt32, "uint32", "<u4", 4},     {DType::kInt64, "int64", "<i8", 8},
    {DType::kUInt64, "uint64", "<u8", 8},     {DType::kFloat16, "float16", "<f2", 2},
    {DType::kBFloat16, "bfloat16", "<V2", 2}, {DType::kFloat32, "float32", "<f4", 4},
    {DType::kFloat64, "float64", "<f8", 8},
};

const DTypeInfo& info(DType t) {
  return kTypes[static_cast<int>(t)];
}

}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}
const char* dtype_name(DType t) {
  return info(t).name;
}
const char* dtype_descr(DType t) {
  return info(t).descr;
}
bool dtype_is_integer(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 ||
         t == DType::kInt32 || t == DType::kUInt32 || t == DType::kInt64 || t == DType::kUInt64;
}
bool dtype_is_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

DType parse_dtype(const std::string& s, const std::string& what) {
  for (const auto& i : kTypes) {
    if (s == i.name || s == i.descr) return i.t;
  }
  // Accept '=' / '|' byte-order marks for little-endian and single-byte types.
  if (s.size() == 3 && (s[0] == '=' || s[0] == '|' || s[0] == '<')) {
    for (const auto& i : kTypes) {
      if (s.substr(1) == std::string(i.descr).substr(1) && std::string(i.descr) != "<V2")
        return i.t;
    }
  }
  if (!s.empty() && s[0] == '>')
    TESSERA_FAIL(TypeError, "{}: big-endian dtype '{}' is not supported (save it little-endian)",
                 what, s);
  TESSERA_FAIL(TypeError, "{}: unsupported dtype '{}'", what, s);
}

namespace detail {
void throw_dtype_mismatch(DType have, DType want) {
  TESSERA_FAIL(TypeError, "array has dtype {}, but {} was requested", dtype_name(have),
               dtype_name(want));
}
}  // namespace detail

// ---- Array ------------------------------------------------------------------------------

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

size_t Array::row_bytes() const {
  size_t n = dtype_size(dtype_);
  for (size_t i = 1; i < shape_.size(); ++i)
    n *= static_cast<size_t>(shape_[i]);
  return n;
}

Array Array::zeros(DType dtype, std::vector<int64_t> shape) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  for (int64_t d : a.shape_)
    TESSERA_EXPECTS(d >= 0, ValueError, "negative dimension {} in shape {}", d, a.shape_str());
  const size_t bytes = std::max<size_t>(1, a.nbytes());
  auto* p = static_cast<char*>(std::calloc(bytes, 1));
  TESSERA_EXPECTS(p != nullptr, Error, "out of memory allocating {} bytes", bytes);
  a.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  a.data_ = p;
  return a;
}

Array Array::wrap(DType dtype, std::vector<int64_t> shape, void* data,
                  std::shared_ptr<void> keepalive, bool writable) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.data_ = data;
  a.storage_ = std::move(keepalive);
  a.writable_ = writable;
  return a;
}

void* Array::raw_mut() {
  TESSERA_EXPECTS(writable_, ValueError, "array {} is read-only (memory-mapped)", shape_str());
  return data_;
}

Array Array::clone() const {
  Array out = zeros(dtype_, shape_);
  if (nbytes() > 0) std::memcpy(out.data_, data_, nbytes());
  return out;
}

Array Array::take_rows(const int64_t* idx, int64_t n) const {
  std::vector<int64_t> shape = shape_;
  TESSERA_EXPECTS(!shape.empty(), ValueError, "take_rows on a scalar array");
  shape[0] = n;
  Array out = zeros(dtype_, shape);
  const size_t rb = row_bytes();
  const auto* src = static_cast<const char*>(data_);
  auto* dst = static_cast<char*>(out.data_);
  const int64_t rows = shape_[0];
  for (int64_t i = 0; i < n; ++i) {
    TESSERA_EXPECTS(idx[i] >= 0 && idx[i] < rows, IndexError, "row index {} out of range [0, {})",
                    idx[i], rows);
    std::memcpy(dst + i * rb, src + idx[i] * rb, rb);
  }
  return out;
}

std::vector<int64_t> Array::to_int64_vector(const std::string& what) const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  const int64_t n = numel();
  switch (dtype_) {
#define TESSERA_CONVERT(DT, T)                    \
  case DT: {                                      \
    const auto* p = static_cast<const T*>(data_); \
    for (int64_t i = 0; i < n; ++i)               \
      out[i] = static_cast<int64_t>(p[i]);        \
    break;                                        \
  }
    TESSERA_CONVERT(DType::kInt8, int8_t)
    TESSERA_CONVERT(DType::kUInt8, uint8_t)
    TESSERA_CONVERT(DType::kBool, uint8_t)
    TESSERA_CONVERT(DType::kInt16, int16_t)
    TESSERA_CONVERT(DType::kUInt16, uint16_t)
    TESSERA_CONVERT(DType::kInt32, int32_t)
    TESSERA_CONVERT(DType::kUInt32, uint32_t)
    TESSERA_CONVERT(DType::kInt64, int64_t)
#undef TESSERA_CONVERT
    case DType::kUInt64: {
      const auto* p = static_cast<const uint64_t*>(data_);
      for (int64_t i = 0; i < n; ++i) {
        TESSERA_EXPECTS(p[i] <= static_cast<uint64_t>(INT64_MAX), ValueError,
                        "{}: value {} at position {} does not fit int64", what, p[i], i);
        out[i] = static_cast<int64_t>(p[i]);
      }
      break;
    }
    default:
      TESSERA_FAIL(TypeError, "{}: expected an integer array, got dtype {}", what,
                   dtype_name(dtype_));
  }
  return out;
}

std::string Array::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

// ---- .npy --------------------------------------------------------------------------------

namespace {

// Extracts the value text of `key` in a Python dict literal; empty if absent.
std::string dict_value(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) k = h.find("\"" + key + "\"");
  if (k == std::string::npos) return {};
  size_t c = h.find(':', k);
  if (c == std::string::npos) return {};
  size_t b = h.find_first_not_of(" \t", c + 1);
  if (b == std::string::npos) return {};
  if (h[b] == '(') {
    size_t e = h.find(')', b);
    return e == std::string::npos ? std::string() : h.substr(b, e - b + 1);
  }
  if (h[b] == '\'' || h[b] == '"') {
    size_t e = h.find(h[b], b + 1);
    return e == std::string::npos ? std::string() : h.substr(b + 1, e - b - 1);
  }
  size_t e = h.find_first_of(",}", b);
  std::string v = h.substr(b, e - b);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.pop_back();
  return v;
}

}  // namespace

NpyHeader read_npy_header(const std::filesystem::path& path) {
  const std::string f = path.string();
  std::ifstream in(path, std::ios::binary);
  TESSERA_EXPECTS(in.good(), IOError, "{}: cannot open file", f);
  char magic[8];
  in.read(magic, 8);
  TESSERA_EXPECTS(in.gcount() == 8 && std::memcmp(magic, "\x93NUMPY", 6) == 0, ValueError,
                  "{}: not a .npy file (bad magic string)", f);
  const int major = static_cast<unsigned char>(magic[6]);
  TESSERA_EXPECTS(major >= 1 && major <= 3, ValueError, "{}: unsupported .npy version {}.{}", f,
                  major, static_cast<int>(static_cast<unsigned char>(magic[7])));
  uint32_t hlen = 0;
  size_t prefix = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    TESSERA_EXPECTS(in.gcount() == 2, ValueError, "{}: truncated .npy header", f);
    hlen = b[0] | (b[1] << 8);
    prefix = 10;
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    TESSERA_EXPECTS(in.gcount() == 4, ValueError, "{}: truncated .npy header", f);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    prefix = 12;
  }
  TESSERA_EXPECTS(hlen < (1u << 24), ValueError, "{}: implausible .npy header length {}", f, hlen);
  std::string h(hlen, '\0');
  in.read(h.data(), hlen);
  TESSERA_EXPECTS(static_cast<uint32_t>(in.gcount()) == hlen, ValueError,
                  "{}: truncated .npy header", f);
  TESSERA_EXPECTS(h.find('{') != std::string::npos && h.find('}') != std::string::npos, ValueError,
                  "{}: malformed .npy header '{}'", f, h);

  NpyHeader out;
  const std::string descr = dict_value(h, "descr");
  TESSERA_EXPECTS(!descr.empty(), ValueError, "{}: .npy header has no 'descr'", f);
  out.dtype = parse_dtype(descr, f);
  const std::string fortran = dict_value(h, "fortran_order");
  TESSERA_EXPECTS(fortran == "False" || fortran == "True", ValueError,
                  "{}: .npy header has no valid 'fortran_order'", f);
  TESSERA_EXPECTS(fortran == "False", ValueError,
                  "{}: Fortran-ordered arrays are not supported (save with np.ascontiguousarray)",
                  f);
  const std::string shape = dict_value(h, "shape");
  TESSERA_EXPECTS(shape.size() >= 2 && shape.front() == '(' && shape.back() == ')', ValueError,
                  "{}: .npy header has no valid 'shape'", f);
  size_t i = 1;
  while (i < shape.size() - 1) {
    while (i < shape.size() - 1 && (shape[i] == ' ' || shape[i] == ','))
      ++i;
    if (i >= shape.size() - 1) break;
    size_t j = i;
    while (j < shape.size() - 1 && std::isdigit(static_cast<unsigned char>(shape[j])))
      ++j;
    TESSERA_EXPECTS(j > i, ValueError, "{}: malformed shape '{}' in .npy header", f, shape);
    int64_t d = 0;
    const auto [end, err] = std::from_chars(shape.data() + i, shape.data() + j, d);
    TESSERA_EXPECTS(err == std::errc() && end == shape.data() + j, ValueError,
                    "{}: dimension '{}' of shape {} in .npy header is out of range", f,
                    shape.substr(i, j - i), shape);
    out.shape.push_back(d);
    while (j < shape.size() - 1 && shape[j] == 'L')
      ++j;
    i = j;
  }
  out.data_offset = prefix + hlen;

  // The data bytes the shape promises, checked for overflow: a shape whose product wraps
  // (e.g. 3 x 6148914691236517206 one-byte elements = 2 mod 2^64) would pass the size check
  // below and describe far more rows than the file holds.
  uint64_t expect = dtype_size(out.dtype);
  int64_t numel = 1;
  for (int64_t d : out.shape) {
    TESSERA_EXPECTS(!__builtin_mul_overflow(expect, static_cast<uint64_t>(d), &expect) &&
                        !__builtin_mul_overflow(numel, d, &numel),
                    ValueError, "{}: shape {} in .npy header is too large ({} bytes overflow)", f,
                    shape, dtype_name(out.dtype));
  }
  std::error_code ec;
  const auto fsize = std::filesystem::file_size(path, ec);
  TESSERA_EXPECTS(!ec, IOError, "{}: cannot stat: {}", f, ec.message());
  TESSERA_EXPECTS(fsize >= out.data_offset && fsize - out.data_offset >= expect, ValueError,
                  "{}: truncated: header promises {} data bytes for shape {} {}, file has {}", f,
                  expect, shape, dtype_name(out.dtype), fsize - out.data_offset);
  return out;
}

Array read_npy(const std::filesystem::path& path) {
  const NpyHeader h = read_npy_header(path);
  Array a = Array::zeros(h.dtype, h.shape);
  std::ifstream in(path, std::ios::binary);
  TESSERA_EXPECTS(in.good(), IOError, "{}: cannot open file", path.string());
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  in.read(static_cast<char*>(a.raw_mut()), static_cast<std::streamsize>(a.nbytes()));
  TESSERA_EXPECTS(static_cast<size_t>(in.gcount()) == a.nbytes(), ValueError, "{}: truncated data",
                  path.string());
  return a;
}

Array mmap_npy(const std::filesystem::path& path, bool writable) {
  const NpyHeader h = read_npy_header(path);
  size_t bytes = dtype_size(h.dtype);
  for (int64_t d : h.shape)
    bytes *= static_cast<size_t>(d);
  const int fd = ::open(path.c_str(), O_RDONLY);
  TESSERA_EXPECTS(fd >= 0, IOError, "{}: cannot open file: {}", path.string(),
                  std::strerror(errno));
  const size_t map_len = h.data_offset + bytes;
  void* p =
      ::mmap(nullptr, map_len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  TESSERA_EXPECTS(p != MAP_FAILED, IOError, "{}: mmap failed: {}", path.string(),
                  std::strerror(errno));
  std::shared_ptr<void> keep(p, [map_len](void* q) { ::munmap(q, map_len); });
  return Array::wrap(h.dtype, h.shape, static_cast<char*>(p) + h.data_offset, std::move(keep),
                     writable);
}

void write_npy(const std::filesystem::path& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data) {
  std::string shp = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shp += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) shp.resize(shp.size() - 2);
  if (shape.size() == 1) shp.resize(shp.size() - 1);
  shp += ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 dtype_descr(dtype), shp);
  // Pad so the data starts on a 64-byte boundary; header ends with '\n'.
  bool v2 = false;
  size_t total = 10 + dict.size() + 1;
  if (total + 63 > 65535 + 10) {
    v2 = true;
    total += 2;
  }
  const size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  const uint32_t hlen = static_cast<uint32_t>(dict.size());

  size_t bytes = dtype_size(dtype);
  for (int64_t d : shape)
    bytes *= static_cast<size_t>(d);

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  TESSERA_EXPECTS(f != nullptr, IOError, "{}: cannot open for writing: {}", path.string(),
                  std::strerror(errno));
  std::string head = "\x93NUMPY";
  head.push_back(v2 ? 2 : 1);
  head.push_back(0);
  if (v2) {
    for (int i = 0; i < 4; ++i)
      head.push_back(static_cast<char>((hlen >> (8 * i)) & 0xff));
  } else {
    head.push_back(static_cast<char>(hlen & 0xff));
    head.push_back(static_cast<char>((hlen >> 8) & 0xff));
  }
  head += dict;
  bool ok = std::fwrite(head.data(), 1, head.size(), f.get()) == head.size();
  if (bytes > 0) ok = ok && std::fwrite(data, 1, bytes, f.get()) == bytes;
  ok = (std::fclose(f.release()) == 0) && ok;
  TESSERA_EXPECTS(ok, IOError, "{}: write failed (disk full?)", path.string());
}

void write_npy(const std::filesystem::path& path, const Array& a) {
  write_npy(path, a.dtype(), a.shape(), a.raw());
}

}  // namespace tessera
