// SPDX-License-Identifier: Apache-2.0
// The JSON config and the partition folders: serialization, parsing, loading.
#include "tessera/partition/format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"

namespace tessera {

namespace {

using json = nlohmann::json;

// Typed field access that names the config file and the field on failure.
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}
  const json& at(const json& obj, const std::string& key, const std::string& where) const {
    TESSERA_EXPECTS(obj.is_object(), ValueError, "{}: '{}' must be an object", file_, where);
    auto it = obj.find(key);
    TESSERA_EXPECTS(it != obj.end(), ValueError, "{}: missing field '{}'", file_, join(where, key));
    return *it;
  }
  int64_t integer(const json& obj, const std::string& key, const std::string& where = "") const {
    const json& v = at(obj, key, where);
    TESSERA_EXPECTS(v.is_number_integer(), ValueError, "{}: field '{}' must be an integer, got {}",
                    file_, join(where, key), v.dump());
    return v.get<int64_t>();
  }
  std::string string(const json& obj, const std::string& key, const std::string& where = "") const {
    const json& v = at(obj, key, where);
    TESSERA_EXPECTS(v.is_string(), ValueError, "{}: field '{}' must be a string, got {}", file_,
                    join(where, key), v.dump());
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& key, const std::string& where = "") const {
    const json& v = at(obj, key, where);
    TESSERA_EXPECTS(v.is_boolean(), ValueError, "{}: field '{}' must be true or false, got {}",
                    file_, join(where, key), v.dump());
    return v.get<bool>();
  }
  std::vector<int64_t> shape(const json& v, const std::string& where) const {
    TESSERA_EXPECTS(v.is_array(), ValueError, "{}: field '{}' must be a list of integers", file_,
                    where);
    std::vector<int64_t> out;
    for (const auto& x : v) {
      TESSERA_EXPECTS(x.is_number_integer() && x.get<int64_t>() >= 0, ValueError,
                      "{}: field '{}' must be a list of non-negative integers, got {}", file_,
                      where, v.dump());
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  // [[s, e], ...] -> offsets (size P + 1); ranges must be contiguous from 0 to `total`.
  std::vector<int64_t> ranges(const json& v, const std::string& where, int64_t parts,
                              int64_t total) const {
    TESSERA_EXPECTS(v.is_array() && static_cast<int64_t>(v.size()) == parts, ValueError,
                    "{}: field '{}' must list {} [start, end) ranges, got {}", file_, where, parts,
                    v.is_array() ? std::to_string(v.size()) : v.dump());
    std::vector<int64_t> off{0};
    for (int64_t p = 0; p < parts; ++p) {
      const json& r = v[p];
      TESSERA_EXPECTS(
          r.is_array() && r.size() == 2 && r[0].is_number_integer() && r[1].is_number_integer(),
          ValueError, "{}: {}[{}] must be [start, end], got {}", file_, where, p, r.dump());
      const int64_t s = r[0].get<int64_t>(), e = r[1].get<int64_t>();
      TESSERA_EXPECTS(s == off.back() && e >= s, ValueError,
                      "{}: {}[{}] = [{}, {}] does not continue the previous range (expected start "
                      "{} and end >= start)",
                      file_, where, p, s, e, off.back());
      off.push_back(e);
    }
    TESSERA_EXPECTS(off.back() == total, ValueError, "{}: {} end at {} but there are {}", file_,
                    where, off.back(), total);
    return off;
  }

 private:
  static std::string join(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }
  std::string file_;
};

json ranges_json(const std::vector<int64_t>& off) {
  json r = json::array();
  for (size_t p = 0; p + 1 < off.size(); ++p) {
    r.push_back({off[p], off[p + 1]});
  }
  return r;
}

json schema_json(const std::vector<ArraySchema>& v) {
  json o = json::object();
  for (const auto& s : v) {
    o[s.name] = {{"dtype", dtype_name(s.dtype)}, {"shape", s.shape}, {"file", s.file}};
  }
  return o;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

const PartFile* PartInfo::file(const std::string& name) const {
  for (const auto& f : files) {
    if (f.name == name) {
      return &f;
    }
  }
  return nullptr;
}

const std::vector<std::string>& partition_graph_files() {
  static const std::vector<std::string> files = {"indptr.npy",   "indices.npy",    "eid.npy",
                                                 "nid.npy",      "inner_node.npy", "inner_edge.npy",
                                                 "orig_nid.npy", "orig_eid.npy"};
  return files;
}

json config_to_json(const PartitionConfig& c) {
  json j = c.json.is_object() ? c.json : json::object();
  j["format_version"] = c.format_version;
  j["graph_name"] = c.graph_name;
  j["num_nodes"] = c.num_nodes;
  j["num_edges"] = c.num_edges;
  j["num_input_edges"] = c.num_input_edges;
  j["num_parts"] = c.num_parts;
  j["part_method"] = c.part_method;
  j["halo_hops"] = c.halo_hops;
  j["node_order"] = c.node_order;
  j["local_indices"] = c.local_indices;
  j["build"] = {{"symmetrize", c.build.symmetrize},
                {"drop_self_loops", c.build.drop_self_loops},
                {"deduplicate", c.build.deduplicate}};
  j["node_ranges"] = ranges_json(c.node_offsets);
  j["edge_ranges"] = ranges_json(c.edge_offsets);
  j["node_map"] = {{"_N", j["node_ranges"]}};
  j["edge_map"] = {{"_E", j["edge_ranges"]}};
  j["ndata_schema"] = schema_json(c.ndata);
  j["edata_schema"] = schema_json(c.edata);
  json parts = json::array();
  for (const auto& p : c.parts) {
    json files = json::object();
    for (const auto& f : p.files) {
      files[f.name] = {{"bytes", f.bytes},
                       {"crc32", crc32_hex(f.crc32)},
                       {"dtype", dtype_name(f.dtype)},
                       {"shape", f.shape}};
    }
    parts.push_back({{"dir", p.dir},
                     {"num_nodes", p.num_nodes},
                     {"num_inner_nodes", p.num_inner_nodes},
                     {"num_edges", p.num_edges},
                     {"num_inner_edges", p.num_inner_edges},
                     {"files", files}});
  }
  j["partitions"] = parts;
  return j;
}

std::string config_to_string(const PartitionConfig& c) {
  // Indented, but arrays of numbers or strings (ranges, shapes) on one line.
  const std::string in = config_to_json(c).dump(1);
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char ch = in[i];
    if (ch == '"') {  // copy a string literal verbatim
      size_t j = i + 1;
      while (j < in.size() && in[j] != '"') {
        j += in[j] == '\\' ? 2 : 1;
      }
      out.append(in, i, j - i + 1);
      i = j;
      continue;
    }
    if (ch != '[') {
      out.push_back(ch);
      continue;
    }
    // Find the matching ']' if no nested container comes first.
    size_t j = i + 1;
    bool flat = true, quoted = false;
    for (; j < in.size(); ++j) {
      if (quoted) {
        if (in[j] == '\\') {
          ++j;
        } else if (in[j] == '"') {
          quoted = false;
        }
      } else if (in[j] == '"') {
        quoted = true;
      } else if (in[j] == '[' || in[j] == '{') {
        flat = false;
        break;
      } else if (in[j] == ']') {
        break;
      }
    }
    if (!flat || j >= in.size()) {
      out.push_back(ch);
      continue;
    }
    out.push_back('[');
    quoted = false;
    for (size_t k = i + 1; k < j; ++k) {
      const char x = in[k];
      if (quoted) {
        out.push_back(x);
        if (x == '\\') {
          out.push_back(in[++k]);
        } else if (x == '"') {
          quoted = false;
        }
      } else if (x == '"') {
        quoted = true;
        out.push_back(x);
      } else if (x == ',') {
        out += ", ";
      } else if (x != ' ' && x != '\n') {
        out.push_back(x);
      }
    }
    out.push_back(']');
    i = j;
  }
  return out;
}

PartitionConfig load_partition_config(const std::filesystem::path& path) {
  const std::string file = path.string();
  TESSERA_EXPECTS(std::filesystem::is_regular_file(path), IOError, "{}: partition config not found",
                  file);
  std::ifstream in(path);
  TESSERA_EXPECTS(in.good(), IOError, "{}: cannot open partition config", file);
  PartitionConfig c;
  c.path = path;
  c.dir = path.parent_path();
  try {
    c.json = json::parse(in);
  } catch (const json::exception& e) {
    TESSERA_FAIL(ValueError, "{}: malformed JSON: {}", file, e.what());
  }
  const Fields f(file);
  const json& j = c.json;
  TESSERA_EXPECTS(j.is_object(), ValueError, "{}: expected a JSON object", file);
  const int64_t version = f.integer(j, "format_version");
  TESSERA_EXPECTS(version >= kPartitionFormatVersionMin && version <= kPartitionFormatVersion,
                  ValueError, "{}: format_version {} is not supported (this build reads {} to {})",
                  file, version, kPartitionFormatVersionMin, kPartitionFormatVersion);
  c.format_version = static_cast<int>(version);
  c.graph_name = f.string(j, "graph_name");
  c.num_nodes = f.integer(j, "num_nodes");
  c.num_edges = f.integer(j, "num_edges");
  c.num_input_edges = f.integer(j, "num_input_edges");
  c.num_parts = f.integer(j, "num_parts");
  TESSERA_EXPECTS(c.num_nodes >= 0 && c.num_edges >= 0 && c.num_input_edges >= 0, ValueError,
                  "{}: negative num_nodes/num_edges/num_input_edges", file);
  TESSERA_EXPECTS(c.num_parts >= 1, ValueError, "{}: num_parts must be >= 1, got {}", file,
                  c.num_parts);
  c.part_method = f.string(j, "part_method");
  const int64_t hops = f.integer(j, "halo_hops");
  TESSERA_EXPECTS(hops >= 0 && hops <= INT32_MAX, ValueError,
                  "{}: halo_hops must be in [0, 2^31), got {}", file, hops);
  c.halo_hops = static_cast<int>(hops);
  c.node_order = j.contains("node_order") ? f.string(j, "node_order") : "original";
  TESSERA_EXPECTS(c.node_order == "original" || c.node_order == "degree", ValueError,
                  "{}: node_order must be \"original\" or \"degree\", got \"{}\"", file,
                  c.node_order);
  c.local_indices = f.boolean(j, "local_indices");
  // Readers take indices.npy as local IDs exactly when there is a halo to hold the sources.
  TESSERA_EXPECTS(c.local_indices == (c.halo_hops > 0), ValueError,
                  "{}: local_indices is {} but halo_hops is {} (local indices go with a halo)",
                  file, c.local_indices, c.halo_hops);
  const json& b = f.at(j, "build", "");
  c.build.symmetrize = f.boolean(b, "symmetrize", "build");
  c.build.drop_self_loops = f.boolean(b, "drop_self_loops", "build");
  c.build.deduplicate = f.boolean(b, "deduplicate", "build");
  c.node_offsets = f.ranges(f.at(j, "node_ranges", ""), "node_ranges", c.num_parts, c.num_nodes);
  c.edge_offsets = f.ranges(f.at(j, "edge_ranges", ""), "edge_ranges", c.num_parts, c.num_edges);
  for (const char* key : {"ndata_schema", "edata_schema"}) {
    const json& s = f.at(j, key, "");
    TESSERA_EXPECTS(s.is_object(), ValueError, "{}: '{}' must be an object", file, key);
    auto& out = std::string(key) == "ndata_schema" ? c.ndata : c.edata;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string where = std::string(key) + "." + it.key();
      ArraySchema a;
      a.name = it.key();
      a.dtype = parse_dtype(f.string(it.value(), "dtype", where),
                            fmt::format("{}: {}.dtype", file, where));
      a.shape = f.shape(f.at(it.value(), "shape", where), where + ".shape");
      TESSERA_EXPECTS(!a.shape.empty(), ValueError, "{}: {}.shape must not be empty", file, where);
      a.file = f.string(it.value(), "file", where);
      TESSERA_EXPECTS(!a.file.empty() && a.file.find('/') == std::string::npos && a.file != "." &&
                          a.file != "..",
                      ValueError, "{}: {}.file '{}' must be a file name in the partition's folder",
                      file, where, a.file);
      out.push_back(std::move(a));
    }
  }
  {
    std::set<std::string> files(partition_graph_files().begin(), partition_graph_files().end());
    for (const auto* schema : {&c.ndata, &c.edata}) {
      for (const auto& a : *schema) {
        TESSERA_EXPECTS(files.insert(a.file).second, ValueError,
                        "{}: the schema's '{}' is stored in {}, a file that holds another array",
                        file, a.name, a.file);
      }
    }
  }
  for (const auto& a : c.ndata) {
    TESSERA_EXPECTS(a.shape[0] == c.num_nodes, ValueError,
                    "{}: ndata_schema.{}.shape[0] is {}, expected num_nodes = {}", file, a.name,
                    a.shape[0], c.num_nodes);
  }
  const json& parts = f.at(j, "partitions", "");
  TESSERA_EXPECTS(parts.is_array() && static_cast<int64_t>(parts.size()) == c.num_parts, ValueError,
                  "{}: 'partitions' must list {} partitions", file, c.num_parts);
  for (int64_t p = 0; p < c.num_parts; ++p) {
    const std::string where = fmt::format("partitions[{}]", p);
    const json& pj = parts[p];
    PartInfo info;
    info.dir = f.string(pj, "dir", where);
    TESSERA_EXPECTS(
        !info.dir.empty() && info.dir.find("..") == std::string::npos && info.dir[0] != '/',
        ValueError, "{}: {}.dir '{}' must be a folder name relative to the config", file, where,
        info.dir);
    info.num_nodes = f.integer(pj, "num_nodes", where);
    info.num_inner_nodes = f.integer(pj, "num_inner_nodes", where);
    info.num_edges = f.integer(pj, "num_edges", where);
    info.num_inner_edges = f.integer(pj, "num_inner_edges", where);
    TESSERA_EXPECTS(info.num_inner_nodes == c.node_offsets[p + 1] - c.node_offsets[p], ValueError,
                    "{}: {}.num_inner_nodes is {} but node_ranges[{}] holds {}", file, where,
                    info.num_inner_nodes, p, c.node_offsets[p + 1] - c.node_offsets[p]);
    TESSERA_EXPECTS(info.num_inner_edges == c.edge_offsets[p + 1] - c.edge_offsets[p], ValueError,
                    "{}: {}.num_inner_edges is {} but edge_ranges[{}] holds {}", file, where,
                    info.num_inner_edges, p, c.edge_offsets[p + 1] - c.edge_offsets[p]);
    // The files hold num_nodes local nodes (inner first) and num_edges local edges: the inner
    // ones cannot be more (readers index the files up to the inner counts).
    TESSERA_EXPECTS(info.num_inner_nodes >= 0 && info.num_inner_nodes <= info.num_nodes, ValueError,
                    "{}: {}.num_inner_nodes is {}, outside [0, num_nodes = {}]", file, where,
                    info.num_inner_nodes, info.num_nodes);
    TESSERA_EXPECTS(info.num_inner_edges >= 0 && info.num_inner_edges <= info.num_edges, ValueError,
                    "{}: {}.num_inner_edges is {}, outside [0, num_edges = {}]", file, where,
                    info.num_inner_edges, info.num_edges);
    const json& files = f.at(pj, "files", where);
    TESSERA_EXPECTS(files.is_object(), ValueError, "{}: {}.files must be an object", file, where);
    for (auto it = files.begin(); it != files.end(); ++it) {
      const std::string fw = where + ".files." + it.key();
      PartFile pf;
      pf.name = it.key();
      pf.bytes = f.integer(it.value(), "bytes", fw);
      const std::string crc = f.string(it.value(), "crc32", fw);
      TESSERA_EXPECTS(
          crc.size() == 8 && crc.find_first_not_of("0123456789abcdef") == std::string::npos,
          ValueError, "{}: {}.crc32 '{}' is not 8 hex digits", file, fw, crc);
      pf.crc32 = static_cast<uint32_t>(std::stoul(crc, nullptr, 16));
      pf.dtype =
          parse_dtype(f.string(it.value(), "dtype", fw), fmt::format("{}: {}.dtype", file, fw));
      pf.shape = f.shape(f.at(it.value(), "shape", fw), fw + ".shape");
      info.files.push_back(std::move(pf));
    }
    c.parts.push_back(std::move(info));
  }
  return c;
}

namespace {

// Checks a loaded file against the size and CRC-32 the config lists. The data is checksummed
// where it was loaded (memory or the mapping), so the file is read once, not twice; only the
// header (and any bytes after the data, which Tessera never writes) are read again.
void verify_file(const std::filesystem::path& fp, const PartFile& pf, const Array& a, int64_t p) {
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(fp, ec));
  TESSERA_EXPECTS(!ec, IOError, "partition {}: cannot stat {}: {}", p, fp.string(), ec.message());
  TESSERA_EXPECTS(bytes == pf.bytes, ValueError,
                  "partition {}: {} has {} bytes but the config lists {} (corrupted, or from "
                  "another partitioning)",
                  p, fp.string(), bytes, pf.bytes);
  const NpyHeader h = read_npy_header(fp);
  const auto data_end = static_cast<int64_t>(h.data_offset + a.nbytes());
  TESSERA_ASSERT(data_end <= bytes, "{}: data ends at {} in a file of {} bytes", fp.string(),
                 data_end, bytes);
  std::string head(h.data_offset, '\0'), tail(static_cast<size_t>(bytes - data_end), '\0');
  {
    const int fd = ::open(fp.c_str(), O_RDONLY | O_CLOEXEC);
    TESSERA_EXPECTS(fd >= 0, IOError, "partition {}: cannot open {}: {}", p, fp.string(),
                    std::strerror(errno));
    try {
      pread_all(fd, head.data(), head.size(), 0, fp.string());
      pread_all(fd, tail.data(), tail.size(), data_end, fp.string());
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  uint32_t crc = crc32_update(0, head.data(), head.size());
  crc = crc32_update(crc, a.raw(), a.nbytes());
  crc = crc32_update(crc, tail.data(), tail.size());
  TESSERA_EXPECTS(crc == pf.crc32, ValueError,
                  "partition {}: {} has checksum {} but the config lists {} (corrupted, or from "
                  "another partitioning; load with verify_checksums=false to skip the check)",
                  p, fp.string(), crc32_hex(crc), crc32_hex(pf.crc32));
}

}  // namespace

bool is_partition_folder(const std::filesystem::path& dir) {
  const std::string f = dir.filename().string();
  if (f.size() <= 4 || f.compare(0, 4, "part") != 0 ||
      f.find_first_not_of("0123456789", 4) != std::string::npos) {
    return false;
  }
  std::error_code ec;
  for (const auto& ent : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = ent.path().filename().string();
    if (!ent.is_regular_file() || ent.is_symlink() || n.size() <= 4 ||
        n.compare(n.size() - 4, 4, ".npy") != 0) {
      return false;
    }
  }
  return !ec;
}

bool is_partition_config(const std::filesystem::path& file) {
  const std::string f = file.filename().string();
  if (f.size() <= 5 || f.compare(f.size() - 5, 5, ".json") != 0) {
    return false;
  }
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("format_version") && j.contains("graph_name") &&
         j.contains("partitions");
}

std::vector<ExpectedFile> expected_partition_files(const PartitionConfig& c, int64_t p) {
  const PartInfo& info = c.parts.at(static_cast<size_t>(p));
  const int64_t nl = info.num_nodes, ml = info.num_edges;
  std::vector<ExpectedFile> want = {
      {"indptr.npy", DType::kInt64, {nl + 1}}, {"indices.npy", DType::kInt64, {ml}},
      {"eid.npy", DType::kInt64, {ml}},        {"nid.npy", DType::kInt64, {nl}},
      {"inner_node.npy", DType::kBool, {nl}},  {"inner_edge.npy", DType::kBool, {ml}},
      {"orig_nid.npy", DType::kInt64, {nl}},   {"orig_eid.npy", DType::kInt64, {ml}}};
  for (const auto& s : c.ndata) {
    std::vector<int64_t> shape = s.shape;
    shape[0] = info.num_inner_nodes;
    want.push_back({s.file, s.dtype, shape});
  }
  for (const auto& s : c.edata) {
    std::vector<int64_t> shape = s.shape;
    shape[0] = info.num_inner_edges;
    want.push_back({s.file, s.dtype, shape});
  }
  return want;
}

LocalPartition load_partition(const PartitionConfig& c, int64_t p, const LoadOptions& opts) {
  TESSERA_EXPECTS(p >= 0 && p < c.num_parts, IndexError, "{}: partition {} outside [0, {})",
                  c.path.string(), p, c.num_parts);
  const PartInfo& info = c.parts[p];
  const std::filesystem::path dir = c.dir / info.dir;
  // Readers take each array's dtype and shape from the schema and the counts (a node data
  // tensor's from ndata_schema): the files must be listed so, and load checks them against
  // their listing below.
  for (const ExpectedFile& w : expected_partition_files(c, p)) {
    const PartFile* pf = info.file(w.name);
    TESSERA_EXPECTS(pf != nullptr, ValueError, "{}: partition {} does not list file {}",
                    c.path.string(), p, w.name);
    TESSERA_EXPECTS(pf->dtype == w.dtype && pf->shape == w.shape, ValueError,
                    "{}: partition {} lists {} as {} {}, but its counts and the schema imply {} "
                    "{}",
                    c.path.string(), p, w.name, dtype_name(pf->dtype), shape_string(pf->shape),
                    dtype_name(w.dtype), shape_string(w.shape));
  }
  TESSERA_EXPECTS(std::filesystem::is_directory(dir), IOError,
                  "partition {}: folder {} is missing (config {})", p, dir.string(),
                  c.path.string());
  auto load = [&](const std::string& name, bool writable = false) {
    const PartFile* pf = info.file(name);
    TESSERA_EXPECTS(pf != nullptr, ValueError, "{}: partition {} does not list file {}",
                    c.path.string(), p, name);
    const std::filesystem::path fp = dir / name;
    TESSERA_EXPECTS(std::filesystem::is_regular_file(fp), IOError,
                    "partition {}: file {} is missing", p, fp.string());
    Array a = opts.mmap ? mmap_npy(fp, writable) : read_npy(fp);
    TESSERA_EXPECTS(a.dtype() == pf->dtype && a.shape() == pf->shape, ValueError,
                    "partition {}: {} is {} {} but the config lists {} {}", p, fp.string(),
                    dtype_name(a.dtype()), a.shape_str(), dtype_name(pf->dtype),
                    shape_string(pf->shape));
    if (opts.verify_checksums) {
      verify_file(fp, *pf, a, p);
    }
    return a;
  };
  LocalPartition L;
  L.part_id = p;
  L.num_inner_nodes = info.num_inner_nodes;
  L.num_inner_edges = info.num_inner_edges;
  L.indptr = load("indptr.npy");
  L.indices = load("indices.npy");
  L.eid = load("eid.npy");
  L.nid = load("nid.npy");
  L.inner_node = load("inner_node.npy");
  L.inner_edge = load("inner_edge.npy");
  L.orig_nid = load("orig_nid.npy");
  L.orig_eid = load("orig_eid.npy");
  for (const auto& s : c.ndata) {
    L.ndata[s.name] = load(s.file, opts.writable_node_data);
  }
  for (const auto& s : c.edata) {
    L.edata[s.name] = load(s.file);
  }
  return L;
}

}  // namespace tessera
