// SPDX-License-Identifier: Apache-2.0
// Internal entry points of the partitioner, shared by its source files. Not a public header.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tessera/partition/partition.hpp"

namespace tessera::detail {

/// True if finalize built `ds.graph` with symmetrize + drop_self_loops + dedup, so the CSC is
/// the adjacency of a simple undirected graph by construction.
bool built_symmetric_simple(const Dataset& ds);

/// symmetric_adjacency; `known_simple` skips the check that the CSC already is symmetric and
/// simple (the caller guarantees it), which is then converted without a transpose.
SymAdjacency symmetric_adjacency(const Graph& csc, bool known_simple);

/// Called by assign_metis around the METIS call itself, once its input is built: `before`
/// may release the CSC (METIS does not read it), `after` must bring it back. `after` runs
/// whether METIS succeeded or not.
struct MetisHooks {
  std::function<void()> before, after;
};

/// assign_metis, with the same guarantee passed on to symmetric_adjacency.
Assignment assign_metis(const Graph& csc, int64_t num_parts, const std::vector<int32_t>& vwgt,
                        int ncon, const PartitionOptions& opts, PhaseTimer* timer,
                        bool known_simple, const MetisHooks* hooks = nullptr);

/// True if `dir` is on tmpfs, where a "spilled" file is memory too.
bool on_tmpfs(const std::filesystem::path& dir);

/// Moves int64 arrays into an unlinked temporary file in `dir` and frees their memory.
/// restore() reads them back; park() frees them again without writing (the file still holds
/// them: the arrays must not have changed since). Errors (disk full, short reads) throw
/// IOError naming `dir`; a failed write leaves the arrays as they were. The file disappears
/// with this object whatever happens.
class SpilledArrays {
 public:
  SpilledArrays(const std::filesystem::path& dir, std::vector<std::vector<int64_t>*> arrays);
  ~SpilledArrays();
  SpilledArrays(const SpilledArrays&) = delete;
  SpilledArrays& operator=(const SpilledArrays&) = delete;
  void restore();
  void park();
  bool parked() const { return parked_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::string what() const;  // names the file in errors
  std::filesystem::path dir_;
  std::vector<std::vector<int64_t>*> arrays_;
  std::vector<size_t> sizes_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  bool parked_ = false;
};

}  // namespace tessera::detail
