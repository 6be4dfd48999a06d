// SPDX-License-Identifier: Apache-2.0
// Mini-batch loaders over a seed set: shuffle, batch size, drop_last, a pool of sampler threads
// and a bounded prefetch queue that delivers batches in a deterministic order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::ops {

/// Options shared by NodeDataLoader and EdgeDataLoader.
struct LoaderOptions {
  int64_t batch_size = 1024;  ///< >= 1
  bool shuffle = true;        ///< permute the seed set each epoch (Philox, seed and epoch)
  bool drop_last = false;     ///< drop a last batch smaller than batch_size
  /// Sampler threads (DGL's num_workers): 0 samples in the caller's thread inside next().
  int num_workers = 1;
  /// Batches sampled ahead of the consumer (at least num_workers are in flight).
  int prefetch = 4;
  uint64_t seed = 0;  ///< RNG seed, < 2^32
};

namespace detail {

/// Produces items 0..count-1 with `num_workers` threads, at most `capacity` ahead of the
/// consumer, and hands them out strictly in index order. An exception thrown while producing
/// item i is rethrown by the next() call that would have returned item i. The destructor stops
/// and joins every thread (safe at any point: mid-epoch, after an error).
template <typename T>
class OrderedPrefetcher {
 public:
  using Producer = std::function<T(int64_t index, int worker)>;

  OrderedPrefetcher(int64_t count, int num_workers, int capacity, Producer produce)
      : count_(count),
        capacity_(std::max(capacity, std::max(num_workers, 1))),
        produce_(std::move(produce)) {
    threads_.reserve(static_cast<size_t>(num_workers));
    try {
      for (int w = 0; w < num_workers; ++w)
        threads_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& e) {  // out of threads: join the ones started, then say so
      stop();
      throw IOError(
          fmt::format("data loader: cannot start sampler thread {} of {} ({}); use "
                      "fewer num_workers",
                      threads_.size() + 1, num_workers, e.what()));
    }
  }
  ~OrderedPrefetcher() { stop(); }
  OrderedPrefetcher(const OrderedPrefetcher&) = delete;
  OrderedPrefetcher& operator=(const OrderedPrefetcher&) = delete;

  /// Polled about every 100 ms while next() waits for an item: true gives up the wait (next()
  /// returns false; the epoch is then abandoned). Python bindings check for Ctrl-C here.
  using Interrupted = std::function<bool()>;

  /// The next item in index order; false after the last one, once stop() was called, or when
  /// `interrupted` said so. Safe to call from several threads: each call claims the next index
  /// and returns that item, so with one consumer the items arrive strictly in order.
  bool next(T& out, const Interrupted& interrupted = {}) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_ || next_deliver_ >= count_) return false;
    const int64_t index = next_deliver_++;
    if (threads_.empty()) {  // synchronous mode: produce it here
      lock.unlock();
      out = produce_(index, 0);
      return true;
    }
    work_cv_.notify_all();  // the claim moved the window the workers may fill
    ++waiting_;
    const auto done = [&] { return stopping_ || ready_.count(index) > 0; };
    while (!ready_cv_.wait_for(lock, std::chrono::milliseconds(100), done)) {
      if (!interrupted) continue;
      lock.unlock();
      const bool give_up = interrupted();
      lock.lock();
      if (give_up) break;
    }
    if (--waiting_ == 0) left_cv_.notify_all();
    const auto it = ready_.find(index);
    if (it == ready_.end()) return false;  // stopped or interrupted while waiting
    auto node = ready_.extract(it);
    lock.unlock();
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    out = std::move(node.mapped().value);
    return true;
  }

  /// Stops without waiting: no item is started or handed out any more (next() returns false,
  /// waiting consumers wake), and the items produced but not handed out are freed. An item a
  /// worker is producing now is finished and dropped in the background; stop() or the
  /// destructor joins. Idempotent.
  void cancel() {
    std::map<int64_t, Slot> dropped;  // freed outside the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      dropped.swap(ready_);
    }
    work_cv_.notify_all();
    ready_cv_.notify_all();
  }

  /// cancel(), then joins the workers and waits until the consumers waiting in next() have
  /// left. Idempotent.
  void stop() {
    cancel();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    std::unique_lock<std::mutex> lock(mu_);
    left_cv_.wait(lock, [&] { return waiting_ == 0; });
  }

 private:
  struct Slot {
    T value{};
    std::exception_ptr error;
  };
  void work(int worker) {
    for (;;) {
      int64_t index;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] {
          return stopping_ || next_claim_ >= count_ || next_claim_ < next_deliver_ + capacity_;
        });
        if (stopping_ || next_claim_ >= count_) return;
        index = next_claim_++;
      }
      Slot slot;
      try {
        slot.value = produce_(index, worker);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!stopping_) ready_.emplace(index, std::move(slot));  // else freed below, unlocked
      }
      ready_cv_.notify_all();
    }
  }

  const int64_t count_;
  const int64_t capacity_;
  Producer produce_;
  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_, left_cv_;
  std::map<int64_t, Slot> ready_;
  int64_t next_claim_ = 0, next_deliver_ = 0;  // next index a worker claims / a consumer claims
  int waiting_ = 0;                            // consumers waiting in next()
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

/// Validates loader options and the seed set (non-empty, IDs in [0, limit)); `what` names the
/// seed kind ("seed node", "seed edge") in messages.
void validate_loader_args(Span<const int64_t> seeds, int64_t limit, const LoaderOptions& opts,
                          const char* what);

}  // namespace detail

/// One node-classification mini-batch.
struct NodeMiniBatch {
  int64_t epoch = 0;
  int64_t index = 0;                 ///< batch index within the epoch
  std::vector<int64_t> seeds;        ///< output nodes (global IDs)
  std::vector<Block> blocks;         ///< input layer first; blocks.back().dst_nodes() == seeds
  std::vector<int64_t> input_nodes;  ///< blocks.front().src_nodes (features to gather)
  SampleStats stats;                 ///< time this batch took to sample
};

/// Node loader (DGL's NodeDataLoader / DataLoader over node IDs). Holds a reference to the
/// sampler (and through it the graph), which must outlive the loader.
class NodeDataLoader {
 public:
  /// Throws ValueError for an empty seed set, batch_size < 1, num_workers < 0 or seed >= 2^32;
  /// IndexError for a seed ID out of range.
  NodeDataLoader(const NeighborSampler& sampler, std::vector<int64_t> seeds, LoaderOptions opts);
  ~NodeDataLoader();
  int64_t num_batches() const;
  /// The seed nodes of batch `b` of `epoch` (the epoch's permutation, then batch_size at a
  /// time).
  std::vector<int64_t> batch_seeds(int64_t epoch, int64_t b) const;
  /// Samples one batch synchronously (what the workers run).
  NodeMiniBatch sample_batch(int64_t epoch, int64_t b, CompactWorkspace* ws = nullptr) const;
  /// Starts (or restarts) the pipeline for `epoch`; a running pipeline is stopped first.
  void start_epoch(int64_t epoch);
  /// The next batch of the current epoch in order; false at the end of the epoch. Rethrows an
  /// exception raised while sampling that batch.
  bool next(NodeMiniBatch& out,
            const detail::OrderedPrefetcher<NodeMiniBatch>::Interrupted& interrupted = {});
  /// Ends the epoch early without waiting: no batch is started any more, the prefetched ones
  /// are freed and next() returns false; a batch being sampled now finishes in the background
  /// (its thread is joined by the next start_epoch() or the destructor). Idempotent.
  void stop();

 private:
  const NeighborSampler& sampler_;
  std::vector<int64_t> seeds_;
  LoaderOptions opts_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;  // permutation of seeds_ for epoch_
  std::vector<CompactWorkspace> workspaces_;
  std::unique_ptr<detail::OrderedPrefetcher<NodeMiniBatch>> pipe_;
};

/// Which edges an edge loader leaves out of message passing (DGL's `exclude`).
enum class ExcludeMode {
  kNone,       ///< keep every edge
  kSelf,       ///< the batch's own edges
  kReverseId,  ///< the batch's own edges and their reverses (reverse_eids)
};

/// Options of EdgeDataLoader beyond LoaderOptions.
struct EdgeLoaderOptions {
  int64_t negatives = 0;  ///< k uniform negatives per positive edge (0 = none)
  ExcludeMode exclude = ExcludeMode::kNone;
  /// For kReverseId: reverse_eids[e] is the edge ID of e's reverse, or -1 / an ID the graph
  /// does not store for none (at least one entry per edge ID; entries in [-1, size)). See
  /// symmetrized_reverse_eids.
  std::vector<int64_t> reverse_eids;
};

/// reverse_eids for a graph built with BuildOptions::symmetrize from `num_input_edges` input
/// edges: edge i and edge E + i are each other's reverse. E + i is absent from the graph where
/// the input held the reversed pair itself (both directions listed, a self loop); that input
/// edge is then i's reverse, which this mapping does not know.
std::vector<int64_t> symmetrized_reverse_eids(int64_t num_input_edges);
/// The same in a relabelled graph's edge IDs, from the original edge ID of each of its
/// `num_edges` edges: entry e is the new ID of the edge whose original ID is e's partner
/// (i and E + i), -1 where that partner is not stored. ValueError starting with `what` for an
/// original ID outside [0, 2E).
std::vector<int64_t> symmetrized_reverse_eids(const int64_t* orig_eid, int64_t num_edges,
                                              int64_t num_input_edges, const std::string& what);

/// One link-prediction mini-batch: the positive edges, their negatives, the pair graph over
/// compacted node IDs, and the blocks to compute the representations of its nodes.
struct EdgeMiniBatch {
  int64_t epoch = 0;
  int64_t index = 0;
  std::vector<int64_t> eids;              ///< positive edge IDs (global)
  std::vector<int64_t> pos_src, pos_dst;  ///< positive endpoints (global IDs)
  std::vector<int64_t> neg_src, neg_dst;  ///< negative endpoints (global IDs)
  /// Unique endpoints of positives then negatives in order of first appearance; the blocks'
  /// output nodes (blocks.back().dst_nodes() == seeds).
  std::vector<int64_t> seeds;
  std::vector<int64_t> pos_src_local, pos_dst_local, neg_src_local, neg_dst_local;  ///< in seeds
  std::vector<Block> blocks;
  std::vector<int64_t> input_nodes;
  SampleStats stats;
};

/// Fills mb.seeds (the unique endpoints of pos_* then neg_*, in order of first appearance) and
/// the *_local indices of every pair endpoint into them. Shared by the standalone and the
/// distributed edge loader.
void compact_pair_endpoints(EdgeMiniBatch& mb);

/// Edge loader (DGL's DataLoader over edge IDs with an as_edge_prediction_sampler). Holds a
/// reference to the sampler and graph.
class EdgeDataLoader {
 public:
  /// `seed_eids` are edge IDs of the sampler's graph. Validates like NodeDataLoader, plus
  /// negatives >= 0 and reverse_eids (size and range) for kReverseId.
  EdgeDataLoader(const NeighborSampler& sampler, std::vector<int64_t> seed_eids, LoaderOptions opts,
                 EdgeLoaderOptions eopts);
  ~EdgeDataLoader();
  int64_t num_batches() const;
  std::vector<int64_t> batch_eids(int64_t epoch, int64_t b) const;
  EdgeMiniBatch sample_batch(int64_t epoch, int64_t b, CompactWorkspace* ws = nullptr) const;
  void start_epoch(int64_t epoch);
  bool next(EdgeMiniBatch& out,
            const detail::OrderedPrefetcher<EdgeMiniBatch>::Interrupted& interrupted = {});
  /// Ends the epoch early without waiting: no batch is started any more, the prefetched ones
  /// are freed and next() returns false; a batch being sampled now finishes in the background
  /// (its thread is joined by the next start_epoch() or the destructor). Idempotent.
  void stop();

 private:
  const NeighborSampler& sampler_;
  std::vector<int64_t> seeds_;
  LoaderOptions opts_;
  EdgeLoaderOptions eopts_;
  std::vector<int64_t> eid_src_, eid_dst_;  // endpoints by edge ID (-1: no such edge)
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
  std::vector<CompactWorkspace> workspaces_;
  std::unique_ptr<detail::OrderedPrefetcher<EdgeMiniBatch>> pipe_;
};

}  // namespace tessera::ops
