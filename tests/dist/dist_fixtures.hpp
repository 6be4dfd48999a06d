// SPDX-License-Identifier: Apache-2.0
// Shared fixtures of the host/distributed tests: a per-process scratch folder, cached partitionings
// of the datasets in data/, and the job environment of forked ranks.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "multiprocess.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera_test.hpp"

namespace tessera::test {

/// <tmp>/tessera-<tag>-<pid>: one folder per test process, removed by ScratchCleanup.
inline std::filesystem::path scratch_dir(const std::string& tag) {
  return std::filesystem::temp_directory_path() /
         ("tessera-" + tag + "-" + std::to_string(::getpid()));
}

/// Declare one at namespace scope: removes scratch_dir(tag) when the test process exits.
struct ScratchCleanup {
  std::string tag;
  ~ScratchCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(tag), ec);
  }
};

/// How the tests read the datasets in data/ (each undirected edge is stored once there).
inline ReadOptions symmetric_read_options() {
  ReadOptions ro;
  ro.build.symmetrize = true;
  ro.build.deduplicate = true;
  return ro;
}

/// `tessera partition` of dataset `name` (in data/) into `parts` parts under scratch_dir(tag),
/// made once per process. Returns the config path.
inline std::filesystem::path cached_partitions(const std::string& tag, const std::string& name,
                                               int parts, const std::string& method = "metis",
                                               int halo = 1) {
  static std::map<std::string, std::filesystem::path> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  const std::string key = fmt::format("{}-{}-{}-h{}", name, parts, method, halo);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Dataset ds = read_dataset(dataset(name), Format::kAuto, symmetric_read_options());
  PartitionOptions po;
  po.num_parts = parts;
  po.method = parse_part_method(method);
  po.halo_hops = halo;
  WriteOptions wo;
  wo.out_dir = scratch_dir(tag) / key;
  wo.name = name;
  PhaseTimer timer;
  set_quiet(true);
  partition_dataset(ds, po, wo, timer);
  return cache[key] = wo.out_dir / (name + ".json");
}

/// The environment of a job of `world` forked ranks over the local transport (`tls` empty; one
/// rank) or UCX over `tls` ("tcp", or "posix,sysv,cma" for shared memory), with short deadlines.
inline JobSpec job(int world, const std::string& tls, double deadline = 60) {
  JobSpec s;
  s.world = world;
  s.deadline_s = deadline;
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "20";
  s.env["TESSERA_OP_TIMEOUT"] = "30";
  s.env["TESSERA_TRANSPORT"] = tls.empty() ? "local" : "ucx";
  if (!tls.empty()) s.env["UCX_TLS"] = tls;
  return s;
}

/// FNV-1a of a string: ranks return hashes, since an answer travels through an 8 KB pipe.
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Drains one epoch of `loader` (already started): a batch index drawn again (a short share
/// wrapping around) must carry the same `key(batch)` as the first time. Returns
/// "<num_batches> <batches drawn> <distinct indices>", or what went wrong.
template <class Batch, class Loader, class Key>
std::string drain_wrapped_epoch(Loader& loader, Key key) {
  Batch mb;
  std::map<int64_t, decltype(key(mb))> first;
  int64_t n = 0;
  while (loader.next(mb)) {
    auto [it, fresh] = first.emplace(mb.index, key(mb));
    if (!fresh && it->second != key(mb)) return "a repeated batch differs";
    ++n;
  }
  return fmt::format("{} {} {}", loader.num_batches(), n, first.size());
}

}  // namespace tessera::test
