// SPDX-License-Identifier: Apache-2.0
// Conversions between Tessera arrays and Python buffers.
#include "convert.hpp"

#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/partition/format.hpp"

namespace tessera::python {

nb::dlpack::dtype to_dlpack(DType t) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::kBool:
      return make(dtype_code::Bool, 8);
    case DType::kInt8:
      return make(dtype_code::Int, 8);
    case DType::kUInt8:
      return make(dtype_code::UInt, 8);
    case DType::kInt16:
      return make(dtype_code::Int, 16);
    case DType::kUInt16:
      return make(dtype_code::UInt, 16);
    case DType::kInt32:
      return make(dtype_code::Int, 32);
    case DType::kUInt32:
      return make(dtype_code::UInt, 32);
    case DType::kInt64:
      return make(dtype_code::Int, 64);
    case DType::kUInt64:
      return make(dtype_code::UInt, 64);
    case DType::kFloat16:
      return make(dtype_code::Float, 16);
    case DType::kBFloat16:
      return make(dtype_code::Bfloat, 16);
    case DType::kFloat32:
      return make(dtype_code::Float, 32);
    case DType::kFloat64:
      return make(dtype_code::Float, 64);
  }
  TESSERA_FAIL(InternalError, "unknown dtype {}", static_cast<int>(t));
}

DType from_dlpack(nb::dlpack::dtype t, const std::string& what) {
  using nb::dlpack::dtype_code;
  TESSERA_EXPECTS(t.lanes == 1, TypeError, "{}: vector dtypes (lanes={}) are not supported", what,
                  t.lanes);
  const auto code = static_cast<dtype_code>(t.code);
  if (code == dtype_code::Bool && t.bits == 8) return DType::kBool;
  if (code == dtype_code::Int) {
    switch (t.bits) {
      case 8:
        return DType::kInt8;
      case 16:
        return DType::kInt16;
      case 32:
        return DType::kInt32;
      case 64:
        return DType::kInt64;
    }
  }
  if (code == dtype_code::UInt) {
    switch (t.bits) {
      case 8:
        return DType::kUInt8;
      case 16:
        return DType::kUInt16;
      case 32:
        return DType::kUInt32;
      case 64:
        return DType::kUInt64;
    }
  }
  if (code == dtype_code::Float) {
    switch (t.bits) {
      case 16:
        return DType::kFloat16;
      case 32:
        return DType::kFloat32;
      case 64:
        return DType::kFloat64;
    }
  }
  if (code == dtype_code::Bfloat && t.bits == 16) return DType::kBFloat16;
  TESSERA_FAIL(TypeError, "{}: unsupported dtype (DLPack code {}, {} bits)", what,
               static_cast<int>(t.code), static_cast<int>(t.bits));
}

nb::object to_numpy(const Array& a) {
  auto* holder = new Array(a);  // shares the storage (mmap or heap)
  nb::capsule owner(holder, [](void* p) noexcept { delete static_cast<Array*>(p); });
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  void* data = const_cast<void*>(a.raw());
  if (a.writable()) {
    nb::ndarray<nb::numpy> arr(data, shape.size(), shape.data(), owner, nullptr,
                               to_dlpack(a.dtype()), nb::device::cpu::value);
    return nb::cast(arr, nb::rv_policy::reference);
  }
  nb::ndarray<nb::numpy, nb::ro> arr(data, shape.size(), shape.data(), owner, nullptr,
                                     to_dlpack(a.dtype()), nb::device::cpu::value);
  return nb::cast(arr, nb::rv_policy::reference);
}

Array array_from_buffer(const AnyArray& a, const std::string& what) {
  const DType dt = from_dlpack(a.dtype(), what);
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i)
    shape[i] = static_cast<int64_t>(a.shape(i));
  Array out = Array::zeros(dt, shape);
  if (a.nbytes() > 0) std::memcpy(out.raw_mut(), a.data(), a.nbytes());
  return out;
}

std::vector<int64_t> int64_vector(const AnyArray& a, const std::string& what) {
  TESSERA_EXPECTS(a.ndim() == 1, ValueError, "{}: expected a 1-D array, got {} dimensions", what,
                  a.ndim());
  const DType dt = from_dlpack(a.dtype(), what);
  TESSERA_EXPECTS(dtype_is_integer(dt), TypeError, "{}: expected integer IDs, got {}", what,
                  dtype_name(dt));
  Array view = Array::wrap(dt, {static_cast<int64_t>(a.shape(0))}, const_cast<void*>(a.data()),
                           nullptr, false);
  return view.to_int64_vector(what);
}

namespace {

template <typename Arr>
BufferInfo make_info(const Arr& a, const std::string& op, const std::string& name) {
  BufferInfo b;
  b.name = name;
  b.data = const_cast<void*>(static_cast<const void*>(a.data()));
  b.device_type = a.device_type();
  b.device_id = a.device_id();
  b.dtype = from_dlpack(a.dtype(), op + ": " + name);
  b.shape.resize(a.ndim());
  int64_t numel = 1;
  for (size_t i = 0; i < a.ndim(); ++i) {
    b.shape[i] = static_cast<int64_t>(a.shape(i));
    numel *= b.shape[i];
  }
  if (numel > 1) {
    // Strides in elements; size-1 dimensions may have any stride (as numpy/torch report them).
    int64_t expect = 1;
    for (size_t k = a.ndim(); k-- > 0;) {
      TESSERA_EXPECTS(b.shape[k] == 1 || a.stride(k) == expect, ValueError,
                      "{}: {} is not C-contiguous (shape {}, stride {} in dimension {} where {} "
                      "was expected); pass a contiguous array (e.g. t.contiguous())",
                      op, name, shape_string(b.shape), a.stride(k), k, expect);
      expect *= b.shape[k];
    }
  }
  return b;
}

}  // namespace

bool BufferInfo::is_cuda() const {
  return device_type == nb::device::cuda::value;
}

std::string BufferInfo::device() const {
  if (device_type == nb::device::cpu::value) {
    return "cpu";
  }
  if (device_type == nb::device::cuda::value) {
    return "cuda:" + std::to_string(device_id);
  }
  return "DLPack device " + std::to_string(device_type) + ":" + std::to_string(device_id);
}

int64_t BufferInfo::row_elems() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    n *= shape[i];
  }
  return n;
}

BufferInfo buffer_info(const DeviceArray& a, const std::string& op, const std::string& name) {
  return make_info(a, op, name);
}

BufferInfo buffer_info(const MutDeviceArray& a, const std::string& op, const std::string& name) {
  return make_info(a, op, name);
}

MutDeviceArray writable_buffer(nb::handle obj, const std::string& op, const std::string& name) {
  MutDeviceArray a;
  if (!nb::try_cast(obj, a, false)) {
    DeviceArray ro;
    const bool read_only = nb::try_cast(obj, ro, false);
    const std::string type = nb::type_name(obj.type()).c_str();
    TESSERA_FAIL(TypeError,
                 "{}: {} must be a writable array that speaks DLPack or the buffer protocol (a "
                 "NumPy array, a torch tensor), got {}{}",
                 op, name, read_only ? "a read-only " : "", type);
  }
  return a;
}

OpDevice common_device(const std::string& op, const std::vector<const BufferInfo*>& bufs) {
  std::string where;
  bool mixed = false, unsupported = false;
  for (const BufferInfo* b : bufs) {
    where += fmt::format("{}{}: {}", where.empty() ? "" : ", ", b->name, b->device());
    if (b->device_type != nb::device::cpu::value && !b->is_cuda()) {
      unsupported = true;
    }
    if (b->device_type != bufs.front()->device_type || b->device_id != bufs.front()->device_id) {
      mixed = true;
    }
  }
  TESSERA_EXPECTS(!unsupported, TypeError, "{}: Tessera runs on the CPU or a CUDA device, got {}",
                  op, where);
  TESSERA_EXPECTS(!mixed, TypeError,
                  "{}: the arguments are on different devices ({}); move them to one device", op,
                  where);
  OpDevice d;
  if (!bufs.empty() && bufs.front()->is_cuda()) {
    d.cuda = true;
    d.device = bufs.front()->device_id;
  }
  return d;
}

}  // namespace tessera::python
