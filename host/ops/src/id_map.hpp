// SPDX-License-Identifier: Apache-2.0
// Open-addressing hash map from global node IDs (>= 0) to local IDs, with O(used) reset.
// Key and value share one 16-byte slot, so a lookup touches one cache line.
//
// Optionally also a direct-mapped table over [0, n) (use_dense): one 4-byte tag per possible
// ID, so compaction costs one random access per edge and no hashing. Tags are epoch-based and
// never cleared between uses: a call takes the tag range (base, base + cap] and stores
// base + 1 + local; a tag is valid iff it is > base (older calls stored smaller values).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace tessera::ops::detail {

class IdMap {
 public:
  /// Clears the map and makes room for `expected` keys without rehashing.
  void reset(int64_t expected) {
    if (static_cast<int64_t>(used_.size()) * 4 < static_cast<int64_t>(slots_.size())) {
      for (uint64_t s : used_)
        slots_[s].key = -1;
    } else {
      for (auto& s : slots_)
        s.key = -1;
    }
    used_.clear();
    // expected is an upper bound (edges + destinations); distinct keys are usually far fewer, so
    // size for 80% load at the bound: a smaller table stays in cache. grow() keeps it correct.
    size_t cap = 64;
    while (static_cast<int64_t>(cap) * 4 < 5 * expected)
      cap <<= 1;
    if (cap > slots_.size()) allocate(cap);
  }
  /// Local ID of `key`, inserting `next` if absent; `inserted` tells which.
  int64_t find_or_insert(int64_t key, int64_t next, bool& inserted) {
    if ((used_.size() + 1) * 4 > slots_.size() * 3) grow();
    uint64_t s = slot(key);
    for (;;) {
      Slot& sl = slots_[s];
      if (sl.key == key) {
        inserted = false;
        return sl.value;
      }
      if (sl.key < 0) {
        sl.key = key;
        sl.value = next;
        used_.push_back(s);
        inserted = true;
        return next;
      }
      s = (s + 1) & mask_;
    }
  }
  /// Local ID of `key` or -1.
  int64_t find(int64_t key) const {
    if (slots_.empty()) return -1;
    uint64_t s = slot(key);
    for (;;) {
      const Slot& sl = slots_[s];
      if (sl.key == key) return sl.value;
      if (sl.key < 0) return -1;
      s = (s + 1) & mask_;
    }
  }
  int64_t size() const { return static_cast<int64_t>(used_.size()); }

  /// Enables the direct-mapped table for IDs in [0, n) (a no-op when already that large).
  /// Returns false (and leaves it off) when n is above kMaxDense.
  static constexpr int64_t kMaxDense = int64_t{1} << 25;  // 128 MiB of tags at most
  bool use_dense(int64_t n) {
    if (n <= 0 || n > kMaxDense) return false;
    if (n <= dense_n_) return true;
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = (static_cast<size_t>(n) * sizeof(uint32_t) + kHuge - 1) & ~(kHuge - 1);
    void* p = nullptr;
    if (::posix_memalign(&p, kHuge, bytes) != 0) return false;
    ::madvise(p, bytes, MADV_HUGEPAGE);  // fewer TLB misses; fine if refused
    std::memset(p, 0, bytes);
    dense_.reset(static_cast<uint32_t*>(p));
    dense_n_ = n;
    base_ = 0;
    return true;
  }
  /// IDs the direct-mapped table covers (0: off).
  int64_t dense_size() const { return dense_n_; }
  /// Starts a use of the direct-mapped table for at most `cap` locals: returns the base (a tag t
  /// is a local of this use iff t > base; local = t - base - 1), or false when cap does not fit.
  bool dense_begin(int64_t cap, uint32_t& base) {
    constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
    if (dense_n_ == 0 || cap < 0 || static_cast<uint64_t>(cap) >= kMax / 2) return false;
    if (base_ + static_cast<uint64_t>(cap) + 1 > kMax) {  // tags would wrap: start over
      std::memset(dense_.get(), 0, static_cast<size_t>(dense_n_) * sizeof(uint32_t));
      base_ = 0;
    }
    base = static_cast<uint32_t>(base_);
    base_ += static_cast<uint64_t>(cap);  // every tag of this use is <= the next base
    return true;
  }
  /// Ends the use begun at `base` after `used` locals (<= its cap): the next use may start
  /// right after them.
  void dense_end(uint32_t base, int64_t used) { base_ = static_cast<uint64_t>(base) + used; }
  uint32_t* dense_tags() { return dense_.get(); }
  /// Hints the cache about the slot of `key`.
  void prefetch(int64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[slot(key)]);
  }

 private:
  struct Slot {
    int64_t key;
    int64_t value;
  };
  uint64_t slot(int64_t key) const {
    return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_;
  }
  void allocate(size_t cap) {
    slots_.assign(cap, Slot{-1, 0});
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    used_.clear();
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    std::vector<uint64_t> old_used;
    old_used.swap(used_);
    allocate(std::max<size_t>(64, old.size() * 2));
    bool ins;
    for (uint64_t s : old_used)
      find_or_insert(old[s].key, old[s].value, ins);
  }
  struct FreeDeleter {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  std::vector<Slot> slots_;
  std::vector<uint64_t> used_;
  std::unique_ptr<uint32_t[], FreeDeleter> dense_;
  int64_t dense_n_ = 0;
  uint64_t base_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace tessera::ops::detail
