// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/device_loader.hpp"

#include "batch_plan.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"

namespace tessera::dist {

DeviceMiniBatch::~DeviceMiniBatch() {
  const bool holds = d_seeds || !blocks.blocks.empty() || !node_rows.empty() || !label_rows.empty();
  if (!holds || !consumed_ || device < 0) {
    return;  // never handed out: its memory is only used on the stream that made it
  }
  try {
    // The consumer may still have kernels queued that read this memory: the loader stream (to
    // which the scratch allocator returns it) waits for everything enqueued there so far.
    const cuda::DeviceGuard guard(device);
    cuda::Event done;
    done.record(consumer_);
    done.make_wait(stream);
  } catch (const std::exception&) {
    // No CUDA context left (process exit): nothing runs any more either.
  }
}

DistDeviceNodeLoader::DistDeviceNodeLoader(const DistDeviceSampler& sampler,
                                           std::vector<int64_t> seeds, ops::LoaderOptions opts,
                                           BatchOrder order, std::vector<DistTensor> node_data,
                                           std::vector<DistTensor> labels)
    : sampler_(sampler), opts_(opts), node_data_(std::move(node_data)), labels_(std::move(labels)) {
  const DistGraph& g = sampler_.graph();
  auto check = [&] {
    for (const auto* list : {&node_data_, &labels_}) {
      for (const DistTensor& t : *list) {
        TESSERA_EXPECTS(t.defined() && t.num_rows() == g.num_nodes(), ValueError,
                        "DistDeviceNodeLoader: tensor '{}' has {} rows, the graph {} nodes",
                        t.defined() ? t.name() : "(undefined)", t.defined() ? t.num_rows() : 0,
                        g.num_nodes());
      }
    }
  };
  plan_ = std::make_unique<detail::BatchPlan>(g.runtime()->transport(), std::move(seeds),
                                              g.num_nodes(), g.orig_nid(), opts_, order,
                                              "DistNodeDataLoader", "seed node", check, "");
  const int device = sampler_.device();
  const cuda::DeviceGuard guard(device);
  const int n = std::max(1, opts_.num_workers);
  streams_.reserve(static_cast<size_t>(n));
  for (int w = 0; w < n; ++w) {
    // Shared with the batches made on it, which may outlive the loader. The last owner
    // destroys it once idle, on its device: batches' memory may then go back to the allocator
    // under this handle without a later stream of the same handle value reusing it too early.
    streams_.emplace_back(new cuda::Stream, [device](cuda::Stream* st) {
      try {
        const cuda::DeviceGuard g(device);
        st->synchronize();
      } catch (const std::exception&) {
      }
      delete st;
    });
  }
}

DistDeviceNodeLoader::~DistDeviceNodeLoader() {
  pipe_.reset();  // joins the workers; each stream goes with its last batch
}

int64_t DistDeviceNodeLoader::num_batches() const {
  return plan_->steps();
}
int64_t DistDeviceNodeLoader::num_global_batches() const {
  return plan_->global_batches();
}
int64_t DistDeviceNodeLoader::global_batch_index(int64_t b) const {
  return plan_->global_batch_index(b);
}
std::vector<int64_t> DistDeviceNodeLoader::batch_seeds(int64_t epoch, int64_t b) const {
  if (epoch == epoch_) {
    return plan_->batch(epoch_order_, b);
  }
  return plan_->batch(plan_->epoch_order(epoch), b);
}

DeviceMiniBatch DistDeviceNodeLoader::sample_batch(int64_t epoch, int64_t b, int worker) const {
  const int device = sampler_.device();
  const cuda::DeviceGuard guard(device);
  const auto& owner = streams_[static_cast<size_t>(worker) % streams_.size()];
  const cuda::StreamHandle stream = owner->get();
  auto& alloc = cuda::scratch_allocator();
  DeviceMiniBatch mb;
  mb.stream_owner = owner;
  mb.device = device;
  mb.stream = stream;
  mb.epoch = epoch;
  mb.index = global_batch_index(b);
  mb.seeds = batch_seeds(epoch, b);
  const double t0 = now_seconds();
  const int64_t n = static_cast<int64_t>(mb.seeds.size());
  mb.d_seeds = std::make_unique<cuda::ScratchBuffer>(alloc, static_cast<size_t>(n) * 8, stream);
  if (n > 0)
    cuda::copy_async(mb.d_seeds->data(), mb.seeds.data(), static_cast<size_t>(n) * 8, stream);
  const auto* d_seeds = static_cast<const int64_t*>(mb.d_seeds->data());
  DistDeviceSampler::Result r = sampler_.sample_blocks(
      mb.seeds, d_seeds, ops::make_rng_key(opts_.seed, epoch, mb.index, 0), stream);
  mb.blocks = std::move(r.blocks);
  for (const cuda::DeviceBlock& blk : mb.blocks.blocks) {
    auto& out = mb.indptr.emplace_back(std::make_unique<cuda::ScratchBuffer>(
        alloc, static_cast<size_t>(blk.num_dst + 1) * 8, stream));
    cuda::csr_offsets_impl(blk.dst_ptr(), blk.num_edges, blk.num_dst,
                           static_cast<int64_t*>(out->data()), stream);
  }
  const double t1 = now_seconds();
  const int64_t ni = mb.num_input_nodes();
  const int64_t* d_input = ni > 0 ? mb.blocks.blocks.front().src_nodes_ptr() : nullptr;
  // Rows of the input nodes and labels of the seeds, straight into the batch's device memory.
  auto gather = [&](const DistTensor& t, const int64_t* d_ids, const std::vector<int64_t>* host,
                    int64_t count) {
    auto out = std::make_unique<cuda::ScratchBuffer>(
        alloc, static_cast<size_t>(count) * t.row_bytes(), stream);
    if (count > 0 && t.row_bytes() > 0) {
      if (host != nullptr && !host->empty()) {
        t.read_into_device(*host, out->data(), stream);  // routed by host IDs already known
      } else {
        t.read_into_device_ids(d_ids, count, out->data(), stream);
      }
    }
    return out;
  };
  for (const DistTensor& t : node_data_) {
    mb.node_rows.push_back(gather(t, d_input, &r.input_nodes_host, ni));
  }
  for (const DistTensor& t : labels_) {
    mb.label_rows.push_back(gather(t, d_seeds, &mb.seeds, n));
  }
  cuda::synchronize(stream);  // the batch is complete when it is handed out
  mb.sample_seconds = t1 - t0;
  mb.gather_seconds = now_seconds() - t1;
  return mb;
}

void DistDeviceNodeLoader::start_epoch(int64_t epoch) {
  auto order = plan_->epoch_order(epoch);
  pipe_.reset();
  epoch_order_ = std::move(order);
  epoch_ = epoch;
  pipe_ = std::make_unique<ops::detail::OrderedPrefetcher<DeviceMiniBatch>>(
      plan_->steps(), opts_.num_workers, opts_.prefetch,
      [this, epoch](int64_t b, int worker) { return sample_batch(epoch, b, worker); });
}

bool DistDeviceNodeLoader::next(
    DeviceMiniBatch& out,
    const ops::detail::OrderedPrefetcher<DeviceMiniBatch>::Interrupted& interrupted) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "DistNodeDataLoader: call start_epoch() first");
  return pipe_->next(out, interrupted);
}

void DistDeviceNodeLoader::stop() {
  if (pipe_) pipe_->cancel();
}

}  // namespace tessera::dist
