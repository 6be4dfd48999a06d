// SPDX-License-Identifier: Apache-2.0
// `tessera generate rmat`: writes an R-MAT graph as an npy dataset folder (the layout of
// data/cora), streamed in chunks so memory stays bounded whatever the scale.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera/graph/rmat.hpp"

namespace tessera::tools {

namespace {

// A .npy file written piecewise: the header first, then data at explicit offsets (pwrite), so
// both rows of edge_index can be filled from one pass over the generated edges.
class NpyWriter {
 public:
  NpyWriter(const fs::path& path, const char* descr, const std::vector<int64_t>& shape)
      : path_(path.string()) {
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (", descr);
    for (size_t i = 0; i < shape.size(); ++i)
      dict += fmt::format("{}{}", i ? ", " : "", shape[i]);
    dict += shape.size() == 1 ? ",), }" : "), }";
    // Magic (6) + version (2) + length (2) + dict + padding + '\n', a multiple of 64 bytes.
    size_t total = 10 + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    TESSERA_ASSERT(total - 10 < 65536, "npy header too long");
    std::string hdr("\x93NUMPY\x01\x00", 8);
    const auto len = static_cast<uint16_t>(total - 10);
    hdr += static_cast<char>(len & 0xff);
    hdr += static_cast<char>(len >> 8);
    hdr += dict;
    hdr.append(total - 10 - dict.size() - 1, ' ');
    hdr += '\n';
    data_offset_ = static_cast<int64_t>(hdr.size());
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    TESSERA_EXPECTS(fd_ >= 0, IOError, "{}: cannot create: {}", path_, std::strerror(errno));
    try {
      write_at(0, hdr.data(), hdr.size());
    } catch (...) {
      ::close(fd_);  // the destructor does not run for a throwing constructor
      fd_ = -1;
      throw;
    }
  }
  ~NpyWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  /// Writes `n` bytes at byte `offset` of the data section.
  void write_data(int64_t offset, const void* data, size_t n) {
    write_at(data_offset_ + offset, data, n);
  }
  void close() {
    TESSERA_EXPECTS(::close(fd_) == 0, IOError, "{}: close failed: {}", path_,
                    std::strerror(errno));
    fd_ = -1;
  }

 private:
  void write_at(int64_t off, const void* data, size_t n) { pwrite_all(fd_, data, n, off, path_); }
  std::string path_;
  int fd_ = -1;
  int64_t data_offset_ = 0;
};

struct GenerateArgs {
  RmatOptions rmat;
  bool no_permute = false;
  bool symmetrize = false;
  std::string out;
  bool overwrite = false;
  std::string name;
  int64_t chunk = int64_t{1} << 22;
};

void run_generate_rmat(GenerateArgs args, const std::string& command_line) {
  RmatOptions& o = args.rmat;
  o.permute = !args.no_permute;
  validate_rmat_options(o);
  TESSERA_EXPECTS(!args.out.empty(), ValueError, "--out: an output folder is required");
  TESSERA_EXPECTS(args.chunk > 0, ValueError, "--chunk must be positive, got {}", args.chunk);
  const bool any_split = o.train_frac > 0 || o.val_frac > 0 || o.test_frac > 0;
  const int64_t n = rmat_num_nodes(o), e = rmat_num_edges(o);
  const int64_t stored = args.symmetrize ? 2 * e : e;
  if (args.name.empty()) args.name = fmt::format("rmat-s{}-ef{}", o.scale, o.edge_factor);
  // What the folder will hold, in bytes (as double: the products may exceed 2^63): checked
  // against the file size limit and the free space before anything is written.
  const double bytes_feat = 4.0 * static_cast<double>(n) * static_cast<double>(o.feat_dim);
  TESSERA_EXPECTS(bytes_feat < 0x1p62, ValueError,
                  "--feat-dim {}: {} nodes of {} float32 features are {:.3g} bytes, more than a "
                  "file can hold",
                  o.feat_dim, n, o.feat_dim, bytes_feat);
  const double bytes_total =
      16.0 * static_cast<double>(stored) + bytes_feat +
      static_cast<double>(n) * ((o.num_classes > 0 ? 8.0 : 0.0) + (o.train_frac > 0) +
                                (o.val_frac > 0) + (o.test_frac > 0));

  // --overwrite replaces only a dataset folder this command wrote: nothing else may be in it.
  AtomicDir dir(args.out, args.overwrite, [](const std::string& f, bool is_dir) {
    static const char* const written[] = {"edge_index.npy", "feat.npy",     "label.npy",
                                          "train_mask.npy", "val_mask.npy", "test_mask.npy",
                                          "meta.json"};
    return !is_dir && std::find(std::begin(written), std::end(written), f) != std::end(written);
  });
  {
    std::error_code ec;
    const std::filesystem::space_info sp = std::filesystem::space(dir.path(), ec);
    TESSERA_EXPECTS(ec || bytes_total <= static_cast<double>(sp.available), IOError,
                    "--out {}: the dataset needs {} but its file system has {} free", args.out,
                    human_bytes(bytes_total), human_bytes(static_cast<double>(sp.available)));
  }
  PhaseTimer timer;
  if (!quiet())
    fmt::print(stderr, "[tessera] R-MAT scale {} edge factor {}: {} nodes, {} edges{} -> {}\n",
               o.scale, o.edge_factor, human_count(static_cast<double>(n)),
               human_count(static_cast<double>(stored)), args.symmetrize ? " (symmetrized)" : "",
               dir.final_path().string());

  timer.begin("generate edges");
  {
    // edge_index [2, stored]: row 0 = sources, row 1 = destinations; with --symmetrize the
    // reverse of edge i is edge e + i.
    NpyWriter w(dir.path() / "edge_index.npy", "<i8", {2, stored});
    std::vector<int64_t> src(static_cast<size_t>(std::min(args.chunk, std::max<int64_t>(e, 1))));
    std::vector<int64_t> dst(src.size());
    Progress prog("generating edges", e, "edges");
    for (int64_t b = 0; b < e; b += args.chunk) {
      const int64_t hi = std::min(e, b + args.chunk), m = hi - b;
      rmat_edges(o, b, hi, src.data(), dst.data());
      const size_t bytes = static_cast<size_t>(m) * sizeof(int64_t);
      w.write_data(8 * b, src.data(), bytes);
      w.write_data(8 * (stored + b), dst.data(), bytes);
      if (args.symmetrize) {
        w.write_data(8 * (e + b), dst.data(), bytes);
        w.write_data(8 * (stored + e + b), src.data(), bytes);
      }
      prog.update(hi);
    }
    prog.done();
    w.close();
  }

  if (o.num_classes > 0 || o.feat_dim > 0 || any_split) timer.begin("generate node data");
  const int64_t node_chunk = std::max<int64_t>(1, args.chunk / std::max<int64_t>(1, o.feat_dim));
  if (o.num_classes > 0) {
    NpyWriter w(dir.path() / "label.npy", "<i8", {n});
    std::vector<int64_t> buf(static_cast<size_t>(std::min(node_chunk, n)));
    Progress prog("generating labels", n, "nodes");
    for (int64_t b = 0; b < n; b += node_chunk) {
      const int64_t hi = std::min(n, b + node_chunk);
      rmat_labels(o, b, hi, buf.data());
      w.write_data(8 * b, buf.data(), static_cast<size_t>(hi - b) * 8);
      prog.update(hi);
    }
    prog.done();
    w.close();
  }
  if (o.feat_dim > 0) {
    NpyWriter w(dir.path() / "feat.npy", "<f4", {n, o.feat_dim});
    std::vector<float> buf(static_cast<size_t>(std::min(node_chunk, n) * o.feat_dim));
    Progress prog("generating features", n, "nodes");
    for (int64_t b = 0; b < n; b += node_chunk) {
      const int64_t hi = std::min(n, b + node_chunk);
      rmat_features(o, b, hi, buf.data());
      w.write_data(4 * b * o.feat_dim, buf.data(),
                   static_cast<size_t>((hi - b) * o.feat_dim) * sizeof(float));
      prog.update(hi);
    }
    prog.done();
    w.close();
  }
  if (any_split) {
    const char* names[] = {"train_mask.npy", "val_mask.npy", "test_mask.npy"};
    std::vector<std::unique_ptr<NpyWriter>> ws;
    for (const char* nm : names)
      ws.push_back(std::make_unique<NpyWriter>(dir.path() / nm, "|b1", std::vector<int64_t>{n}));
    const int64_t chunk = std::min(args.chunk, n);
    std::vector<uint8_t> split(static_cast<size_t>(chunk)), mask(static_cast<size_t>(chunk));
    Progress prog("generating split masks", n, "nodes");
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t hi = std::min(n, b + chunk);
      rmat_splits(o, b, hi, split.data());
      for (int s = 0; s < 3; ++s) {
        for (int64_t i = 0; i < hi - b; ++i)
          mask[i] = split[i] == s + 1;
        ws[s]->write_data(b, mask.data(), static_cast<size_t>(hi - b));
      }
      prog.update(hi);
    }
    prog.done();
    for (auto& w : ws)
      w->close();
  }

  timer.begin("write meta.json");
  nlohmann::json meta = {
      {"name", args.name},
      {"num_nodes", n},
      {"num_edges_stored", stored},
      {"generator", "rmat"},
      {"scale", o.scale},
      {"edge_factor", o.edge_factor},
      {"a", o.a},
      {"b", o.b},
      {"c", o.c},
      {"seed", o.seed},
      {"permute", o.permute},
      {"symmetrized", args.symmetrize},
      {"feat_dim", o.feat_dim},
      {"num_classes", o.num_classes},
      {"train_frac", o.train_frac},
      {"val_frac", o.val_frac},
      {"test_frac", o.test_frac},
      {"edges", args.symmetrize ? "both directions stored (reverse of edge i is edge E/2 + i)"
                                : "directed R-MAT edges as generated, self loops and duplicates "
                                  "kept (Graph500)"},
      {"source", "synthetic: tessera generate rmat (Graph500 R-MAT, splitmix64 counter RNG)"},
      {"command", command_line},
      {"license", "generated data, no license restrictions"}};
  {
    const fs::path p = dir.path() / "meta.json";
    std::ofstream out(p);
    out << meta.dump(2) << "\n";
    out.close();
    TESSERA_EXPECTS(out.good(), IOError, "{}: write failed", p.string());
  }
  timer.begin("commit");
  dir.commit();
  timer.end();
  if (!quiet())
    fmt::print(stderr, "[tessera] wrote {} in {:.2f} s\n", dir.final_path().string(),
               timer.total_seconds());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto* gen = app.add_subcommand("generate", "Generate a synthetic graph dataset");
  gen->require_subcommand(1);
  auto* rm = gen->add_subcommand(
      "rmat",
      "R-MAT/Kronecker graph with Graph500 parameters, written as an npy dataset folder "
      "(edge_index.npy, feat.npy, label.npy, *_mask.npy, meta.json). Deterministic for a seed, "
      "whatever the thread count; memory stays bounded (chunks), so scale 26+ works.");
  auto args = std::make_shared<GenerateArgs>();
  RmatOptions& o = args->rmat;
  rm->add_option("--scale", o.scale, "log2 of the number of nodes (0..40)")->required();
  rm->add_option("--edge-factor", o.edge_factor, "edges per node (E = edge_factor * 2^scale)")
      ->required();
  rm->add_option("--seed", o.seed, "random seed (>= 0)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return !v.empty() && v[0] == '-' ? "must be >= 0, got " + v : std::string();
          },
          "UINT"))
      ->capture_default_str();
  rm->add_option("-a,--a", o.a, "probability of the top-left quadrant")->capture_default_str();
  rm->add_option("-b,--b", o.b, "probability of the top-right quadrant")->capture_default_str();
  rm->add_option("-c,--c", o.c, "probability of the bottom-left quadrant")->capture_default_str();
  rm->add_flag("--no-permute", args->no_permute, "keep R-MAT node IDs (hubs get small IDs)");
  rm->add_option("--feat-dim", o.feat_dim, "random float32 features per node (0: none)");
  rm->add_option("--num-classes", o.num_classes, "random labels in [0, C) (0: none)");
  rm->add_option("--train-frac", o.train_frac, "fraction of nodes in train_mask");
  rm->add_option("--val-frac", o.val_frac, "fraction of nodes in val_mask");
  rm->add_option("--test-frac", o.test_frac, "fraction of nodes in test_mask");
  rm->add_flag("--symmetrize", args->symmetrize, "store both directions of every edge");
  rm->add_option("--out", args->out, "output dataset folder (written atomically)")->required();
  rm->add_flag("--overwrite", args->overwrite, "replace an existing output folder");
  rm->add_option("--name", args->name, "dataset name in meta.json");
  rm->add_option("--chunk", args->chunk, "edges generated per chunk (memory: 16 B each)")
      ->capture_default_str();
  rm->callback([args, rm] {
    std::string cmd = "tessera generate rmat";
    for (const auto* opt : rm->get_options()) {
      if (opt->count() == 0 || opt->get_name() == "--help") continue;
      cmd += " " + opt->get_name();
      for (const auto& r : opt->results())
        if (opt->get_type_size() != 0) cmd += " " + r;
    }
    run_generate_rmat(*args, cmd);
  });
}

}  // namespace tessera::tools
