// SPDX-License-Identifier: Apache-2.0
#include "tessera/ops/loader.hpp"

#include <algorithm>
#include <limits>

#include "id_map.hpp"
#include "tessera/core/batches.hpp"
#include "tessera/core/error.hpp"

namespace tessera::ops {

namespace detail {

void validate_loader_args(Span<const int64_t> seeds, int64_t limit, const LoaderOptions& opts,
                          const char* what) {
  TESSERA_EXPECTS(!seeds.empty(), ValueError, "data loader: the {} set is empty", what);
  TESSERA_EXPECTS(opts.batch_size >= 1, ValueError, "data loader: batch_size {} < 1",
                  opts.batch_size);
  TESSERA_EXPECTS(opts.num_workers >= 0, ValueError, "data loader: num_workers {} < 0",
                  opts.num_workers);
  TESSERA_EXPECTS(opts.prefetch >= 0, ValueError, "data loader: prefetch {} < 0", opts.prefetch);
  TESSERA_EXPECTS(opts.seed < (uint64_t{1} << 32), ValueError,
                  "data loader: seed {} out of range: the Philox key holds a 32-bit seed (< 2^32)",
                  opts.seed);
  for (int64_t i = 0; i < seeds.size(); ++i)
    if (seeds[i] < 0 || seeds[i] >= limit)
      TESSERA_FAIL(IndexError, "data loader: {} {} at position {} outside [0, {})", what, seeds[i],
                   i, limit);
  // A seed set is a set: a node listed twice would fail only in the epochs that shuffle both
  // copies into one batch (a batch's seeds are its destination nodes, once each).
  std::vector<bool> seen(static_cast<size_t>(limit));
  for (int64_t i = 0; i < seeds.size(); ++i) {
    TESSERA_EXPECTS(!seen[static_cast<size_t>(seeds[i])], ValueError,
                    "data loader: {} {} at position {} is listed twice (a seed set holds each ID "
                    "once)",
                    what, seeds[i], i);
    seen[static_cast<size_t>(seeds[i])] = true;
  }
}

namespace {
int64_t count_batches(int64_t n, const LoaderOptions& o) {
  return o.drop_last ? n / o.batch_size : ceil_div(n, o.batch_size);
}
std::vector<int64_t> epoch_order(const std::vector<int64_t>& seeds, const LoaderOptions& o,
                                 int64_t epoch) {
  if (!o.shuffle) return seeds;
  const RngKey k = make_rng_key(o.seed, epoch, 0, 0);
  const auto perm = philox_permutation(static_cast<int64_t>(seeds.size()), k.seed, k.epoch);
  std::vector<int64_t> out(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i)
    out[i] = seeds[static_cast<size_t>(perm[i])];
  return out;
}
std::vector<int64_t> slice_batch(const std::vector<int64_t>& order, const LoaderOptions& o,
                                 int64_t b) {
  const int64_t n = static_cast<int64_t>(order.size());
  TESSERA_EXPECTS(b >= 0 && b < count_batches(n, o), IndexError,
                  "data loader: batch {} outside [0, {})", b, count_batches(n, o));
  const int64_t lo = b * o.batch_size;  // b < count_batches: lo < n, no overflow
  const int64_t hi = clipped_end(lo, o.batch_size, n);
  return {order.begin() + lo, order.begin() + hi};
}
}  // namespace

}  // namespace detail

// ---- NodeDataLoader --------------------------------------------------------------------------

NodeDataLoader::NodeDataLoader(const NeighborSampler& sampler, std::vector<int64_t> seeds,
                               LoaderOptions opts)
    : sampler_(sampler), seeds_(std::move(seeds)), opts_(opts) {
  detail::validate_loader_args(seeds_, sampler_.graph().num_nodes, opts_, "seed node");
}

NodeDataLoader::~NodeDataLoader() {
  pipe_.reset();  // joins the workers before the workspaces go away
}

int64_t NodeDataLoader::num_batches() const {
  return detail::count_batches(static_cast<int64_t>(seeds_.size()), opts_);
}

std::vector<int64_t> NodeDataLoader::batch_seeds(int64_t epoch, int64_t b) const {
  make_rng_key(opts_.seed, epoch, 0, 0);  // validates the epoch (-1 also means "none started")
  if (epoch == epoch_) return detail::slice_batch(order_, opts_, b);
  return detail::slice_batch(detail::epoch_order(seeds_, opts_, epoch), opts_, b);
}

NodeMiniBatch NodeDataLoader::sample_batch(int64_t epoch, int64_t b, CompactWorkspace* ws) const {
  NodeMiniBatch mb;
  mb.epoch = epoch;
  mb.index = b;
  mb.seeds = batch_seeds(epoch, b);
  const RngKey key = make_rng_key(opts_.seed, epoch, b, 0);
  mb.blocks = sampler_.sample_blocks(mb.seeds, key, nullptr, ws, &mb.stats);
  mb.input_nodes = mb.blocks.front().src_nodes;
  return mb;
}

void NodeDataLoader::start_epoch(int64_t epoch) {
  make_rng_key(opts_.seed, epoch, 0, 0);  // validates the epoch before the running one stops
  pipe_.reset();
  epoch_ = epoch;
  order_ = detail::epoch_order(seeds_, opts_, epoch);
  workspaces_.resize(static_cast<size_t>(std::max(opts_.num_workers, 1)));
  pipe_ = std::make_unique<detail::OrderedPrefetcher<NodeMiniBatch>>(
      num_batches(), opts_.num_workers, opts_.prefetch, [this, epoch](int64_t b, int worker) {
        return sample_batch(epoch, b, &workspaces_[static_cast<size_t>(worker)]);
      });
}

void NodeDataLoader::stop() {
  if (pipe_) pipe_->cancel();
}

bool NodeDataLoader::next(
    NodeMiniBatch& out, const detail::OrderedPrefetcher<NodeMiniBatch>::Interrupted& interrupted) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "NodeDataLoader: call start_epoch() first");
  return pipe_->next(out, interrupted);
}

// ---- EdgeDataLoader --------------------------------------------------------------------------

void compact_pair_endpoints(EdgeMiniBatch& mb) {
  detail::IdMap map;
  map.reset(static_cast<int64_t>(mb.pos_src.size() + mb.neg_src.size()) * 2);
  mb.seeds.clear();
  auto local = [&](int64_t v) {
    bool ins;
    const int64_t l = map.find_or_insert(v, static_cast<int64_t>(mb.seeds.size()), ins);
    if (ins) mb.seeds.push_back(v);
    return l;
  };
  mb.pos_src_local.resize(mb.pos_src.size());
  mb.pos_dst_local.resize(mb.pos_dst.size());
  for (size_t i = 0; i < mb.pos_src.size(); ++i) {
    mb.pos_src_local[i] = local(mb.pos_src[i]);
    mb.pos_dst_local[i] = local(mb.pos_dst[i]);
  }
  mb.neg_src_local.resize(mb.neg_src.size());
  mb.neg_dst_local.resize(mb.neg_dst.size());
  for (size_t i = 0; i < mb.neg_src.size(); ++i) {
    mb.neg_src_local[i] = local(mb.neg_src[i]);
    mb.neg_dst_local[i] = local(mb.neg_dst[i]);
  }
}

std::vector<int64_t> symmetrized_reverse_eids(int64_t num_input_edges) {
  std::vector<int64_t> r(static_cast<size_t>(2 * num_input_edges));
  for (int64_t i = 0; i < num_input_edges; ++i) {
    r[i] = num_input_edges + i;
    r[num_input_edges + i] = i;
  }
  return r;
}

std::vector<int64_t> symmetrized_reverse_eids(const int64_t* orig_eid, int64_t num_edges,
                                              int64_t num_input_edges, const std::string& what) {
  const int64_t ein = num_input_edges;
  std::vector<int64_t> new_of(static_cast<size_t>(2 * ein), -1);
  for (int64_t e = 0; e < num_edges; ++e) {
    TESSERA_EXPECTS(orig_eid[e] >= 0 && orig_eid[e] < 2 * ein, ValueError,
                    "{}: edge {} has original ID {} outside the symmetrized space [0, {})", what, e,
                    orig_eid[e], 2 * ein);
    new_of[orig_eid[e]] = e;
  }
  std::vector<int64_t> rev(static_cast<size_t>(num_edges));
  for (int64_t e = 0; e < num_edges; ++e) {
    rev[e] = new_of[orig_eid[e] < ein ? orig_eid[e] + ein : orig_eid[e] - ein];
  }
  return rev;
}

EdgeDataLoader::EdgeDataLoader(const NeighborSampler& sampler, std::vector<int64_t> seed_eids,
                               LoaderOptions opts, EdgeLoaderOptions eopts)
    : sampler_(sampler), seeds_(std::move(seed_eids)), opts_(opts), eopts_(std::move(eopts)) {
  const Graph& g = sampler_.graph();
  int64_t space = 0;
  for (int64_t k = 0; k < g.num_edges(); ++k)
    space = std::max(space, g.eid(k) + 1);
  detail::validate_loader_args(seeds_, space, opts_, "seed edge");
  TESSERA_EXPECTS(eopts_.negatives >= 0, ValueError, "EdgeDataLoader: negatives {} < 0",
                  eopts_.negatives);
  TESSERA_EXPECTS(eopts_.negatives <= std::numeric_limits<int64_t>::max() /
                                          std::min<int64_t>(opts_.batch_size, seeds_.size()),
                  ValueError,
                  "EdgeDataLoader: negatives {} per edge for batches of {} edges: the count of "
                  "negative pairs overflows",
                  eopts_.negatives, std::min<int64_t>(opts_.batch_size, seeds_.size()));
  eid_src_.assign(static_cast<size_t>(space), -1);
  eid_dst_.assign(static_cast<size_t>(space), -1);
  const bool in = sampler_.options().dir == EdgeDir::kIn;
  for (int64_t v = 0; v < g.num_nodes; ++v)
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const int64_t e = g.eid(k);
      eid_src_[e] = in ? g.indices[k] : v;
      eid_dst_[e] = in ? v : g.indices[k];
    }
  for (size_t i = 0; i < seeds_.size(); ++i)
    TESSERA_EXPECTS(eid_src_[seeds_[i]] >= 0, IndexError,
                    "EdgeDataLoader: seed edge {} at position {} is not an edge of the graph",
                    seeds_[i], i);
  if (eopts_.exclude == ExcludeMode::kReverseId) {
    // One entry per edge ID at least; an entry names e's reverse, or -1 / an ID the graph does
    // not store (symmetrized_reverse_eids(E) has 2E entries, and the graph lacks E + i where
    // the input held the reversed pair itself, or past its last stored ID).
    const auto size = static_cast<int64_t>(eopts_.reverse_eids.size());
    TESSERA_EXPECTS(size >= space, ValueError,
                    "EdgeDataLoader: reverse_eids has {} entries for an edge-ID space of {}", size,
                    space);
    // An entry that names a stored edge must also name one running the other way: a map of
    // other IDs (e.g. original IDs given for relabelled edges) would exclude the wrong edges
    // and leave each seed's reverse in its blocks, without an error.
    for (int64_t e = 0; e < size; ++e) {
      const int64_t r = eopts_.reverse_eids[e];
      TESSERA_EXPECTS(r >= -1 && r < size, IndexError,
                      "EdgeDataLoader: reverse_eids[{}] = {} outside [-1, {})", e, r, size);
      if (e >= space || eid_src_[e] < 0 || r < 0 || r >= space || eid_src_[r] < 0) {
        continue;
      }
      TESSERA_EXPECTS(eid_src_[r] == eid_dst_[e] && eid_dst_[r] == eid_src_[e], ValueError,
                      "EdgeDataLoader: reverse_eids[{}] = {}, but edge {} runs {} -> {} and edge "
                      "{} runs {} -> {}, not the other way (reverse_eids must be in the graph's "
                      "edge IDs)",
                      e, r, e, eid_src_[e], eid_dst_[e], r, eid_src_[r], eid_dst_[r]);
    }
  }
}

EdgeDataLoader::~EdgeDataLoader() {
  pipe_.reset();
}

int64_t EdgeDataLoader::num_batches() const {
  return detail::count_batches(static_cast<int64_t>(seeds_.size()), opts_);
}

std::vector<int64_t> EdgeDataLoader::batch_eids(int64_t epoch, int64_t b) const {
  make_rng_key(opts_.seed, epoch, 0, 0);  // validates the epoch (-1 also means "none started")
  if (epoch == epoch_) return detail::slice_batch(order_, opts_, b);
  return detail::slice_batch(detail::epoch_order(seeds_, opts_, epoch), opts_, b);
}

EdgeMiniBatch EdgeDataLoader::sample_batch(int64_t epoch, int64_t b, CompactWorkspace* ws) const {
  EdgeMiniBatch mb;
  mb.epoch = epoch;
  mb.index = b;
  mb.eids = batch_eids(epoch, b);
  const int64_t m = static_cast<int64_t>(mb.eids.size());
  mb.pos_src.resize(static_cast<size_t>(m));
  mb.pos_dst.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    mb.pos_src[i] = eid_src_[mb.eids[i]];
    mb.pos_dst[i] = eid_dst_[mb.eids[i]];
  }
  const RngKey key = make_rng_key(opts_.seed, epoch, b, 0);
  uniform_negatives(sampler_.graph().num_nodes, mb.pos_src, mb.eids, eopts_.negatives, key,
                    mb.neg_src, mb.neg_dst);
  compact_pair_endpoints(mb);
  // Excluded edges, keyed by the row that stores them (dst for kIn, src for kOut).
  ExcludeEdges exclude;
  if (eopts_.exclude != ExcludeMode::kNone) {
    const bool in = sampler_.options().dir == EdgeDir::kIn;
    std::vector<int64_t> rows, eids;
    auto add = [&](int64_t e) {
      rows.push_back(in ? eid_dst_[e] : eid_src_[e]);
      eids.push_back(e);
    };
    for (int64_t e : mb.eids) {
      add(e);
      if (eopts_.exclude == ExcludeMode::kReverseId) {
        const int64_t r = eopts_.reverse_eids[e];
        if (r >= 0 && r < static_cast<int64_t>(eid_src_.size()) && eid_src_[r] >= 0) {
          add(r);
        }
      }
    }
    exclude = ExcludeEdges(rows, eids);
  }
  mb.blocks =
      sampler_.sample_blocks(mb.seeds, key, exclude.empty() ? nullptr : &exclude, ws, &mb.stats);
  mb.input_nodes = mb.blocks.front().src_nodes;
  return mb;
}

void EdgeDataLoader::start_epoch(int64_t epoch) {
  make_rng_key(opts_.seed, epoch, 0, 0);  // validates the epoch before the running one stops
  pipe_.reset();
  epoch_ = epoch;
  order_ = detail::epoch_order(seeds_, opts_, epoch);
  workspaces_.resize(static_cast<size_t>(std::max(opts_.num_workers, 1)));
  pipe_ = std::make_unique<detail::OrderedPrefetcher<EdgeMiniBatch>>(
      num_batches(), opts_.num_workers, opts_.prefetch, [this, epoch](int64_t b, int worker) {
        return sample_batch(epoch, b, &workspaces_[static_cast<size_t>(worker)]);
      });
}

void EdgeDataLoader::stop() {
  if (pipe_) pipe_->cancel();
}

bool EdgeDataLoader::next(
    EdgeMiniBatch& out, const detail::OrderedPrefetcher<EdgeMiniBatch>::Interrupted& interrupted) {
  TESSERA_EXPECTS(pipe_ != nullptr, ValueError, "EdgeDataLoader: call start_epoch() first");
  return pipe_->next(out, interrupted);
}

}  // namespace tessera::ops
