// SPDX-License-Identifier: Apache-2.0
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
/// Memory: 16 bytes per edge for the int64 COO (plus 4*feat_dim+10 bytes per node), and
/// finalize() needs about as much again for the CSC: scale 25 at edge factor 16 (8 GiB COO) is
/// the largest that fits in memory on a 24 GiB machine. Larger graphs (scale 26 and up) are
/// written to disk in bounded memory by `tessera generate`, which streams the chunked
/// functions below.
Dataset generate_rmat(const RmatOptions& opts);

/// Checks the options (scale in [0, 40], edge_factor >= 0, a, b, c >= 0 with a+b+c <= 1,
/// split fractions >= 0 summing to at most 1, feat_dim/num_classes >= 0); throws ValueError.
void validate_rmat_options(const RmatOptions& opts);
/// 2^scale, and edge_factor * 2^scale.
int64_t rmat_num_nodes(const RmatOptions& opts);
int64_t rmat_num_edges(const RmatOptions& opts);

/// Chunked generation, for streaming to disk. Every value is a pure function of (options,
/// index), drawn from a counter-based generator (splitmix64 keyed by seed and index), so any
/// chunking and any thread count give the same graph as generate_rmat. Each call runs in
/// parallel over its range.
/// Edges [begin, end): src/dst hold end - begin node IDs (after the node permutation).
void rmat_edges(const RmatOptions& opts, int64_t begin, int64_t end, int64_t* src, int64_t* dst);
/// Labels of nodes [begin, end) in [0, num_classes) (requires num_classes > 0).
void rmat_labels(const RmatOptions& opts, int64_t begin, int64_t end, int64_t* label);
/// Features of nodes [begin, end), row-major (end - begin) x feat_dim: a per-class centroid
/// (when num_classes > 0) plus uniform noise in [-1, 1), so labels are learnable.
void rmat_features(const RmatOptions& opts, int64_t begin, int64_t end, float* feat);
/// Split of nodes [begin, end): 0 none, 1 train, 2 validation, 3 test (by the fractions).
void rmat_splits(const RmatOptions& opts, int64_t begin, int64_t end, uint8_t* split);

}  // namespace tessera
