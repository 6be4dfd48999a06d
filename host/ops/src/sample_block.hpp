// SPDX-License-Identifier: Apache-2.0
// NeighborSampler's CPU path for one hop: uniform sampling straight into a block (internal).
#pragma once

#include "tessera/ops/block.hpp"
#include "tessera/ops/sampling_graph.hpp"

namespace tessera::ops::detail {

class IdMap;

/// Seeds per piece of a hop split over threads: small enough that the pieces balance the
/// threads and the compaction of the first ones overlaps the sampling of the rest.
inline constexpr int64_t kPiece = 256;

/// Fewest edges in a hop's first guess of its size for which sample_block_cpu splits the hop over
/// threads; below it the hop runs in the calling thread. The guess is min(seeds x fanout, the
/// graph's edges (without replacement), seeds x min(fanout, 32) + 4096).
inline constexpr int64_t kThreadedMinEdges = 16384;

/// to_block(sample_neighbors(graph, seeds, opts), seeds) in one pass, for uniform sampling
/// without exclusions of a graph on the CPU: each sampled edge is written once, into the block,
/// and compacted over `map`'s direct-mapped tags, which must cover every node. With more than
/// one chunk of seeds (opts.num_threads) and at least kThreadedMinEdges guessed edges the
/// threads sample pieces of the seeds while the calling thread compacts them in order. The same
/// block, bit for bit, for any thread count. A seed listed twice is a ValueError (as in to_block,
/// with this function's wording); a neighbor outside [0, num_nodes) is an IndexError naming it (the
/// general path would compact it by hashing and fail at the next hop's seed check). Returns false,
/// with `out` untouched, when the options need the general path (weights, exclusions, fanout -1, a
/// graph placed on a GPU, or no direct-mapped table). `compact_share` gets the fraction of the
/// calling thread's time spent compacting.
bool sample_block_cpu(const SamplingGraph& graph, Span<const int64_t> seeds,
                      const SampleOptions& opts, IdMap& map, Block& out, double& compact_share);

}  // namespace tessera::ops::detail
