// SPDX-License-Identifier: Apache-2.0
// `tessera train`: parses the options of python/examples/train_sage.py and runs the libtorch
// trainer (host/train).
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/train/train.hpp"

namespace tessera::tools {

namespace {

std::vector<int64_t> parse_fanouts(const std::string& s) {
  std::vector<int64_t> out;
  TESSERA_EXPECTS(s.empty() || s.back() != ',', ValueError,
                  "--fanouts {}: ends with a comma (give e.g. 10,25, input layer first)", s);
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    TESSERA_EXPECTS(!item.empty() && *end == '\0', ValueError,
                    "--fanouts {}: '{}' is not an integer (give e.g. 10,25, input layer first)", s,
                    item);
    TESSERA_EXPECTS(errno != ERANGE, ValueError, "--fanouts {}: '{}' is out of range", s, item);
    out.push_back(v);
  }
  TESSERA_EXPECTS(!out.empty(), ValueError, "--fanouts is empty");
  return out;
}

/// The raw values of the options that fall back to the metric's preset when not given.
struct Raw {
  int64_t epochs = 0, batch_size = 0, eval_every = 0, hidden = 0, log_every = 0, stop_after = 0;
  double dropout = 0, input_dropout = 0, lr = 0, weight_decay = 0, gpu_budget = 0;
  std::string fanouts, feat_norm, model = "sage";
  bool layer_norm = false, no_layer_norm = false;
};

}  // namespace

void register_train(CLI::App& app) {
  auto o = std::make_shared<train::TrainOptions>();
  auto raw = std::make_shared<Raw>();
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train GraphSAGE or GCN with mini-batch neighbor sampling on a partitioned graph in C++ "
      "(libtorch): python/examples/train_sage.py's presets, partitions, batches and results. "
      "Run it under tessera launch, torchrun, srun or mpirun for several ranks.");
  sub->add_option("--dataset", o->dataset, "Dataset folder (npy layout)")->required();
  sub->add_option("--parts", o->parts, "Partitions (default: the number of ranks)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--batching", o->batching, "global (the same batches for any P) or split")
      ->capture_default_str();
  sub->add_option("--part-method", o->part_method, "metis or random")->capture_default_str();
  sub->add_option("--part-dir", o->part_dir,
                  "Where the partitions go (default out/partitions/<name>-<method>-p<P>, the "
                  "Python example's)");
  sub->add_flag("--repartition", o->repartition, "Partition again even if a config exists");
  sub->add_flag("--no-symmetrize", o->no_symmetrize, "Keep edges directed");
  sub->add_option("--model", raw->model, "sage (GraphSAGE, mean aggregator) or gcn")
      ->capture_default_str();
  auto* epochs = sub->add_option("--epochs", raw->epochs, "Epochs (preset: 100 acc, 40 rocauc)");
  auto* fanouts =
      sub->add_option("--fanouts", raw->fanouts, "Per layer, input layer first (e.g. 10,25)");
  auto* batch = sub->add_option("--batch-size", raw->batch_size,
                                "Seeds per optimizer step over all ranks (each of P takes 1/P)");
  sub->add_option("--eval-batch-size", o->eval_batch_size,
                  "Nodes per batch of the layer-wise full-neighbor inference")
      ->capture_default_str();
  auto* eval_every = sub->add_option("--eval-every", raw->eval_every, "Evaluate every k epochs");
  auto* hidden = sub->add_option("--hidden", raw->hidden, "Hidden units");
  auto* dropout = sub->add_option("--dropout", raw->dropout, "Dropout between layers");
  auto* in_drop = sub->add_option("--input-dropout", raw->input_dropout, "Dropout of the input");
  auto* ln = sub->add_flag("--layer-norm", raw->layer_norm, "Layer norm between layers");
  auto* no_ln = sub->add_flag("--no-layer-norm", raw->no_layer_norm, "No layer norm");
  auto* lr = sub->add_option("--lr", raw->lr, "Adam learning rate");
  auto* wd = sub->add_option("--weight-decay", raw->weight_decay, "Adam weight decay");
  auto* fnorm = sub->add_option("--feat-norm", raw->feat_norm, "none, row or standard");
  sub->add_option("--metric", o->metric, "auto (from meta.json), acc or rocauc")
      ->capture_default_str();
  sub->add_option("--split", o->split, "Split index of [N, S] masks, a list, or 'all'")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the model, the loaders and METIS")
      ->capture_default_str();
  sub->add_option("--num-workers", o->num_workers, "Sampler threads per loader")
      ->capture_default_str();
  sub->add_option("--prefetch", o->prefetch, "Batches prepared ahead of training")
      ->capture_default_str();
  auto* log_every = sub->add_option("--log-every", raw->log_every,
                                    "Read the loss back every k steps (default 1 CPU, 20 GPU)");
  sub->add_option("--grad-sync", o->grad_sync,
                  "Gradient all-reduce: auto, nccl (Tessera's NCCL transport, GPU) or host")
      ->capture_default_str();
  auto* budget = sub->add_option("--gpu-budget", raw->gpu_budget,
                                 "GB of GPU memory for the graph and its features (default: "
                                 "half of the free memory)");
  sub->add_option("--threads", o->threads, "Intra-op threads (0: default)")->capture_default_str();
  sub->add_option("--device", o->device, "auto, cpu, cuda (cuda:<LOCAL_RANK % GPUs>) or cuda:N")
      ->capture_default_str();
  sub->add_option("--checkpoint", o->checkpoint, "Checkpoint file (saved after every epoch)");
  sub->add_flag("--resume", o->resume, "Continue from --checkpoint");
  auto* stop_after = sub->add_option("--stop-after", raw->stop_after,
                                     "Stop after this many epochs (to test --resume)");
  sub->add_option("--results", o->results, "Write the results as JSON here");
  sub->add_option("--loss-curve", o->loss_curve,
                  "Loss-curve CSV (default out/<name>-p<P>-cpp-loss.csv)");
  sub->add_option("--save-predictions", o->save_predictions,
                  "Folder for predictions.npy, embeddings.npy and logits.npy (original node "
                  "order)");
  sub->add_option("--batch-digests", o->batch_digests,
                  "Record digests of the first k batches of every epoch in the results")
      ->capture_default_str();
  sub->add_flag("--op-time", o->op_time,
                "Time the ATen operators of every step (op_seconds per epoch in the results; "
                "about 1 us per operator)");
  sub->add_flag("--quiet", o->quiet, "One line per split, no progress bar");
  sub->callback([=] {
    TESSERA_EXPECTS(raw->model == "sage" || raw->model == "gcn", ValueError,
                    "--model must be sage or gcn, got '{}'", raw->model);
    o->model = raw->model == "sage" ? train::ModelKind::kSage : train::ModelKind::kGcn;
    if (epochs->count() > 0) {
      o->epochs = raw->epochs;
    }
    if (fanouts->count() > 0) {
      o->fanouts = parse_fanouts(raw->fanouts);
    }
    if (batch->count() > 0) {
      o->batch_size = raw->batch_size;
    }
    if (eval_every->count() > 0) {
      o->eval_every = raw->eval_every;
    }
    if (hidden->count() > 0) {
      o->hidden = raw->hidden;
    }
    if (dropout->count() > 0) {
      o->dropout = raw->dropout;
    }
    if (in_drop->count() > 0) {
      o->input_dropout = raw->input_dropout;
    }
    TESSERA_EXPECTS(!(ln->count() > 0 && no_ln->count() > 0), ValueError,
                    "--layer-norm and --no-layer-norm contradict each other");
    if (ln->count() > 0) {
      o->layer_norm = true;
    }
    if (no_ln->count() > 0) {
      o->layer_norm = false;
    }
    if (lr->count() > 0) {
      o->lr = raw->lr;
    }
    if (wd->count() > 0) {
      o->weight_decay = raw->weight_decay;
    }
    if (fnorm->count() > 0) {
      o->feat_norm = raw->feat_norm;
    }
    if (log_every->count() > 0) {
      o->log_every = raw->log_every;
    }
    if (budget->count() > 0) {
      o->gpu_budget_gb = raw->gpu_budget;
    }
    if (stop_after->count() > 0) {
      o->stop_after = raw->stop_after;
    }
    const int code = train::run_training(*o);
    if (code != 0) {
      std::exit(code);
    }
  });
}

}  // namespace tessera::tools
