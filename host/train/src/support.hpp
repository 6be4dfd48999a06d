// SPDX-License-Identifier: Apache-2.0
// What the trainer needs besides libtorch: digests, the ROC-AUC, the progress bar, the
// checkpoint file format, the per-split training record, partition preparation and the results
// files. Nothing here includes a torch header, so the torch translation units stay few.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dist/runtime.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/train/train.hpp"

namespace tessera::train::detail {

/// Digest of a batch as tests/python/test_cpp_trainer.py computes it from Python's loader: the
/// seeds, then per block (input layer first) num_dst, src_nodes, src, dst and eids as int64
/// little-endian bytes; the first 16 hex digits of their SHA-256.
std::string batch_digest(const std::vector<int64_t>& seeds, const std::vector<ops::Block>& blocks);

/// python/tessera/metrics.py's roc_auc(pos, neg) (Mann-Whitney U with average ranks for ties),
/// as a fraction; NaN when either side is empty.
double roc_auc(const std::vector<double>& pos, const std::vector<double>& neg);

/// train_sage.py's progress bar: one status line on stderr, rewritten in place on a terminal,
/// else a line every kLogInterval seconds and one at the end ("split 0 epoch   3: 40/40
/// batches, loss 0.1234, 1.2s").
class ProgressBar {
 public:
  ProgressBar(int64_t total, std::string desc, bool enabled);
  void update(double loss);
  void close();

 private:
  int64_t total_, n_ = 0;
  std::string desc_;
  bool enabled_, tty_;
  double t0_, last_;
};

/// Seconds between the progress lines of an epoch when stderr is not a terminal.
inline constexpr double kLogInterval = 30;

/// One epoch of the training record (train_sage.py's state["history"] entries).
struct EpochRecord {
  int64_t epoch = 0;
  double loss = 0;
  double val = 0;  ///< NaN when not evaluated
  double seconds = 0, eval_seconds = 0;
  int64_t steps = 0;
  /// wait, forward_backward, all_reduce, optimizer, other (seconds of the training thread)
  std::map<std::string, double> split;
  double loader_sampling = 0, loader_gathering = 0;
  double op_seconds = 0;  ///< with --op-time: the ATen operators of the steps; else NaN
  std::vector<std::string> batch_digests;  ///< of the first --batch-digests batches
};

/// The training state of one split that a checkpoint carries (train_sage.py's `state`).
struct SplitState {
  int64_t epoch = 0;  ///< the next epoch to run
  std::vector<EpochRecord> history;
  double best_val = 0;  ///< -inf before the first evaluation
  int64_t best_epoch = -1;
  double test_at_best = 0;  ///< NaN before the first evaluation
  SplitState();
};

nlohmann::json to_json(const SplitState& s);
/// Reads what to_json wrote (null stands for NaN and -inf as JSON has neither).
SplitState split_state_from_json(const nlohmann::json& j);

/// A named tensor of a checkpoint, as raw bytes.
struct NamedBytes {
  std::string name;
  std::string dtype;  ///< NumPy name ("float32", "uint8", ...)
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Writes a checkpoint: one file ("TESSERA-CKPT1\n", a JSON header with `meta`, every entry's
/// name, dtype, shape, offset, size and the CRC-32 of the data, then the data), through a
/// temporary sibling and a rename, so a reader sees the previous checkpoint or the whole new one.
void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta,
                      const std::vector<NamedBytes>& entries);
/// Reads a checkpoint: IOError naming the file when it is missing, unreadable, truncated or its
/// CRC differs; ValueError when it is not a checkpoint of this format.
// The members' implicit moves do not throw; clang-tidy cannot see it through std::map.
struct Checkpoint {  // NOLINT(bugprone-exception-escape)
  nlohmann::json meta;
  std::map<std::string, NamedBytes> entries;
  /// The entry `name` (ValueError naming the file and the entry when absent).
  const NamedBytes& at(const std::string& name) const;
  std::filesystem::path path;
};
Checkpoint read_checkpoint(const std::filesystem::path& path);

/// This process's rank among its node's (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK)
/// and the node's number of ranks (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE,
/// OMPI_COMM_WORLD_LOCAL_SIZE; else `world`). ValueError naming a variable that is no integer.
int local_rank();
int local_world_size(int world);

/// The dataset's name as train_sage.py takes it: the last component of its path.
std::string dataset_name(const std::string& dataset);

/// Partitions `o.dataset` into `parts` parts as train_sage.py does (METIS balanced on
/// train_mask and edges when parts > 1, 1-hop halo, symmetrized unless no_symmetrize, seed
/// o.seed), on rank 0 and only when the config does not exist yet (or o.repartition); every rank
/// then gets the config path. `check` sees the dataset before it is partitioned, to refuse
/// what the run cannot train on before the partitioning's work. A config of another part count
/// is refused. Collective: a failure on rank 0 fails every rank, naming it.
std::string prepare_partitions(dist::Runtime& rt, const TrainOptions& o, int64_t parts,
                               const std::function<void(const Dataset&)>& check = {});

/// Seconds to read every file of partition `part` of `config` once (the floor of loading it).
double read_partition_files(const std::string& config, int part);

/// The splits `spec` names ("0", "1,3", "all") for masks with `num_splits` columns;
/// ValueError naming --split otherwise. `num_splits` < 0 checks the syntax only ("all" then
/// names no split).
std::vector<int64_t> parse_splits(const std::string& spec, int64_t num_splits);

/// Every rank's outcome of a step that can fail on some ranks only: an empty `error` is
/// success. Throws on every rank when any failed: the own error's message, or one naming the
/// first failed rank and its message. `what` names the step.
void agree(dist::Runtime& rt, const std::string& what, const std::string& error);

}  // namespace tessera::train::detail
