// SPDX-License-Identifier: Apache-2.0
// The node loader of the GPU training path: mini-batches of a DistGraph prepared whole in device
// memory (seeds, blocks, the input nodes' feature rows, the seeds' labels) on the loader's own
// CUDA streams, `prefetch` batches ahead of training. The batches are the ones
// DistNodeDataLoader yields (same seeds, same keys, the same blocks bit for bit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cuda/memory.hpp"
#include "tessera/dist/device_sampling.hpp"
#include "tessera/dist/loader.hpp"
#include "tessera/dist/tensor.hpp"

namespace tessera::dist {

/// One batch in device memory, owned by whoever holds it. Its memory comes from the scratch
/// allocator on the loader stream that made it; release_after() names the stream that consumes
/// it, and the destructor then orders the memory's reuse after everything enqueued on that
/// stream so far (an event), so the consumer may still have kernels in flight that read it.
struct DeviceMiniBatch {
  /// The loader stream that made the batch, kept alive (and only then destroyed, after it is
  /// idle) for as long as the batch: its memory goes back to that stream's free list. Declared
  /// first, so it outlives the buffers below.
  std::shared_ptr<cuda::Stream> stream_owner;
  int64_t epoch = 0;
  int64_t index = 0;           ///< global batch index (the sampling key)
  std::vector<int64_t> seeds;  ///< host copy of the output nodes
  std::unique_ptr<cuda::ScratchBuffer> d_seeds;
  ops::DeviceBlocks blocks;  ///< input layer first; blocks.front().src_nodes are the input nodes
  /// Per block: the CSR offsets of its destination nodes (num_dst + 1 int64; block edges are
  /// grouped by destination), made on the loader stream so the training step needs no search.
  std::vector<std::unique_ptr<cuda::ScratchBuffer>> indptr;
  /// Per prefetched node-data tensor (the loader's node_data order): rows of the input nodes,
  /// num_input_nodes() x row_bytes.
  std::vector<std::unique_ptr<cuda::ScratchBuffer>> node_rows;
  /// Per label tensor (the loader's labels order): rows of the seeds, seeds.size() x row_bytes.
  std::vector<std::unique_ptr<cuda::ScratchBuffer>> label_rows;
  double sample_seconds = 0;  ///< wall time of sampling and compaction (the worker's stream)
  double gather_seconds = 0;  ///< wall time of the feature and label gathers
  int device = -1;
  cuda::StreamHandle stream = nullptr;  ///< the loader stream that made it (idle on hand-off)

  int64_t num_input_nodes() const {
    return blocks.blocks.empty() ? 0 : blocks.blocks.front().num_src;
  }
  /// The stream whose work must finish before this batch's memory is reused.
  void release_after(cuda::StreamHandle consumer) {
    consumer_ = consumer;
    consumed_ = true;
  }
  DeviceMiniBatch() = default;
  DeviceMiniBatch(DeviceMiniBatch&&) = default;
  DeviceMiniBatch& operator=(DeviceMiniBatch&&) = default;
  ~DeviceMiniBatch();

 private:
  cuda::StreamHandle consumer_ = nullptr;
  bool consumed_ = false;
};

/// DistNodeDataLoader on the GPU. Creation is collective (the ranks agree on the batches per
/// epoch, as DistNodeDataLoader). `num_workers` threads each sample and gather on a stream of
/// their own; a worker's batch is complete (its stream idle) when next() hands it over.
class DistDeviceNodeLoader {
 public:
  /// `node_data`: DistTensors (node policy) whose rows of the input nodes are gathered into the
  /// batch (DGL's prefetch_node_feats); `labels`: the same for the seeds (prefetch_labels).
  /// Mirror them first (place_on_device) for device-speed gathers of local rows. ValueError as
  /// DistNodeDataLoader, and for a tensor of another row count than the graph's nodes. Holds
  /// references to the sampler (and its graph) and handles to the tensors.
  DistDeviceNodeLoader(const DistDeviceSampler& sampler, std::vector<int64_t> seeds,
                       ops::LoaderOptions opts, BatchOrder order,
                       std::vector<DistTensor> node_data = {}, std::vector<DistTensor> labels = {});
  ~DistDeviceNodeLoader();

  int64_t num_batches() const;
  int64_t num_global_batches() const;
  int64_t global_batch_index(int64_t b) const;
  std::vector<int64_t> batch_seeds(int64_t epoch, int64_t b) const;
  /// Prepares this rank's batch `b` of `epoch` on the stream of `worker` (what the workers run;
  /// worker 0 when called directly). Returns with that stream idle.
  DeviceMiniBatch sample_batch(int64_t epoch, int64_t b, int worker = 0) const;
  void start_epoch(int64_t epoch);
  /// The next batch in order; false at the end of the epoch (or when interrupted).
  bool next(DeviceMiniBatch& out,
            const ops::detail::OrderedPrefetcher<DeviceMiniBatch>::Interrupted& interrupted = {});
  /// Ends the epoch early without waiting (see DistNodeDataLoader::stop).
  void stop();
  const std::vector<DistTensor>& node_data() const { return node_data_; }
  const std::vector<DistTensor>& labels() const { return labels_; }
  int device() const { return sampler_.device(); }

 private:
  const DistDeviceSampler& sampler_;
  ops::LoaderOptions opts_;
  std::unique_ptr<detail::BatchPlan> plan_;
  std::vector<DistTensor> node_data_, labels_;
  std::vector<std::shared_ptr<cuda::Stream>> streams_;  // one per worker (at least one)
  int64_t epoch_ = -1;
  std::vector<int64_t> epoch_order_;
  std::unique_ptr<ops::detail::OrderedPrefetcher<DeviceMiniBatch>> pipe_;
};

}  // namespace tessera::dist
