// SPDX-License-Identifier: Apache-2.0
// tessera._C: the nanobind module. C++ exceptions become the Python exceptions
// docs/design.md names, carrying the C++ message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/runtime.hpp"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "Tessera's C++ core (graph ingest, partitioning, sampling, loaders)";
  // Tensors handed out by DLPack without a copy keep their owner (a Block, an array) alive until
  // torch or numpy lets go of them, which at interpreter exit can come after this module is torn
  // down: nanobind would then report every such owner as "leaked" at the end of an ordinary
  // script that keeps a batch in a global. Off unless TESSERA_LEAK_WARNINGS is set (for
  // hunting real reference-count bugs).
  const char* leak_env = std::getenv("TESSERA_LEAK_WARNINGS");
  nb::set_leak_warnings(leak_env != nullptr && *leak_env != '\0' && *leak_env != '0');
  m.attr("__version__") = TESSERA_VERSION;
  // Asked of the linked library, not of a macro: the module is the same source in both builds.
  m.attr("cuda_compiled") = tessera::cuda::compiled_with_cuda();
  m.def("cuda_device_count", &tessera::cuda::device_count,
        "CUDA devices Tessera can use (0 without a CUDA build or without a GPU).");

  // NotCompiledError is a RuntimeError subclass so `except RuntimeError` still catches it.
  // Deliberately never released: the translator may run until interpreter shutdown.
  static PyObject* not_compiled =
      PyErr_NewException("tessera._C.NotCompiledError", PyExc_RuntimeError, nullptr);
  m.attr("NotCompiledError") = nb::handle(not_compiled);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tessera::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const tessera::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const tessera::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const tessera::IOError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const tessera::NotCompiledError& e) {
      PyErr_SetString(not_compiled, e.what());
    } catch (const tessera::Error& e) {  // InternalError and any future kind
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def(
      "_raise",
      [](const std::string& kind, const std::string& msg) {
        if (kind == "value") throw tessera::ValueError(msg);
        if (kind == "index") throw tessera::IndexError(msg);
        if (kind == "type") throw tessera::TypeError(msg);
        if (kind == "io") throw tessera::IOError(msg);
        if (kind == "not_compiled") throw tessera::NotCompiledError(msg);
        if (kind == "internal") throw tessera::InternalError(msg);
        throw tessera::Error(msg);
      },
      nb::arg("kind"), nb::arg("message"), "Throws a C++ exception of `kind` (for tests).");

  m.def(
      "_buffer_address",
      [](const tessera::python::AnyArray& a) { return reinterpret_cast<uintptr_t>(a.data()); },
      nb::arg("array"),
      "The address C++ sees for a CPU buffer passed in (to check zero-copy passing).");

  m.def(
      "_device_view",
      [](nb::handle owner, int device_type, int device_id) {
        auto a = nb::cast<nb::ndarray<nb::c_contig, nb::device::cpu>>(owner, false);
        std::vector<size_t> shape(a.ndim());
        for (size_t i = 0; i < a.ndim(); ++i) {
          shape[i] = a.shape(i);
        }
        nb::ndarray<nb::array_api> v(a.data(), shape.size(), shape.data(), owner, nullptr,
                                     a.dtype(), device_type, device_id);
        return nb::cast(v, nb::rv_policy::reference);
      },
      nb::arg("array"), nb::arg("device_type"), nb::arg("device_id") = 0,
      "For tests of the device dispatch: a DLPack view of a writable C-contiguous CPU array "
      "that CLAIMS to live on another device (device_type 2 = CUDA). Its memory is host "
      "memory: pass it only where the call must fail before any device access (a CPU-only "
      "build, or mixed devices).");

  tessera::python::bind_graph(m);
  tessera::python::bind_partition(m);
  tessera::python::bind_ops(m);
  tessera::python::bind_dist(m);
  tessera::python::bind_device(m);
}
