// SPDX-License-Identifier: Apache-2.0
// A non-owning view of a contiguous array (C++17 has no std::span), and where data lives.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

namespace tessera::ops {

/// Where an op's inputs live and where it runs. Host data runs the CPU twin; kCuda selects the
/// CUDA twin (raises not_compiled_with_cuda in a CPU-only build).
enum class Device { kCpu, kCuda };
/// "cpu" / "cuda".
const char* device_name(Device d);

/// A non-owning view of `size` elements at `data` (host memory unless the op says otherwise).
/// The viewed memory must outlive every use of the view.
template <typename T>
class Span {
 public:
  Span() = default;
  Span(T* data, int64_t size) : data_(data), size_(size) {}
  /// Views a whole vector (const views bind to const vectors too).
  template <typename V,
            typename = std::enable_if_t<std::is_same_v<
                std::remove_const_t<T>, typename std::remove_reference_t<V>::value_type>>>
  Span(V&& v) : data_(v.data()), size_(static_cast<int64_t>(v.size())) {}  // NOLINT(implicit)

  T* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](int64_t i) const { return data_[i]; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  Span subspan(int64_t offset, int64_t count) const { return Span(data_ + offset, count); }
  std::vector<std::remove_const_t<T>> to_vector() const { return {data_, data_ + size_}; }

 private:
  T* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace tessera::ops
