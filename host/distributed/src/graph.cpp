// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <numeric>

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

DistGraph::DistGraph(const std::shared_ptr<Runtime>& rt, const std::string& graph_name,
                     const std::filesystem::path& part_config, const DistGraphOptions& opts)
    : st_(std::make_unique<detail::GraphState>()) {
  TESSERA_EXPECTS(rt != nullptr, ValueError, "DistGraph '{}': null runtime", graph_name);
  auto& g = *st_;
  g.rt = rt;
  g.name = graph_name;
  auto& rs = rt->state();
  auto& t = *rs.t;
  const int world = t.world_size(), me = t.rank();
  g.config = load_partition_config(part_config);
  TESSERA_EXPECTS(g.config.graph_name == graph_name, ValueError,
                  "DistGraph '{}': the config {} holds graph '{}'", graph_name,
                  part_config.string(), g.config.graph_name);
  check_same_partitioning(t, g.config);
  // Tensor names carry the partitioning's identity: loading the same partitioning again shares
  // its tensors (idempotent, as DGL), another partitioning of a graph of the same name in this
  // process gets its own.
  const std::string sums = fingerprint(g.config)["checksums"].get<std::string>();
  const std::string prefix =
      fmt::format("{}@{:08x}", graph_name, crc32_update(0, sums.data(), sums.size()));
  TESSERA_EXPECTS(g.config.num_parts >= 1 && world % g.config.num_parts == 0, ValueError,
                  "DistGraph '{}': {} has {} partitions but the job has {} ranks (one partition "
                  "per machine and the same number of trainers on every machine: the ranks must "
                  "be a multiple of the partitions; a world of one process needs a 1-partition "
                  "config)",
                  graph_name, part_config.string(), g.config.num_parts, world);
  const int tpm = static_cast<int>(world / g.config.num_parts);
  const int mach = me / tpm, local = me % tpm;
  g.trainers_per_machine = tpm;
  g.machine = mach;
  LoadOptions lo;
  lo.verify_checksums = opts.verify_checksums;
  g.part = load_partition(g.config, mach, lo);
  g.machine_book = PartitionBook::from_config(g.config);
  {
    std::lock_guard<std::mutex> lk(rs.mu);
    g.id = rs.next_graph_id++;
  }
  // The machine's ranges, and this trainer's part of them.
  const auto nrange = g.machine_book.node_range(mach);
  const auto erange = g.machine_book.edge_range(mach);
  const int64_t nlo = nrange.first, nhi = nrange.second;
  const int64_t elo = erange.first, ehi = erange.second;
  TESSERA_EXPECTS(g.part.num_inner_nodes == nhi - nlo, ValueError,
                  "DistGraph '{}': partition {} has {} inner nodes but its range holds {}",
                  graph_name, mach, g.part.num_inner_nodes, nhi - nlo);

  // The partition's structure (memory-mapped), checked before anything indexes with it.
  const int64_t ni = nhi - nlo, n = g.config.num_nodes;
  const int64_t* indptr = g.part.indptr.data<int64_t>();
  const int64_t* indices = g.part.indices.data<int64_t>();
  const int64_t* nid = g.part.nid.data<int64_t>();
  const int64_t* onid = g.part.orig_nid.data<int64_t>();
  const int64_t* eid = g.part.eid.data<int64_t>();
  const int64_t* oeid = g.part.orig_eid.data<int64_t>();
  const int64_t num_local = g.part.nid.rows();
  // Every stored ID is checked before it indexes anything: a corrupt file is an error naming
  // the file, not a crash.
  auto bad_id = [&](const char* file, int64_t k, int64_t v, int64_t bound) {
    TESSERA_FAIL(ValueError,
                 "DistGraph '{}': partition {}'s {} holds {} at position {}, outside [0, {}) "
                 "(a corrupt partition file; `tessera validate` checks every file)",
                 graph_name, mach, file, v, k, bound);
  };
  TESSERA_EXPECTS(
      g.part.indptr.rows() >= ni + 1 && g.part.orig_nid.rows() >= num_local && num_local >= ni,
      ValueError,
      "DistGraph '{}': partition {}'s files disagree: indptr.npy has {} entries, "
      "nid.npy {} and orig_nid.npy {} rows for {} inner nodes",
      graph_name, mach, g.part.indptr.rows(), num_local, g.part.orig_nid.rows(), ni);
  const int64_t m = indptr[ni];
  for (int64_t i = 0; i < ni; ++i) {
    if (indptr[i + 1] < indptr[i]) bad_id("indptr.npy", i + 1, indptr[i + 1], indptr[i] + 1);
  }
  TESSERA_EXPECTS(indptr[0] == 0 && m >= 0 && m <= g.part.indices.rows() &&
                      m <= g.part.eid.rows() && m <= g.part.orig_eid.rows(),
                  ValueError,
                  "DistGraph '{}': partition {}'s indptr.npy ends at {} but {} edges "
                  "are stored",
                  graph_name, mach, m, g.part.indices.rows());
  const int64_t me_edges = ehi - elo;
  TESSERA_EXPECTS(m == me_edges, ValueError,
                  "DistGraph '{}': partition {} stores {} in-edges of its inner nodes but its edge "
                  "range [{}, {}) holds {}",
                  graph_name, mach, m, elo, ehi, me_edges);
  // Inner edges stored in edge-ID order (what `tessera partition` writes)?
  std::atomic<bool> in_order{true};
  parallel_for(0, m, 1 << 16, [&](int64_t k0, int64_t k1, int64_t) {
    for (int64_t k = k0; k < k1 && in_order.load(std::memory_order_relaxed); ++k) {
      if (eid[k] != elo + k) {
        in_order = false;
      }
    }
  });
  // This trainer's rows: the machine's nodes cut into tpm contiguous ranges whose sizes differ
  // by at most one, each with the in-edges of its nodes. Every rank's range, gathered, is the
  // book that routes reads and sampling (one partition per rank).
  auto cut = [&](int l) {
    const int64_t size = ni / tpm, rem = ni % tpm;
    return l * size + std::min<int64_t>(l, rem);
  };
  // This trainer's local rows [row_lo, row_hi) and stored edges [edge_lo, edge_hi).
  const int64_t row_lo = cut(local), row_hi = cut(local + 1);
  const int64_t edge_lo = indptr[row_lo], edge_hi = indptr[row_hi];
  // Its edges must be those with edge IDs [elo + edge_lo, elo + edge_hi): `tessera partition`
  // numbers each node's in-edges consecutively (in some order within the node).
  if (tpm > 1 && !in_order) {
    for (int64_t k = edge_lo; k < edge_hi; ++k) {
      TESSERA_EXPECTS(eid[k] >= elo + edge_lo && eid[k] < elo + edge_hi, ValueError,
                      "DistGraph '{}': {} trainers per machine need the in-edges of each run of "
                      "nodes numbered consecutively, as `tessera partition` writes them, but "
                      "partition {}'s stored edge {} has edge ID {} outside [{}, {})",
                      graph_name, tpm, mach, k, eid[k], elo + edge_lo, elo + edge_hi);
    }
  }
  {
    const int64_t mine[4] = {nlo + row_lo, nlo + row_hi, elo + edge_lo, elo + edge_hi};
    std::vector<int64_t> all(static_cast<size_t>(world) * 4);
    t.all_gather(mine, sizeof mine, all.data());
    std::vector<int64_t> noff{0}, eoff{0};
    for (int r = 0; r < world; ++r) {
      const int64_t* a = all.data() + static_cast<size_t>(r) * 4;
      TESSERA_EXPECTS(a[0] == noff.back() && a[2] == eoff.back(), ValueError,
                      "DistGraph '{}': rank {}'s rows [{}, {}) do not follow rank {}'s (ranks of "
                      "one machine must be consecutive and run over the same partitioning)",
                      graph_name, r, a[0], a[1], r - 1);
      noff.push_back(a[1]);
      eoff.push_back(a[3]);
    }
    g.book = PartitionBook(std::move(noff), std::move(eoff));
  }

  // With several trainers per machine, the machine's node and edge data live in one shared
  // memory segment: the machine's first trainer creates it, the others map it, and its name is
  // unlinked once all have (the memory goes with the last mapping, even after kill -9).
  std::vector<std::pair<int64_t, size_t>> layout;  // (offset, bytes) per shared tensor
  auto row_bytes_of = [](const std::vector<int64_t>& shape, DType dt) {
    size_t rb = dtype_size(dt);
    for (size_t d = 1; d < shape.size(); ++d) {
      rb *= static_cast<size_t>(shape[d]);
    }
    return rb;
  };
  std::shared_ptr<detail::ShmSegment> seg;
  if (tpm > 1) {
    size_t total = 0;
    auto add = [&](int64_t rows, size_t rb) {
      const size_t bytes = static_cast<size_t>(rows) * rb;
      layout.emplace_back(static_cast<int64_t>(total), bytes);
      total += (bytes + 4095) / 4096 * 4096;
    };
    for (const auto& s : g.config.ndata) {
      add(ni, row_bytes_of(s.shape, s.dtype));
    }
    for (const auto& s : g.config.edata) {
      add(m, row_bytes_of(s.shape, s.dtype));
    }
    add(ni, 8);  // orig_nid
    add(m, 8);   // orig_eid
    add(m, 16);  // edge endpoints
    const char* token = std::getenv("TESSERA_JOB_TOKEN");
    const std::string tok = token ? token : "";
    const std::string tag =
        fmt::format("{:08x}-{:08x}-m{}", crc32_update(0, tok.data(), tok.size()),
                    crc32_update(0, prefix.data(), prefix.size()), mach);
    int64_t pid = 0;
    std::string fail;
    if (local == 0) {
      detail::sweep_stale_segments();
      pid = static_cast<int64_t>(::getpid());
      try {
        seg = detail::shm_create(detail::shm_segment_name(pid, tag), total);
      } catch (const std::exception& e) {
        fail = e.what();
        pid = -1;
      }
    }
    std::vector<int64_t> pids(static_cast<size_t>(world));
    t.all_gather(&pid, sizeof pid, pids.data());
    const int64_t leader = pids[static_cast<size_t>(mach) * tpm];
    TESSERA_EXPECTS(leader > 0, IOError,
                    "DistGraph '{}': machine {}'s shared partition could not be created{}{}",
                    graph_name, mach, fail.empty() ? "" : ": ", fail);
    if (local != 0) {
      seg = detail::shm_open_existing(detail::shm_segment_name(leader, tag), total);
    }
    t.barrier();
    if (local == 0) {
      detail::shm_unlink_name(seg->name);
    }
    g.shared = seg;
    g.shared_bytes = static_cast<int64_t>(total);
  }
  size_t next_shared = 0;
  auto machine_rows = [&](int64_t lo_row, int64_t hi_row) {
    MachineRows mr;
    if (seg) {
      mr.hold = seg;
      mr.base = seg->base + layout[next_shared++].first;
      mr.lo = lo_row;
      mr.hi = hi_row;
      mr.trainers = tpm;
      mr.local = local;
    }
    return mr;
  };

  // Node and edge data as DistTensors (collective, in config order on every rank).
  const auto npol = PartPolicy::node(g.book), epol = PartPolicy::edge(g.book);
  for (const auto& s : g.config.ndata) {
    auto it = g.part.ndata.find(s.name);
    TESSERA_EXPECTS(it != g.part.ndata.end(), ValueError,
                    "DistGraph '{}': partition {} lacks node data '{}'", graph_name, mach, s.name);
    g.ndata.emplace(
        s.name, DistTensor(rt, fmt::format("{}:node:{}", prefix, s.name), s.shape, s.dtype, npol,
                           copy_rows(it->second, nlo, "node data " + s.name), true,
                           Placement::kHost, machine_rows(nlo, nhi)));
  }
  for (const auto& s : g.config.edata) {
    auto it = g.part.edata.find(s.name);
    TESSERA_EXPECTS(it != g.part.edata.end(), ValueError,
                    "DistGraph '{}': partition {} lacks edge data '{}'", graph_name, mach, s.name);
    g.edata.emplace(
        s.name, DistTensor(rt, fmt::format("{}:edge:{}", prefix, s.name), s.shape, s.dtype, epol,
                           copy_rows(it->second, elo, "edge data " + s.name), true,
                           Placement::kHost, machine_rows(elo, ehi)));
  }
  g.orig_nid = DistTensor(rt, fmt::format("{}:orig_nid", prefix), {g.config.num_nodes},
                          DType::kInt64, npol, copy_rows(g.part.orig_nid, nlo, "orig_nid"), true,
                          Placement::kHost, machine_rows(nlo, nhi));

  // The sampling structure: this rank's rows, each in the unpartitioned graph's storage order,
  // keyed by original node ID (the Philox key of a node is its original ID).
  // Sources of halo-less partitions (local_indices false) whose original ID lives elsewhere.
  // Format version 2 stores every row in that order already (`tessera validate` checks it):
  // its rows are sampled where they are stored, and need no original IDs of their sources.
  const bool stored_in_sampling_order = g.config.format_version >= 2;
  std::vector<int64_t> remote, remote_orig;
  if (!g.config.local_indices && !stored_in_sampling_order) {
    for (int64_t k = edge_lo; k < edge_hi; ++k) {
      const int64_t u = indices[k];
      if (u < 0 || u >= n) bad_id("indices.npy", k, u, n);
      if (u < nlo || u >= nhi) remote.push_back(u);
    }
    std::sort(remote.begin(), remote.end());
    remote.erase(std::unique(remote.begin(), remote.end()), remote.end());
    remote_orig.resize(remote.size());
    if (!remote.empty()) g.orig_nid.read_into(remote, remote_orig.data());
  }
  // The new and original ID of every local node side by side, so that the passes over the
  // edges below read one cache line per edge's source instead of one in each of nid.npy and
  // orig_nid.npy (random reads: they dominate loading a large partition).
  struct Ids {
    int64_t now, orig;
  };
  std::vector<Ids> ids;
  if (g.config.local_indices && !stored_in_sampling_order) {
    ids.resize(static_cast<size_t>(num_local));
    parallel_for(0, num_local, 1 << 16, [&](int64_t u0, int64_t u1, int64_t) {
      for (int64_t u = u0; u < u1; ++u) {
        ids[static_cast<size_t>(u)] = {nid[u], onid[u]};
      }
    });
  }
  // The new and original ID of the source of stored edge k (checked).
  auto src_ids = [&](int64_t k) -> Ids {
    const int64_t u = indices[k];
    if (g.config.local_indices) {
      if (u < 0 || u >= num_local) {
        bad_id("indices.npy", k, u, num_local);
      }
      return ids[static_cast<size_t>(u)];
    }
    // Checked above.
    if (u >= nlo && u < nhi) {
      return {u, onid[u - nlo]};
    }
    return {u, remote_orig[std::lower_bound(remote.begin(), remote.end(), u) - remote.begin()]};
  };
  auto& sg = *g.sg;
  sg.lo = nlo + row_lo;
  sg.hi = nlo + row_hi;
  sg.num_nodes = n;
  sg.inner_orig.assign(onid + row_lo, onid + row_hi);
  sg.graph_name = graph_name;
  sg.elo = elo + edge_lo;
  // Shares the mapped files (this trainer's rows); weights are built from them on first use.
  for (const auto& [name, a] : g.part.edata) {
    if (tpm == 1 || a.rows() < edge_hi) {
      sg.edata[name] = a;  // a short array is refused, naming it, when used as weights
      continue;
    }
    std::vector<int64_t> shape = a.shape();
    shape[0] = edge_hi - edge_lo;
    const auto keep = std::make_shared<Array>(a);
    auto* rows = static_cast<uint8_t*>(const_cast<void*>(a.raw())) +
                 static_cast<size_t>(edge_lo) * a.row_bytes();
    sg.edata[name] = Array::wrap(a.dtype(), shape, rows, keep, false);
  }
  for (int64_t i = 0; i < ni; ++i) {
    if (onid[i] < 0 || onid[i] >= n) bad_id("orig_nid.npy", i, onid[i], n);
  }
  // The new ID that nid.npy gives each local ID (sampled sources of a halo partition are renamed
  // through it).
  if (g.config.local_indices) {
    for (int64_t u = 0; u < num_local; ++u) {
      if (nid[u] < 0 || nid[u] >= n) {
        bad_id("nid.npy", u, nid[u], n);
      }
    }
  }
  const int64_t my_rows = row_hi - row_lo, my_edges = edge_hi - edge_lo;
  sg.indptr.resize(static_cast<size_t>(my_rows) + 1);
  for (int64_t r = 0; r <= my_rows; ++r) {
    sg.indptr[r] = indptr[row_lo + r] - edge_lo;
  }
  if (stored_in_sampling_order) {
    // Version 2 stores each row in the unpartitioned graph's order (`tessera validate` checks
    // it): the mapped files are sampled in place. Every stored source is range-checked here, in
    // parallel (a corrupt file is an error naming it, not a crash).
    const int64_t bound = g.config.local_indices ? num_local : n;
    parallel_for(edge_lo, edge_hi, 1 << 16, [&](int64_t k0, int64_t k1, int64_t) {
      for (int64_t k = k0; k < k1; ++k) {
        if (static_cast<uint64_t>(indices[k]) >= static_cast<uint64_t>(bound)) {
          bad_id("indices.npy", k, indices[k], bound);  // parallel_for rethrows it here
        }
      }
    });
    if (g.config.local_indices) {
      sg.nid_file = g.part.nid;
      sg.local_nid = nid;
    }
    sg.indices = g.part.indices;
    sg.eids = g.part.eid;
    sg.arrays.indices = indices + edge_lo;
    sg.arrays.eids = eid + edge_lo;
  } else {
    // Version 1 rows, in parallel, each ordered by detail::order_row (radix-sorted when long,
    // else by a packed 64-bit key when the IDs fit; ties, multi-edges, then put in edge-ID
    // order) into copies. Only per-thread buffers beside them: loading touches as little fresh
    // memory as it can. Two arrays of 8 bytes an edge (a vector fills on one thread): filled
    // side by side.
    std::vector<int64_t> now_of, eid_of;
    parallel_for(0, 2, 1, [&](int64_t a0, int64_t a1, int64_t) {
      for (int64_t a = a0; a < a1; ++a) {
        (a == 0 ? now_of : eid_of).resize(static_cast<size_t>(my_edges));
      }
    });
    int pos_bits = 1;
    int64_t max_deg = 0;
    for (int64_t i = row_lo; i < row_hi; ++i) {
      max_deg = std::max(max_deg, indptr[i + 1] - indptr[i]);
    }
    while ((int64_t{1} << pos_bits) < max_deg) {
      ++pos_bits;
    }
    int id_bits = 1;
    while ((int64_t{1} << id_bits) < n) {
      ++id_bits;
    }
    const bool pack = id_bits + pos_bits <= 63;
    parallel_for(row_lo, row_hi, 1024, [&](int64_t i0, int64_t i1, int64_t) {
      detail::RowOrderScratch scratch;
      std::vector<int64_t> order, orig, now;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = indptr[i], e = indptr[i + 1], d = e - b;
        orig.resize(static_cast<size_t>(d));
        now.resize(static_cast<size_t>(d));
        order.resize(static_cast<size_t>(d));
        bool sorted = true;
        for (int64_t t = 0; t < d; ++t) {
          const Ids src = src_ids(b + t);  // checks the stored ID
          now[t] = src.now;
          orig[t] = src.orig;
          order[t] = t;
          if (t > 0 && (orig[t - 1] > orig[t] ||
                        (orig[t - 1] == orig[t] && oeid[b + t - 1] > oeid[b + t]))) {
            sorted = false;
          }
        }
        if (!sorted) {
          detail::order_row(
              orig.data(), d, id_bits, pos_bits, pack,
              [&](int64_t x, int64_t y) { return oeid[b + x] < oeid[b + y]; }, scratch,
              order.data());
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
  sg.arrays.num_nodes = my_rows;
  sg.arrays.num_edges = my_edges;
  sg.arrays.indptr = sg.indptr.data();
  sg.arrays.row_keys = sg.inner_orig.data();
  sg.rows = std::make_unique<ops::SamplingGraph>(sg.arrays, ops::SamplingGraphOptions::as_stored());

  // Edge lookups (link prediction): the endpoints and original ID of every edge this rank owns,
  // i.e. of its inner edges (an edge belongs to the owner of its destination), by new edge ID.
  // Written straight into the tensors' rows (no staging copies): by position when the stored
  // edges are in edge-ID order (what `tessera partition` writes), else scattered by edge ID.
  // Creating them is collective: with several ranks now, at the same point on every rank; a
  // job of one rank builds them on first use (ensure_edge_tables), so one that never looks an
  // edge up (node classification) neither spends the time (about 40% of loading a products-like
  // partition) nor holds the memory (24 bytes an edge).
  const MachineRows oeid_rows = machine_rows(elo, ehi), ends_rows = machine_rows(elo, ehi);
  const bool local_ids = g.config.local_indices, stored_in_order = in_order.load();
  // Stored out of edge-ID order (not what `tessera partition` writes): the stored position of
  // each edge ID, which checks every ID here, at load, also when the lookups come later.
  auto rows_of_eid = std::make_shared<std::vector<int64_t>>();
  if (!stored_in_order) {
    std::vector<int64_t>& row_of = *rows_of_eid;
    row_of.assign(static_cast<size_t>(m), -1);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t r = eid[k] - elo;
      TESSERA_EXPECTS(r >= 0 && r < m && row_of[r] < 0, ValueError,
                      "DistGraph '{}': partition {}'s inner edge {} has edge ID {} outside its "
                      "range [{}, {}) or listed twice",
                      graph_name, mach, k, eid[k], elo, ehi);
      row_of[r] = k;
    }
  }
  g.build_edge_tables = [&g, rt, prefix, epol, elo, m, ni, row_lo, row_hi, num_local, n, local_ids,
                         stored_in_order, indptr, indices, nid, oeid, oeid_rows, ends_rows,
                         rows_of_eid, graph_name, mach] {
    const bool in_order = stored_in_order;
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
  if (world > 1) {
    ensure_edge_tables(g);
  }
  // Original -> new node ID, rows owned evenly; each rank writes the rows of its own nodes.
  g.new_nid = DistTensor(rt, fmt::format("{}:new_nid", prefix), {n}, DType::kInt64,
                         PartPolicy::even(n, world), nullptr, true);
  {
    std::vector<int64_t> mine(static_cast<size_t>(row_hi - row_lo));
    std::iota(mine.begin(), mine.end(), nlo + row_lo);
    g.new_nid.write(ops::Span<const int64_t>(onid + row_lo, row_hi - row_lo), mine.data());
  }

  {
    std::lock_guard<std::mutex> lk(rs.mu);
    rs.graphs[g.id] = g.sg;
  }
  t.barrier();  // every owner can sample (and every new_nid row is written) before anyone asks
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
