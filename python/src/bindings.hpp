// Entry points of the binding units of tessera._C.
#pragma once

#include <nanobind/nanobind.h>

namespace tessera::python {
void bind_graph(nanobind::module_& m);
void bind_partition(nanobind::module_& m);
void bind_ops(nanobind::module_& m);
}  // namespace tessera::python
