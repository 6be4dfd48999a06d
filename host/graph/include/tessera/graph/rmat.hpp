// R-MAT / Kronecker graph generator (Graph500 parameters), seeded and deterministic.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/graph/dataset.hpp"

namespace tessera {

/// Parameters of an R-MAT graph: 2^scale nodes, edge_factor * 2^scale generated edges.
struct RmatOptions {
  int scale = 16;
  int64_t edge_factor = 16;
  double a = 0.57, b = 0.19, c = 0.19;  ///< Graph500 defaults; d = 1 - a - b - c
  uint64_t seed = 1;
  /// Randomly permute node IDs (Graph500 does) so degree does not correlate with ID.
  bool permute = true;
  /// Optional node data: feat float32 [N, feat_dim] (0 = none), label int64 [N] in
  /// [0, num_classes) (0 = none), train/val/test masks with these fractions (0 = none).
  int64_t feat_dim = 0;
  int64_t num_classes = 0;
  double train_frac = 0, val_frac = 0, test_frac = 0;
};

/// Parses "rmat:SCALE,EF[,SEED]" (e.g. "rmat:21,25"); throws ValueError naming the spec.
RmatOptions parse_rmat_spec(const std::string& spec);
/// True if `s` starts with "rmat:".
bool is_rmat_spec(const std::string& s);

/// Generates the edge list (and optional node data) of an R-MAT graph. The result depends
/// only on the options (not on the thread count). Not finalized: call finalize() or use
/// read_dataset("rmat:...") which also applies the build options.
Dataset generate_rmat(const RmatOptions& opts);

}  // namespace tessera
