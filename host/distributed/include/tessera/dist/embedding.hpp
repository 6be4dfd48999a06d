// SPDX-License-Identifier: Apache-2.0
// Sparse optimizers of distributed embeddings (DGL's DistEmbedding with SparseAdagrad /
// SparseAdam): the sparse gradients of the rows a step touched are pushed to the rows' owners in
// one all-to-all and applied there, to the owner's rows of the embedding and of the optimizer's
// state tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dist/tensor.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/ops/span.hpp"

namespace tessera::dist {

namespace detail {
struct OptimizerState;
}

/// Hyperparameters of SparseOptimizer::adagrad (DGL's SparseAdagrad).
struct SparseAdagradOptions {
  double lr = 0.01;                      ///< learning rate
  double eps = 1e-10;                    ///< added to sqrt(sum) in the denominator
  double initial_accumulator_value = 0;  ///< initial value of every element of the sum
};

/// Hyperparameters of SparseOptimizer::adam (DGL's SparseAdam; per-row step counts).
struct SparseAdamOptions {
  double lr = 0.001;     ///< learning rate
  double beta1 = 0.9;    ///< decay of the first moment
  double beta2 = 0.999;  ///< decay of the second moment
  double eps = 1e-8;     ///< added to sqrt(vhat) in the denominator
};

/// A sparse optimizer of one embedding: a float32 DistTensor of shape [N, dim] under any
/// PartPolicy (a "DistEmbedding" is such a tensor, usually persistent). A handle: copies share
/// the optimizer. Its state lives in persistent DistTensors over the embedding's policy and
/// runtime, so it can be read, saved and loaded like any tensor:
///
///  * Adagrad: `<emb>:adagrad_sum` (float32 [N, dim], filled with initial_accumulator_value);
///  * Adam: `<emb>:adam_m`, `<emb>:adam_v` (float32 [N, dim], zeros) and `<emb>:adam_step`
///    (int64 [N], how many steps updated each row).
///
/// State tensors are created idempotently by name: a second optimizer of the same kind over the
/// same embedding shares the existing state (its initial_accumulator_value is then not applied).
///
/// Arithmetic (documented so that a reference can reproduce it bit for bit): gradients are
/// summed in float32 starting from 0, on each rank over its repeated IDs in the order given,
/// then at the owner over the ranks' sums in increasing rank order. The update of one element
/// runs in float32 with the hyperparameters rounded to float32 (`1 - beta` computed in double,
/// then rounded); Adam's bias corrections `1 - beta^step` are computed in double from the row's
/// step and rounded to float32:
///
///  * Adagrad: `sum += g*g; w -= lr * g / (sqrt(sum) + eps)`;
///  * Adam (rows that got a gradient only): `step += 1; m = b1*m + (1-b1)*g;
///    v = b2*v + (1-b2)*g*g; mhat = m / (1-b1^step); vhat = v / (1-b2^step);
///    w -= lr * mhat / (sqrt(vhat) + eps)`.
class SparseOptimizer {
 public:
  enum class Kind : uint8_t { kAdagrad, kAdam };

  SparseOptimizer() = default;
  /// Collective (creates the state tensors). ValueError naming the tensor when `emb` is not a
  /// defined float32 tensor of 2 dimensions, or an option is out of range (lr < 0, eps < 0,
  /// beta outside [0, 1)).
  static SparseOptimizer adagrad(const DistTensor& emb, const SparseAdagradOptions& options = {});
  static SparseOptimizer adam(const DistTensor& emb, const SparseAdamOptions& options = {});

  /// COLLECTIVE: every rank calls it in the same step, with its own `ids` (global rows, any
  /// order, repeats allowed, possibly empty) and `grads`: ids.size() * dim float32 values,
  /// row-major, host memory (may be null when ids is empty). Repeated IDs on a rank are summed
  /// first; then one all_to_all_v over the runtime's transport sends each (id, gradient row) to
  /// the row's owner, which sums the contributions per row in increasing sender-rank order and
  /// updates its local rows of the embedding and the state. Ends with a barrier: when step
  /// returns on any rank, every rank's rows are updated, so reads see the new values.
  ///
  /// Every rank's message carries a header (the embedding's tensor id, a per-optimizer call
  /// count, dim, and an error status), so a mismatch between ranks (other optimizers, other call
  /// counts) fails every rank with ValueError naming both ranks instead of mixing gradients, and a
  /// rank whose arguments are wrong makes every rank fail before anything is applied: IndexError
  /// naming the ID and its position for an ID outside [0, N) (the other ranks' IndexError names
  /// that rank). A rank that never calls makes the others fail at the transport's deadline
  /// (TimeoutError / PeerLostError naming it).
  void step(ops::Span<const int64_t> ids, const float* grads);
  /// The same with `grads` an Array (float32, shape [ids.size(), dim]); TypeError / ValueError
  /// otherwise.
  void step(ops::Span<const int64_t> ids, const Array& grads);

  /// Learning rate of subsequent steps (>= 0; not saved by save()). Local to this rank: set it
  /// to the same value on every rank.
  void set_lr(double lr);
  double lr() const;

  bool defined() const { return static_cast<bool>(s_); }
  Kind kind() const;
  /// The embedding this optimizer updates.
  const DistTensor& embedding() const;
  /// The state tensors in a fixed order: Adagrad {sum}; Adam {m, v, step}.
  const std::vector<DistTensor>& state_tensors() const;
  /// One state tensor by its suffix: "adagrad_sum", "adam_m", "adam_v" or "adam_step";
  /// ValueError naming what exists otherwise.
  const DistTensor& state(const std::string& suffix) const;
  /// Number of step() calls made on this rank (the call count the headers compare).
  int64_t num_steps() const;

  /// Collective: save_dist_tensor of every state tensor into `dir` (the embedding itself is a
  /// tensor of its own: save it with save_dist_tensor). Hyperparameters are not saved.
  void save(const std::filesystem::path& dir) const;
  /// Collective: load_dist_tensor of every state tensor from `dir`; the same checks and the same
  /// all-or-nothing behaviour per tensor.
  void load(const std::filesystem::path& dir);

 private:
  std::shared_ptr<detail::OptimizerState> s_;
};

}  // namespace tessera::dist
