// SPDX-License-Identifier: Apache-2.0
// GraphSAGE / GCN layers and Adam on ATen. Only the ATen operators used are included (per-
// operator headers), which keeps this translation unit a fraction of <torch/torch.h>'s compile
// time.
#include "model.hpp"

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/div.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/zeros.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "mean_aggregate.hpp"
#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/sha256.hpp"

namespace tessera::train::detail {

namespace {

// torch.nn.init as torch/nn/init.py computes the bounds (same doubles, same uniform_ draws).
void kaiming_uniform_a_sqrt5(at::Tensor& w) {  // nn.Linear's reset_parameters
  at::NoGradGuard no_grad;
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + std::pow(a, 2)));
  const double std = gain / std::sqrt(static_cast<double>(w.size(1)));
  const double bound = std::sqrt(3.0) * std;
  w.uniform_(-bound, bound);
}

void linear_bias_uniform(at::Tensor& b, int64_t fan_in) {  // nn.Linear's bias init
  at::NoGradGuard no_grad;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  b.uniform_(-bound, bound);
}

void xavier_uniform(at::Tensor& w, double gain) {
  at::NoGradGuard no_grad;
  const double std = gain * std::sqrt(2.0 / static_cast<double>(w.size(1) + w.size(0)));
  const double a = std::sqrt(3.0) * std;
  w.uniform_(-a, a);
}

at::Tensor param(const std::vector<int64_t>& shape) {
  return at::empty(shape, at::TensorOptions().dtype(at::kFloat)).set_requires_grad(true);
}

// nn.py's mean_aggregate: out[v] = mean of h_src[u] over the edges u -> v (0 without edges).
// Float32 rows take the CSR product (Tessera's blocks group their edges by destination), with
// the block's CSR offsets when it has them (the GPU loader's batches), else searched for: on the
// CPU the CPU twin (no [E, F] message tensor), on a GPU, as nn.py's default there, the row
// engine in training steps (small blocks, fanout-bounded rows: the host's time per call
// counts), cuSPARSE without autograd (inference: full neighborhoods, hub rows it balances);
// otherwise index_select + index_add_.
at::Tensor mean_aggregate(const at::Tensor& h, const TBlock& b) {
  if (h.scalar_type() == at::kFloat && h.dim() == 2 && (h.is_cuda() || h.is_cpu())) {
    const at::Tensor indptr =
        b.indptr.defined() ? b.indptr
                           : at::searchsorted(b.dst, at::arange(b.num_dst + 1, b.dst.options()));
    return train::mean_aggregate(h, b.src, indptr,
                                 h.is_cuda() && !at::GradMode::is_enabled()
                                     ? ops::SpmmEngine::kCusparse
                                     : ops::SpmmEngine::kRows);
  }
  at::Tensor out = at::zeros({b.num_dst, h.size(1)}, h.options());
  out.index_add_(0, b.dst, h.index_select(0, b.src));
  at::Tensor deg = at::zeros({b.num_dst}, h.options())
                       .index_add_(0, b.dst, at::ones({b.dst.size(0)}, h.options()));
  return out / deg.clamp_(1).view({-1, 1});
}

}  // namespace

Model::Model(ModelKind kind, int64_t in_feats, int64_t hidden, int64_t out_feats, int num_layers,
             double dropout, double input_dropout, bool layer_norm)
    : kind_(kind), dropout_(dropout), input_dropout_(input_dropout) {
  TESSERA_EXPECTS(num_layers >= 1, ValueError, "a model needs at least one layer (one fanout)");
  std::vector<int64_t> dims{in_feats};
  for (int i = 0; i + 1 < num_layers; ++i) {
    dims.push_back(hidden);
  }
  dims.push_back(out_feats);
  const double relu_gain = std::sqrt(2.0);
  for (int i = 0; i < num_layers; ++i) {
    Layer l;
    l.in = dims[i];
    l.out = dims[i + 1];
    if (kind_ == ModelKind::kSage) {
      // SAGEConv.__init__ (DGL's): nn.Linear(fc_neigh, no bias), nn.Linear(fc_self) each draw
      // their default init, then reset_parameters redraws both weights with Xavier (gain of
      // ReLU); the bias keeps nn.Linear's draw. Five draws in this order.
      l.w_neigh = param({l.out, l.in});
      kaiming_uniform_a_sqrt5(l.w_neigh);
      l.w_self = param({l.out, l.in});
      kaiming_uniform_a_sqrt5(l.w_self);
      l.bias = param({l.out});
      linear_bias_uniform(l.bias, l.in);
      xavier_uniform(l.w_self, relu_gain);
      xavier_uniform(l.w_neigh, relu_gain);
    } else {
      l.weight = param({l.out, l.in});  // DGL's GraphConv: Xavier (gain 1), zero bias
      xavier_uniform(l.weight, 1.0);
      l.bias = at::zeros({l.out}, at::TensorOptions().dtype(at::kFloat)).set_requires_grad(true);
    }
    layers_.push_back(std::move(l));
  }
  if (layer_norm) {
    for (int i = 0; i + 1 < num_layers; ++i) {
      norms_.emplace_back(
          at::ones({hidden}, at::TensorOptions().dtype(at::kFloat)).set_requires_grad(true),
          at::zeros({hidden}, at::TensorOptions().dtype(at::kFloat)).set_requires_grad(true));
    }
  }
}

at::Tensor Model::sage(const Layer& l, const TBlock& b, const at::Tensor& x) const {
  // nn.py's SAGEConv: fc_self(h_dst) + fc_neigh(mean of the in-neighbors) + bias; the projection
  // runs before the aggregation when it shrinks the rows (DGL's order).
  TESSERA_ASSERT(x.size(0) == b.num_src, "{} source rows for a block with {} source nodes",
                 x.size(0), b.num_src);
  return sage_forward(x, b.num_dst, l.w_self, l.w_neigh, l.bias,
                      [&](const at::Tensor& h) { return mean_aggregate(h, b); });
}

at::Tensor Model::gcn(const Layer& l, const TBlock& b, const at::Tensor& x) const {
  // GraphConv(norm="both") on the block plus a self loop on every destination node:
  // h_v' = sum over u -> v and v itself of h_u / sqrt(d_out(u) d_in(v)), degrees counted in the
  // block with the self loops (DGL's GraphConv on a block) or, where the block gives them, the
  // sources' out-degrees in the whole graph; then W (before the sum when it shrinks the rows)
  // and the bias.
  TESSERA_ASSERT(x.size(0) == b.num_src, "{} source rows for a block with {} source nodes",
                 x.size(0), b.num_src);
  const at::TensorOptions f = x.options();
  at::Tensor ones_e = at::ones({b.src.size(0)}, f);
  at::Tensor out_deg;
  if (b.src_out_deg.defined()) {
    TESSERA_ASSERT(b.src_out_deg.size(0) == b.num_src, "{} source degrees for {} source nodes",
                   b.src_out_deg.size(0), b.num_src);
    out_deg = b.src_out_deg.to(f);
  } else {
    out_deg = at::zeros({b.num_src}, f).index_add_(0, b.src, ones_e);
    out_deg.slice(0, 0, b.num_dst).add_(1);
  }
  at::Tensor in_deg = at::zeros({b.num_dst}, f).index_add_(0, b.dst, ones_e).add_(1);
  at::Tensor h = x * out_deg.pow(-0.5).view({-1, 1});
  if (l.in > l.out) {
    h = at::linear(h, l.weight);
  }
  at::Tensor agg =
      at::zeros({b.num_dst, h.size(1)}, f).index_add_(0, b.dst, h.index_select(0, b.src));
  agg = (agg + h.slice(0, 0, b.num_dst)) * in_deg.pow(-0.5).view({-1, 1});
  if (l.in <= l.out) {
    agg = at::linear(agg, l.weight);
  }
  return agg + l.bias;
}

at::Tensor Model::conv(const Layer& l, const TBlock& b, const at::Tensor& x) const {
  return kind_ == ModelKind::kSage ? sage(l, b, x) : gcn(l, b, x);
}

at::Tensor Model::forward(const std::vector<TBlock>& blocks, const at::Tensor& x,
                          bool train) const {
  TESSERA_EXPECTS(blocks.size() == layers_.size(), ValueError,
                  "the model has {} layers but the batch has {} blocks", layers_.size(),
                  blocks.size());
  at::Tensor h = at::dropout(x, input_dropout_, train);
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = conv(layers_[i], blocks[i], h);
    if (i + 1 < layers_.size()) {
      if (!norms_.empty()) {
        h = at::layer_norm(h, {h.size(1)}, norms_[i].first, norms_[i].second, 1e-5);
      }
      h = at::dropout(at::relu(h), dropout_, train);
    }
  }
  return h;
}

at::Tensor Model::layer_forward(int i, const TBlock& block, const at::Tensor& x) const {
  at::Tensor y = conv(layers_[i], block, x);
  if (i + 1 < num_layers()) {
    if (!norms_.empty()) {
      y = at::layer_norm(y, {y.size(1)}, norms_[i].first, norms_[i].second, 1e-5);
    }
    y = at::relu(y);
  }
  return y;
}

std::vector<std::pair<std::string, at::Tensor>> Model::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    if (kind_ == ModelKind::kSage) {  // SAGEConv's modules in their order (DGL's names)
      out.emplace_back(p + "fc_neigh.weight", l.w_neigh);
      out.emplace_back(p + "fc_self.weight", l.w_self);
      out.emplace_back(p + "fc_self.bias", l.bias);
    } else {
      out.emplace_back(p + "bias", l.bias);  // a module's own parameters precede its children's
      out.emplace_back(p + "weight", l.weight);
    }
  }
  for (size_t i = 0; i < norms_.size(); ++i) {
    out.emplace_back("norms." + std::to_string(i) + ".weight", norms_[i].first);
    out.emplace_back("norms." + std::to_string(i) + ".bias", norms_[i].second);
  }
  return out;
}

std::vector<at::Tensor> Model::parameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, t] : named_parameters()) {
    out.push_back(t);
  }
  return out;
}

void Model::to(const at::Device& device) {
  at::NoGradGuard no_grad;
  auto move = [&](at::Tensor& t) {
    if (t.defined()) {
      t = t.to(device).detach().set_requires_grad(true);
    }
  };
  for (Layer& l : layers_) {
    move(l.bias);
    move(l.w_self);
    move(l.w_neigh);
    move(l.weight);
  }
  for (auto& [w, b] : norms_) {
    move(w);
    move(b);
  }
}

std::string Model::digest() const {
  auto params = named_parameters();
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Sha256 h;
  for (const auto& [name, t] : params) {
    const at::Tensor c = t.detach().to(at::kCPU).contiguous();
    h.update(name);
    h.update(c.data_ptr(), c.numel() * c.element_size());
  }
  return to_hex(h.finish()).substr(0, 16);
}

// --- Adam ------------------------------------------------------------------------------------
Adam::Adam(std::vector<at::Tensor> params, double lr, double weight_decay, bool fused)
    : params_(std::move(params)), lr_(lr), weight_decay_(weight_decay), fused_(fused) {
  for (const at::Tensor& p : params_) {
    exp_avg_.push_back(at::zeros_like(p).detach());
    exp_avg_sq_.push_back(at::zeros_like(p).detach());
    // torch keeps the step as a float32 scalar tensor: on the CPU, or beside the parameter for
    // the fused kernel.
    step_.push_back(
        at::zeros({}, p.options().dtype(at::kFloat).device(fused ? p.device() : at::kCPU)));
  }
}

void Adam::zero_grad() {
  for (at::Tensor& p : params_) {
    p.mutable_grad() = at::Tensor();  // set_to_none=True
  }
}

void Adam::step() {
  at::NoGradGuard no_grad;
  if (fused_) {
    std::vector<at::Tensor> params, grads, avg, avg_sq, steps;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].grad().defined()) {
        continue;
      }
      params.push_back(params_[i]);
      grads.push_back(params_[i].grad());
      avg.push_back(exp_avg_[i]);
      avg_sq.push_back(exp_avg_sq_[i]);
      steps.push_back(step_[i]);
    }
    at::_foreach_add_(steps, 1);
    at::_fused_adam_(params, grads, avg, avg_sq, {}, steps, lr_, beta1_, beta2_, weight_decay_,
                     eps_, /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  // torch/optim/adam.py's _single_tensor_adam, operation for operation.
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& param = params_[i];
    at::Tensor grad = param.grad();
    if (!grad.defined()) {
      continue;
    }
    step_[i].add_(1);
    if (weight_decay_ != 0) {
      grad = grad.add(param, weight_decay_);
    }
    exp_avg_[i].lerp_(grad, 1 - beta1_);
    exp_avg_sq_[i].mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
    const double step = step_[i].item<double>();
    const double bias_correction1 = 1 - std::pow(beta1_, step);
    const double bias_correction2 = 1 - std::pow(beta2_, step);
    const double step_size = lr_ / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    at::Tensor denom = (exp_avg_sq_[i].sqrt() / bias_correction2_sqrt).add_(eps_);
    param.addcdiv_(exp_avg_[i], denom, -step_size);
  }
}

std::vector<std::pair<std::string, at::Tensor>> Adam::state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("exp_avg." + std::to_string(i), exp_avg_[i]);
    out.emplace_back("exp_avg_sq." + std::to_string(i), exp_avg_sq_[i]);
    out.emplace_back("step." + std::to_string(i), step_[i]);
  }
  return out;
}

void manual_seed(uint64_t seed) {
  torch::manual_seed(seed);
}

}  // namespace tessera::train::detail
