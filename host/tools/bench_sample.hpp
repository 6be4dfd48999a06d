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
  int streams = 4;  // > 1: also time this many threads, each with its own stream
  uint64_t seed = 0;
  std::string placement = "gpu";
  std::string command;
  std::string json;
  PhaseTimer* timer = nullptr;
};

/// Places the graph (gpu or uva), checks the first batches against the CPU twin bit for bit,
/// times `batches` batches of sampling and compaction on the GPU on one stream and then (when
/// `streams` > 1) on that many streams driven by as many host threads, measures the copy bound
/// of the placement in the same run, prints all of it and writes the JSON. NotCompiledError
/// without CUDA.
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
