// SPDX-License-Identifier: Apache-2.0
// The models of `tessera train` on libtorch's ATen: GraphSAGE (mean aggregator) and GCN layers
// over blocks, and Adam as torch.optim.Adam computes it. Each operation is the one
// python/tessera/nn.py and torch.optim run, in the same order, so with the same seed, batches
// and thread count the C++ trainer computes bit for bit what train_sage.py does on the CPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/train/train.hpp"

namespace tessera::train::detail {

/// A block on the tensors' device: int64 local edge endpoints, and the node counts (the first
/// num_dst source nodes are the destinations).
struct TBlock {
  at::Tensor src, dst;
  int64_t num_src = 0, num_dst = 0;
  /// The CSR offsets of the destinations' edges (num_dst + 1, int64), when the batch has them
  /// (the GPU loader's): SAGE's mean aggregation on a GPU then runs Tessera's row kernels.
  at::Tensor indptr = {};
  /// The sources' out-degrees in the whole graph, self loop included (float, num_src), when
  /// known (layer-wise inference): GCN divides by them instead of the block's counts, which
  /// cover only the edges into this block's destinations.
  at::Tensor src_out_deg = {};
};

/// A stack of SAGEConv or GCN layers with ReLU, optional layer norm and dropout between them
/// (python/tessera/nn.py's GraphSAGE). Parameters are created on the CPU by the default CPU
/// generator in the order the Python model draws them, then moved by to().
class Model {
 public:
  Model(ModelKind kind, int64_t in_feats, int64_t hidden, int64_t out_feats, int num_layers,
        double dropout, double input_dropout, bool layer_norm);

  /// Outputs of blocks.back()'s destination nodes; `x` holds blocks[0]'s source features.
  /// `train` applies dropout.
  at::Tensor forward(const std::vector<TBlock>& blocks, const at::Tensor& x, bool train) const;
  /// Layer `i` on one block without dropout, followed by norm and ReLU unless it is the last
  /// (layer-wise inference).
  at::Tensor layer_forward(int i, const TBlock& block, const at::Tensor& x) const;
  int num_layers() const { return static_cast<int>(layers_.size()); }
  int64_t out_dim(int i) const { return layers_[i].out; }

  /// (name, tensor) in the module order of the Python model's parameters(); names are its
  /// state_dict keys ("layers.0.fc_self.weight", "norms.0.bias", ...).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<at::Tensor> parameters() const;
  void to(const at::Device& device);
  /// train_sage.py's param_digest: SHA-256 of every (name, bytes) in name order, 16 hex digits.
  std::string digest() const;

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    at::Tensor bias;
    at::Tensor w_self, w_neigh;  // SAGE: fc_self.weight, fc_neigh.weight [out, in]
    at::Tensor weight;           // GCN: [out, in]
  };
  at::Tensor sage(const Layer& l, const TBlock& b, const at::Tensor& x) const;
  at::Tensor gcn(const Layer& l, const TBlock& b, const at::Tensor& x) const;
  at::Tensor conv(const Layer& l, const TBlock& b, const at::Tensor& x) const;
  ModelKind kind_;
  std::vector<Layer> layers_;
  std::vector<std::pair<at::Tensor, at::Tensor>> norms_;  // LayerNorm weight, bias (or none)
  double dropout_, input_dropout_;
};

/// torch.optim.Adam (not decoupled weight decay, no amsgrad): on the CPU the single-tensor
/// update of torch/optim/adam.py op for op (so the bits equal Python's); on a GPU torch's fused
/// kernel (_fused_adam_), as train_sage.py's fused=True.
class Adam {
 public:
  Adam(std::vector<at::Tensor> params, double lr, double weight_decay, bool fused);
  void zero_grad();
  void step();
  /// State tensors for a checkpoint: "exp_avg.<i>", "exp_avg_sq.<i>", "step.<i>".
  std::vector<std::pair<std::string, at::Tensor>> state() const;

 private:
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_, step_;
  double lr_, weight_decay_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
  bool fused_;
};

/// Seeds torch's default CPU generator and every CUDA generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace tessera::train::detail
