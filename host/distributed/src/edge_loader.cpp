// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/edge_loader.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "batch_plan.hpp"
#include "tessera/core/error.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::dist {

namespace {

const char* exclude_name(ops::ExcludeMode m) {
  switch (m) {
    case ops::ExcludeMode::kNone:
      return "none";
    case ops::ExcludeMode::kSelf:
      return "self";
    case ops::ExcludeMode::kReverseId:
      return "reverse_id";
  }
  return "?";
}

}  // namespace

DistEdgeDataLoader::DistEdgeDataLoader(const DistNeighborSampler& sampler,
                                       std::vector<int64_t> seed_eids, ops::LoaderOptions opts,
                                       ops::EdgeLoaderOptions eopts, BatchOrder order)
    : sampler_(sampler), opts_(opts), eopts_(std::move(eopts)) {
  const DistGraph& g = sampler_.graph();
  auto& t = g.runtime()->transport();
  const int64_t ne = g.num_edges();
  const std::string on = fmt::format("DistEdgeDataLoader on rank {}", t.rank());
  auto check = [&] {
    TESSERA_EXPECTS(eopts_.negatives >= 0, ValueError, "{}: negatives {} < 0", on,
                    eopts_.negatives);
    TESSERA_EXPECTS(eopts_.negatives == 0 || g.num_nodes() > 0, ValueError,
                    "{}: negatives requested on a graph without nodes", on);
    if (eopts_.exclude != ops::ExcludeMode::kReverseId) {
      return;
    }
    TESSERA_EXPECTS(static_cast<int64_t>(eopts_.reverse_eids.size()) == ne, ValueError,
                    "{}: reverse_eids has {} entries for the {} edges of '{}' (new edge IDs)", on,
                    eopts_.reverse_eids.size(), ne, g.graph_name());
    for (size_t e = 0; e < eopts_.reverse_eids.size(); ++e) {
      const int64_t r = eopts_.reverse_eids[e];
      TESSERA_EXPECTS(r >= -1 && r < ne, IndexError,
                      "{}: reverse_eids[{}] = {} outside [0, {}) (or -1: no reverse)", on, e, r,
                      ne);
    }
    // Up to kChecked edges spread over the ID space must have reverses that run the other way:
    // a map in other IDs (original IDs given for the new ones) would exclude the wrong edges
    // and leave each seed's reverse in its blocks, without an error.
    constexpr int64_t kChecked = 4096;
    std::vector<int64_t> ids, revs;
    for (int64_t k = 0; k < std::min(ne, kChecked); ++k) {
      const int64_t e = k * ne / std::min(ne, kChecked);
      if (eopts_.reverse_eids[static_cast<size_t>(e)] >= 0) {
        ids.push_back(e);
        revs.push_back(eopts_.reverse_eids[static_cast<size_t>(e)]);
      }
    }
    if (ids.empty()) {
      return;
    }
    const Array a = g.edge_endpoints().read(ids), b = g.edge_endpoints().read(revs);
    const int64_t *pa = a.data<int64_t>(), *pb = b.data<int64_t>();
    for (size_t i = 0; i < ids.size(); ++i) {
      TESSERA_EXPECTS(pa[2 * i] == pb[2 * i + 1] && pa[2 * i + 1] == pb[2 * i], ValueError,
                      "{}: reverse_eids[{}] = {}, but edge {} runs {} -> {} and edge {} runs {} "
                      "-> {}, not the other way (reverse_eids must be in the graph's new edge "
                      "IDs: symmetrized_reverse_eids(g) gives them)",
                      on, ids[i], revs[i], ids[i], pa[2 * i], pa[2 * i + 1], revs[i], pb[2 * i],
                      pb[2 * i + 1]);
    }
  };
  plan_ = std::make_unique<detail::BatchPlan>(
      t, std::move(seed_eids), ne, g.orig_eid(), opts_, order, "DistEdgeDataLoader", "seed edge",
      check,
      fmt::format(", negatives {}, exclude {}", eopts_.negatives, exclude_name(eopts_.exclude)));
}

DistEdgeDataLoader::~DistEdgeDataLoader() {
  pipe_.reset();
}

int64_t DistEdgeDataLoader::num_batches() const {
  return plan_->steps();
}

int64_t DistEdgeDataLoader::num_global_batches() const {
  return plan_->global_batches();
}

int64_t DistEdgeDataLoader::global_batch_index(int64_t b) const {
  return plan_->global_batch_index(b);
}

std::vector<int64_t> DistEdgeDataLoader::batch_eids(int64_t epoch, int64_t b) const {
  if (epoch == epoch_) {
    return plan_->batch(epoch_order_, b);
  }
  return plan_->batch(plan_->epoch_order(epoch), b);
}

ops::EdgeMiniBatch DistEdgeDataLoader::sample_batch(int64_t epoch, int64_t b) const {
  const auto t0 = std::chrono::steady_clock::now();
  const DistGraph& g = sampler_.graph();
  ops::EdgeMiniBatch mb;
  mb.epoch = epoch;
  mb.index = global_batch_index(b);
  mb.eids = batch_eids(epoch, b);
  const RngKey key = ops::make_rng_key(opts_.seed, epoch, mb.index, 0);
  const int64_t m = static_cast<int64_t>(mb.eids.size()), k = eopts_.negatives;
  const Array ends = g.edge_endpoints().read(mb.eids);
  const int64_t* ep = ends.data<int64_t>();
  mb.pos_src.resize(static_cast<size_t>(m));
  mb.pos_dst.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    mb.pos_src[i] = ep[2 * i];
    mb.pos_dst[i] = ep[2 * i + 1];
  }
  if (k > 0) {
    // Keyed and drawn in original IDs (the unpartitioned graph's terms), then mapped back.
    const Array oe = g.orig_eid().read(mb.eids);
    std::vector<int64_t> neg_dst_orig;
    ops::uniform_negatives(g.num_nodes(), mb.pos_src,
                           ops::Span<const int64_t>(oe.data<int64_t>(), m), k, key, mb.neg_src,
                           neg_dst_orig);
    const Array nd = g.new_nid().read(neg_dst_orig);
    mb.neg_dst.assign(nd.data<int64_t>(), nd.data<int64_t>() + nd.rows());
  }
  ops::compact_pair_endpoints(mb);  // seeds: unique endpoints in order of first appearance
  std::vector<int64_t> exclude;
  if (eopts_.exclude != ops::ExcludeMode::kNone) {
    exclude = mb.eids;
    if (eopts_.exclude == ops::ExcludeMode::kReverseId) {
      for (int64_t e : mb.eids) {
        if (eopts_.reverse_eids[e] >= 0) {
          exclude.push_back(eopts_.reverse_eids[e]);
        }
      }
    }
  }
  mb.blocks = sampler_.sample_blocks(mb.seeds, key, exclude);
  mb.input_nodes = mb.blocks.front().src_nodes;
  mb.stats.seeds = static_cast<int64_t>(mb.seeds.size());
  for (const auto& bl : mb.blocks) {
    mb.stats.sampled_edges += bl.num_edges();
  }
  mb.stats.sample_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return mb;
}

void DistEdgeDataLoader::start_epoch(int64_t epoch) {
  auto order = plan_->epoch_order(epoch);  // validates the epoch before the running one stops
  pipe_.reset();
  epoch_order_ = std::move(order);
  epoch_ = epoch;
  pipe_ = std::make_unique<ops::detail::OrderedPrefetcher<ops::EdgeMiniBatch>>(
      plan_->steps(), opts_.num_workers, opts_.prefetch,
      [this, epoch](int64_t b, int /*worker*/) { return sample_batch(epoch, b); });
}

void DistEdgeDataLoader::stop() {
  if (pipe_) pipe_->cancel();
}

bool DistEdgeDataLoader::next(
    ops::EdgeMiniBatch& out,
    const ops::detail::OrderedPrefetcher<ops::EdgeMiniBatch>::Interrupted& interrupted) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "DistEdgeDataLoader: call start_epoch() first");
  return pipe_->next(out, interrupted);
}

std::vector<int64_t> symmetrized_reverse_eids(const DistGraph& g) {
  const PartitionConfig& c = g.config();
  TESSERA_EXPECTS(c.build.symmetrize, ValueError,
                  "symmetrized_reverse_eids: '{}' ({}) was not built with symmetrize; pass "
                  "reverse_eids of your own",
                  g.graph_name(), c.path.string());
  const int64_t ne = g.num_edges();
  std::vector<int64_t> all(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) {
    all[e] = e;
  }
  const Array orig = g.orig_eid().read(all);
  return ops::symmetrized_reverse_eids(
      orig.data<int64_t>(), ne, c.num_input_edges,
      fmt::format("symmetrized_reverse_eids: '{}'", g.graph_name()));
}

}  // namespace tessera::dist
