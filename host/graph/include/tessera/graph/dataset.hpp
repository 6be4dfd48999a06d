// SPDX-License-Identifier: Apache-2.0
// A graph dataset in memory (structure + node/edge arrays) and the readers that ingest one.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/graph/graph.hpp"
#include "tessera/graph/npy.hpp"

namespace tessera {

/// A graph with its node and edge data, as read from disk.
/// Lifecycle: a reader fills `edges` (input order) and the arrays; `finalize()` builds `graph`
/// (CSC) and releases `edges`.
struct Dataset {
  std::string name;
  std::string format;  ///< reader that produced it: npy, ogb, snap, metis, mtx, rmat
  int64_t num_nodes = 0;
  int64_t num_input_edges = 0;  ///< edges as read (rows of edata)
  EdgeList edges;               ///< input edges; emptied by finalize()
  Graph graph;                  ///< CSC after finalize(); eids index the input edge space
  BuildOptions build;           ///< options finalize() applied
  bool finalized = false;
  /// Node arrays, shape [N, ...] (e.g. feat, label, train_mask; masks of S splits are
  /// stored [S, N] on disk and transposed to [N, S] here). Reserved names: node_weight (int64
  /// [N, ncon], METIS vertex weights), orig_id (int64 [N], IDs in the source file).
  std::map<std::string, Array> ndata;
  /// Edge arrays, shape [num_input_edges, ...] (e.g. edge_weight). With symmetrize, the added
  /// reverse E+i takes row i; an input edge always keeps its own row.
  std::map<std::string, Array> edata;
  /// Free-form metadata (license, source, reference results) from meta.json when present.
  nlohmann::json meta = nlohmann::json::object();
};

/// Input formats. `kAuto` detects from the path (folder with edge_index.npy -> npy, folder
/// with raw/ -> ogb, *.graph -> metis, *.mtx[.gz] -> mtx, otherwise snap).
enum class Format { kAuto, kNpy, kOgb, kSnap, kMetis, kMtx };
Format parse_format(const std::string& s);
const char* format_name(Format f);
Format detect_format(const std::filesystem::path& path);

/// What an input says about the direction of its stored edges (meta.json of an npy folder, or
/// what a reader took from the file's header, e.g. a SNAP "Undirected graph" line).
enum class EdgeStorage {
  kUnknown,         ///< it says nothing
  kDirected,        ///< directed edges ("directed": true, or "symmetrized": false)
  kUndirectedOnce,  ///< undirected, each pair stored once: to be symmetrized before use
  kBothDirections,  ///< already symmetrized: both directions of every pair are stored
};

/// Classifies `meta`: "symmetrized": true (what `tessera generate rmat --symmetrize` writes) is
/// kBothDirections and wins over the rest; "directed": false, "undirected": true, or an "edges"
/// note saying each undirected edge is stored once or to symmetrize (as data/cora's) is
/// kUndirectedOnce; "directed": true or "symmetrized": false is kDirected. What the note
/// claims is trusted, not checked against the edges.
EdgeStorage edge_storage(const nlohmann::json& meta);
const char* edge_storage_name(EdgeStorage s);

/// Options common to all readers.
struct ReadOptions {
  /// How the CSC is built. `build.symmetrize` asks for reverse edges; read_dataset leaves it
  /// off for an input that stores both directions already (resolve_build_options).
  BuildOptions build;
  /// Symmetrize also when the input says it is undirected with each pair stored once, unless
  /// asked not to: the default of `tessera partition` (off with --no-symmetrize) and of
  /// Python's load_dataset / partition_graph (off with symmetrize=False).
  bool symmetrize_if_undirected = false;
  /// Split name for OGB datasets with several splits under split/ (empty: the only one).
  std::string ogb_split;
  /// Extra node arrays to load from an npy directory besides the standard ones: every other
  /// `*.npy` with N rows is loaded too unless `npy_strict` is set.
  bool npy_strict = false;
};

/// The options read_dataset builds `ds` (read, not finalized) with: opts.build, where
/// symmetrize is
///   * off for an input that says it stores both directions (EdgeStorage::kBothDirections):
///     symmetrizing it would add nothing, so a request for it is met as the edges are;
///   * on when asked (build.symmetrize), or when opts.symmetrize_if_undirected and the input
///     says it is undirected with each pair stored once (kUndirectedOnce);
///   * off otherwise.
/// Whatever it decides, symmetrize never stores a pair twice in one direction (BuildOptions).
BuildOptions resolve_build_options(const Dataset& ds, const ReadOptions& opts);

/// Reads a dataset in any supported format (an "rmat:SCALE,EF[,SEED]" spec with kAuto generates
/// one) without building its CSC: read_dataset's first half, for callers that time it apart.
Dataset read_unfinalized(const std::filesystem::path& path, Format format, const ReadOptions& opts);

/// Reads a dataset in any supported format and finalizes it (builds the CSC) with
/// resolve_build_options: read_unfinalized, then finalize.
Dataset read_dataset(const std::filesystem::path& path, Format format, const ReadOptions& opts);

/// Individual readers; they fill edges and arrays but do not finalize. Each validates its
/// input and throws ValueError/IndexError/TypeError/IOError naming the file and the problem.
Dataset read_npy_dir(const std::filesystem::path& dir, const ReadOptions& opts);
Dataset read_ogb_dir(const std::filesystem::path& dir, const ReadOptions& opts);
Dataset read_snap(const std::filesystem::path& file, const ReadOptions& opts);
Dataset read_metis(const std::filesystem::path& file, const ReadOptions& opts);
Dataset read_mtx(const std::filesystem::path& file, const ReadOptions& opts);

/// Builds the CSC with `opts` and releases the edge list; checks array row counts.
void finalize(Dataset& ds, const BuildOptions& opts);

/// What a dataset's files are now, as 64 hex digits: SHA-256 over the relative path, size and
/// modification time (ns) of every regular file under `path` (a folder, hidden entries left
/// out) or of `path` itself (a file). Recorded with a partitioning so that a run can tell
/// whether the dataset changed since (partitions cached by the trainers); any edit, copy
/// without preserved times or replacement changes it. IOError when `path` cannot be listed.
std::string dataset_fingerprint(const std::filesystem::path& path);

}  // namespace tessera
