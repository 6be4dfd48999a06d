// SPDX-License-Identifier: Apache-2.0
// The output sinks of the CPU sampler's windowed uniform pipeline (RowSampler::run_uniform in
// sample_rows.hpp): it hands every window of sampled positions to a sink, which writes the
// window's edges and prefetches the next window's adjacency words as it goes. CooSink appends a
// COO (sample_neighbors), BlockSink writes a block and compacts it over direct-mapped tags
// (NeighborSampler's one-pass hop), ChunkSink appends one piece of a hop split over threads
// (sample_block.cpp compacts the pieces into the block in order).
#pragma once

#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/prefetch.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops::detail {

// One window of run_uniform: seeds [first, first + size) of the call, count[i] edges of seed
// first + i, their storage positions in pos (total in all).
struct UniformWindow {
  static constexpr int64_t kSize = 32;
  int64_t first = 0, size = 0, total = 0;
  int64_t count[kSize];
  std::vector<int64_t> pos;
};

// The adjacency words of the window after the one being written, prefetched into L2 one per
// written edge (the rest after the last), so that the requests reach memory at about the rate it
// serves them and arrive while the window in between is drawn. Issued in a burst at draw time
// they stalled the core until the memory caught up, and into L1 they evicted the tags that
// compaction reads next: on rmat:21,25 this form samples 1.2-1.3x as fast as either. Rows shorter
// than the fanout prefetch one line several times; skipping a line already requested costs more
// than it saves (a compare per edge: 0.93x, twice).
struct Ahead {
  const int64_t* pos = nullptr;  // null: nothing to prefetch
  int64_t n = 0;
  template <class S>
  void step(const S& g, int64_t q) const {
    if (q < n) {
      g.prefetch_edge(pos[q]);
    }
  }
  template <class S>
  void rest(const S& g, int64_t q) const {
    for (; q < n; ++q) {
      g.prefetch_edge(pos[q]);
    }
  }
};

// run_uniform's sink for sample_neighbors: the window's edges appended to a COO.
struct CooSink {
  SampledEdges& out;
  template <class S>
  void write(const S& g, const UniformWindow& wd, const int64_t* seeds, const Ahead& ahead) {
    const size_t o0 = out.src.size();
    out.src.resize(o0 + static_cast<size_t>(wd.total));
    out.dst.resize(o0 + static_cast<size_t>(wd.total));
    out.eid.resize(o0 + static_cast<size_t>(wd.total));
    int64_t* self = g.o.dir == EdgeDir::kIn ? out.dst.data() + o0 : out.src.data() + o0;
    int64_t* other = g.o.dir == EdgeDir::kIn ? out.src.data() + o0 : out.dst.data() + o0;
    int64_t* eo = out.eid.data() + o0;
    const int64_t* pos = wd.pos.data();
    int64_t q = 0;
    for (int64_t i = 0; i < wd.size; ++i) {
      const int64_t v = seeds[wd.first + i];
      for (int64_t j = 0; j < wd.count[i]; ++j, ++q) {
        const int64_t p = pos[q];
        self[q] = v;
        other[q] = g.neighbor(p);
        eo[q] = g.eid(p);
        ahead.step(g, q);
      }
    }
    ahead.rest(g, q);
  }
  void finish() {}
};

// The local ID of source `s` in a block compacted over direct-mapped tags (tag t is a local of
// this block iff t > base; local = t - base - 1), `next` being the next new local ID. Without
// branches on whether the source is new (half of them are, at random): a new source takes
// `next`, every source rewrites its tag and the next slot of src_nodes (`nodes`), and only a new
// one advances `next`. Same IDs as the branching form. Written with masks: GCC compiled
// `fresh ? next : old` into a branch, mispredicted for about half of the sources (the masks
// measured 1.04-1.08x the sampling rate on rmat:21,25).
inline int64_t compact_source(uint32_t* tag, uint32_t base, int64_t* nodes, int64_t& next,
                              int64_t s) {
  const int64_t old = static_cast<int64_t>(tag[s]) - static_cast<int64_t>(base) - 1;
  const int64_t fresh = -static_cast<int64_t>(old < 0);  // all ones iff a new source
  const int64_t local = (next & fresh) | (old & ~fresh);
  tag[s] = base + 1 + static_cast<uint32_t>(local);
  nodes[next] = s;
  next -= fresh;
  return local;
}

// run_uniform's sink for sample_block_cpu: the window's edges go straight into the block
// (source = the sampled neighbor, destination = the seed's position, which is its local ID),
// and the window before it is compacted over the direct-mapped tags, whose cache lines were
// prefetched (into L2: 1.06-1.07x the rate of L1 prefetches, which crowd out the window's other
// data) when its neighbors were written. Windows are compacted in order, so new source nodes get
// local IDs in order of first appearance, exactly as to_block gives them.
struct BlockSink {
  Block& out;
  uint32_t* tag;
  uint64_t num_nodes;     // every neighbor must be below (tags cover [0, num_nodes))
  uint32_t base;          // tag t is a local of this block iff t > base
  int64_t num_src;        // local IDs given so far (out.src_nodes grows ahead of it)
  int64_t compacted = 0;  // edges [0, compacted) carry local source IDs
  int64_t size = 0;       // edges written; the arrays grow ahead of it in steps (zero-filled once)
  uint64_t compact_ticks = 0;

  // Compacts the sources of edges [compacted, end) in place.
  void compact_to(int64_t end) {
    const uint64_t t0 = __rdtsc();
    if (num_src + (end - compacted) > out.num_src()) {
      out.src_nodes.resize(static_cast<size_t>(num_src + std::max<int64_t>(end - compacted, 4096)));
    }
    int64_t* src = out.src.data();
    int64_t* nodes = out.src_nodes.data();
    int64_t next = num_src;
    for (int64_t q = compacted; q < end; ++q) {
      const int64_t s = src[q];
      if (static_cast<uint64_t>(s) >= num_nodes) {
        TESSERA_FAIL(IndexError,
                     "sample_blocks: sampled neighbor {} is outside [0, {}) (edge ID {})", s,
                     num_nodes, out.eids[q]);
      }
      src[q] = compact_source(tag, base, nodes, next, s);
    }
    num_src = next;
    compacted = end;
    compact_ticks += __rdtsc() - t0;
  }
  template <class S>
  void write(const S& g, const UniformWindow& wd, const int64_t* /*seeds*/, const Ahead& ahead) {
    const int64_t o0 = size;
    size += wd.total;
    if (size > out.num_edges()) {  // a step of many windows: resize's zero-fill stays in cache
      const size_t grown = static_cast<size_t>(size + std::max<int64_t>(wd.total, 4096));
      out.src.resize(grown);
      out.dst.resize(grown);
      out.eids.resize(grown);
    }
    int64_t* src = out.src.data() + o0;
    int64_t* dst = out.dst.data() + o0;
    int64_t* eo = out.eids.data() + o0;
    const int64_t* pos = wd.pos.data();
    int64_t q = 0;
    for (int64_t i = 0; i < wd.size; ++i) {
      const int64_t local = wd.first + i;
      for (int64_t j = 0; j < wd.count[i]; ++j, ++q) {
        const int64_t p = pos[q];
        const int64_t u = g.neighbor(p);
        src[q] = u;
        dst[q] = local;
        eo[q] = g.eid(p);
        if (static_cast<uint64_t>(u) < num_nodes) {
          prefetch_l2(&tag[u]);
        }
        ahead.step(g, q);
      }
    }
    ahead.rest(g, q);
    compact_to(o0);  // the previous window
  }
  void finish() {
    compact_to(size);
    out.src_nodes.resize(static_cast<size_t>(num_src));
    out.src.resize(static_cast<size_t>(size));
    out.dst.resize(static_cast<size_t>(size));
    out.eids.resize(static_cast<size_t>(size));
  }
};

// run_uniform's sink for one chunk of a hop sampled by several threads: the window's edges
// appended with the sampled neighbor as src (a global ID, compacted later by append_compacted in
// sample_block.cpp) and the seed's local ID (its position in the hop's seeds) as dst.
struct ChunkSink {
  SampledEdges& out;
  int64_t first_local;  // local ID of the chunk's first seed
  template <class S>
  void write(const S& g, const UniformWindow& wd, const int64_t* /*seeds*/, const Ahead& ahead) {
    const size_t o0 = out.src.size();
    out.src.resize(o0 + static_cast<size_t>(wd.total));
    out.dst.resize(o0 + static_cast<size_t>(wd.total));
    out.eid.resize(o0 + static_cast<size_t>(wd.total));
    int64_t* src = out.src.data() + o0;
    int64_t* dst = out.dst.data() + o0;
    int64_t* eo = out.eid.data() + o0;
    const int64_t* pos = wd.pos.data();
    int64_t q = 0;
    for (int64_t i = 0; i < wd.size; ++i) {
      const int64_t local = first_local + wd.first + i;
      for (int64_t j = 0; j < wd.count[i]; ++j, ++q) {
        const int64_t p = pos[q];
        src[q] = g.neighbor(p);
        dst[q] = local;
        eo[q] = g.eid(p);
        ahead.step(g, q);
      }
    }
    ahead.rest(g, q);
  }
  void finish() {}
};

}  // namespace tessera::ops::detail
