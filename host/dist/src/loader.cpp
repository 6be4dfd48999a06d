#include "tessera/dist/loader.hpp"

#include <algorithm>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::dist {

namespace {

int64_t count_batches(int64_t n, const ops::LoaderOptions& o) {
  return o.drop_last ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
}

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer: an order-independent set fingerprint
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

DistNodeDataLoader::DistNodeDataLoader(const DistNeighborSampler& sampler,
                                       std::vector<int64_t> seeds, ops::LoaderOptions opts,
                                       BatchOrder order)
    : sampler_(sampler), seeds_(std::move(seeds)), opts_(opts), order_(order) {
  const DistGraph& g = sampler_.graph();
  auto& t = g.runtime()->transport();
  rank_ = t.rank();
  world_ = t.world_size();
  TESSERA_EXPECTS(opts_.batch_size >= 1, ValueError, "DistNodeDataLoader: batch_size {} < 1",
                  opts_.batch_size);
  TESSERA_EXPECTS(opts_.num_workers >= 0, ValueError, "DistNodeDataLoader: num_workers {} < 0",
                  opts_.num_workers);
  TESSERA_EXPECTS(opts_.prefetch >= 0, ValueError, "DistNodeDataLoader: prefetch {} < 0",
                  opts_.prefetch);
  ops::make_rng_key(opts_.seed, 0, 0, 0);  // validates the seed
  const int64_t n = static_cast<int64_t>(seeds_.size());
  for (int64_t i = 0; i < n; ++i)
    if (seeds_[i] < 0 || seeds_[i] >= g.num_nodes())
      TESSERA_FAIL(IndexError, "DistNodeDataLoader: seed node {} at position {} outside [0, {})",
                   seeds_[i], i, g.num_nodes());

  if (order_ == BatchOrder::kGlobal) {
    // Order by original ID, so the batches do not depend on the partitioning's numbering.
    const Array orig = g.orig_nid().read(seeds_);
    const int64_t* o = orig.data<int64_t>();
    std::vector<int64_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return o[a] < o[b]; });
    std::vector<int64_t> sorted(static_cast<size_t>(n));
    uint64_t fp = 0;
    for (int64_t i = 0; i < n; ++i) {
      sorted[i] = seeds_[idx[i]];
      fp += mix64(static_cast<uint64_t>(o[i]));
    }
    seeds_ = std::move(sorted);
    // Every rank must have passed the same set: compare (count, fingerprint) with rank 0's.
    uint64_t mine[2] = {static_cast<uint64_t>(n), fp};
    std::vector<uint64_t> all(static_cast<size_t>(2 * world_));
    t.all_gather(mine, sizeof mine, all.data());
    for (int r = 1; r < world_; ++r)
      TESSERA_EXPECTS(all[2 * r] == all[0] && all[2 * r + 1] == all[1], ValueError,
                      "DistNodeDataLoader (global batch order): rank {} passed {} seed nodes, "
                      "rank 0 {}, or a different set; every rank must pass the same seed set",
                      r, all[2 * r], all[0]);
    own_batches_ = count_batches(n, opts_);
    TESSERA_EXPECTS(own_batches_ > 0, ValueError,
                    "DistNodeDataLoader: no batch in {} seed nodes (batch_size {}, drop_last {})",
                    n, opts_.batch_size, opts_.drop_last);
    global_batches_ = own_batches_;
    steps_ = (own_batches_ + world_ - 1) / world_;
  } else {
    own_batches_ = count_batches(n, opts_);
    std::vector<int64_t> counts(static_cast<size_t>(world_));
    t.all_gather(&own_batches_, sizeof own_batches_, counts.data());
    for (int r = 0; r < world_; ++r)
      TESSERA_EXPECTS(counts[r] > 0, ValueError,
                      "DistNodeDataLoader: rank {} has no batch of seed nodes (its share is "
                      "smaller than batch_size {} with drop_last, or empty); every rank needs one "
                      "so that all ranks run the same number of steps",
                      r, opts_.batch_size);
    steps_ = *std::max_element(counts.begin(), counts.end());
    global_batches_ = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  }
}

DistNodeDataLoader::~DistNodeDataLoader() { pipe_.reset(); }

int64_t DistNodeDataLoader::global_batch_index(int64_t b) const {
  TESSERA_EXPECTS(b >= 0 && b < steps_, IndexError, "DistNodeDataLoader: batch {} outside [0, {})",
                  b, steps_);
  if (order_ == BatchOrder::kGlobal) return (b * world_ + rank_) % global_batches_;
  return (b % own_batches_) * world_ + rank_;
}

std::vector<int64_t> DistNodeDataLoader::epoch_order(int64_t epoch) const {
  if (!opts_.shuffle) return seeds_;
  const RngKey k = ops::make_rng_key(opts_.seed, epoch, 0, 0);
  const auto perm = ops::philox_permutation(static_cast<int64_t>(seeds_.size()), k.seed, k.epoch);
  std::vector<int64_t> out(seeds_.size());
  for (size_t i = 0; i < seeds_.size(); ++i)
    out[i] = seeds_[static_cast<size_t>(perm[i])];
  return out;
}

std::vector<int64_t> DistNodeDataLoader::batch_seeds(int64_t epoch, int64_t b) const {
  const int64_t j = global_batch_index(b);
  const int64_t local = order_ == BatchOrder::kGlobal ? j : j / world_;
  std::vector<int64_t> tmp;
  const std::vector<int64_t>& order = epoch == epoch_ ? epoch_order_ : (tmp = epoch_order(epoch));
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t lo = local * opts_.batch_size, hi = std::min(n, lo + opts_.batch_size);
  return {order.begin() + lo, order.begin() + hi};
}

ops::NodeMiniBatch DistNodeDataLoader::sample_batch(int64_t epoch, int64_t b) const {
  ops::NodeMiniBatch mb;
  mb.epoch = epoch;
  mb.index = global_batch_index(b);
  mb.seeds = batch_seeds(epoch, b);
  mb.blocks = sampler_.sample_blocks(mb.seeds, ops::make_rng_key(opts_.seed, epoch, mb.index, 0));
  mb.input_nodes = mb.blocks.front().src_nodes;
  return mb;
}

void DistNodeDataLoader::start_epoch(int64_t epoch) {
  pipe_.reset();
  epoch_order_ = epoch_order(epoch);  // validates the epoch
  epoch_ = epoch;
  pipe_ = std::make_unique<ops::detail::OrderedPrefetcher<ops::NodeMiniBatch>>(
      steps_, opts_.num_workers, opts_.prefetch,
      [this, epoch](int64_t b, int /*worker*/) { return sample_batch(epoch, b); });
}

bool DistNodeDataLoader::next(ops::NodeMiniBatch& out) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "DistNodeDataLoader: call start_epoch() first");
  return pipe_->next(out);
}

}  // namespace tessera::dist
