// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "state.hpp"
#include "tessera/core/error.hpp"

namespace tessera::dist {

namespace {

// Element `column` of row `i` (rows of `row_bytes`, elements of `esize` bytes) is nonzero.
inline bool selected(const uint8_t* base, int64_t i, size_t row_bytes, size_t esize,
                     int64_t column) {
  const uint8_t* p =
      base + static_cast<size_t>(i) * row_bytes + static_cast<size_t>(column) * esize;
  for (size_t b = 0; b < esize; ++b) {
    if (p[b]) {
      return true;
    }
  }
  return false;
}

void check_mask_shape(const std::vector<int64_t>& shape, int64_t column, const char* what) {
  TESSERA_EXPECTS(shape.size() == 1 || shape.size() == 2, ValueError,
                  "{}: the mask must be 1-D or 2-D ([N] or [N, splits]), not {}", what,
                  shape_string(shape));
  const int64_t cols = shape.size() == 2 ? shape[1] : 1;
  TESSERA_EXPECTS(column >= 0 && column < cols, IndexError,
                  "{}: column {} outside the mask's {} column(s)", what, column, cols);
}

// DGL's _split_even_to_part: the chunk [left, right) of `count` selected items for `rank`.
std::pair<int64_t, int64_t> even_chunk(int64_t count, int world, int rank) {
  const int64_t size = count / world, remain = count % world;
  const int64_t left = rank * size + std::min<int64_t>(rank, remain);
  return {left, left + size + (rank < remain ? 1 : 0)};
}

// The rank that takes position `g` of `total` selected items with force_even over `world` ranks,
// T = `trainers` per machine: the machine's chunk (the even chunks of its T ranks together) is
// dealt to its trainers in turn, position by position, as DGL spreads a machine's chunk over its
// trainers (at random). Consecutive chunks would give the first trainer the machine's
// highest-degree nodes (degree order numbers them first) and every step's most sampling.
int even_owner(int64_t g, int64_t total, int world, int trainers) {
  int r = 0;
  while (even_chunk(total, world, r).second <= g) {
    ++r;
  }
  if (trainers <= 1) {
    return r;
  }
  const int first = r / trainers * trainers;
  return first + static_cast<int>((g - even_chunk(total, world, first).first) % trainers);
}

// Every `trainers`-th of `ids` from `local` on: a machine's selected IDs dealt to its trainers
// in turn (sizes differ by at most one, the first trainers taking one more).
std::vector<int64_t> dealt(const std::vector<int64_t>& ids, int trainers, int local) {
  std::vector<int64_t> out;
  for (size_t i = static_cast<size_t>(local); i < ids.size(); i += static_cast<size_t>(trainers)) {
    out.push_back(ids[i]);
  }
  return out;
}

// The selected IDs of this rank's machine (ranks [m T, m T + T) for machine m = rank / T), in ID
// order, from the siblings' own selected rows (`mine`): one all-to-all of every rank, each sending
// its IDs to its machine's trainers. For tensors whose rows the trainers do not share.
std::vector<int64_t> machine_selected(const DistTensor& mask, const std::vector<int64_t>& mine,
                                      int trainers, const char* what) {
  auto& t = mask.runtime().transport();
  const transport::CollectiveLabel label(t, what);
  const int world = t.world_size(), me = t.rank();
  TESSERA_EXPECTS(world % trainers == 0, ValueError,
                  "{}: {} trainers per machine do not divide the world of {} ranks", what, trainers,
                  world);
  transport::Bytes bytes(mine.size() * 8);
  if (!mine.empty()) {
    std::memcpy(bytes.data(), mine.data(), bytes.size());
  }
  std::vector<transport::Bytes> out(static_cast<size_t>(world));
  const int first = me / trainers * trainers;
  for (int r = first; r < first + trainers; ++r) {
    out[r] = bytes;
  }
  const auto in = t.all_to_all_v(out);
  std::vector<int64_t> machine;
  for (const auto& b : in) {  // rank order: ascending row ranges, so ID order
    const size_t o = machine.size();
    machine.resize(o + b.size() / 8);
    if (!b.empty()) {
      std::memcpy(machine.data() + o, b.data(), b.size());
    }
  }
  return machine;
}

std::vector<int64_t> split_tensor(const DistTensor& mask, bool force_even, int64_t column,
                                  int trainers_per_machine, const char* kind, const char* what) {
  TESSERA_EXPECTS(mask.defined(), ValueError, "{}: undefined mask", what);
  TESSERA_EXPECTS(mask.policy().kind == kind, ValueError,
                  "{}: the mask '{}' is partitioned by the {} policy, not the {} policy", what,
                  mask.name(), mask.policy().kind, kind);
  check_mask_shape(mask.shape(), column, what);
  const auto [lo, hi] = mask.local_range();
  const auto* base = static_cast<const uint8_t*>(mask.local_data());
  const size_t es = dtype_size(mask.dtype());
  std::vector<int64_t> mine;
  for (int64_t i = 0; i < hi - lo; ++i) {
    if (selected(base, i, mask.row_bytes(), es, column)) {
      mine.push_back(lo + i);
    }
  }
  if (!force_even) {
    // Several trainers per machine (DGL's _split_local): the machine's selected IDs cut into one
    // chunk per trainer in ID order. Read from the memory the trainers share (a graph's data),
    // else gathered from the machine's trainers (a tensor the user made: each trainer holds its
    // own range), when the caller says how many trainers a machine has.
    const MachineRows mr = mask.machine_rows();
    if (mr.base != nullptr && mr.trainers > 1) {
      std::vector<int64_t> machine;
      for (int64_t i = 0; i < mr.hi - mr.lo; ++i) {
        if (selected(mr.base, i, mask.row_bytes(), es, column)) {
          machine.push_back(mr.lo + i);
        }
      }
      return dealt(machine, mr.trainers, mr.local);
    }
    if (mr.base == nullptr && trainers_per_machine > 1) {
      const int me = mask.runtime().rank();
      const std::vector<int64_t> machine = machine_selected(mask, mine, trainers_per_machine, what);
      return dealt(machine, trainers_per_machine, me % trainers_per_machine);
    }
    return mine;
  }
  // Everyone's count; then each selected item goes to the rank even_owner gives its position in
  // the global ID-ordered list (one all-to-all; each rank's items arrive in ID order).
  auto& t = mask.runtime().transport();
  const transport::CollectiveLabel label(t, what);
  const int world = t.world_size(), me = t.rank();
  std::vector<int64_t> counts(static_cast<size_t>(world));
  const int64_t c = static_cast<int64_t>(mine.size());
  t.all_gather(&c, sizeof c, counts.data());
  int64_t before = 0, total = 0;
  for (int r = 0; r < world; ++r) {
    if (r < me) {
      before += counts[r];
    }
    total += counts[r];
  }
  const MachineRows mr = mask.machine_rows();
  int trainers = mr.base != nullptr ? mr.trainers : trainers_per_machine;
  if (trainers < 1 || world % trainers != 0) {
    trainers = 1;
  }
  std::vector<transport::Bytes> out(static_cast<size_t>(world));
  for (int64_t k = 0; k < c; ++k) {
    const int r = even_owner(before + k, total, world, trainers);
    const size_t o = out[r].size();
    out[r].resize(o + 8);
    std::memcpy(out[r].data() + o, &mine[k], 8);
  }
  const auto in = t.all_to_all_v(out);
  std::vector<int64_t> res;
  for (const auto& b : in) {
    const size_t o = res.size();
    res.resize(o + b.size() / 8);
    if (!b.empty()) {
      std::memcpy(res.data() + o, b.data(), b.size());
    }
  }
  return res;
}

std::vector<int64_t> split_array(const Array& mask, const std::vector<int64_t>& offsets, int rank,
                                 bool force_even, int64_t column, int trainers, const char* what) {
  check_mask_shape(mask.shape(), column, what);
  const int world = static_cast<int>(offsets.size()) - 1;
  TESSERA_EXPECTS(rank >= 0 && rank < world, IndexError, "{}: rank {} outside [0, {})", what, rank,
                  world);
  TESSERA_EXPECTS(mask.rows() == offsets.back(), ValueError,
                  "{}: the mask has {} rows but the partition book covers {}", what, mask.rows(),
                  offsets.back());
  const auto* base = static_cast<const uint8_t*>(mask.raw());
  const size_t es = dtype_size(mask.dtype()), rb = mask.row_bytes();
  std::vector<int64_t> res;
  if (!force_even) {
    for (int64_t i = offsets[rank]; i < offsets[rank + 1]; ++i) {
      if (selected(base, i, rb, es, column)) {
        res.push_back(i);
      }
    }
    return res;
  }
  int64_t total = 0;
  for (int64_t i = 0; i < mask.rows(); ++i) {
    total += selected(base, i, rb, es, column);
  }
  if (trainers < 1 || world % trainers != 0) {
    trainers = 1;
  }
  const int first = rank / trainers * trainers;  // the machine's chunk, then every T-th of it
  const int64_t left = even_chunk(total, world, first).first;
  const int64_t right = even_chunk(total, world, first + trainers - 1).second;
  int64_t k = 0;
  for (int64_t i = 0; i < mask.rows() && k < right; ++i) {
    if (selected(base, i, rb, es, column)) {
      if (k >= left && (k - left) % trainers == rank - first) {
        res.push_back(i);
      }
      ++k;
    }
  }
  return res;
}

}  // namespace

std::vector<int64_t> node_split(const DistTensor& mask, bool force_even, int64_t column,
                                int trainers_per_machine) {
  return split_tensor(mask, force_even, column, trainers_per_machine, "node", "node_split");
}
std::vector<int64_t> edge_split(const DistTensor& mask, bool force_even, int64_t column,
                                int trainers_per_machine) {
  return split_tensor(mask, force_even, column, trainers_per_machine, "edge", "edge_split");
}
std::vector<int64_t> node_split(const Array& mask, const PartitionBook& book, int rank,
                                bool force_even, int64_t column, int trainers_per_machine) {
  return split_array(mask, book.node_offsets(), rank, force_even, column, trainers_per_machine,
                     "node_split");
}
std::vector<int64_t> edge_split(const Array& mask, const PartitionBook& book, int rank,
                                bool force_even, int64_t column, int trainers_per_machine) {
  return split_array(mask, book.edge_offsets(), rank, force_even, column, trainers_per_machine,
                     "edge_split");
}

}  // namespace tessera::dist
