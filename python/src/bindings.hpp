// Entry points of the binding units of tessera._C.
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "tessera/ops/block.hpp"
#include "tessera/ops/loader.hpp"

namespace tessera::python {
void bind_graph(nanobind::module_& m);
void bind_partition(nanobind::module_& m);
void bind_ops(nanobind::module_& m);
void bind_dist(nanobind::module_& m);

/// Blocks as a Python list of _C.Block (moved, no copy of the arrays).
nanobind::list blocks_to_py(std::vector<ops::Block>&& blocks);
/// A node mini-batch as a dict (epoch, index, seeds, input_nodes, blocks, timings).
nanobind::dict node_batch_to_py(ops::NodeMiniBatch&& b);
}  // namespace tessera::python
