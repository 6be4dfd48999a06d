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
  /// Edge arrays, shape [num_input_edges, ...] (e.g. edge_weight). With symmetrize, reverse
  /// edge E+i takes row i.
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

/// Options common to all readers.
struct ReadOptions {
  BuildOptions build;
  /// Split name for OGB datasets with several splits under split/ (empty: the only one).
  std::string ogb_split;
  /// Extra node arrays to load from an npy directory besides the standard ones: every other
  /// `*.npy` with N rows is loaded too unless `npy_strict` is set.
  bool npy_strict = false;
};

/// Reads a dataset in any supported format and finalizes it (builds the CSC).
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

}  // namespace tessera
