// SPDX-License-Identifier: Apache-2.0
// `tessera partition`: read a graph, partition it (METIS or random), write the partition folders.
#include <fmt/format.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera::tools {

namespace {

struct PartitionArgs {
  std::string input, format = "auto", method = "metis", node_order = "degree", out, name,
                     stats_json;
  int64_t parts = 0;
  std::vector<std::string> balance_masks;
  bool balance_edges = false, symmetrize = false, no_symmetrize = false, drop_self_loops = false,
       dedup = false, overwrite = false, quiet = false, allow_empty = false;
  int halo_hops = 1;
  int64_t seed = -1;
  int ufactor = -1;
  bool low_memory = false;
};

// Whether `path` names `folder` or something under it (after resolving both; missing parts of
// either path are taken as written).
bool is_inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  const auto f = std::filesystem::weakly_canonical(std::filesystem::absolute(folder), ec);
  auto pi = p.begin(), fi = f.begin();
  for (; fi != f.end(); ++fi, ++pi) {
    if (fi->empty() && std::next(fi) == f.end()) {
      break;  // a trailing separator
    }
    if (pi == p.end() || *pi != *fi) {
      return false;
    }
  }
  return true;
}

void run_partition(const PartitionArgs& a) {
  set_quiet(a.quiet);
  TESSERA_EXPECTS(a.parts >= 1, ValueError, "--parts must be >= 1, got {}", a.parts);
  TESSERA_EXPECTS(a.halo_hops >= 0, ValueError, "--halo-hops must be >= 0, got {}", a.halo_hops);
  TESSERA_EXPECTS(!(a.symmetrize && a.no_symmetrize), ValueError,
                  "--symmetrize and --no-symmetrize contradict each other");
  PartitionOptions po;
  po.num_parts = a.parts;
  po.method = parse_part_method(a.method);
  po.balance_masks = a.balance_masks;
  po.balance_edges = a.balance_edges;
  po.halo_hops = a.halo_hops;
  po.node_order = parse_node_order(a.node_order);
  po.seed = a.seed;
  po.ufactor = a.ufactor;
  po.low_memory = a.low_memory;
  TESSERA_EXPECTS(!a.low_memory || po.method == PartMethod::kMetis, ValueError,
                  "--low-memory applies to --method metis (the random partitioner holds no "
                  "second copy of the graph)");
  TESSERA_EXPECTS(po.method == PartMethod::kMetis || (a.balance_masks.empty() && !a.balance_edges),
                  ValueError, "--balance-mask/--balance-edges need --method metis");
  TESSERA_EXPECTS(po.method == PartMethod::kMetis || a.ufactor == -1, ValueError,
                  "--ufactor is METIS's imbalance tolerance: it needs --method metis");
  check_partition_options(po);
  // Outputs checked before the input is read: an existing --out without --overwrite, and a
  // --stats-json that could not be written once the partitioning is committed.
  TESSERA_EXPECTS(a.overwrite || !std::filesystem::exists(a.out), ValueError,
                  "output {} already exists (pass --overwrite to replace it)", a.out);
  // The output is written as a temporary sibling and renamed into place: its parent must take
  // new entries, whether or not --out exists already.
  check_output_path("--out", a.out, /*folder=*/true);
  if (std::filesystem::exists(a.out)) {
    check_output_path("--out", std::filesystem::absolute(a.out).lexically_normal().parent_path(),
                      /*folder=*/true);
  }
  check_output_path("--stats-json", a.stats_json);
  TESSERA_EXPECTS(a.stats_json.empty() || !is_inside(a.stats_json, a.out), ValueError,
                  "--stats-json {}: inside --out {}, which the partitioning replaces as a whole "
                  "(the file could overwrite its config); write it elsewhere",
                  a.stats_json, a.out);

#ifdef __GLIBC__
  if (a.low_memory) {
    // glibc serves blocks under a threshold from its heap and keeps them resident after free,
    // and raises that threshold (up to 32 MiB) whenever a larger mmapped block is freed: METIS's
    // working memory and the per-partition arrays would then stay in the resident set on top
    // of the next phase. A fixed 128 KiB threshold returns every large block when it is freed.
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  }
#endif
  PhaseTimer timer;
  reset_peak_rss();
  timer.begin("read");
  ReadOptions ro;
  ro.build.symmetrize = a.symmetrize;
  ro.symmetrize_if_undirected = !a.no_symmetrize;
  ro.build.drop_self_loops = a.drop_self_loops;
  ro.build.deduplicate = a.dedup;
  Dataset ds = read_unfinalized(a.input, parse_format(a.format), ro);
  const BuildOptions bo = resolve_build_options(ds, ro);
  if (!quiet() && bo.symmetrize != a.symmetrize) {
    fmt::print(stderr, "[tessera] {}: the input says its edges are {}: {}\n", ds.name,
               edge_storage_name(edge_storage(ds.meta)),
               bo.symmetrize ? "symmetrizing (--no-symmetrize to keep them directed)"
                             : "not adding reverse edges");
  } else if (!quiet() && !a.symmetrize && !a.no_symmetrize &&
             edge_storage(ds.meta) == EdgeStorage::kUnknown) {
    fmt::print(stderr,
               "[tessera] {}: the input does not say whether its edges are directed: kept as "
               "stored, one direction each (--symmetrize adds the reverse edges)\n",
               ds.name);
  }
  timer.begin("build CSR");
  finalize(ds, bo);
  // An empty or comment-only input, or more partitions than nodes, is almost always a mistake
  // (a wrong file, a wrong flag): refused unless asked for.
  TESSERA_EXPECTS(ds.num_nodes > 0 || a.allow_empty, ValueError,
                  "{}: the graph has no nodes (an empty or comment-only input?); pass "
                  "--allow-empty to write an empty partitioning on purpose",
                  a.input);
  TESSERA_EXPECTS(a.parts <= ds.num_nodes || a.allow_empty, ValueError,
                  "--parts {} is more than the {} nodes of {}: at most {} partitions can hold a "
                  "node each (--allow-empty writes the others empty on purpose)",
                  a.parts, ds.num_nodes, a.input, ds.num_nodes);
  if (!quiet()) {
    fmt::print(stderr,
               "[tessera] {}: {} nodes, {} edges (symmetrize={}, drop_self_loops={}, "
               "dedup={})\n",
               ds.name, ds.num_nodes, ds.graph.num_edges(), bo.symmetrize, bo.drop_self_loops,
               bo.deduplicate);
  }

  WriteOptions wo;
  wo.out_dir = a.out;
  wo.name = a.name.empty() ? ds.name : a.name;
  wo.overwrite = a.overwrite;
  wo.source_path = a.input;
  // ds is not needed afterwards: with --low-memory its CSC is not read back at the end.
  PartitionStats st = partition_dataset(std::move(ds), po, wo, timer);
  fmt::print("{}", st.summary());
  if (!a.stats_json.empty()) {  // its path was checked before the work
    write_text_atomic(a.stats_json, st.to_json().dump(2) + "\n");
  }
}

}  // namespace

void register_partition(CLI::App& app) {
  auto args = std::make_shared<PartitionArgs>();
  auto* cmd = app.add_subcommand(
      "partition", "Partition a graph (METIS or random) into the on-disk partition format");
  cmd->add_option("--input,-i", args->input,
                  "Dataset path (npy/OGB folder, edge list, .graph, "
                  ".mtx) or rmat:SCALE,EF[,SEED]")
      ->required();
  cmd->add_option("--format", args->format, "Input format")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "npy", "ogb", "snap", "metis", "mtx"}));
  cmd->add_option("--parts,-k", args->parts, "Number of partitions (>= 1)")->required();
  cmd->add_option("--method", args->method, "Partitioner")
      ->capture_default_str()
      ->check(CLI::IsMember({"metis", "random"}));
  cmd->add_option("--balance-mask", args->balance_masks,
                  "Node mask to balance across partitions (repeatable; NAME or NAME:COLUMN)");
  cmd->add_flag("--balance-edges", args->balance_edges, "Balance in-edges (in-degree weights)");
  cmd->add_option("--halo-hops", args->halo_hops, "Hops of in-neighborhood kept as halo nodes")
      ->capture_default_str();
  cmd->add_option("--node-order", args->node_order,
                  "Numbering within a partition: degree (highest in-degree first: hubs share "
                  "cache lines) or original (the input's order)")
      ->capture_default_str()
      ->check(CLI::IsMember({"original", "degree"}));
  cmd->add_flag("--symmetrize", args->symmetrize,
                "Add the reverse of every edge whose reversed pair the input lacks (default for "
                "inputs that say they are undirected with each edge stored once: npy meta.json, "
                "SNAP header; a no-op for inputs whose meta.json says \"symmetrized\": true)");
  cmd->add_flag("--no-symmetrize", args->no_symmetrize, "Never symmetrize");
  cmd->add_flag("--drop-self-loops", args->drop_self_loops, "Drop self loops");
  cmd->add_flag("--dedup", args->dedup, "Keep one copy of duplicate edges");
  cmd->add_option("--seed", args->seed, "METIS seed (default: METIS's) or random seed (0)");
  cmd->add_option("--ufactor", args->ufactor, "METIS imbalance tolerance in 1/1000 (default 30)");
  cmd->add_flag("--allow-empty", args->allow_empty,
                "Accept a graph without nodes, and more partitions than nodes (empty partitions)");
  cmd->add_flag("--low-memory", args->low_memory,
                "Park the CSR in a temporary file beside the output folder while METIS runs: peak "
                "memory lower by 16 bytes per edge, for one extra write and read of them");
  cmd->add_option("--out,-o", args->out, "Output folder (written atomically)")->required();
  cmd->add_option("--name", args->name,
                  "Name of the config (<out>/<name>.json; default: the "
                  "dataset name)");
  cmd->add_flag("--overwrite", args->overwrite, "Replace an existing output folder");
  cmd->add_option("--stats-json", args->stats_json,
                  "Write phase times, memory, edge cut and "
                  "balance as JSON");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress on stderr");
  cmd->callback([args] { run_partition(*args); });
}

}  // namespace tessera::tools
