// Open-addressing hash map from global node IDs (>= 0) to local IDs, with O(used) reset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessera::ops::detail {

class IdMap {
 public:
  /// Clears the map and makes room for `expected` keys without rehashing.
  void reset(int64_t expected) {
    if (static_cast<int64_t>(used_.size()) * 4 < static_cast<int64_t>(keys_.size())) {
      for (uint64_t s : used_)
        keys_[s] = -1;
    } else {
      std::fill(keys_.begin(), keys_.end(), -1);
    }
    used_.clear();
    size_t cap = 64;
    while (static_cast<int64_t>(cap) < 2 * expected)
      cap <<= 1;
    if (cap > keys_.size()) allocate(cap);
  }
  /// Local ID of `key`, inserting `next` if absent; `inserted` tells which.
  int64_t find_or_insert(int64_t key, int64_t next, bool& inserted) {
    if (static_cast<size_t>(used_.size() + 1) * 2 > keys_.size()) grow();
    uint64_t s = slot(key);
    for (;;) {
      const int64_t k = keys_[s];
      if (k == key) {
        inserted = false;
        return vals_[s];
      }
      if (k < 0) {
        keys_[s] = key;
        vals_[s] = next;
        used_.push_back(s);
        inserted = true;
        return next;
      }
      s = (s + 1) & mask_;
    }
  }
  /// Local ID of `key` or -1.
  int64_t find(int64_t key) const {
    if (keys_.empty()) return -1;
    uint64_t s = slot(key);
    for (;;) {
      const int64_t k = keys_[s];
      if (k == key) return vals_[s];
      if (k < 0) return -1;
      s = (s + 1) & mask_;
    }
  }
  int64_t size() const { return static_cast<int64_t>(used_.size()); }
  /// Hint the cache about the slot of `key`.
  void prefetch(int64_t key) const {
    if (!keys_.empty()) __builtin_prefetch(&keys_[slot(key)]);
  }

 private:
  uint64_t slot(int64_t key) const {
    return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_;
  }
  void allocate(size_t cap) {
    keys_.assign(cap, -1);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    used_.clear();
  }
  void grow() {
    std::vector<int64_t> old_keys, old_vals;
    std::vector<uint64_t> old_used;
    old_keys.swap(keys_);
    old_vals.swap(vals_);
    old_used.swap(used_);
    allocate(std::max<size_t>(64, old_keys.size() * 2));
    bool ins;
    for (uint64_t s : old_used)
      find_or_insert(old_keys[s], old_vals[s], ins);
  }
  std::vector<int64_t> keys_, vals_;
  std::vector<uint64_t> used_;
  uint64_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace tessera::ops::detail
