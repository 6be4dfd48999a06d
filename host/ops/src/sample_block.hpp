// SPDX-License-Identifier: Apache-2.0
// NeighborSampler's CPU path for one hop: uniform sampling straight into a block (internal).
#pragma once

#include "tessera/ops/block.hpp"
#include "tessera/ops/sampling_graph.hpp"

namespace tessera::ops::detail {

class IdMap;

/// to_block(sample_neighbors(graph, seeds, opts), seeds) in one pass, for uniform sampling
/// without exclusions of a graph on the CPU: each sampled edge is written once, into the block,
/// and compacted over `map`'s direct-mapped tags, which must cover every node. With more than
/// one chunk of seeds (opts.num_threads) the threads sample pieces of the seeds while the calling
/// thread compacts them in order. The same block, bit for bit, for any thread count. A seed
/// listed twice is a ValueError (as in to_block, with this function's wording); a neighbor
/// outside [0, num_nodes) is an IndexError naming it (the general path would compact it by
/// hashing and fail at the next hop's seed check). Returns false, with `out` untouched, when the
/// options need the general path (weights, exclusions, fanout -1, a graph placed on a GPU, or
/// no direct-mapped table). `compact_share` gets the fraction of the calling thread's time
/// spent compacting.
bool sample_block_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                      const SampleOptions& opts, IdMap& map, Block& out, double& compact_share);

}  // namespace tessera::ops::detail
