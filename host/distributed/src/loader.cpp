// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/loader.hpp"

#include "batch_plan.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"

namespace tessera::dist {

DistNodeDataLoader::DistNodeDataLoader(const DistNeighborSampler& sampler,
                                       std::vector<int64_t> seeds, ops::LoaderOptions opts,
                                       BatchOrder order)
    : sampler_(sampler), opts_(opts) {
  const DistGraph& g = sampler_.graph();
  plan_ = std::make_unique<detail::BatchPlan>(g.runtime()->transport(), std::move(seeds),
                                              g.num_nodes(), g.orig_nid(), opts_, order,
                                              "DistNodeDataLoader", "seed node", nullptr, "");
}

DistNodeDataLoader::~DistNodeDataLoader() {
  pipe_.reset();
}

int64_t DistNodeDataLoader::num_batches() const {
  return plan_->steps();
}

int64_t DistNodeDataLoader::num_global_batches() const {
  return plan_->global_batches();
}

int64_t DistNodeDataLoader::global_batch_index(int64_t b) const {
  return plan_->global_batch_index(b);
}

std::vector<int64_t> DistNodeDataLoader::batch_seeds(int64_t epoch, int64_t b) const {
  if (epoch == epoch_) {
    return plan_->batch(epoch_order_, b);
  }
  return plan_->batch(plan_->epoch_order(epoch), b);
}

ops::NodeMiniBatch DistNodeDataLoader::sample_batch(int64_t epoch, int64_t b) const {
  ops::NodeMiniBatch mb;
  mb.epoch = epoch;
  mb.index = global_batch_index(b);
  mb.seeds = batch_seeds(epoch, b);
  const double t0 = now_seconds();
  mb.blocks = sampler_.sample_blocks(mb.seeds, ops::make_rng_key(opts_.seed, epoch, mb.index, 0));
  mb.stats.sample_seconds = now_seconds() - t0;  // compaction and remote requests included
  mb.stats.seeds = static_cast<int64_t>(mb.seeds.size());
  for (const ops::Block& blk : mb.blocks) {
    mb.stats.sampled_edges += static_cast<int64_t>(blk.src.size());
  }
  mb.input_nodes = mb.blocks.front().src_nodes;
  return mb;
}

void DistNodeDataLoader::start_epoch(int64_t epoch) {
  auto order = plan_->epoch_order(epoch);  // validates the epoch before the running one stops
  pipe_.reset();
  epoch_order_ = std::move(order);
  epoch_ = epoch;
  pipe_ = std::make_unique<ops::detail::OrderedPrefetcher<ops::NodeMiniBatch>>(
      plan_->steps(), opts_.num_workers, opts_.prefetch,
      [this, epoch](int64_t b, int /*worker*/) { return sample_batch(epoch, b); });
}

void DistNodeDataLoader::stop() {
  if (pipe_) pipe_->cancel();
}

bool DistNodeDataLoader::next(
    ops::NodeMiniBatch& out,
    const ops::detail::OrderedPrefetcher<ops::NodeMiniBatch>::Interrupted& interrupted) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "DistNodeDataLoader: call start_epoch() first");
  return pipe_->next(out, interrupted);
}

}  // namespace tessera::dist
