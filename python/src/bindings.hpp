// SPDX-License-Identifier: Apache-2.0
// Entry points of the binding units of tessera._C.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "tessera/ops/block.hpp"
#include "tessera/ops/loader.hpp"

namespace tessera::python {
void bind_graph(nanobind::module_& m);
void bind_partition(nanobind::module_& m);
void bind_ops(nanobind::module_& m);
void bind_dist(nanobind::module_& m);
void bind_device(nanobind::module_& m);

/// Loader options from the Python arguments (ValueError for a seed outside [0, 2^32)).
ops::LoaderOptions loader_options(int64_t batch_size, bool shuffle, bool drop_last, int num_workers,
                                  int prefetch, int64_t seed);
/// Blocks as a Python list of _C.Block (moved, no copy of the arrays).
nanobind::list blocks_to_py(std::vector<ops::Block>&& blocks);
/// A node mini-batch as a dict (epoch, index, seeds, input_nodes, blocks, timings).
nanobind::dict node_batch_to_py(ops::NodeMiniBatch&& b);
/// A link-prediction mini-batch as a dict (epoch, index, eids, pos/neg endpoints global and
/// local, seeds, input_nodes, blocks).
nanobind::dict edge_batch_to_py(ops::EdgeMiniBatch&& b);
/// An edge loader's `exclude` argument: "none" (or ""), "self" or "reverse_id"; ValueError else.
ops::ExcludeMode parse_exclude(const std::string& s);
}  // namespace tessera::python
