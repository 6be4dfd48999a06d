// SPDX-License-Identifier: Apache-2.0
// `tessera train`: mini-batch GraphSAGE / GCN training on a partitioned graph in C++ (libtorch),
// the C++ twin of python/examples/train_sage.py: the same partitions, loaders, samplers, presets,
// batches and results, without Python.
//
// This header needs no torch header: the trainer itself (train.cpp, model.cpp) is compiled only
// with -DTESSERA_WITH_TORCH=ON; without it run_training throws NotCompiledError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::train {

/// The model: GraphSAGE with the mean aggregator (python/tessera/nn.py, DGL's SAGEConv), or GCN
/// (DGL's GraphConv with norm="both" on each block with a self loop on every destination node).
enum class ModelKind : uint8_t { kSage, kGcn };

/// Hyper-parameters of one task (train_sage.py's PRESETS).
struct Hyper {
  int64_t epochs = 0;
  std::vector<int64_t> fanouts;  ///< per layer, input layer first
  int64_t batch_size = 0;        ///< seeds per optimizer step over all ranks
  int64_t hidden = 0;
  double dropout = 0;
  double input_dropout = 0;
  bool layer_norm = false;
  double lr = 0;
  double weight_decay = 0;
  std::string feat_norm;  ///< "none", "row" or "standard"
  int64_t eval_every = 1;
};

/// train_sage.py's PRESETS for a metric: "acc" (Cora-like) or "rocauc" (Tolokers-like).
/// ValueError for another name.
Hyper preset(const std::string& metric);

/// Everything `tessera train` takes. Unset optionals take the metric's preset (as
/// train_sage.py does), the rest train_sage.py's defaults.
struct TrainOptions {
  std::string dataset;              ///< dataset folder (npy layout); required
  int64_t parts = 0;                ///< partitions; 0: the number of ranks (must equal it)
  std::string batching = "global";  ///< "global" (the same batches for any P) or "split"
  std::string part_method = "metis";
  std::string part_dir;  ///< default out/partitions/<name>-<method>-p<P> (shared with Python)
  bool repartition = false;
  bool no_symmetrize = false;
  ModelKind model = ModelKind::kSage;

  std::optional<int64_t> epochs;
  std::optional<std::vector<int64_t>> fanouts;
  std::optional<int64_t> batch_size;
  int64_t eval_batch_size = 32768;
  std::optional<int64_t> eval_every;
  std::optional<int64_t> hidden;
  std::optional<double> dropout;
  std::optional<double> input_dropout;
  std::optional<bool> layer_norm;
  std::optional<double> lr;
  std::optional<double> weight_decay;
  std::optional<std::string> feat_norm;
  std::string metric = "auto";  ///< "auto" (from the dataset's meta.json), "acc" or "rocauc"
  std::string split = "0";      ///< split index, a comma-separated list, or "all"
  int64_t seed = 0;
  int num_workers = 1;               ///< sampler threads (on a GPU each has its own CUDA stream)
  int prefetch = 4;                  ///< batches prepared ahead of training
  std::optional<int64_t> log_every;  ///< loss read back every k steps (1 on CPU, 20 on GPU)
  std::string grad_sync = "auto";    ///< "auto", "nccl" (Tessera's NCCL transport) or "host"
  std::optional<double> gpu_budget_gb;
  int threads = 0;              ///< intra-op threads (0: torch's default, or cores / local ranks)
  std::string device = "auto";  ///< "auto", "cpu", "cuda" or "cuda:N"
  std::string checkpoint;       ///< saved after every epoch (atomically)
  bool resume = false;
  std::optional<int64_t> stop_after;  ///< stop after this many epochs (to test resume)
  std::string results;                ///< results JSON (train_sage.py's layout)
  std::string loss_curve;             ///< loss-curve CSV (default out/<name>-p<P>-cpp-loss.csv)
  std::string save_predictions;       ///< folder for predictions / embeddings / logits .npy
  int64_t batch_digests = 0;          ///< record digests of the first k batches of every epoch
  bool op_time = false;               ///< time the ATen operators of the steps (RecordFunction)
  bool quiet = false;
};

/// The options with every unset hyper-parameter taken from the preset of `metric` ("acc" or
/// "rocauc"), checked: ValueError naming the option for a bad value.
Hyper resolve_hyper(const TrainOptions& o, const std::string& metric);

/// The metric of a dataset folder: "rocauc" when its meta.json names ROC-AUC, else "acc".
std::string dataset_metric(const std::string& dataset);

/// Runs the training as `tessera train` does: joins the job the launcher set up (tessera
/// launch, torchrun, srun, mpirun; one process otherwise), partitions the dataset on rank 0
/// unless a partitioning exists, trains, evaluates, writes what was asked. Collective.
/// Returns the exit code. Throws tessera errors (ValueError naming the option, IOError naming
/// the file, ...); NotCompiledError in a build without TESSERA_WITH_TORCH.
int run_training(const TrainOptions& opts);

/// Whether this build has the libtorch trainer (TESSERA_WITH_TORCH).
bool torch_compiled();

}  // namespace tessera::train
