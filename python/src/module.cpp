// tessera._C: the nanobind module. C++ exceptions become the Python exceptions DESIGN.md
// names, carrying the C++ message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "convert.hpp"
#include "tessera/core/error.hpp"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "Tessera's C++ core (graph ingest, partitioning, sampling, loaders)";
  m.attr("__version__") = TESSERA_VERSION;
#ifdef TESSERA_WITH_CUDA_BUILD
  m.attr("cuda_compiled") = true;
#else
  m.attr("cuda_compiled") = false;
#endif

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

  tessera::python::bind_graph(m);
  tessera::python::bind_partition(m);
  tessera::python::bind_ops(m);
  tessera::python::bind_dist(m);
}
