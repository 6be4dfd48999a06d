// `tessera bench sample` on the GPU (bench_sample_cuda.cpp), called by cmd_bench.cpp once the
// graph is loaded and the command line checked.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/progress.hpp"
#include "tessera/graph/graph.hpp"

namespace tessera::tools {

struct SampleCudaRun {
  const Graph* graph = nullptr;
  std::string graph_spec;
  bool symmetrized = true;
  std::vector<float> weights;  // storage order; empty: uniform
  std::vector<int64_t> fanouts;
  bool replace = false;
  int64_t batch_size = 1024;
  int64_t batches = 50;
  int64_t check_batches = 2;
  int streams = 4;  // the most streams (host threads) the best-configuration search tries
  std::vector<int64_t> per_call;  // batches per call the search tries (default 1, 2, 4, 8)
  std::vector<int64_t> sweep;     // batch sizes measured one stream and best (empty: none)
  int64_t digest_batches = 8;     // batches in the blocks digest
  bool interleave = true;         // the interleaved adjacency (else split arrays)
  bool cuda_graph = true;
  int stage_bytes = -1;  // UVA row staging (-1: the engine's default)
  uint64_t seed = 0;
  std::string placement = "gpu";
  std::string command;
  std::string json;     // write the JSON here, or
  std::string results;  // under results/<bench>/<date>-<commit>-<machine>.json
  PhaseTimer* timer = nullptr;
};

/// Places the graph (gpu or uva) and measures in one run: the limit (sampled edges per second of
/// the checked batches' frontier visits when a plain kernel reads only what the sampler must
/// read of the placed graph, cuda::row_read_rate), the memcpy bound of the placement and a
/// single-entry random-read rate beside them; the first batches against the CPU twin bit for bit
/// (a difference fails the command); sampling with compaction on one stream (one blocking call
/// per batch, then calls kept two deep), and a search over batches per call and streams for the
/// best configuration; the same at every batch size of `sweep`; a digest of the first batches'
/// blocks, equal for every configuration and the CPU twin. Prints all of it and writes the JSON.
/// NotCompiledError without CUDA.
void run_bench_sample_cuda(const SampleCudaRun& run);

/// The "stages" line of both sampling benchmarks: time and share of sampling and compaction,
/// in the clock `clock` names.
inline void print_sample_stages(double sample_seconds, double compact_seconds, const char* clock) {
  const double busy = sample_seconds + compact_seconds;
  fmt::print("  stages ({}): sampling {:.3f} s ({:.0f}%), compaction {:.3f} s ({:.0f}%)\n", clock,
             sample_seconds, 100 * sample_seconds / busy, compact_seconds,
             100 * compact_seconds / busy);
}

}  // namespace tessera::tools
