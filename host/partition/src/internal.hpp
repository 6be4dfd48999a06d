// Internal entry points of the partitioner, shared by its source files. Not a public header.
#pragma once

#include <vector>

#include "tessera/partition/partition.hpp"

namespace tessera::detail {

/// True if finalize built `ds.graph` with symmetrize + drop_self_loops + dedup, so the CSC is
/// the adjacency of a simple undirected graph by construction.
bool built_symmetric_simple(const Dataset& ds);

/// symmetric_adjacency; `known_simple` skips the check that the CSC already is symmetric and
/// simple (the caller guarantees it), which is then converted without a transpose.
SymAdjacency symmetric_adjacency(const Graph& csc, bool known_simple);

/// assign_metis, with the same guarantee passed on to symmetric_adjacency.
Assignment assign_metis(const Graph& csc, int64_t num_parts, const std::vector<int32_t>& vwgt,
                        int ncon, const PartitionOptions& opts, PhaseTimer* timer,
                        bool known_simple);

}  // namespace tessera::detail
