// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/io.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agree.hpp"
#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/partition/format.hpp"

namespace tessera::dist {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "tessera.dist_tensor";
constexpr int kVersion = 1;

std::string part_file(const std::string& stem, int rank) {
  return fmt::format("{}.part{}.npy", stem, rank);
}

// A temporary sibling of `final_path`, unique per file name and process.
fs::path tmp_sibling(const fs::path& final_path) {
  return final_path.parent_path() /
         fmt::format(".{}.tmp-{}", final_path.filename().string(), ::getpid());
}

void rename_onto(const fs::path& tmp, const fs::path& final_path) {
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    TESSERA_FAIL(IOError, "cannot rename {} onto {}: {}", tmp.string(), final_path.string(),
                 ec.message());
  }
}

// Writes this rank's rows as .npy through a temporary sibling; returns (bytes, crc32).
std::pair<int64_t, uint32_t> write_part(const DistTensor& t, const fs::path& path) {
  const auto [lo, hi] = t.local_range();
  std::vector<int64_t> shape = t.shape();
  shape[0] = hi - lo;
  const fs::path tmp = tmp_sibling(path);
  try {
    write_npy(tmp, t.dtype(), shape, t.local_data());
    const uint32_t crc = file_crc32(tmp);
    const auto bytes = static_cast<int64_t>(fs::file_size(tmp));
    rename_onto(tmp, path);
    return {bytes, crc};
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  TESSERA_EXPECTS(fs::is_regular_file(path, ec), IOError,
                  "{} is missing (no DistTensor saved here?)", path.string());
  std::ifstream in(path, std::ios::binary);
  TESSERA_EXPECTS(in.good(), IOError, "cannot open {}", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  TESSERA_EXPECTS(!in.bad(), IOError, "cannot read {}", path.string());
  return ss.str();
}

std::string offsets_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(v[i]);
  }
  return s + "]";
}

// Parses the description and checks it against `t`; returns this rank's part entry.
json check_description(const DistTensor& t, const std::string& text, const fs::path& jpath,
                       int me) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    TESSERA_FAIL(ValueError, "{}: not valid JSON ({})", jpath.string(), e.what());
  }
  const std::string where = jpath.string();
  try {
    TESSERA_EXPECTS(j.value("format", "") == kFormat, ValueError,
                    "{}: field 'format' is '{}', expected '{}'", where, j.value("format", ""),
                    kFormat);
    const int version = j.at("version").get<int>();
    TESSERA_EXPECTS(version == kVersion, ValueError,
                    "{}: field 'version' is {}; this build reads version {}", where, version,
                    kVersion);
    const auto name = j.at("name").get<std::string>();
    TESSERA_EXPECTS(name == t.name(), ValueError,
                    "{}: field 'name' is '{}' but the tensor is '{}' (another tensor whose name "
                    "sanitizes alike)",
                    where, name, t.name());
    const auto shape = j.at("shape").get<std::vector<int64_t>>();
    TESSERA_EXPECTS(shape == t.shape(), ValueError,
                    "{}: field 'shape' {} differs from the tensor's {}", where, shape_string(shape),
                    shape_string(t.shape()));
    const auto dtype = j.at("dtype").get<std::string>();
    TESSERA_EXPECTS(dtype == dtype_name(t.dtype()), ValueError,
                    "{}: field 'dtype' {} differs from the tensor's {}", where, dtype,
                    dtype_name(t.dtype()));
    const auto offsets = j.at("policy").at("offsets").get<std::vector<int64_t>>();
    TESSERA_EXPECTS(offsets == t.policy().offsets, ValueError,
                    "{}: field 'policy.offsets' {} (which rank owns which rows) differs from the "
                    "tensor's {} ({} policy); loading into another partitioning is not supported",
                    where, offsets_string(offsets), offsets_string(t.policy().offsets),
                    t.policy().kind);
    const int world = j.at("world_size").get<int>();
    const auto& parts = j.at("parts");
    TESSERA_EXPECTS(world == t.policy().world_size() && parts.is_array() &&
                        parts.size() == static_cast<size_t>(world),
                    ValueError, "{}: field 'world_size' {} with {} parts; the job has {} ranks",
                    where, world, parts.size(), t.policy().world_size());
    return parts.at(static_cast<size_t>(me));
  } catch (const json::exception& e) {
    TESSERA_FAIL(ValueError, "{}: malformed description ({})", where, e.what());
  }
}

// Reads and checks this rank's part into a new Array (nothing is copied into `t` here).
Array read_part(const DistTensor& t, const json& entry, const fs::path& dir, const fs::path& jpath,
                const std::string& stem, int me) {
  const std::string expect = part_file(stem, me);
  std::string file;
  int64_t bytes = 0;
  std::string crc;
  try {
    file = entry.at("file").get<std::string>();
    bytes = entry.at("bytes").get<int64_t>();
    crc = entry.at("crc32").get<std::string>();
  } catch (const json::exception& e) {
    TESSERA_FAIL(ValueError, "{}: malformed entry of part {} ({})", jpath.string(), me, e.what());
  }
  TESSERA_EXPECTS(file == expect, ValueError, "{}: field 'parts[{}].file' is '{}', expected '{}'",
                  jpath.string(), me, file, expect);
  const fs::path path = dir / file;
  std::error_code ec;
  TESSERA_EXPECTS(fs::is_regular_file(path, ec), IOError,
                  "{} is missing (rank {}'s part of DistTensor '{}', listed in {})", path.string(),
                  me, t.name(), jpath.string());
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  TESSERA_EXPECTS(!ec && size == bytes, ValueError,
                  "{}: {} bytes on disk but field 'parts[{}].bytes' in {} says {} (truncated or "
                  "from another save)",
                  path.string(), size, me, jpath.string(), bytes);
  const std::string have = crc32_hex(file_crc32(path));
  TESSERA_EXPECTS(have == crc, ValueError,
                  "{}: CRC-32 {} differs from field 'parts[{}].crc32' {} in {} (corrupt or from "
                  "another save)",
                  path.string(), have, me, crc, jpath.string());
  Array a = read_npy(path);
  const auto [lo, hi] = t.local_range();
  std::vector<int64_t> shape = t.shape();
  shape[0] = hi - lo;
  TESSERA_EXPECTS(a.dtype() == t.dtype(), ValueError, "{}: dtype {} differs from the tensor's {}",
                  path.string(), dtype_name(a.dtype()), dtype_name(t.dtype()));
  TESSERA_EXPECTS(a.shape() == shape, ValueError,
                  "{}: shape {} differs from rank {}'s rows of the tensor, {}", path.string(),
                  a.shape_str(), me, shape_string(shape));
  return a;
}

}  // namespace

std::string sanitized_tensor_name(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) {
      c = '_';
    }
  }
  if (s.empty() || s.front() == '.') {
    s.insert(s.begin(), '_');  // no hidden files, no "." or ".."
  }
  return s;
}

namespace {

// Throws when `jpath` exists and describes a tensor of another name than `name`.
void refuse_other_tensor(const fs::path& jpath, const std::string& name) {
  std::error_code ec;
  if (!fs::exists(jpath, ec)) {
    return;
  }
  const json j = json::parse(read_text(jpath), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    return;  // not a description: overwritten like any stale file
  }
  const auto other = j["name"].get<std::string>();
  TESSERA_EXPECTS(other == name, ValueError,
                  "{} holds the saved DistTensor '{}', whose files have the same names as those "
                  "of '{}' (names differ only in characters a file name cannot hold); save into "
                  "another folder",
                  jpath.string(), other, name);
}

}  // namespace

void save_dist_tensor(const DistTensor& t, const std::filesystem::path& dir) {
  TESSERA_EXPECTS(t.defined(), ValueError, "save_dist_tensor: the DistTensor is undefined");
  auto& tr = t.runtime().transport();
  const int me = tr.rank(), world = tr.world_size();
  const std::string stem = sanitized_tensor_name(t.name());
  const std::string context = fmt::format("save_dist_tensor '{}' to {}", t.name(), dir.string());
  const transport::CollectiveLabel label(tr, fmt::format("save_dist_tensor '{}'", t.name()));

  // 0. Rank 0 refuses a folder whose description under this file name is another tensor's (names
  // that differ only in characters a file name cannot hold, e.g. "u:v" and "u_v"): its parts
  // would be overwritten. Agreed before any rank writes.
  std::exception_ptr err;
  if (me == 0) {
    try {
      refuse_other_tensor(dir / (stem + ".json"), t.name());
    } catch (...) {
      err = std::current_exception();
    }
  }
  detail::all_or_nothing(tr, context, err);

  // 1. Every rank writes its part; the ranks share (bytes, crc) or the error.
  err = nullptr;
  detail::Writer w;
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    TESSERA_EXPECTS(!ec, IOError, "cannot create folder {}: {}", dir.string(), ec.message());
    const auto [bytes, crc] = write_part(t, dir / part_file(stem, me));
    w.put<int64_t>(bytes);
    w.put<uint32_t>(crc);
  } catch (...) {
    err = std::current_exception();
  }
  const auto parts = detail::all_or_nothing(tr, context, err, w.buf);

  // 2. Rank 0 describes the tensor; everybody waits for it (the second exchange is the barrier
  // after which the whole tensor is on disk).
  err = nullptr;
  if (me == 0) {
    try {
      json j;
      j["format"] = kFormat;
      j["version"] = kVersion;
      j["name"] = t.name();
      j["shape"] = t.shape();
      j["dtype"] = dtype_name(t.dtype());
      j["policy"] = {{"kind", t.policy().kind}, {"offsets", t.policy().offsets}};
      j["world_size"] = world;
      json pj = json::array();
      for (int r = 0; r < world; ++r) {
        detail::Reader rd(transport::ByteView(parts[r]), "save outcome");
        const auto bytes = rd.get<int64_t>();
        const auto crc = rd.get<uint32_t>();
        pj.push_back({{"file", part_file(stem, r)},
                      {"rows", {t.policy().offsets[r], t.policy().offsets[r + 1]}},
                      {"bytes", bytes},
                      {"crc32", crc32_hex(crc)}});
      }
      j["parts"] = pj;
      write_text_atomic(dir / (stem + ".json"), j.dump(2) + "\n");
    } catch (...) {
      err = std::current_exception();
    }
  }
  detail::all_or_nothing(tr, context, err);
}

namespace detail {

Array read_saved_rows(const DistTensor& t, const std::filesystem::path& dir) {
  TESSERA_EXPECTS(t.defined(), ValueError, "load_dist_tensor: the DistTensor is undefined");
  auto& tr = t.runtime().transport();
  const int me = tr.rank();
  const std::string stem = sanitized_tensor_name(t.name());
  const fs::path jpath = dir / (stem + ".json");
  const std::string context = fmt::format("load_dist_tensor '{}' from {}", t.name(), dir.string());

  // 1. Rank 0 reads the description and shares it (only rank 0 needs to see the JSON).
  std::exception_ptr err;
  transport::Bytes text;
  if (me == 0) {
    try {
      const std::string s = read_text(jpath);
      text.assign(s.begin(), s.end());
    } catch (...) {
      err = std::current_exception();
    }
  }
  const auto shared = all_or_nothing(tr, context, err, text);

  // 2. Every rank checks it and reads its part into a buffer.
  err = nullptr;
  Array rows;
  try {
    const json entry =
        check_description(t, std::string(shared[0].begin(), shared[0].end()), jpath, me);
    rows = read_part(t, entry, dir, jpath, stem, me);
  } catch (...) {
    err = std::current_exception();
  }
  all_or_nothing(tr, context, err);
  return rows;
}

void store_loaded_rows(DistTensor& t, const Array& rows, const std::string& context) {
  // Everybody succeeded: copy, then wait so that no rank reads rows not loaded yet.
  if (rows.nbytes() > 0) {
    std::memcpy(t.local_data(), rows.raw(), rows.nbytes());
    const auto [lo, hi] = t.local_range();
    t.local_rows_changed(lo, hi);
  }
  try {
    t.runtime().transport().barrier();
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(context);
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(context);
  }
}

}  // namespace detail

void load_dist_tensor(DistTensor& t, const std::filesystem::path& dir) {
  TESSERA_EXPECTS(t.defined(), ValueError, "load_dist_tensor: the DistTensor is undefined");
  const transport::CollectiveLabel label(t.runtime().transport(),
                                         fmt::format("load_dist_tensor '{}'", t.name()));
  const Array rows = detail::read_saved_rows(t, dir);
  detail::store_loaded_rows(t, rows,
                            fmt::format("load_dist_tensor '{}' from {}", t.name(), dir.string()));
}

}  // namespace tessera::dist
