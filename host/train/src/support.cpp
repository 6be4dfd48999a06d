// SPDX-License-Identifier: Apache-2.0
#include "support.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/core/sha256.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/transport/transport.hpp"

namespace tessera::train::detail {

namespace {

double nan() {
  return std::numeric_limits<double>::quiet_NaN();
}

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

double num_or(const nlohmann::json& j, const char* key, double missing) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? missing : it->get<double>();
}

constexpr char kCkptMagic[] = "TESSERA-CKPT1\n";

}  // namespace

std::string batch_digest(const std::vector<int64_t>& seeds, const std::vector<ops::Block>& blocks) {
  Sha256 h;
  h.update(seeds.data(), seeds.size() * sizeof(int64_t));
  for (const ops::Block& b : blocks) {
    h.update(&b.num_dst, sizeof(int64_t));
    for (const auto* v : {&b.src_nodes, &b.src, &b.dst, &b.eids}) {
      h.update(v->data(), v->size() * sizeof(int64_t));
    }
  }
  return to_hex(h.finish()).substr(0, 16);
}

// --- metrics ---------------------------------------------------------------------------------
double roc_auc(const std::vector<double>& pos, const std::vector<double>& neg) {
  const auto npos = static_cast<double>(pos.size()), nneg = static_cast<double>(neg.size());
  if (pos.empty() || neg.empty()) {
    return nan();
  }
  // Average 1-based rank of every distinct value (ties share theirs), summed over the
  // positives. Ranks are multiples of 1/2, so every summation order gives the same double.
  std::vector<std::pair<double, bool>> all;
  all.reserve(pos.size() + neg.size());
  for (double v : pos) {
    all.emplace_back(v, true);
  }
  for (double v : neg) {
    all.emplace_back(v, false);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double pos_rank_sum = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    int64_t positives = 0;
    while (j < all.size() && all[j].first == all[i].first) {
      positives += all[j++].second;
    }
    const double avg = static_cast<double>(j) - static_cast<double>(j - i - 1) / 2.0;
    pos_rank_sum += avg * static_cast<double>(positives);
    i = j;
  }
  return (pos_rank_sum - npos * (npos + 1) / 2.0) / (npos * nneg);
}

// --- progress bar ----------------------------------------------------------------------------
ProgressBar::ProgressBar(int64_t total, std::string desc, bool enabled)
    : total_(total),
      desc_(std::move(desc)),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      t0_(now_seconds()),
      last_(t0_) {}

void ProgressBar::update(double loss) {
  ++n_;
  if (!enabled_) {
    return;
  }
  const double t = now_seconds();
  const bool last = n_ == total_;
  // A terminal gets a bar redrawn 10 times a second; a log file (tessera launch, srun) a line
  // every kLogInterval seconds, so a long epoch still shows that it moves.
  if (!last && t - last_ < (tty_ ? 0.1 : kLogInterval)) {
    return;
  }
  last_ = t;
  // A terminal's bar is redrawn in place and ends its line at the last batch; a log gets lines.
  fmt::print(stderr, "{}{}: {}/{} batches, loss {:.4f}, {:.1f}s{}", tty_ ? "\r" : "", desc_, n_,
             total_, loss, t - t0_, last || !tty_ ? "\n" : "");
  std::fflush(stderr);
}

void ProgressBar::close() {
  if (enabled_ && tty_ && n_ != total_) {
    fmt::print(stderr, "\n");
  }
  enabled_ = false;
}

// --- training record -------------------------------------------------------------------------
SplitState::SplitState()
    : best_val(-std::numeric_limits<double>::infinity()), test_at_best(nan()) {}

nlohmann::json to_json(const SplitState& s) {
  nlohmann::json hist = nlohmann::json::array();
  for (const EpochRecord& e : s.history) {
    nlohmann::json split = nlohmann::json::object();
    for (const auto& [k, v] : e.split) {
      split[k] = v;
    }
    nlohmann::json r = {{"epoch", e.epoch},
                        {"loss", num(e.loss)},
                        {"val", num(e.val)},
                        {"seconds", e.seconds},
                        {"eval_seconds", e.eval_seconds},
                        {"steps", e.steps},
                        {"split", split},
                        {"loader_sampling", e.loader_sampling},
                        {"loader_gathering", e.loader_gathering}};
    if (std::isfinite(e.op_seconds)) {
      r["op_seconds"] = e.op_seconds;
    }
    if (!e.batch_digests.empty()) {
      r["batch_digests"] = e.batch_digests;
    }
    hist.push_back(std::move(r));
  }
  return {{"epoch", s.epoch},
          {"history", hist},
          {"best_val", num(s.best_val)},
          {"best_epoch", s.best_epoch},
          {"test_at_best", num(s.test_at_best)}};
}

SplitState split_state_from_json(const nlohmann::json& j) {
  SplitState s;
  s.epoch = j.at("epoch").get<int64_t>();
  s.best_val = num_or(j, "best_val", -std::numeric_limits<double>::infinity());
  s.best_epoch = j.at("best_epoch").get<int64_t>();
  s.test_at_best = num_or(j, "test_at_best", nan());
  for (const auto& r : j.at("history")) {
    EpochRecord e;
    e.epoch = r.at("epoch").get<int64_t>();
    e.loss = num_or(r, "loss", nan());
    e.val = num_or(r, "val", nan());
    e.seconds = r.at("seconds").get<double>();
    e.eval_seconds = r.at("eval_seconds").get<double>();
    e.steps = r.at("steps").get<int64_t>();
    for (const auto& [k, v] : r.at("split").items()) {
      e.split[k] = v.get<double>();
    }
    e.loader_sampling = r.at("loader_sampling").get<double>();
    e.loader_gathering = r.at("loader_gathering").get<double>();
    e.op_seconds = num_or(r, "op_seconds", nan());
    if (r.contains("batch_digests")) {
      e.batch_digests = r["batch_digests"].get<std::vector<std::string>>();
    }
    s.history.push_back(std::move(e));
  }
  return s;
}

// --- checkpoint file -------------------------------------------------------------------------
void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta,
                      const std::vector<NamedBytes>& entries) {
  nlohmann::json header = {{"meta", meta}, {"entries", nlohmann::json::array()}};
  uint64_t offset = 0;
  for (const NamedBytes& e : entries) {
    header["entries"].push_back(
        {{"name", e.name},
         {"dtype", e.dtype},
         {"shape", e.shape},
         {"offset", offset},
         {"bytes", e.bytes.size()},
         {"crc32", crc32_hex(crc32_update(0, e.bytes.data(), e.bytes.size()))}});
    offset += e.bytes.size();
  }
  const std::string text = header.dump();
  const std::filesystem::path tmp =
      path.parent_path() / fmt::format(".{}.tmp-{}", path.filename().string(), getpid());
  if (!path.parent_path().empty()) {
    std::filesystem::create_directories(path.parent_path());
  }
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TESSERA_EXPECTS(f.good(), IOError, "checkpoint {}: cannot open {} for writing", path.string(),
                    tmp.string());
    const uint64_t n = text.size();
    f.write(kCkptMagic, sizeof(kCkptMagic) - 1);
    f.write(reinterpret_cast<const char*>(&n), sizeof(n));
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const NamedBytes& e : entries) {
      f.write(reinterpret_cast<const char*>(e.bytes.data()),
              static_cast<std::streamsize>(e.bytes.size()));
    }
    f.flush();
    if (!f.good()) {
      f.close();
      std::filesystem::remove(tmp);
      TESSERA_FAIL(IOError, "checkpoint {}: writing {} failed (disk full?)", path.string(),
                   tmp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    TESSERA_FAIL(IOError, "checkpoint {}: cannot rename {} onto it: {}", path.string(),
                 tmp.string(), ec.message());
  }
}

const NamedBytes& Checkpoint::at(const std::string& name) const {
  auto it = entries.find(name);
  TESSERA_EXPECTS(it != entries.end(), ValueError,
                  "checkpoint {}: no entry '{}' (it holds {} entries; written by another model "
                  "or version?)",
                  path.string(), name, entries.size());
  return it->second;
}

Checkpoint read_checkpoint(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  TESSERA_EXPECTS(f.good(), IOError, "checkpoint {}: cannot open it for reading", path.string());
  char magic[sizeof(kCkptMagic) - 1];
  f.read(magic, sizeof(magic));
  TESSERA_EXPECTS(f.good() && std::memcmp(magic, kCkptMagic, sizeof(magic)) == 0, ValueError,
                  "checkpoint {}: not a checkpoint of `tessera train` (bad magic)", path.string());
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), sizeof(n));
  const auto size = std::filesystem::file_size(path);
  TESSERA_EXPECTS(f.good() && n <= size, IOError, "checkpoint {}: truncated header", path.string());
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  TESSERA_EXPECTS(f.good(), IOError, "checkpoint {}: truncated header", path.string());
  Checkpoint c;
  c.path = path;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
    c.meta = header.at("meta");
    const uint64_t data0 = sizeof(kCkptMagic) - 1 + sizeof(n) + n;
    for (const auto& e : header.at("entries")) {
      NamedBytes b;
      b.name = e.at("name").get<std::string>();
      b.dtype = e.at("dtype").get<std::string>();
      b.shape = e.at("shape").get<std::vector<int64_t>>();
      const auto off = e.at("offset").get<uint64_t>(), len = e.at("bytes").get<uint64_t>();
      TESSERA_EXPECTS(data0 + off + len <= size, IOError,
                      "checkpoint {}: truncated: entry '{}' ends at byte {} of {}", path.string(),
                      b.name, data0 + off + len, size);
      b.bytes.resize(len);
      f.seekg(static_cast<std::streamoff>(data0 + off));
      f.read(reinterpret_cast<char*>(b.bytes.data()), static_cast<std::streamsize>(len));
      TESSERA_EXPECTS(f.good(), IOError, "checkpoint {}: cannot read entry '{}'", path.string(),
                      b.name);
      const std::string crc = crc32_hex(crc32_update(0, b.bytes.data(), b.bytes.size()));
      TESSERA_EXPECTS(crc == e.at("crc32").get<std::string>(), IOError,
                      "checkpoint {}: entry '{}' is corrupt (CRC-32 {} differs from the "
                      "header's {})",
                      path.string(), b.name, crc, e.at("crc32").get<std::string>());
      c.entries.emplace(b.name, std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    TESSERA_FAIL(ValueError, "checkpoint {}: malformed header: {}", path.string(), e.what());
  }
  return c;
}

// --- files and environment -------------------------------------------------------------------
namespace {
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
      continue;
    }
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    TESSERA_EXPECTS(end != v && *end == '\0', ValueError, "{}={} is not an integer", name, v);
    return static_cast<int>(x);
  }
  return fallback;
}
}  // namespace

int local_rank() {
  return env_int({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0);
}

int local_world_size(int world) {
  return env_int({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                 world);
}

std::string dataset_name(const std::string& dataset) {
  std::filesystem::path p(dataset);
  while (!p.empty() && p.filename().empty()) {
    p = p.parent_path();  // a trailing slash
  }
  return p.filename().string();
}

void agree(dist::Runtime& rt, const std::string& what, const std::string& error) {
  if (rt.world_size() == 1) {
    if (!error.empty()) {
      TESSERA_FAIL(ValueError, "{}", error);
    }
    return;
  }
  const transport::CollectiveLabel label(rt.transport(), what);
  const transport::Bytes mine(error.begin(), error.end());
  const std::vector<transport::Bytes> all = rt.transport().all_gather(mine);
  if (!error.empty()) {
    TESSERA_FAIL(ValueError, "{}", error);
  }
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) {
      TESSERA_FAIL(ValueError, "{}: rank {} failed: {}", what, r,
                   std::string(all[r].begin(), all[r].end()));
    }
  }
}

// A partitioning found where this run would write its own is reused only when it is one of the
// same dataset and graph: the same part count, method and seed (of several parts), the same
// source whose files are as they were when it was partitioned (the fingerprint recorded with
// it), and not symmetrized when the run asks for the stored edges (--no-symmetrize). A run that
// symmetrizes may find the flag off where the dataset says both directions are stored already.
// tessera.utils.reusable_partitions applies the same rule for the Python examples.
void check_reusable(const std::string& config, const TrainOptions& o, int64_t parts) {
  const PartitionConfig c = load_partition_config(config);
  auto refuse = [&](const std::string& why) {
    throw ValueError(
        fmt::format("{}: {} (give --repartition, or another --part-dir)", config, why));
  };
  if (c.num_parts != parts) {
    refuse(fmt::format("holds {} part(s), this run needs {}", c.num_parts, parts));
  }
  if (o.no_symmetrize && c.build.symmetrize) {
    refuse("partitions the symmetrized graph, and --no-symmetrize asks for the stored edges");
  }
  std::ifstream f(config);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("source") && j["source"].contains("path") &&
      j["source"]["path"].is_string()) {
    const std::string theirs = j["source"]["path"].get<std::string>();
    std::error_code ec;  // a source moved or removed since: not compared
    const bool same = std::filesystem::equivalent(theirs, o.dataset, ec);
    if (!same && !ec) {
      refuse(fmt::format("partitions {}, not --dataset {}", theirs, o.dataset));
    }
  }
  // Method and seed choose how the nodes are cut: one part is the same whichever they are.
  if (parts > 1 && j.is_object() && j.contains("partition_options") &&
      j["partition_options"].is_object()) {
    const nlohmann::json& po = j["partition_options"];
    if (po.contains("method") && po["method"] != o.part_method) {
      refuse(fmt::format("was partitioned with --part-method {}, this run asks for {}",
                         po["method"].dump(), o.part_method));
    }
    if (po.contains("seed") && po["seed"] != o.seed) {
      refuse(fmt::format("was partitioned with --seed {}, this run has {}", po["seed"].dump(),
                         o.seed));
    }
  }
  std::error_code ec;
  if (std::filesystem::exists(o.dataset, ec)) {
    const nlohmann::json* fp = nullptr;
    if (j.is_object() && j.contains("source") && j["source"].contains("fingerprint")) {
      fp = &j["source"]["fingerprint"];
    }
    if (fp == nullptr) {
      refuse(
          "records no fingerprint of its dataset's files (made by an older Tessera), so "
          "whether --dataset changed since cannot be told");
    }
    if (*fp != dataset_fingerprint(o.dataset)) {
      refuse(
          fmt::format("--dataset {} changed since it was partitioned (its files' sizes or "
                      "modification times differ)",
                      o.dataset));
    }
  }
}

// A partition folder that holds another dataset's partitioning (a config of another name) is not
// this run's to replace: partitioning into it would delete that one.
void refuse_other_partitionings(const std::filesystem::path& out, const std::string& name) {
  std::error_code ec;
  if (!std::filesystem::is_directory(out, ec)) {
    return;
  }
  for (const auto& ent : std::filesystem::directory_iterator(out, ec)) {
    const std::string f = ent.path().filename().string();
    if (f != name + ".json" && is_partition_config(ent.path())) {
      TESSERA_FAIL(ValueError,
                   "{}: holds {}, a partitioning of another dataset, which partitioning {} here "
                   "would delete (give another --part-dir, or remove it)",
                   out.string(), f, name);
    }
  }
}

std::string prepare_partitions(dist::Runtime& rt, const TrainOptions& o, int64_t parts,
                               const std::function<void(const Dataset&)>& check) {
  const std::string name = dataset_name(o.dataset);
  const std::filesystem::path out = !o.part_dir.empty()
                                        ? std::filesystem::path(o.part_dir)
                                        : std::filesystem::path("out") / "partitions" /
                                              fmt::format("{}-{}-p{}", name, o.part_method, parts);
  std::string config = (out / (name + ".json")).string();
  std::string error;
  if (rt.rank() == 0) {
    try {
      if (std::filesystem::exists(config) && !o.repartition) {
        check_reusable(config, o, parts);
        if (!o.quiet) {
          fmt::print("[train] reusing partitions {}\n", config);
        }
      } else {
        check_output_path(o.part_dir.empty() ? "partition folder" : "--part-dir", out,
                          /*folder=*/true);
        refuse_other_partitionings(out, name);
        const double t0 = now_seconds();
        ReadOptions ro;
        ro.build.symmetrize = !o.no_symmetrize;
        Dataset ds = read_dataset(o.dataset, Format::kAuto, ro);
        if (check) {
          check(ds);
        }
        PartitionOptions po;
        po.num_parts = parts;
        po.method = parse_part_method(o.part_method);
        if (parts > 1 && po.method == PartMethod::kMetis) {
          po.balance_masks = {"train_mask"};
        }
        po.balance_edges = parts > 1;
        po.halo_hops = 1;
        po.seed = o.seed;
        WriteOptions wo;
        wo.out_dir = out;
        wo.name = name;
        wo.overwrite = true;
        wo.source_path = o.dataset;
        PhaseTimer timer("train");
        partition_dataset(ds, po, wo, timer);
        fmt::print("[train] partitioned {} into {} part(s) in {:.2f}s: {}\n", o.dataset, parts,
                   now_seconds() - t0, config);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::fflush(stdout);
  }
  agree(rt, "partitioning", error);
  return config;
}

double read_partition_files(const std::string& config, int part) {
  const PartitionConfig c = load_partition_config(config);
  const std::filesystem::path folder = c.dir / c.parts.at(part).dir;
  const double t0 = now_seconds();
  std::vector<char> buf(64 << 20);
  for (const PartFile& file : c.parts.at(part).files) {
    std::ifstream f(folder / file.name, std::ios::binary);
    while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    }
  }
  return now_seconds() - t0;
}

std::vector<int64_t> parse_splits(const std::string& spec, int64_t num_splits) {
  std::vector<int64_t> out;
  if (spec == "all") {
    out.resize(std::max<int64_t>(num_splits, 0));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  TESSERA_EXPECTS(spec.empty() || spec.back() != ',', ValueError, "--split '{}': an empty item",
                  spec);
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    TESSERA_EXPECTS(!item.empty(), ValueError, "--split '{}': an empty item", spec);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    TESSERA_EXPECTS(*end == '\0' && errno != ERANGE, ValueError,
                    "--split {}: '{}' is not a split index (give an index, a comma-separated "
                    "list or 'all')",
                    spec, item);
    // Each split trains once: "0,0" trained split 0 twice and reported "over 1 split(s)".
    TESSERA_EXPECTS(std::find(out.begin(), out.end(), v) == out.end(), ValueError,
                    "--split '{}': split {} is listed twice", spec, v);
    TESSERA_EXPECTS(v >= 0, ValueError, "--split {}: split {} is negative", spec, v);
    TESSERA_EXPECTS(num_splits < 0 || v < num_splits, ValueError,
                    "--split {}: split {} is outside [0, {}) (the masks have {} split(s))", spec, v,
                    num_splits, num_splits);
    out.push_back(v);
  }
  TESSERA_EXPECTS(!out.empty(), ValueError, "--split is empty");
  return out;
}

}  // namespace tessera::train::detail
