// SPDX-License-Identifier: Apache-2.0
// Conversions between Tessera's host arrays and Python buffers (DLPack through nanobind).
// Outputs are zero-copy NumPy views whose owner keeps the C++ memory alive; inputs are read in
// place (any C-contiguous CPU buffer that speaks DLPack or the buffer protocol: NumPy, torch).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/graph/npy.hpp"

namespace tessera::python {

namespace nb = nanobind;

/// Any read-only, C-contiguous host buffer (dtype checked at run time).
using AnyArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
/// A 1-D int64 host buffer, read in place (NumPy arrays of other integer types are converted).
using I64Array = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
/// A read-only buffer on any device (CPU or CUDA), any dtype and strides: never converted or
/// copied by nanobind; the op checks contiguity, dtype and device itself (buffer_info).
using DeviceArray = nb::ndarray<nb::ro>;
/// A writable buffer on any device, as DeviceArray (outputs the op writes in place).
using MutDeviceArray = nb::ndarray<>;

/// What an op needs to know about a buffer passed from Python, whatever its device.
struct BufferInfo {
  std::string name;  ///< the argument's name, for messages
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int32_t device_type = 1;  ///< DLPack device type (kDLCPU = 1, kDLCUDA = 2, ...)
  int32_t device_id = 0;

  bool is_cuda() const;
  /// "cpu", "cuda:0", or "DLPack device <type>:<id>" for the devices Tessera does not run on.
  std::string device() const;
  /// Product of shape[1:] (1 for a 1-D buffer).
  int64_t row_elems() const;
};

/// The BufferInfo of `a`, argument `name` of `op`. ValueError when `a` is not C-contiguous
/// (nothing is copied behind the caller's back: an output must be written in place), TypeError
/// for a dtype Tessera has no name for.
BufferInfo buffer_info(const DeviceArray& a, const std::string& op, const std::string& name);
BufferInfo buffer_info(const MutDeviceArray& a, const std::string& op, const std::string& name);
/// Casts a Python object to a writable buffer of any device (no conversion); TypeError naming
/// `name` of `op` for anything else (a read-only array, a list).
MutDeviceArray writable_buffer(nb::handle obj, const std::string& op, const std::string& name);

/// Where an op over `bufs` runs: CPU (every buffer on the CPU) or one CUDA device (every buffer
/// on it). TypeError naming every argument and its device when they are mixed, or when a buffer
/// is on a device Tessera does not run on.
struct OpDevice {
  bool cuda = false;
  int device = -1;  ///< CUDA device index when `cuda`
};
OpDevice common_device(const std::string& op, const std::vector<const BufferInfo*>& bufs);

/// DLPack dtype of a Tessera dtype (bool as DLPack's bool, 8 bits).
nb::dlpack::dtype to_dlpack(DType t);
/// Tessera dtype of a DLPack dtype; TypeError naming `what` when Tessera has no such dtype.
DType from_dlpack(nb::dlpack::dtype t, const std::string& what);

/// A NumPy view of `a` (no copy); the view owns a reference to the array's storage, so it
/// stays valid after `a` is gone. Memory-mapped (read-only) arrays give read-only views.
nb::object to_numpy(const Array& a);

/// A NumPy view of `n` elements at `data` kept alive by `owner` (a Python object).
template <typename T>
nb::object view_numpy(const T* data, size_t n, nb::handle owner) {
  size_t shape[1] = {n};
  nb::ndarray<nb::numpy, T> arr(const_cast<T*>(data), 1, shape, owner);
  return nb::cast(arr, nb::rv_policy::reference);
}

/// A read-only NumPy view (for arrays C++ has validated once and relies on afterwards, such as
/// a graph's CSC: an in-place write there would let sampling read out of bounds).
template <typename T>
nb::object view_numpy_readonly(const T* data, size_t n, nb::handle owner) {
  size_t shape[1] = {n};
  nb::ndarray<nb::numpy, const T> arr(data, 1, shape, owner);
  return nb::cast(arr, nb::rv_policy::reference);
}

/// A loader's next batch as `to_py(batch)`, or None at the end of the epoch. Waits without the
/// GIL, taking it about every 100 ms to run the Python signal handlers, so Ctrl-C interrupts a
/// wait for a slow batch (the handler's exception is raised here).
template <typename Batch, typename Loader, typename ToPy>
nb::object next_batch_to_py(Loader& l, ToPy&& to_py) {
  Batch mb;
  bool ok, raised = false;
  {
    nb::gil_scoped_release nogil;
    ok = l.next(mb, [&raised] {
      nb::gil_scoped_acquire gil;
      raised = PyErr_CheckSignals() != 0;
      return raised;
    });
  }
  if (raised) throw nb::python_error();
  if (!ok) return nb::none();
  return to_py(std::move(mb));
}

/// Moves a vector into a NumPy array without copying its elements.
template <typename T>
nb::object vector_to_numpy(std::vector<T>&& v) {
  auto* holder = new std::vector<T>(std::move(v));
  nb::capsule owner(holder, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return view_numpy(holder->data(), holder->size(), owner);
}

/// A deep copy of a Python buffer as an owned Array (for data that C++ keeps, e.g. ndata).
Array array_from_buffer(const AnyArray& a, const std::string& what);
/// An int64 vector from a 1-D buffer (copy; any integer dtype). TypeError otherwise.
std::vector<int64_t> int64_vector(const AnyArray& a, const std::string& what);

}  // namespace tessera::python
