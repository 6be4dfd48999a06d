// SPDX-License-Identifier: Apache-2.0
// Presets and option checks of `tessera train` (no torch here).
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/train/train.hpp"

namespace tessera::train {

Hyper preset(const std::string& metric) {
  // train_sage.py's PRESETS: GraphSAGE settings that reach the published figures.
  Hyper h;
  if (metric == "acc") {
    h.epochs = 100;
    h.fanouts = {10, 25};
    h.batch_size = 64;
    h.hidden = 64;
    h.dropout = 0.5;
    h.input_dropout = 0.0;
    h.layer_norm = false;
    h.lr = 0.01;
    h.weight_decay = 5e-4;
    h.feat_norm = "row";
    h.eval_every = 1;
    return h;
  }
  if (metric == "rocauc") {
    h.epochs = 40;
    h.fanouts = {15, 10};
    h.batch_size = 512;
    h.hidden = 128;
    h.dropout = 0.2;
    h.input_dropout = 0.0;
    h.layer_norm = true;
    h.lr = 0.01;
    h.weight_decay = 0.0;
    h.feat_norm = "standard";
    h.eval_every = 4;
    return h;
  }
  TESSERA_FAIL(ValueError, "--metric must be auto, acc or rocauc, got '{}'", metric);
}

Hyper resolve_hyper(const TrainOptions& o, const std::string& metric) {
  Hyper h = preset(metric);
  if (o.epochs) {
    h.epochs = *o.epochs;
  }
  if (o.fanouts) {
    h.fanouts = *o.fanouts;
  }
  if (o.batch_size) {
    h.batch_size = *o.batch_size;
  }
  if (o.hidden) {
    h.hidden = *o.hidden;
  }
  if (o.dropout) {
    h.dropout = *o.dropout;
  }
  if (o.input_dropout) {
    h.input_dropout = *o.input_dropout;
  }
  if (o.layer_norm) {
    h.layer_norm = *o.layer_norm;
  }
  if (o.lr) {
    h.lr = *o.lr;
  }
  if (o.weight_decay) {
    h.weight_decay = *o.weight_decay;
  }
  if (o.feat_norm) {
    h.feat_norm = *o.feat_norm;
  }
  if (o.eval_every) {
    h.eval_every = *o.eval_every;
  }
  TESSERA_EXPECTS(h.epochs >= 1, ValueError, "--epochs must be >= 1, got {}", h.epochs);
  TESSERA_EXPECTS(!h.fanouts.empty(), ValueError, "--fanouts is empty");
  for (int64_t f : h.fanouts) {
    TESSERA_EXPECTS(f >= -1, ValueError,
                    "--fanouts: each fanout must be >= 0 or -1 (all neighbors), got {}", f);
  }
  TESSERA_EXPECTS(h.batch_size >= 1, ValueError, "--batch-size must be >= 1, got {}", h.batch_size);
  TESSERA_EXPECTS(h.hidden >= 1, ValueError, "--hidden must be >= 1, got {}", h.hidden);
  TESSERA_EXPECTS(h.dropout >= 0 && h.dropout < 1, ValueError,
                  "--dropout must be in [0, 1), got {}", h.dropout);
  TESSERA_EXPECTS(h.input_dropout >= 0 && h.input_dropout < 1, ValueError,
                  "--input-dropout must be in [0, 1), got {}", h.input_dropout);
  TESSERA_EXPECTS(h.lr > 0 && std::isfinite(h.lr), ValueError, "--lr must be > 0, got {}", h.lr);
  TESSERA_EXPECTS(h.weight_decay >= 0 && std::isfinite(h.weight_decay), ValueError,
                  "--weight-decay must be >= 0, got {}", h.weight_decay);
  TESSERA_EXPECTS(h.feat_norm == "none" || h.feat_norm == "row" || h.feat_norm == "standard",
                  ValueError, "--feat-norm must be none, row or standard, got '{}'", h.feat_norm);
  TESSERA_EXPECTS(h.eval_every >= 1, ValueError, "--eval-every must be >= 1, got {}", h.eval_every);
  return h;
}

std::string dataset_metric(const std::string& dataset) {
  // As train_sage.py: ROC-AUC when meta.json's "metric" names it; accuracy otherwise (also
  // without a readable meta.json).
  std::ifstream f(std::filesystem::path(dataset) / "meta.json");
  if (!f.good()) {
    return "acc";
  }
  const nlohmann::json meta = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("metric") || !meta["metric"].is_string()) {
    return "acc";
  }
  std::string m = meta["metric"].get<std::string>();
  for (char& c : m) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return m.find("ROC") != std::string::npos ? "rocauc" : "acc";
}

}  // namespace tessera::train
