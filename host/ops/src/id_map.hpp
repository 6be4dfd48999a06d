// Open-addressing hash map from global node IDs (>= 0) to local IDs, with O(used) reset.
// Key and value share one 16-byte slot, so a lookup touches one cache line.
#pragma once

#include <algorithm>
#include <cstdint>
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
  std::vector<Slot> slots_;
  std::vector<uint64_t> used_;
  uint64_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace tessera::ops::detail
