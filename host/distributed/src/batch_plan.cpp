// SPDX-License-Identifier: Apache-2.0
#include "batch_plan.hpp"

#include <algorithm>
#include <numeric>

#include "agree.hpp"
#include "state.hpp"
#include "tessera/core/batches.hpp"
#include "tessera/core/error.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::dist::detail {

namespace {

int64_t count_batches(int64_t n, const ops::LoaderOptions& o) {
  return o.drop_last ? n / o.batch_size : ceil_div(n, o.batch_size);
}

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer: an order-independent set fingerprint
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

BatchPlan::BatchPlan(transport::Transport& t, std::vector<int64_t> ids, int64_t limit,
                     const DistTensor& orig, const ops::LoaderOptions& opts, BatchOrder order,
                     const std::string& loader, const char* what,
                     const std::function<void()>& check, const std::string& agree)
    : loader_(loader), ids_(std::move(ids)), opts_(opts), order_(order) {
  rank_ = t.rank();
  world_ = t.world_size();
  const int64_t n = static_cast<int64_t>(ids_.size());
  // Local phase: validate, and in kGlobal order the IDs by original ID.
  Writer w;
  std::exception_ptr err;
  try {
    const std::string on = fmt::format("{} on rank {}", loader_, rank_);
    TESSERA_EXPECTS(opts_.batch_size >= 1, ValueError, "{}: batch_size {} < 1", on,
                    opts_.batch_size);
    TESSERA_EXPECTS(opts_.num_workers >= 0, ValueError, "{}: num_workers {} < 0", on,
                    opts_.num_workers);
    TESSERA_EXPECTS(opts_.prefetch >= 0, ValueError, "{}: prefetch {} < 0", on, opts_.prefetch);
    TESSERA_EXPECTS(opts_.seed < (uint64_t{1} << 32), ValueError,
                    "{}: seed {} out of range: the Philox key holds a 32-bit seed (< 2^32)", on,
                    opts_.seed);
    // A seed set is a set: an ID listed twice would fail only in the epochs that shuffle both
    // copies into one batch, on one rank (the others then wait for it in a collective).
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(limit, 0)));
    for (int64_t i = 0; i < n; ++i) {
      if (ids_[i] < 0 || ids_[i] >= limit) {
        TESSERA_FAIL(IndexError, "{}: {} {} at position {} outside [0, {})", on, what, ids_[i], i,
                     limit);
      }
      TESSERA_EXPECTS(!seen[static_cast<size_t>(ids_[i])], ValueError,
                      "{}: {} {} at position {} is listed twice (a seed set holds each ID once)",
                      on, what, ids_[i], i);
      seen[static_cast<size_t>(ids_[i])] = true;
    }
    if (check) {
      check();
    }
    own_batches_ = count_batches(n, opts_);
    w.put<int64_t>(order_ == BatchOrder::kGlobal ? 1 : 0);
    w.put<int64_t>(own_batches_);
    w.put<int64_t>(n);
    if (order_ == BatchOrder::kGlobal) {
      // Order by original ID, so the batches do not depend on the partitioning's numbering.
      const Array o = orig.read(ids_);
      const int64_t* op = o.data<int64_t>();
      std::vector<int64_t> idx(static_cast<size_t>(n));
      std::iota(idx.begin(), idx.end(), 0);
      std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return op[a] < op[b]; });
      std::vector<int64_t> sorted(static_cast<size_t>(n));
      uint64_t fp = 0;
      for (int64_t i = 0; i < n; ++i) {
        sorted[i] = ids_[idx[i]];
        fp += mix64(static_cast<uint64_t>(op[i]));
      }
      ids_ = std::move(sorted);
      w.put<uint64_t>(fp);
      const std::string settings =
          fmt::format("batch_size {}, shuffle {}, drop_last {}, seed {}{}", opts_.batch_size,
                      opts_.shuffle, opts_.drop_last, opts_.seed, agree);
      w.put_bytes(settings.data(), settings.size());
    }
  } catch (...) {
    err = std::current_exception();
  }
  const transport::CollectiveLabel label(t, loader_);
  const auto all = all_or_nothing(t, loader_, err, w.buf);

  // Every rank sees the same payloads, so every rank reaches the same verdict.
  auto field = [&](int r, size_t off) {
    int64_t v;
    std::memcpy(&v, all[r].data() + off, sizeof v);
    return v;
  };
  for (int r = 1; r < world_; ++r) {
    TESSERA_EXPECTS(field(r, 0) == field(0, 0), ValueError,
                    "{}: rank {} uses the {} batch order but rank 0 the {}", loader_, r,
                    field(r, 0) ? "global" : "local", field(0, 0) ? "global" : "local");
  }
  std::vector<int64_t> counts(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    counts[r] = field(r, 8);
  }
  if (order_ == BatchOrder::kGlobal) {
    auto settings = [&](int r) { return std::string(all[r].begin() + 32, all[r].end()); };
    for (int r = 1; r < world_; ++r) {
      TESSERA_EXPECTS(field(r, 16) == field(0, 16) && field(r, 24) == field(0, 24), ValueError,
                      "{} (global batch order): rank {} passed {} {}s, rank 0 {}, or a different "
                      "set; every rank must pass the same {} set",
                      loader_, r, field(r, 16), what, field(0, 16), what);
      TESSERA_EXPECTS(settings(r) == settings(0), ValueError,
                      "{} (global batch order): rank {} has {} but rank 0 {}; every rank must "
                      "cut the same global batches",
                      loader_, r, settings(r), settings(0));
    }
    TESSERA_EXPECTS(own_batches_ > 0, ValueError,
                    "{}: no batch in {} {}s (batch_size {}, drop_last {})", loader_, n, what,
                    opts_.batch_size, opts_.drop_last);
    global_batches_ = own_batches_;
    steps_ = ceil_div(own_batches_, world_);
  } else {
    for (int r = 0; r < world_; ++r) {
      const std::string why =
          field(r, 16) == 0
              ? fmt::format("rank {} has no {}s", r, what)
              : fmt::format("rank {}'s {} {}s are fewer than batch_size {} with drop_last", r,
                            field(r, 16), what, opts_.batch_size);
      TESSERA_EXPECTS(counts[r] > 0, ValueError,
                      "{} (local batch order): {}; every rank needs a batch of its own, so that "
                      "all ranks run the same number of steps",
                      loader_, why);
    }
    steps_ = *std::max_element(counts.begin(), counts.end());
    global_batches_ = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  }
}

int64_t BatchPlan::global_batch_index(int64_t b) const {
  TESSERA_EXPECTS(b >= 0 && b < steps_, IndexError, "{}: batch {} outside [0, {})", loader_, b,
                  steps_);
  if (order_ == BatchOrder::kGlobal) {
    return (b * world_ + rank_) % global_batches_;
  }
  return (b % own_batches_) * world_ + rank_;
}

std::vector<int64_t> BatchPlan::epoch_order(int64_t epoch) const {
  const RngKey k = ops::make_rng_key(opts_.seed, epoch, 0, 0);  // validates the epoch
  if (!opts_.shuffle) {
    return ids_;
  }
  const auto perm = ops::philox_permutation(static_cast<int64_t>(ids_.size()), k.seed, k.epoch);
  std::vector<int64_t> out(ids_.size());
  for (size_t i = 0; i < ids_.size(); ++i) {
    out[i] = ids_[static_cast<size_t>(perm[i])];
  }
  return out;
}

std::vector<int64_t> BatchPlan::batch(const std::vector<int64_t>& order, int64_t b) const {
  const int64_t j = global_batch_index(b);
  const int64_t local = order_ == BatchOrder::kGlobal ? j : j / world_;
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t lo = local * opts_.batch_size, hi = clipped_end(lo, opts_.batch_size, n);
  return {order.begin() + lo, order.begin() + hi};
}

}  // namespace tessera::dist::detail
