// NeighborSampler's CPU path for one hop: uniform sampling straight into a block (internal).
#pragma once

#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops::detail {

class IdMap;

/// to_block(sample_neighbors(graph, seeds, opts), seeds) in one pass, for uniform sampling
/// without exclusions on one thread: each sampled edge is written once, into the block, and
/// compacted over `map`'s direct-mapped tags, which must cover every node. The same block, bit
/// for bit, and the same errors (a seed listed twice: ValueError). Returns false, with `out`
/// untouched, when the options need the general path (weights, exclusions, fanout -1, more than
/// one thread, the device, or no direct-mapped table). `compact_share` gets the fraction of
/// the time spent compacting.
bool sample_block_cpu(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                      IdMap& map, Block& out, double& compact_share);

}  // namespace tessera::ops::detail
