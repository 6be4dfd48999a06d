// SPDX-License-Identifier: Apache-2.0
// Bad input: clear errors naming the partition, file and field; nothing left behind.
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;

Dataset toy() {
  std::vector<std::pair<int64_t, int64_t>> e;
  for (int64_t v = 0; v < 60; ++v) {
    e.push_back({v, (v + 1) % 60});
    e.push_back({v, (v * 7) % 60});
  }
  return make_dataset(60, e, {true});
}

std::string all_errors(const ValidationReport& r) {
  std::string s;
  for (const auto& e : r.errors)
    s += e + "\n";
  return s;
}

void expect_only_outputs(const fs::path& dir, std::vector<std::string> names) {
  std::vector<std::string> have;
  for (const auto& e : fs::directory_iterator(dir))
    have.push_back(e.path().filename().string());
  std::sort(have.begin(), have.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(have, names);
}

PartitionStats write(const Dataset& ds, const fs::path& out, int64_t P, bool overwrite = true,
                     PartitionOptions po = {}) {
  set_quiet(true);
  po.num_parts = P;
  PhaseTimer t;
  WriteOptions wo;
  wo.out_dir = out;
  wo.name = "g";
  wo.overwrite = overwrite;
  return partition_dataset(ds, po, wo, t);
}

// Rewrites one file's size/checksum in the config so that only the contract checks can catch a
// tampered file (a buggy writer rather than a corrupted disk).
void reseal(const fs::path& config, int p, const std::string& file) {
  nlohmann::json j;
  {
    std::ifstream in(config);
    in >> j;
  }
  const fs::path fp = config.parent_path() / fmt::format("part{}", p) / file;
  auto& f = j["partitions"][p]["files"][file];
  f["bytes"] = fs::file_size(fp);
  f["crc32"] = crc32_hex(file_crc32(fp));
  std::ofstream(config) << j.dump(1);
}

template <typename T>
void poke(const fs::path& npy, int64_t index, T value) {
  Array a = read_npy(npy);
  a.mut_data<T>()[index] = value;
  write_npy(npy, a);
}

TEST(Errors, BadPartsAndHalo) {
  TempDir tmp;
  const Dataset ds = toy();
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", 0), ValueError, "--parts must be");
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", -3), ValueError, "got -3");
  PartitionOptions po;
  po.halo_hops = -1;
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", 2, true, po), ValueError, "--halo-hops");
  TESSERA_EXPECT_THROW_MSG(parse_part_method("kahip"), ValueError, "unknown partition method");
  expect_only_outputs(tmp.path(), {});
}

TEST(Errors, FailureLeavesNothingBehindAndKeepsOldOutput) {
  TempDir tmp;
  const Dataset ds = toy();
  PartitionOptions po;
  po.balance_masks = {"no_such_mask"};
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", 2, true, po), ValueError, "no_such_mask");
  expect_only_outputs(tmp.path(), {});  // no output, no temporary folder
  write(ds, tmp / "out", 2);
  // Existing output without --overwrite: refused; a failing overwrite keeps the old output.
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", 3, false), ValueError, "--overwrite");
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "out", 3, true, po), ValueError, "no_such_mask");
  expect_only_outputs(tmp.path(), {"out"});
  EXPECT_TRUE(validate_partitions(tmp / "out" / "g.json", &ds).ok());
  EXPECT_EQ(load_partition_config(tmp / "out" / "g.json").num_parts, 2);
}

TEST(Errors, OverwriteRefusesAFolderThatIsNotPartitionOutput) {
  TempDir tmp;
  const Dataset ds = toy();
  fs::create_directories(tmp / "home" / "docs");
  std::ofstream(tmp / "home" / "notes.txt") << "precious";
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "home", 2), ValueError, "refusing to overwrite");
  EXPECT_TRUE(fs::exists(tmp / "home" / "notes.txt"));
  std::ofstream(tmp / "file") << "x";
  TESSERA_EXPECT_THROW_MSG(write(ds, tmp / "file", 2), ValueError, "not a folder");
  write(ds, tmp / "out", 3);
  write(ds, tmp / "out", 2);  // replacing earlier partition output is fine
  EXPECT_FALSE(fs::exists(tmp / "out" / "part2"));
}

TEST(Errors, MissingPartitionFile) {
  TempDir tmp;
  const Dataset ds = toy();
  write(ds, tmp / "out", 3);
  fs::remove(tmp / "out" / "part1" / "indices.npy");
  std::ofstream(tmp / "out" / "part0" / "stray.npy") << "x";
  const ValidationReport r = validate_partitions(tmp / "out" / "g.json", &ds);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all_errors(r).find("partition 1: file part1/indices.npy is missing"), std::string::npos)
      << all_errors(r);
  EXPECT_NE(all_errors(r).find("partition 0: part0/stray.npy is not listed"), std::string::npos)
      << all_errors(r);
  const PartitionConfig c = load_partition_config(tmp / "out" / "g.json");
  TESSERA_EXPECT_THROW_MSG(load_partition(c, 1), IOError, "indices.npy is missing");
  fs::remove_all(tmp / "out" / "part2");
  const ValidationReport r2 = validate_partitions(tmp / "out" / "g.json");
  EXPECT_NE(all_errors(r2).find("partition 2: folder"), std::string::npos) << all_errors(r2);
  TESSERA_EXPECT_THROW_MSG(validate_partitions(tmp / "nope.json"), IOError,
                           "partition config not found");
}

TEST(Errors, CorruptedFileFailsChecksum) {
  TempDir tmp;
  const Dataset ds = toy();
  write(ds, tmp / "out", 2);
  const fs::path f = tmp / "out" / "part0" / "node_feat.npy";
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-3, std::ios::end);
    io.put('\x7f');
  }
  const ValidationReport r = validate_partitions(tmp / "out" / "g.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all_errors(r).find("partition 0: part0/node_feat.npy has checksum"), std::string::npos)
      << all_errors(r);
  const PartitionConfig c = load_partition_config(tmp / "out" / "g.json");
  // Checked by default, read or mapped; skipped only when asked.
  TESSERA_EXPECT_THROW_MSG(load_partition(c, 0), ValueError, "node_feat.npy has checksum");
  TESSERA_EXPECT_THROW_MSG(load_partition(c, 0, {/*mmap=*/false, /*verify_checksums=*/true}),
                           ValueError, "node_feat.npy has checksum");
  EXPECT_NO_THROW(load_partition(c, 0, {/*mmap=*/true, /*verify_checksums=*/false}));
  EXPECT_NO_THROW(load_partition(c, 1));
  // A truncated file is caught by its size.
  fs::resize_file(tmp / "out" / "part1" / "eid.npy", 100);
  const ValidationReport r2 = validate_partitions(tmp / "out" / "g.json");
  EXPECT_NE(all_errors(r2).find("part1/eid.npy has 100 bytes"), std::string::npos)
      << all_errors(r2);
}

TEST(Errors, ConfigOfAnotherPartitioning) {
  TempDir tmp;
  const Dataset ds = toy();
  write(ds, tmp / "a", 2);
  PartitionOptions po;
  po.method = PartMethod::kRandom;
  write(ds, tmp / "b", 2, true, po);
  fs::copy_file(tmp / "b" / "g.json", tmp / "a" / "g.json", fs::copy_options::overwrite_existing);
  const ValidationReport r = validate_partitions(tmp / "a" / "g.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all_errors(r).find("from another partitioning"), std::string::npos) << all_errors(r);
  // The config of another graph against this dataset.
  const Dataset other = make_dataset(61, {{0, 1}});
  const ValidationReport r2 = validate_partitions(tmp / "b" / "g.json", &other);
  EXPECT_NE(all_errors(r2).find("has 61 nodes but the config says 60"), std::string::npos)
      << all_errors(r2);
}

TEST(Errors, MalformedConfig) {
  TempDir tmp;
  const Dataset ds = toy();
  write(ds, tmp / "out", 2);
  const fs::path cfg = tmp / "out" / "g.json";
  nlohmann::json j;
  {
    std::ifstream in(cfg);
    in >> j;
  }
  auto with = [&](auto edit) {
    nlohmann::json k = j;
    edit(k);
    std::ofstream(tmp / "bad.json") << k.dump();
    return tmp / "bad.json";
  };
  TESSERA_EXPECT_THROW_MSG(load_partition_config(with([](auto& k) { k.erase("num_nodes"); })),
                           ValueError, "missing field 'num_nodes'");
  TESSERA_EXPECT_THROW_MSG(load_partition_config(with([](auto& k) { k["node_ranges"][1][0] = 5; })),
                           ValueError, "node_ranges[1]");
  TESSERA_EXPECT_THROW_MSG(load_partition_config(with([](auto& k) { k["format_version"] = 99; })),
                           ValueError, "format_version 99");
  // 2^32 + 2 is no version 2 (it was truncated to an int before the check).
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) { k["format_version"] = 4294967298LL; })), ValueError,
      "format_version 4294967298");
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) { k["halo_hops"] = 4294967297LL; })), ValueError,
      "halo_hops must be in [0, 2^31), got 4294967297");
  TESSERA_EXPECT_THROW_MSG(load_partition_config(with([](auto& k) {
                             k["partitions"][0]["files"]["nid.npy"]["crc32"] = "xyz";
                           })),
                           ValueError, "partitions[0].files.nid.npy.crc32");
  // Inner counts beyond what the partition's files hold: readers index the files up to them.
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) { k["partitions"][0]["num_nodes"] = 1; })), ValueError,
      "partitions[0].num_inner_nodes is");
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) { k["partitions"][1]["num_edges"] = 0; })), ValueError,
      "partitions[1].num_inner_edges is");
  // A data file outside the partition's folder.
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) {
        k["ndata_schema"]["x"] = {{"dtype", "float32"}, {"shape", {60, 2}}, {"file", "../x.npy"}};
      })),
      ValueError, "ndata_schema.x.file '../x.npy' must be a file name");
  // Local indices go with a halo: readers took the local IDs as global ones (another graph).
  TESSERA_EXPECT_THROW_MSG(load_partition_config(with([](auto& k) { k["local_indices"] = false; })),
                           ValueError, "local_indices is false but halo_hops is 1");
  // Two arrays in one file.
  TESSERA_EXPECT_THROW_MSG(
      load_partition_config(with([](auto& k) { k["ndata_schema"]["label"]["file"] = "nid.npy"; })),
      ValueError, "the schema's 'label' is stored in nid.npy, a file that holds another array");
  std::ofstream(tmp / "bad.json") << "{ not json";
  TESSERA_EXPECT_THROW_MSG(load_partition_config(tmp / "bad.json"), ValueError, "malformed JSON");

  // A schema that lies about a file its partitions list truthfully: readers take the dtype and
  // shape from the schema (a uint8 file read as float32 crashed, a shape cut rows apart).
  auto load_edited = [&](auto edit) {
    nlohmann::json k = j;
    edit(k);
    std::ofstream(tmp / "out" / "edited.json") << k.dump();
    return load_partition(load_partition_config(tmp / "out" / "edited.json"), 0);
  };
  TESSERA_EXPECT_THROW_MSG(
      load_edited([](auto& k) { k["ndata_schema"]["label"]["dtype"] = "float64"; }), ValueError,
      "lists node_label.npy as int64 [");
  TESSERA_EXPECT_THROW_MSG(load_edited([](auto& k) { k["ndata_schema"]["feat"]["shape"][1] = 1; }),
                           ValueError, "but its counts and the schema imply float32 [");
}

// DGL's readers take the ranges from node_map / edge_map: validate holds them to the ranges.
TEST(Errors, ValidateHoldsDglsRangeMapsToTheRanges) {
  TempDir tmp;
  write(toy(), tmp / "out", 2);
  const fs::path cfg = tmp / "out" / "g.json";
  nlohmann::json j;
  {
    std::ifstream in(cfg);
    in >> j;
  }
  for (const auto& [map, key] : {std::pair{"node_map", "_N"}, std::pair{"edge_map", "_E"}}) {
    nlohmann::json k = j;
    k[map][key][0][1] = k[map][key][0][1].get<int64_t>() + 1;
    std::ofstream(cfg) << k.dump();
    const ValidationReport r = validate_partitions(cfg);
    EXPECT_NE(all_errors(r).find(fmt::format("{}.{} differs from", map, key)), std::string::npos)
        << all_errors(r);
  }
}

TEST(Errors, ValidateCatchesContractViolationsBehindValidChecksums) {
  TempDir tmp;
  const Dataset ds = toy();
  auto fresh = [&] {
    PartitionOptions po;
    po.halo_hops = 2;
    write(ds, tmp / "out", 3, true, po);
    return tmp / "out" / "g.json";
  };
  auto errors_after = [&](int p, const std::string& file, auto edit) {
    const fs::path cfg = fresh();
    edit(tmp / "out" / fmt::format("part{}", p) / file);
    reseal(cfg, p, file);
    const ValidationReport r = validate_partitions(cfg, &ds);
    EXPECT_FALSE(r.ok()) << file;
    return all_errors(r);
  };
  // A feature row that did not move with its node.
  EXPECT_NE(errors_after(0, "node_feat.npy", [](const fs::path& f) { poke<float>(f, 2, 1234.5f); })
                .find("part0/node_feat.npy row 1"),
            std::string::npos);
  // A label swapped.
  EXPECT_NE(errors_after(1, "node_label.npy", [](const fs::path& f) { poke<int64_t>(f, 0, 99); })
                .find("node_label.npy row 0"),
            std::string::npos);
  // orig_nid no longer a bijection.
  EXPECT_NE(errors_after(2, "orig_nid.npy",
                         [&](const fs::path& f) {
                           const Array a = read_npy(tmp / "out" / "part0" / "orig_nid.npy");
                           poke<int64_t>(f, 0, a.data<int64_t>()[0]);
                         })
                .find("not a bijection"),
            std::string::npos);
  // An edge rewired to another source.
  const std::string rewired = errors_after(0, "indices.npy", [&](const fs::path& f) {
    // Rewire the last in-edge of some node to the last local node (the row stays sorted).
    const Array ptr = read_npy(tmp / "out" / "part0" / "indptr.npy");
    const Array idx = read_npy(f);
    const auto* q = ptr.data<int64_t>();
    const int64_t last_node = ptr.rows() - 2;
    for (int64_t i = 0; i + 1 < ptr.rows(); ++i)
      if (q[i + 1] > q[i] && idx.data<int64_t>()[q[i + 1] - 1] < last_node) {
        poke<int64_t>(f, q[i + 1] - 1, last_node);
        return;
      }
    FAIL() << "no row to rewire";
  });
  EXPECT_TRUE(rewired.find("the dataset's edge") != std::string::npos ||
              rewired.find("halo") != std::string::npos)
      << rewired;
  // A row out of order.
  const std::string unsorted = errors_after(2, "indices.npy", [](const fs::path& f) {
    const Array a = read_npy(f);  // row 0 has in-edges from two distinct sources
    poke<int64_t>(f, 0, a.data<int64_t>()[1]);
    poke<int64_t>(f, 1, a.data<int64_t>()[0]);
  });
  EXPECT_NE(unsorted.find("not in the original order (original source, original edge ID)"),
            std::string::npos)
      << unsorted;
  // The same without halo (sources stored as global IDs): the order is checked once every
  // partition's original IDs are known. Swapping two sources (with their original edge IDs)
  // keeps every edge's endpoints consistent, so only the order check can object.
  {
    PartitionOptions po;
    po.halo_hops = 0;
    write(ds, tmp / "out0", 3, true, po);
    const fs::path cfg = tmp / "out0" / "g.json";
    for (const char* file : {"indices.npy", "orig_eid.npy", "edge_weight.npy"}) {
      const fs::path f = tmp / "out0" / "part2" / file;
      Array a = read_npy(f);
      auto* rows = static_cast<uint8_t*>(a.raw_mut());
      std::swap_ranges(rows, rows + a.row_bytes(), rows + a.row_bytes());
      write_npy(f, a);
      reseal(cfg, 2, file);
    }
    const ValidationReport r = validate_partitions(cfg, &ds);
    EXPECT_NE(all_errors(r).find("are not in the original order (original source, original "
                                 "edge ID)"),
              std::string::npos)
        << all_errors(r);
  }
  // Rows whose edge IDs interleave: row A's last two entries swapped, and A's last edge ID
  // traded with the first of the next row B, so that each row's IDs still increase and no two
  // consecutive IDs of one row are out of order; only "consecutive IDs in a row" catches it.
  {
    PartitionOptions po;
    po.halo_hops = 0;
    write(ds, tmp / "out1", 3, true, po);
    const fs::path cfg = tmp / "out1" / "g.json", dir = tmp / "out1" / "part2";
    const Array indptr = read_npy(dir / "indptr.npy");
    Array indices = read_npy(dir / "indices.npy"), oeid = read_npy(dir / "orig_eid.npy"),
          eid = read_npy(dir / "eid.npy");
    const int64_t* q = indptr.data<int64_t>();
    int64_t a = 0;
    while (a + 2 < indptr.rows() && (q[a + 1] - q[a] < 2 || q[a + 2] == q[a + 1])) {
      ++a;
    }
    ASSERT_LT(a + 2, indptr.rows()) << "no row of two entries followed by a non-empty row";
    const int64_t last = q[a + 1] - 1;  // A's last entry; B's first is last + 1
    std::swap(indices.mut_data<int64_t>()[last - 1], indices.mut_data<int64_t>()[last]);
    std::swap(oeid.mut_data<int64_t>()[last - 1], oeid.mut_data<int64_t>()[last]);
    std::swap(eid.mut_data<int64_t>()[last], eid.mut_data<int64_t>()[last + 1]);
    for (const auto& [file, arr] : {std::pair<const char*, const Array*>{"indices.npy", &indices},
                                    {"orig_eid.npy", &oeid},
                                    {"eid.npy", &eid}}) {
      write_npy(dir / file, *arr);
      reseal(cfg, 2, file);
    }
    const ValidationReport r = validate_partitions(cfg, nullptr);
    EXPECT_NE(all_errors(r).find("is not consecutive"), std::string::npos) << all_errors(r);
  }
  // A halo node dropped from the list (nid entry of a halo node changed to an owned node).
  const std::string halo =
      errors_after(1, "inner_edge.npy", [](const fs::path& f) { poke<uint8_t>(f, 0, 0); });
  EXPECT_NE(halo.find("inner_edge.npy[0] is false"), std::string::npos) << halo;
}

}  // namespace
}  // namespace tessera::test
