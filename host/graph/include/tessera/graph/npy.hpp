// SPDX-License-Identifier: Apache-2.0
// Host n-d arrays and the NumPy .npy format (read, memory-map, write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// Element types Tessera stores. Names follow NumPy; `descr` is the .npy type string.
enum class DType : uint8_t {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64
};

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// NumPy name ("float32", "int64", "bool", "bfloat16").
const char* dtype_name(DType t);
/// .npy descr ("<f4", "<i8", "|b1"); bfloat16 is written as "<V2" with dtype_name kept in JSON.
const char* dtype_descr(DType t);
/// Parses a NumPy name or descr; throws TypeError naming `what` if unknown.
DType parse_dtype(const std::string& s, const std::string& what = "dtype");
bool dtype_is_integer(DType t);
bool dtype_is_float(DType t);

template <typename T>
DType dtype_of();

/// A dense, C-contiguous host array. Owns its memory (heap) or maps a file (read-only).
/// Copies share the same storage (like a tensor view); use `clone()` for a deep copy.
class Array {
 public:
  Array() = default;
  /// A zero-filled array of the given type and shape.
  static Array zeros(DType dtype, std::vector<int64_t> shape);
  /// Takes ownership of a vector's buffer (no copy); shape defaults to [v.size()].
  template <typename T>
  static Array from_vector(std::vector<T>&& v, std::vector<int64_t> shape = {});
  /// Wraps external memory kept alive by `keepalive`.
  static Array wrap(DType dtype, std::vector<int64_t> shape, void* data,
                    std::shared_ptr<void> keepalive, bool writable);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i)); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  /// Number of rows (shape[0]; 1 for a scalar), and the bytes of one row.
  int64_t rows() const { return shape_.empty() ? 1 : shape_[0]; }
  size_t row_bytes() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr && numel() == 0; }
  bool writable() const { return writable_; }
  bool defined() const { return storage_ != nullptr || !shape_.empty(); }

  const void* raw() const { return data_; }
  void* raw_mut();
  /// Typed pointer; throws TypeError if T does not match the dtype.
  template <typename T>
  const T* data() const;
  template <typename T>
  T* mut_data();

  /// A deep copy in owned heap memory.
  Array clone() const;
  /// Gathers rows (shape[0] axis) by index into a new array: out[i] = this[idx[i]].
  Array take_rows(const int64_t* idx, int64_t n) const;
  /// Converts integer arrays to int64 (copy), throwing TypeError for non-integers.
  std::vector<int64_t> to_int64_vector(const std::string& what) const;
  /// Shape as "[2, 5278]".
  std::string shape_str() const;

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  bool writable_ = true;
};

/// Header of a .npy file.
struct NpyHeader {
  DType dtype;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  ///< byte offset of the data in the file
};

/// Reads and validates the header; throws ValueError/TypeError/IOError naming the file and the
/// problem (bad magic, unsupported version, Fortran order, big-endian or unknown dtype,
/// malformed dict, data shorter than the header promises).
NpyHeader read_npy_header(const std::filesystem::path& path);
/// Reads a whole .npy file into owned memory.
Array read_npy(const std::filesystem::path& path);
/// Maps a .npy file (MAP_PRIVATE); the data is paged in on demand. Read-only, or `writable`:
/// copy-on-write, so that writes change this process's pages and never the file.
Array mmap_npy(const std::filesystem::path& path, bool writable = false);
/// Writes an array as .npy version 1.0 (2.0 if the header needs it). Not atomic by itself:
/// write into an AtomicDir.
void write_npy(const std::filesystem::path& path, const Array& a);
void write_npy(const std::filesystem::path& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data);

// ---- template definitions ----------------------------------------------------------------
template <>
inline DType dtype_of<bool>() {
  return DType::kBool;
}
template <>
inline DType dtype_of<int8_t>() {
  return DType::kInt8;
}
template <>
inline DType dtype_of<uint8_t>() {
  return DType::kUInt8;
}
template <>
inline DType dtype_of<int16_t>() {
  return DType::kInt16;
}
template <>
inline DType dtype_of<uint16_t>() {
  return DType::kUInt16;
}
template <>
inline DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
inline DType dtype_of<uint32_t>() {
  return DType::kUInt32;
}
template <>
inline DType dtype_of<int64_t>() {
  return DType::kInt64;
}
template <>
inline DType dtype_of<uint64_t>() {
  return DType::kUInt64;
}
template <>
inline DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
inline DType dtype_of<double>() {
  return DType::kFloat64;
}

namespace detail {
[[noreturn]] void throw_dtype_mismatch(DType have, DType want);
}

template <typename T>
Array Array::from_vector(std::vector<T>&& v, std::vector<int64_t> shape) {
  static_assert(!std::is_same_v<T, bool>, "use uint8_t storage for bool arrays");
  auto holder = std::make_shared<std::vector<T>>(std::move(v));
  if (shape.empty()) shape = {static_cast<int64_t>(holder->size())};
  void* p = holder->data();
  return wrap(dtype_of<T>(), std::move(shape), p, std::move(holder), true);
}

template <typename T>
const T* Array::data() const {
  if (dtype_of<T>() != dtype_ && !(std::is_same_v<T, uint8_t> && dtype_ == DType::kBool))
    detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return static_cast<const T*>(data_);
}
template <typename T>
T* Array::mut_data() {
  if (dtype_of<T>() != dtype_ && !(std::is_same_v<T, uint8_t> && dtype_ == DType::kBool))
    detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return static_cast<T*>(raw_mut());
}

}  // namespace tessera
