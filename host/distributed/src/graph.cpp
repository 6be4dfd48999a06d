// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <numeric>
#include <tuple>
#include <utility>

#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "row_order.hpp"
#include "shm.hpp"
#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera::dist {

namespace {

// What every rank must agree on: the identity of the partitioning.
nlohmann::json fingerprint(const PartitionConfig& c) {
  nlohmann::json j;
  j["config"] = c.path.string();
  j["graph_name"] = c.graph_name;
  j["num_parts"] = c.num_parts;
  j["num_nodes"] = c.num_nodes;
  j["num_edges"] = c.num_edges;
  j["node_offsets"] = c.node_offsets;
  j["edge_offsets"] = c.edge_offsets;
  // Checksums of every partition's files (what `tessera partition` wrote), in config order.
  std::string sums;
  for (const auto& p : c.parts) {
    for (const auto& f : p.files) {
      sums += fmt::format("{}/{}:{:08x};", p.dir, f.name, f.crc32);
    }
  }
  j["checksums"] = sums;
  return j;
}

void check_same_partitioning(transport::Transport& t, const PartitionConfig& c) {
  const std::string mine = fingerprint(c).dump();
  const auto all = t.all_gather(transport::ByteView(mine.data(), mine.size()));
  const auto me = nlohmann::json::parse(mine);
  for (int r = 0; r < t.world_size(); ++r) {
    if (r == t.rank()) {
      continue;
    }
    const auto theirs = nlohmann::json::parse(std::string(all[r].begin(), all[r].end()));
    for (const char* field : {"graph_name", "num_parts", "num_nodes", "num_edges", "node_offsets",
                              "edge_offsets", "checksums"}) {
      if (theirs[field] == me[field]) {
        continue;
      }
      std::string a = theirs[field].dump(), b = me[field].dump();
      if (std::string(field) == "checksums") {
        a = "(file checksums of another partitioning run)";
        b = "(this rank's)";
      }
      TESSERA_FAIL(ValueError,
                   "DistGraph '{}': rank {}'s partition config {} is not from the same "
                   "partitioning as rank {}'s {}: {} differ ({} on rank {}, {} on rank {}); every "
                   "rank must load the config of one partitioning run",
                   c.graph_name, r, theirs["config"].get<std::string>(), t.rank(), c.path.string(),
                   field, a, r, b, t.rank());
    }
  }
}

// memcpy on every core: loading copies gigabytes from the mapped files.
void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kGrain = size_t{8} << 20;
  const auto chunks = static_cast<int64_t>((bytes + kGrain - 1) / kGrain);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    const size_t b = static_cast<size_t>(c0) * kGrain;
    const size_t e = std::min(bytes, static_cast<size_t>(c1) * kGrain);
    std::memcpy(static_cast<uint8_t*>(dst) + b, static_cast<const uint8_t*>(src) + b, e - b);
  });
}

// Copies rows [b, e) of the owner's local array `a` (local row 0 = global row `lo`).
// Runs the graph's edge-table builder once (see the constructor), from whichever accessor
// needs the tables first.
void ensure_edge_tables(detail::GraphState& g) {
  std::call_once(g.edge_tables_once, [&g] {
    if (g.build_edge_tables) {
      g.build_edge_tables();
      g.build_edge_tables = nullptr;  // releases what it held
    }
  });
}

// The global new ID of the source of stored edge k: indices.npy holds local IDs, which nid.npy
// names, or without halo (local_ids false) new IDs themselves. An ID outside [0, bound) is a
// corrupt file: an error naming it, not a crash.
int64_t stored_source(const int64_t* indices, const int64_t* nid, bool local_ids, int64_t bound,
                      int64_t k, const std::string& graph, int64_t part) {
  const int64_t u = indices[k];
  TESSERA_EXPECTS(u >= 0 && u < bound, ValueError,
                  "DistGraph '{}': partition {}'s indices.npy holds {} at position {}, outside "
                  "[0, {}) (a corrupt partition file; `tessera validate` checks every file)",
                  graph, part, u, k, bound);
  return local_ids ? nid[u] : u;
}

InitFn copy_rows(const Array& a, int64_t lo, const std::string& what) {
  return [a, lo, what](int64_t b, int64_t e, void* dst) {
    TESSERA_EXPECTS(a.rows() >= e - lo, ValueError, "{}: {} rows stored, {} needed", what, a.rows(),
                    e - lo);
    const size_t rb = a.row_bytes();
    parallel_copy(dst, static_cast<const uint8_t*>(a.raw()) + static_cast<size_t>(b - lo) * rb,
                  static_cast<size_t>(e - b) * rb);
  };
}

}  // namespace

namespace {

// What the constructor's steps share while a partition loads: where this rank stands in the
// job, the machine's ranges and this trainer's share of them, and the partition's
// memory-mapped arrays (check_structure checks them before anything indexes with them).
struct Loading {
  Loading(detail::GraphState& g_, std::shared_ptr<Runtime> rt_, transport::Transport& t_,
          std::string name_)
      : g(g_), rt(std::move(rt_)), t(t_), name(std::move(name_)) {}

  detail::GraphState& g;
  std::shared_ptr<Runtime> rt;
  transport::Transport& t;
  std::string name;         // the graph's
  std::string prefix;       // of its tensors' names: the graph and its partitioning's checksums
  int world = 1, tpm = 1;   // ranks; trainers per machine
  int mach = 0, local = 0;  // this rank's machine, and its index among the machine's trainers
  int64_t nlo = 0, nhi = 0, elo = 0, ehi = 0;  // the machine's node and edge ranges
  int64_t ni = 0, n = 0, m = 0;  // its inner nodes, the graph's nodes, its inner edges
  int64_t num_local = 0;         // local IDs (inner nodes and halo)
  int64_t row_lo = 0, row_hi = 0, edge_lo = 0, edge_hi = 0;  // this trainer's local rows, edges
  const int64_t* indptr = nullptr;
  const int64_t* indices = nullptr;
  const int64_t* nid = nullptr;
  const int64_t* onid = nullptr;
  const int64_t* eid = nullptr;
  const int64_t* oeid = nullptr;
  bool in_order = true;  // inner edges stored in edge-ID order (what `tessera partition` writes)

  // A stored ID outside [0, bound): an error naming the file, not a crash.
  [[noreturn]] void bad_id(const char* file, int64_t k, int64_t v, int64_t bound) const {
    TESSERA_FAIL(ValueError,
                 "DistGraph '{}': partition {}'s {} holds {} at position {}, outside [0, {}) "
                 "(a corrupt partition file; `tessera validate` checks every file)",
                 name, mach, file, v, k, bound);
  }
};

// The config, checked against the graph name, the job's size and every other rank's config;
// this rank's machine, and its partition, memory-mapped.
Loading open_partition(detail::GraphState& g, const std::shared_ptr<Runtime>& rt,
                       const std::string& graph_name, const std::filesystem::path& part_config,
                       const DistGraphOptions& opts) {
  auto& rs = rt->state();
  Loading l(g, rt, *rs.t, graph_name);
  l.world = l.t.world_size();
  g.config = load_partition_config(part_config);
  TESSERA_EXPECTS(g.config.graph_name == graph_name, ValueError,
                  "DistGraph '{}': the config {} holds graph '{}'", graph_name,
                  part_config.string(), g.config.graph_name);
  check_same_partitioning(l.t, g.config);
  // Tensor names carry the partitioning's identity: loading the same partitioning again shares
  // its tensors (idempotent, as DGL), another partitioning of a graph of the same name in this
  // process gets its own.
  const std::string sums = fingerprint(g.config)["checksums"].get<std::string>();
  l.prefix = fmt::format("{}@{:08x}", graph_name, crc32_update(0, sums.data(), sums.size()));
  TESSERA_EXPECTS(g.config.num_parts >= 1 && l.world % g.config.num_parts == 0, ValueError,
                  "DistGraph '{}': {} has {} partitions but the job has {} ranks (one partition "
                  "per machine and the same number of trainers on every machine: the ranks must "
                  "be a multiple of the partitions; a world of one process needs a 1-partition "
                  "config)",
                  graph_name, part_config.string(), g.config.num_parts, l.world);
  l.tpm = static_cast<int>(l.world / g.config.num_parts);
  l.mach = l.t.rank() / l.tpm;
  l.local = l.t.rank() % l.tpm;
  g.trainers_per_machine = l.tpm;
  g.machine = l.mach;
  LoadOptions lo;
  lo.verify_checksums = opts.verify_checksums;
  lo.writable_node_data = l.world == 1;  // the node data's rows stay in the mapping: data_rows
  g.part = load_partition(g.config, l.mach, lo);
  g.machine_book = PartitionBook::from_config(g.config);
  {
    std::lock_guard<std::mutex> lk(rs.mu);
    g.id = rs.next_graph_id++;
  }
  std::tie(l.nlo, l.nhi) = g.machine_book.node_range(l.mach);
  std::tie(l.elo, l.ehi) = g.machine_book.edge_range(l.mach);
  TESSERA_EXPECTS(g.part.num_inner_nodes == l.nhi - l.nlo, ValueError,
                  "DistGraph '{}': partition {} has {} inner nodes but its range holds {}",
                  graph_name, l.mach, g.part.num_inner_nodes, l.nhi - l.nlo);
  l.ni = l.nhi - l.nlo;
  l.n = g.config.num_nodes;
  l.indptr = g.part.indptr.data<int64_t>();
  l.indices = g.part.indices.data<int64_t>();
  l.nid = g.part.nid.data<int64_t>();
  l.onid = g.part.orig_nid.data<int64_t>();
  l.eid = g.part.eid.data<int64_t>();
  l.oeid = g.part.orig_eid.data<int64_t>();
  l.num_local = g.part.nid.rows();
  return l;
}

// The partition's structure (its files' sizes, indptr, the inner edges' count), checked before
// anything indexes with it; and whether the inner edges are stored in edge-ID order.
void check_structure(Loading& l) {
  const LocalPartition& part = l.g.part;
  TESSERA_EXPECTS(
      part.indptr.rows() >= l.ni + 1 && part.orig_nid.rows() >= l.num_local && l.num_local >= l.ni,
      ValueError,
      "DistGraph '{}': partition {}'s files disagree: indptr.npy has {} entries, "
      "nid.npy {} and orig_nid.npy {} rows for {} inner nodes",
      l.name, l.mach, part.indptr.rows(), l.num_local, part.orig_nid.rows(), l.ni);
  const int64_t* indptr = l.indptr;
  l.m = indptr[l.ni];
  for (int64_t i = 0; i < l.ni; ++i) {
    if (indptr[i + 1] < indptr[i]) {
      l.bad_id("indptr.npy", i + 1, indptr[i + 1], indptr[i] + 1);
    }
  }
  TESSERA_EXPECTS(indptr[0] == 0 && l.m >= 0 && l.m <= part.indices.rows() &&
                      l.m <= part.eid.rows() && l.m <= part.orig_eid.rows(),
                  ValueError,
                  "DistGraph '{}': partition {}'s indptr.npy ends at {} but {} edges "
                  "are stored",
                  l.name, l.mach, l.m, part.indices.rows());
  TESSERA_EXPECTS(l.m == l.ehi - l.elo, ValueError,
                  "DistGraph '{}': partition {} stores {} in-edges of its inner nodes but its edge "
                  "range [{}, {}) holds {}",
                  l.name, l.mach, l.m, l.elo, l.ehi, l.ehi - l.elo);
  std::atomic<bool> in_order{true};
  const int64_t* eid = l.eid;
  const int64_t elo = l.elo;
  parallel_for(0, l.m, 1 << 16, [&](int64_t k0, int64_t k1, int64_t) {
    for (int64_t k = k0; k < k1 && in_order.load(std::memory_order_relaxed); ++k) {
      if (eid[k] != elo + k) {
        in_order = false;
      }
    }
  });
  l.in_order = in_order.load();
}

// Bytes of one row of a node or edge data array.
size_t row_bytes_of(const ArraySchema& s) {
  size_t rb = dtype_size(s.dtype);
  for (size_t d = 1; d < s.shape.size(); ++d) {
    rb *= static_cast<size_t>(s.shape[d]);
  }
  return rb;
}

}  // namespace

namespace detail {

// This trainer's rows: the machine's nodes cut into tpm contiguous ranges, each with the in-edges
// of its nodes, holding about equal shares of the machine's partition in bytes: a node weighs
// its rows of the node data and of the per-node arrays (indptr, orig_nid), plus its in-edges'
// rows of the edge data and of the per-edge arrays (indices, eid, orig_eid). What a trainer
// places on its GPU, the sampling requests it serves and its evaluation grow with that. Ranges of
// equal node counts would put nearly every edge into the first trainer's under degree order (hubs
// first): 99.6% of a products-like graph's edges at 2 trainers (by bytes: 67.0%), 97.1% at 4
// (33.8%). Each cut aims at an equal share of what the ranges before it left, so one hub heavier
// than a share leaves the next trainers more than a node each. Every range holds at least one
// node when the machine has as many nodes as trainers; with fewer, the sizes differ by at most
// one.
std::vector<int64_t> trainer_cuts(const int64_t* indptr, int64_t ni, int tpm, int64_t node_bytes,
                                  int64_t edge_bytes) {
  std::vector<int64_t> cut(static_cast<size_t>(tpm) + 1, 0);
  cut[static_cast<size_t>(tpm)] = ni;
  if (ni < tpm) {
    for (int i = 1; i < tpm; ++i) {
      cut[static_cast<size_t>(i)] = i * (ni / tpm) + std::min<int64_t>(i, ni % tpm);
    }
    return cut;
  }
  // The bytes of the nodes before node r (increasing in r).
  auto before = [&](int64_t r) { return r * node_bytes + indptr[r] * edge_bytes; };
  for (int i = 1; i < tpm; ++i) {
    // An equal share of what the ranges before have left (a hub heavier than a share would
    // otherwise leave the next trainers one node each and the last one the rest).
    const int64_t done = before(cut[static_cast<size_t>(i) - 1]);
    const int64_t target = done + (before(ni) - done) / (tpm - i + 1);
    int64_t lo = 0, hi = ni;  // the first node r with before(r) >= target
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (before(mid) < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    cut[static_cast<size_t>(i)] =
        std::min(std::max(lo, cut[static_cast<size_t>(i) - 1] + 1), ni - (tpm - i));
  }
  return cut;
}

}  // namespace detail

namespace {

void cut_trainer_rows(Loading& l) {
  int64_t node_bytes = 16, edge_bytes = 24;  // indptr and orig_nid; indices, eid and orig_eid
  for (const auto& s : l.g.config.ndata) {
    node_bytes += static_cast<int64_t>(row_bytes_of(s));
  }
  for (const auto& s : l.g.config.edata) {
    edge_bytes += static_cast<int64_t>(row_bytes_of(s));
  }
  const std::vector<int64_t> cut =
      detail::trainer_cuts(l.indptr, l.ni, l.tpm, node_bytes, edge_bytes);
  l.row_lo = cut[static_cast<size_t>(l.local)];
  l.row_hi = cut[static_cast<size_t>(l.local) + 1];
  l.edge_lo = l.indptr[l.row_lo];
  l.edge_hi = l.indptr[l.row_hi];
  // Its edges must be those with edge IDs [elo + edge_lo, elo + edge_hi): `tessera partition`
  // numbers each node's in-edges consecutively (in some order within the node).
  if (l.tpm > 1 && !l.in_order) {
    for (int64_t k = l.edge_lo; k < l.edge_hi; ++k) {
      TESSERA_EXPECTS(l.eid[k] >= l.elo + l.edge_lo && l.eid[k] < l.elo + l.edge_hi, ValueError,
                      "DistGraph '{}': {} trainers per machine need the in-edges of each run of "
                      "nodes numbered consecutively, as `tessera partition` writes them, but "
                      "partition {}'s stored edge {} has edge ID {} outside [{}, {})",
                      l.name, l.tpm, l.mach, k, l.eid[k], l.elo + l.edge_lo, l.elo + l.edge_hi);
    }
  }
}

// Every rank's rows and edges, gathered (collective): the book that routes reads and sampling,
// one partition per rank.
PartitionBook gather_rank_book(const Loading& l) {
  const int64_t mine[4] = {l.nlo + l.row_lo, l.nlo + l.row_hi, l.elo + l.edge_lo,
                           l.elo + l.edge_hi};
  std::vector<int64_t> all(static_cast<size_t>(l.world) * 4);
  l.t.all_gather(mine, sizeof mine, all.data());
  std::vector<int64_t> noff{0}, eoff{0};
  for (int r = 0; r < l.world; ++r) {
    const int64_t* a = all.data() + static_cast<size_t>(r) * 4;
    TESSERA_EXPECTS(a[0] == noff.back() && a[2] == eoff.back(), ValueError,
                    "DistGraph '{}': rank {}'s rows [{}, {}) do not follow rank {}'s (ranks of "
                    "one machine must be consecutive and run over the same partitioning)",
                    l.name, r, a[0], a[1], r - 1);
    noff.push_back(a[1]);
    eoff.push_back(a[3]);
  }
  return PartitionBook(std::move(noff), std::move(eoff));
}

// With several trainers per machine, the machine's node and edge data live in one shared
// memory segment: the machine's first trainer creates it, the others map it, and its name is
// unlinked once all have (the memory goes with the last mapping, even after kill -9). With one
// trainer per machine there is no segment (see data_rows).
class MachineSegment {
 public:
  // Collective when the machine has several trainers.
  explicit MachineSegment(const Loading& l) : l_(l) {
    if (l.tpm > 1) {
      create(l);
    }
  }

  // Where the next tensor of the segment's layout keeps the machine's rows [lo_row, hi_row):
  // ndata and edata in config order, then orig_nid, orig_eid and the edge endpoints.
  MachineRows next(int64_t lo_row, int64_t hi_row) {
    MachineRows mr;
    if (seg_) {
      mr.hold = seg_;
      mr.base = seg_->base + layout_[next_++].first;
      mr.lo = lo_row;
      mr.hi = hi_row;
      mr.trainers = l_.tpm;
      mr.local = l_.local;
    }
    return mr;
  }

 private:
  void create(const Loading& l) {
    size_t total = 0;
    auto add = [&](int64_t rows, size_t rb) {
      const size_t bytes = static_cast<size_t>(rows) * rb;
      layout_.emplace_back(static_cast<int64_t>(total), bytes);
      total += (bytes + 4095) / 4096 * 4096;
    };
    for (const auto& s : l.g.config.ndata) {
      add(l.ni, row_bytes_of(s));
    }
    for (const auto& s : l.g.config.edata) {
      add(l.m, row_bytes_of(s));
    }
    add(l.ni, 8);  // orig_nid
    add(l.m, 8);   // orig_eid
    add(l.m, 16);  // edge endpoints
    // A machine whose partition is empty (METIS leaves parts empty on small graphs) still maps
    // a page, so that every tensor has a base address to register.
    total = std::max<size_t>(total, 4096);
    const char* token = std::getenv("TESSERA_JOB_TOKEN");
    const std::string tok = token ? token : "";
    const std::string tag =
        fmt::format("{:08x}-{:08x}-m{}", crc32_update(0, tok.data(), tok.size()),
                    crc32_update(0, l.prefix.data(), l.prefix.size()), l.mach);
    int64_t pid = 0;
    std::string fail;
    if (l.local == 0) {
      detail::sweep_stale_segments();
      pid = static_cast<int64_t>(::getpid());
      try {
        seg_ = detail::shm_create(detail::shm_segment_name(pid, tag), total);
      } catch (const std::exception& e) {
        fail = e.what();
        pid = -1;
      }
    }
    std::vector<int64_t> pids(static_cast<size_t>(l.world));
    l.t.all_gather(&pid, sizeof pid, pids.data());
    const int64_t leader = pids[static_cast<size_t>(l.mach) * l.tpm];
    TESSERA_EXPECTS(leader > 0, IOError,
                    "DistGraph '{}': machine {}'s shared partition could not be created{}{}",
                    l.name, l.mach, fail.empty() ? "" : ": ", fail);
    if (l.local != 0) {
      seg_ = detail::shm_open_existing(detail::shm_segment_name(leader, tag), total);
    }
    l.t.barrier();
    if (l.local == 0) {
      detail::shm_unlink_name(seg_->name);
    }
    l.g.shared = seg_;
    l.g.shared_bytes = static_cast<int64_t>(total);
  }

  const Loading& l_;
  std::shared_ptr<detail::ShmSegment> seg_;
  std::vector<std::pair<int64_t, size_t>> layout_;  // (offset, bytes) per shared tensor
  size_t next_ = 0;
};

// Where a tensor keeps its rows [lo, hi) of data stored in the partition's `file` from row
// `file_lo` on (`loaded`, the file as load_partition mapped it): in the machine's shared segment
// (several trainers), else, in a job of one rank, in a copy-on-write mapping of the file itself,
// so that loading neither copies them nor zero-fills fresh memory for them (0.8 GB of features
// of a products-sized partition) and they share the page cache's pages until written (writes
// stay in this process, the file keeps the stored rows); else (several ranks: transports
// register their rows) in memory of the tensor's own. Node data was mapped so by load_partition
// (LoadOptions::writable_node_data) and is used as it is; edge data is mapped a second time,
// since the sampler builds edge weights from the read-only mapping, which writes to the tensor
// must not change.
MachineRows data_rows(const Loading& l, MachineSegment& shared, const std::string& file,
                      const Array& loaded, int64_t file_lo, int64_t lo, int64_t hi,
                      const std::string& what) {
  if (l.world > 1) {
    return shared.next(lo, hi);
  }
  TESSERA_EXPECTS(loaded.rows() >= hi - file_lo, ValueError, "{}: {} rows stored, {} needed", what,
                  loaded.rows(), hi - file_lo);
  MachineRows mr;
  mr.lo = lo;
  mr.hi = hi;
  mr.filled = true;
  if (loaded.writable()) {
    auto a = std::make_shared<Array>(loaded);  // shares the mapping
    mr.base =
        static_cast<uint8_t*>(a->raw_mut()) + static_cast<size_t>(lo - file_lo) * a->row_bytes();
    mr.hold = std::move(a);
    return mr;
  }
  const std::filesystem::path path = l.g.config.dir / l.g.config.parts[l.mach].dir / file;
  Array a = mmap_npy(path, /*writable=*/true);
  // The second mapping must hold what load_partition checked: the file could have been replaced
  // in between (a new partitioning written over the folder). Compared where both share the page
  // cache's pages, in parallel.
  bool same = a.dtype() == loaded.dtype() && a.shape() == loaded.shape();
  if (same) {
    std::atomic<bool> equal{true};
    const auto* x = static_cast<const uint8_t*>(a.raw());
    const auto* y = static_cast<const uint8_t*>(loaded.raw());
    constexpr int64_t kChunk = int64_t{4} << 20;
    const auto n = static_cast<int64_t>(a.nbytes());
    parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1, int64_t) {
      for (int64_t c = c0; c < c1 && equal.load(std::memory_order_relaxed); ++c) {
        const int64_t b = c * kChunk;
        if (std::memcmp(x + b, y + b, static_cast<size_t>(std::min(kChunk, n - b))) != 0) {
          equal = false;
        }
      }
    });
    same = equal.load();
  }
  TESSERA_EXPECTS(same, ValueError,
                  "DistGraph '{}': {} changed while it was loaded (a partitioning written over "
                  "its folder?); load it again",
                  l.name, path.string());
  mr.base = static_cast<uint8_t*>(a.raw_mut()) + static_cast<size_t>(lo - file_lo) * a.row_bytes();
  mr.hold = std::make_shared<Array>(std::move(a));
  return mr;
}

// Node and edge data and orig_nid as DistTensors (collective, in config order on every rank),
// their rows copied from the partition's files (node and edge data of a job of one rank: mapped,
// see data_rows).
void create_data_tensors(const Loading& l, MachineSegment& shared) {
  auto& g = l.g;
  const auto npol = PartPolicy::node(g.book), epol = PartPolicy::edge(g.book);
  auto create = [&](const ArraySchema& s, const std::map<std::string, Array>& stored,
                    const char* kind, const PartPolicy& pol, int64_t lo, int64_t hi) {
    auto it = stored.find(s.name);
    TESSERA_EXPECTS(it != stored.end(), ValueError,
                    "DistGraph '{}': partition {} lacks {} data '{}'", l.name, l.mach, kind,
                    s.name);
    const std::string what = fmt::format("{} data {}", kind, s.name);
    const MachineRows rows = data_rows(l, shared, s.file, it->second, lo, lo, hi, what);
    return DistTensor(l.rt, fmt::format("{}:{}:{}", l.prefix, kind, s.name), s.shape, s.dtype, pol,
                      copy_rows(it->second, lo, what), true, Placement::kHost, rows);
  };
  for (const auto& s : g.config.ndata) {
    g.ndata.emplace(s.name, create(s, g.part.ndata, "node", npol, l.nlo, l.nhi));
  }
  for (const auto& s : g.config.edata) {
    g.edata.emplace(s.name, create(s, g.part.edata, "edge", epol, l.elo, l.ehi));
  }
  g.orig_nid = DistTensor(l.rt, fmt::format("{}:orig_nid", l.prefix), {g.config.num_nodes},
                          DType::kInt64, npol, copy_rows(g.part.orig_nid, l.nlo, "orig_nid"), true,
                          Placement::kHost, shared.next(l.nlo, l.nhi));
}

// The new and original ID of the source of each stored edge of this trainer's rows, for a
// version-1 partition, whose rows are reordered at load by their sources' original IDs.
class SourceIds {
 public:
  struct Ids {
    int64_t now, orig;
  };

  // Reads the original IDs of remote sources from their owners (halo-less partitions).
  explicit SourceIds(const Loading& l) : l_(l) {
    if (!l.g.config.local_indices) {
      // Sources of halo-less partitions (local_indices false) whose original ID lives elsewhere.
      for (int64_t k = l.edge_lo; k < l.edge_hi; ++k) {
        const int64_t u = l.indices[k];
        if (u < 0 || u >= l.n) {
          l.bad_id("indices.npy", k, u, l.n);
        }
        if (u < l.nlo || u >= l.nhi) {
          remote_.push_back(u);
        }
      }
      std::sort(remote_.begin(), remote_.end());
      remote_.erase(std::unique(remote_.begin(), remote_.end()), remote_.end());
      remote_orig_.resize(remote_.size());
      if (!remote_.empty()) {
        l.g.orig_nid.read_into(remote_, remote_orig_.data());
      }
      return;
    }
    // The new and original ID of every local node side by side, so that the passes over the
    // edges read one cache line per edge's source instead of one in each of nid.npy and
    // orig_nid.npy (random reads: they dominate loading a large partition).
    ids_.resize(static_cast<size_t>(l.num_local));
    parallel_for(0, l.num_local, 1 << 16, [&](int64_t u0, int64_t u1, int64_t) {
      for (int64_t u = u0; u < u1; ++u) {
        ids_[static_cast<size_t>(u)] = {l.nid[u], l.onid[u]};
      }
    });
  }

  // Stored edge k's source (checked).
  Ids operator()(int64_t k) const {
    const int64_t u = l_.indices[k];
    if (l_.g.config.local_indices) {
      if (u < 0 || u >= l_.num_local) {
        l_.bad_id("indices.npy", k, u, l_.num_local);
      }
      return ids_[static_cast<size_t>(u)];
    }
    // Checked by the constructor.
    if (u >= l_.nlo && u < l_.nhi) {
      return {u, l_.onid[u - l_.nlo]};
    }
    return {u, remote_orig_[std::lower_bound(remote_.begin(), remote_.end(), u) - remote_.begin()]};
  }

 private:
  const Loading& l_;
  std::vector<int64_t> remote_, remote_orig_;
  std::vector<Ids> ids_;
};

// Version 2 stores each row in the unpartitioned graph's order (`tessera validate` checks it):
// the mapped files are sampled in place. Every stored source is range-checked here, in parallel
// (a corrupt file is an error naming it, not a crash).
void sample_rows_in_place(const Loading& l, detail::SampleGraph& sg) {
  const bool local_ids = l.g.config.local_indices;
  const int64_t bound = local_ids ? l.num_local : l.n;
  const int64_t* indices = l.indices;
  parallel_for(l.edge_lo, l.edge_hi, 1 << 16, [&](int64_t k0, int64_t k1, int64_t) {
    for (int64_t k = k0; k < k1; ++k) {
      if (static_cast<uint64_t>(indices[k]) >= static_cast<uint64_t>(bound)) {
        l.bad_id("indices.npy", k, indices[k], bound);  // parallel_for rethrows it here
      }
    }
  });
  if (local_ids) {
    sg.nid_file = l.g.part.nid;
    sg.local_nid = l.nid;
  }
  sg.indices = l.g.part.indices;
  sg.eids = l.g.part.eid;
  sg.arrays.indices = l.indices + l.edge_lo;
  sg.arrays.eids = l.eid + l.edge_lo;
}

// Version 1 rows, in parallel, each ordered by detail::order_row (radix-sorted when long, else
// by a packed 64-bit key when the IDs fit; ties, multi-edges, then put in edge-ID order) into
// copies. Only per-thread buffers beside them: loading touches as little fresh memory as it
// can.
void sort_rows_into_copies(const Loading& l, detail::SampleGraph& sg) {
  const SourceIds src_ids(l);
  const int64_t *indptr = l.indptr, *eid = l.eid, *oeid = l.oeid;
  const int64_t my_edges = l.edge_hi - l.edge_lo, edge_lo = l.edge_lo;
  // Two arrays of 8 bytes an edge (a vector fills on one thread): filled side by side.
  std::vector<int64_t> now_of, eid_of;
  parallel_for(0, 2, 1, [&](int64_t a0, int64_t a1, int64_t) {
    for (int64_t a = a0; a < a1; ++a) {
      (a == 0 ? now_of : eid_of).resize(static_cast<size_t>(my_edges));
    }
  });
  int pos_bits = 1;
  int64_t max_deg = 0;
  for (int64_t i = l.row_lo; i < l.row_hi; ++i) {
    max_deg = std::max(max_deg, indptr[i + 1] - indptr[i]);
  }
  while ((int64_t{1} << pos_bits) < max_deg) {
    ++pos_bits;
  }
  int id_bits = 1;
  while ((int64_t{1} << id_bits) < l.n) {
    ++id_bits;
  }
  const bool pack = id_bits + pos_bits <= 63;
  parallel_for(l.row_lo, l.row_hi, 1024, [&](int64_t i0, int64_t i1, int64_t) {
    detail::RowOrderScratch scratch;
    std::vector<int64_t> order, orig, now;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = indptr[i], e = indptr[i + 1], d = e - b;
      orig.resize(static_cast<size_t>(d));
      now.resize(static_cast<size_t>(d));
      order.resize(static_cast<size_t>(d));
      bool sorted = true;
      for (int64_t t = 0; t < d; ++t) {
        const SourceIds::Ids src = src_ids(b + t);  // checks the stored ID
        now[t] = src.now;
        orig[t] = src.orig;
        order[t] = t;
        if (t > 0 &&
            (orig[t - 1] > orig[t] || (orig[t - 1] == orig[t] && oeid[b + t - 1] > oeid[b + t]))) {
          sorted = false;
        }
      }
      if (!sorted) {
        detail::order_row(
            orig.data(), d, id_bits, pos_bits, pack,
            [&](int64_t x, int64_t y) { return oeid[b + x] < oeid[b + y]; }, scratch, order.data());
      }
      int64_t q = b - edge_lo;
      for (int64_t t : order) {
        now_of[q] = now[t];
        eid_of[q] = eid[b + t];
        ++q;
      }
    }
  });
  sg.indices = Array::from_vector(std::move(now_of));
  sg.eids = Array::from_vector(std::move(eid_of));
  sg.arrays.indices = sg.indices.data<int64_t>();
  sg.arrays.eids = sg.eids.data<int64_t>();
}

// The sampling structure: this rank's rows, each in the unpartitioned graph's storage order,
// keyed by original node ID (the Philox key of a node is its original ID). Format version 2
// stores every row in that order already: its rows are sampled where they are stored, and need
// no original IDs of their sources.
void build_sampling_rows(const Loading& l) {
  auto& g = l.g;
  auto& sg = *g.sg;
  sg.lo = l.nlo + l.row_lo;
  sg.hi = l.nlo + l.row_hi;
  sg.num_nodes = l.n;
  sg.inner_orig.assign(l.onid + l.row_lo, l.onid + l.row_hi);
  sg.graph_name = l.name;
  sg.elo = l.elo + l.edge_lo;
  // Shares the mapped files (this trainer's rows); weights are built from them on first use.
  for (const auto& [name, a] : g.part.edata) {
    if (l.tpm == 1 || a.rows() < l.edge_hi) {
      sg.edata[name] = a;  // a short array is refused, naming it, when used as weights
      continue;
    }
    std::vector<int64_t> shape = a.shape();
    shape[0] = l.edge_hi - l.edge_lo;
    const auto keep = std::make_shared<Array>(a);
    auto* rows = static_cast<uint8_t*>(const_cast<void*>(a.raw())) +
                 static_cast<size_t>(l.edge_lo) * a.row_bytes();
    sg.edata[name] = Array::wrap(a.dtype(), shape, rows, keep, false);
  }
  for (int64_t i = 0; i < l.ni; ++i) {
    if (l.onid[i] < 0 || l.onid[i] >= l.n) {
      l.bad_id("orig_nid.npy", i, l.onid[i], l.n);
    }
  }
  // The new ID that nid.npy gives each local ID (sampled sources of a halo partition are renamed
  // through it).
  if (g.config.local_indices) {
    for (int64_t u = 0; u < l.num_local; ++u) {
      if (l.nid[u] < 0 || l.nid[u] >= l.n) {
        l.bad_id("nid.npy", u, l.nid[u], l.n);
      }
    }
  }
  const int64_t my_rows = l.row_hi - l.row_lo;
  sg.indptr.resize(static_cast<size_t>(my_rows) + 1);
  for (int64_t r = 0; r <= my_rows; ++r) {
    sg.indptr[r] = l.indptr[l.row_lo + r] - l.edge_lo;
  }
  if (g.config.format_version >= 2) {
    sample_rows_in_place(l, sg);
  } else {
    sort_rows_into_copies(l, sg);
  }
  sg.arrays.num_nodes = my_rows;
  sg.arrays.num_edges = l.edge_hi - l.edge_lo;
  sg.arrays.indptr = sg.indptr.data();
  sg.arrays.row_keys = sg.inner_orig.data();
  sg.rows = std::make_unique<ops::SamplingGraph>(sg.arrays, ops::SamplingGraphOptions::as_stored());
}

// Edge lookups (link prediction): the endpoints and original ID of every edge this rank owns,
// i.e. of its inner edges (an edge belongs to the owner of its destination), by new edge ID.
// Written straight into the tensors' rows (no staging copies): by position when the stored
// edges are in edge-ID order (what `tessera partition` writes), else scattered by edge ID.
// Creating them is collective: with several ranks now, at the same point on every rank; a job
// of one rank builds them on first use (ensure_edge_tables), so one that never looks an edge up
// (node classification) neither spends the time (about 40% of loading a products-like
// partition) nor holds the memory (24 bytes an edge).
void prepare_edge_tables(const Loading& l, MachineSegment& shared) {
  const MachineRows oeid_rows = shared.next(l.elo, l.ehi), ends_rows = shared.next(l.elo, l.ehi);
  const int64_t m = l.m, elo = l.elo;
  // Stored out of edge-ID order (not what `tessera partition` writes): the stored position of
  // each edge ID, which checks every ID here, at load, also when the lookups come later.
  auto rows_of_eid = std::make_shared<std::vector<int64_t>>();
  if (!l.in_order) {
    std::vector<int64_t>& row_of = *rows_of_eid;
    row_of.assign(static_cast<size_t>(m), -1);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t r = l.eid[k] - elo;
      TESSERA_EXPECTS(r >= 0 && r < m && row_of[r] < 0, ValueError,
                      "DistGraph '{}': partition {}'s inner edge {} has edge ID {} outside its "
                      "range [{}, {}) or listed twice",
                      l.name, l.mach, k, l.eid[k], elo, l.ehi);
      row_of[r] = k;
    }
  }
  const auto epol = PartPolicy::edge(l.g.book);
  l.g.build_edge_tables = [&g = l.g, rt = l.rt, prefix = l.prefix, epol, elo, m, ni = l.ni,
                           row_lo = l.row_lo, row_hi = l.row_hi, num_local = l.num_local, n = l.n,
                           local_ids = l.g.config.local_indices, in_order = l.in_order,
                           indptr = l.indptr, indices = l.indices, nid = l.nid, oeid = l.oeid,
                           oeid_rows, ends_rows, rows_of_eid, graph_name = l.name, mach = l.mach] {
    // The new ID of the source of stored edge k (checked: a corrupt file is an error).
    auto src_new = [&](int64_t k) {
      return stored_source(indices, nid, local_ids, local_ids ? num_local : n, k, graph_name, mach);
    };
    const std::vector<int64_t>& row_of = *rows_of_eid;
    std::vector<int64_t> dst_of(static_cast<size_t>(in_order ? 0 : m));  // stored edge -> dst
    if (!in_order) {
      for (int64_t i = 0; i < ni; ++i) {
        for (int64_t k = indptr[i]; k < indptr[i + 1]; ++k) {
          dst_of[k] = nid[i];
        }
      }
    }
    auto stored = [&](int64_t r) { return in_order ? r : row_of[r]; };
    g.orig_eid = DistTensor(
        rt, fmt::format("{}:orig_eid", prefix), {g.config.num_edges}, DType::kInt64, epol,
        [&](int64_t b, int64_t e, void* dst) {
          auto* out = static_cast<int64_t*>(dst);
          if (in_order) {
            parallel_copy(out, oeid + (b - elo), static_cast<size_t>(e - b) * 8);
            return;
          }
          parallel_for(b, e, 1 << 16, [&](int64_t r0, int64_t r1, int64_t) {
            for (int64_t r = r0; r < r1; ++r) {
              out[r - b] = oeid[stored(r - elo)];
            }
          });
        },
        true, Placement::kHost, oeid_rows);
    g.edge_endpoints = DistTensor(
        rt, fmt::format("{}:edge:_endpoints", prefix), {g.config.num_edges, 2}, DType::kInt64, epol,
        [&](int64_t b, int64_t e, void* dst) {
          auto* out = static_cast<int64_t*>(dst);
          if (in_order) {                   // row by row: the destination is the row's node
            const int64_t first = b - elo;  // this rank's first stored edge (edge_lo)
            parallel_for(row_lo, row_hi, 1024, [&](int64_t i0, int64_t i1, int64_t) {
              for (int64_t i = i0; i < i1; ++i) {
                for (int64_t k = indptr[i]; k < indptr[i + 1]; ++k) {
                  out[2 * (k - first)] = src_new(k);
                  out[2 * (k - first) + 1] = nid[i];
                }
              }
            });
            return;
          }
          parallel_for(b, e, 1 << 16, [&](int64_t r0, int64_t r1, int64_t) {
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t k = stored(r - elo);
              out[2 * (r - b)] = src_new(k);
              out[2 * (r - b) + 1] = dst_of[k];
            }
          });
        },
        true, Placement::kHost, ends_rows);
  };
  if (l.world > 1) {
    ensure_edge_tables(l.g);
  }
}

// Original -> new node ID, rows owned evenly; each rank writes the rows of its own nodes
// (collective).
void write_new_nid(const Loading& l) {
  l.g.new_nid = DistTensor(l.rt, fmt::format("{}:new_nid", l.prefix), {l.n}, DType::kInt64,
                           PartPolicy::even(l.n, l.world), nullptr, true);
  std::vector<int64_t> mine(static_cast<size_t>(l.row_hi - l.row_lo));
  std::iota(mine.begin(), mine.end(), l.nlo + l.row_lo);
  l.g.new_nid.write(ops::Span<const int64_t>(l.onid + l.row_lo, l.row_hi - l.row_lo), mine.data());
}

}  // namespace

DistGraph::DistGraph(const std::shared_ptr<Runtime>& rt, const std::string& graph_name,
                     const std::filesystem::path& part_config, const DistGraphOptions& opts)
    : st_(std::make_unique<detail::GraphState>()) {
  TESSERA_EXPECTS(rt != nullptr, ValueError, "DistGraph '{}': null runtime", graph_name);
  auto& g = *st_;
  g.rt = rt;
  g.name = graph_name;
  const transport::CollectiveLabel label(rt->transport(),
                                         fmt::format("DistGraph '{}'", graph_name));
  Loading l = open_partition(g, rt, graph_name, part_config, opts);
  check_structure(l);
  cut_trainer_rows(l);
  g.book = gather_rank_book(l);
  MachineSegment shared(l);
  create_data_tensors(l, shared);
  build_sampling_rows(l);
  prepare_edge_tables(l, shared);
  write_new_nid(l);
  auto& rs = rt->state();
  {
    std::lock_guard<std::mutex> lk(rs.mu);
    rs.graphs[g.id] = g.sg;
  }
  rs.t->barrier();  // every owner can sample (and every new_nid row is written) before anyone asks
}

DistGraph::~DistGraph() {
  // While unwinding (this rank failed), peers may still ask us to sample until the transport
  // shuts down: the registry keeps the sampling structure alive until the runtime ends.
  if (std::uncaught_exceptions() > 0) {
    return;
  }
  auto& rs = st_->rt->state();
  std::lock_guard<std::mutex> lk(rs.mu);
  rs.graphs.erase(st_->id);
}

const std::string& DistGraph::graph_name() const {
  return st_->name;
}
int64_t DistGraph::num_nodes() const {
  return st_->config.num_nodes;
}
int64_t DistGraph::num_edges() const {
  return st_->config.num_edges;
}
const PartitionBook& DistGraph::book() const {
  return st_->book;
}
const PartitionBook& DistGraph::machine_book() const {
  return st_->machine_book;
}
int DistGraph::trainers_per_machine() const {
  return st_->trainers_per_machine;
}
int DistGraph::machine() const {
  return st_->machine;
}
int64_t DistGraph::shared_bytes() const {
  return st_->shared_bytes;
}
const PartitionConfig& DistGraph::config() const {
  return st_->config;
}
const LocalPartition& DistGraph::local_partition() const {
  return st_->part;
}
int64_t DistGraph::part_id() const {
  return st_->part.part_id;
}
std::pair<int64_t, int64_t> DistGraph::local_node_range() const {
  return st_->book.node_range(st_->rt->rank());
}
std::pair<int64_t, int64_t> DistGraph::local_edge_range() const {
  return st_->book.edge_range(st_->rt->rank());
}
const std::map<std::string, DistTensor>& DistGraph::ndata() const {
  return st_->ndata;
}
const std::map<std::string, DistTensor>& DistGraph::edata() const {
  return st_->edata;
}

namespace {
const DistTensor& lookup(const std::map<std::string, DistTensor>& m, const std::string& name,
                         const char* kind, const std::string& graph) {
  auto it = m.find(name);
  if (it == m.end()) {
    std::string names;
    for (const auto& [k, v] : m) {
      names += (names.empty() ? "" : ", ") + k;
    }
    TESSERA_FAIL(ValueError, "DistGraph '{}' has no {} data '{}' (it has: {})", graph, kind, name,
                 names.empty() ? "none" : names);
  }
  return it->second;
}
}  // namespace

const DistTensor& DistGraph::node_data(const std::string& name) const {
  return lookup(st_->ndata, name, "node", st_->name);
}
const DistTensor& DistGraph::edge_data(const std::string& name) const {
  return lookup(st_->edata, name, "edge", st_->name);
}
const DistTensor& DistGraph::orig_nid() const {
  return st_->orig_nid;
}
const DistTensor& DistGraph::orig_eid() const {
  ensure_edge_tables(*st_);
  return st_->orig_eid;
}
const DistTensor& DistGraph::edge_endpoints() const {
  ensure_edge_tables(*st_);
  return st_->edge_endpoints;
}
const DistTensor& DistGraph::new_nid() const {
  return st_->new_nid;
}
const std::shared_ptr<Runtime>& DistGraph::runtime() const {
  return st_->rt;
}

}  // namespace tessera::dist
