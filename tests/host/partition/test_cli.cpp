// SPDX-License-Identifier: Apache-2.0
// The `tessera partition` and `tessera validate` commands (skipped if the tool is not built).
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int rc;
  std::string out;
};

CmdResult run(const std::string& args) {
  const std::string cmd = std::string(TESSERA_TOOL) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  CmdResult r{-1, ""};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(TESSERA_TOOL)) GTEST_SKIP() << "tessera tool not built: " << TESSERA_TOOL;
  }
};

TEST_F(Cli, PartitionCoraThenValidate) {
  TempDir tmp;
  const std::string cora = dataset("cora").string();
  const fs::path out = tmp / "out";
  CmdResult r =
      run(fmt::format("partition --input {} --parts 4 --method metis --balance-mask train_mask "
                      "--halo-hops 1 --out {} --name cora --stats-json {}",
                      cora, out.string(), (tmp / "stats.json").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("symmetrizing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("edge cut:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("METIS"), std::string::npos) << r.out;  // phase line on stderr
  nlohmann::json st;
  std::ifstream(tmp / "stats.json") >> st;
  EXPECT_EQ(st["num_parts"], 4);
  EXPECT_EQ(st["num_edges"], 10556);
  EXPECT_GT(st["edge_cut"].get<int64_t>(), 0);
  EXPECT_EQ(st["parts"].size(), 4u);
  EXPECT_TRUE(st["balance"].contains("train_mask"));
  EXPECT_GT(st["peak_rss_bytes"].get<int64_t>(), 0);
  // Node arrays of data/cora: uint8 features, int64 labels, three bool masks.
  EXPECT_EQ(st["feature_bytes"].get<int64_t>(), 2708 * (1433 + 8 + 3));
  bool has_metis = false;
  for (const auto& ph : st["phases"])
    has_metis |= ph["name"] == "METIS";
  EXPECT_TRUE(has_metis);

  r = run(fmt::format("validate {} --dataset {}", (out / "cora.json").string(), cora));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.rfind("OK", 0), 0u) << r.out;

  // Exists without --overwrite: refused, output untouched.
  r = run(fmt::format("partition -i {} -k 2 --out {} --name cora -q", cora, out.string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;

  // A corrupted file: validate exits non-zero naming the partition and file.
  {
    std::fstream io(out / "part2" / "nid.npy", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-1, std::ios::end);
    io.put('\x55');
  }
  r = run(fmt::format("validate {}", (out / "cora.json").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("part2/nid.npy has checksum"), std::string::npos) << r.out;
}

// --node-order degree: a valid partitioning whose parts number their nodes by in-degree.
TEST_F(Cli, PartitionByDegreeOrderValidates) {
  TempDir tmp;
  const std::string cora = dataset("cora").string();
  const fs::path out = tmp / "out";
  CmdResult r = run(fmt::format("partition -i {} -k 3 --node-order degree --out {} --name c -q",
                                cora, out.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  const PartitionConfig c = load_partition_config(out / "c.json");
  EXPECT_EQ(c.node_order, "degree");
  int64_t inner_checked = 0;
  for (int64_t p = 0; p < 3; ++p) {
    const LocalPartition L = load_partition(c, p);
    const int64_t* indptr = L.indptr.data<int64_t>();
    for (int64_t v = 1; v < L.num_inner_nodes; ++v, ++inner_checked)
      EXPECT_GE(indptr[v] - indptr[v - 1], indptr[v + 1] - indptr[v]) << "part " << p << " " << v;
  }
  EXPECT_GT(inner_checked, 2000);
  r = run(fmt::format("validate {} --dataset {}", (out / "c.json").string(), cora));
  EXPECT_EQ(r.rc, 0) << r.out;
  // The validator holds the parts to the order the config claims.
  nlohmann::json cj;
  std::ifstream(out / "c.json") >> cj;
  cj["node_order"] = "original";
  std::ofstream(out / "c.json") << cj.dump(1);
  r = run(fmt::format("validate {}", (out / "c.json").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("are out of node_order \"original\""), std::string::npos) << r.out;
  // Degree order is also the default.
  r = run(fmt::format("partition -i {} -k 3 --out {} --name c -q", cora, (tmp / "dflt").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(load_partition_config(tmp / "dflt" / "c.json").node_order, "degree");
  r = run(fmt::format("partition -i {} -k 2 --node-order rcmk --out {} -q", cora,
                      (tmp / "bad").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--node-order"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "bad"));
}

// --low-memory: the CSR goes to a temporary file while METIS runs; the output is the same.
TEST_F(Cli, LowMemoryWritesTheSamePartitions) {
  TempDir tmp;
  const std::string cora = dataset("cora").string();
  for (const char* mode : {"", "--low-memory"}) {
    const fs::path out = tmp / (*mode ? "low" : "plain");
    const CmdResult r =
        run(fmt::format("partition -i {} -k 4 --halo-hops 2 {} --out {} --name c "
                        "-q --stats-json {}.stats",
                        cora, mode, out.string(), out.string()));
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  nlohmann::json plain, low;
  std::ifstream(tmp / "plain.stats") >> plain;
  std::ifstream(tmp / "low.stats") >> low;
  std::vector<std::string> names;
  for (const auto& ph : low["phases"])
    names.push_back(ph["name"]);
  EXPECT_NE(std::find(names.begin(), names.end(), "spill CSR"), names.end());
  EXPECT_EQ(low["edge_cut"], plain["edge_cut"]);
  const PartitionConfig a = load_partition_config(tmp / "plain" / "c.json");
  const PartitionConfig b = load_partition_config(tmp / "low" / "c.json");
  EXPECT_EQ(a.num_edges, b.num_edges);
  for (size_t p = 0; p < a.parts.size(); ++p)
    for (size_t f = 0; f < a.parts[p].files.size(); ++f)
      EXPECT_EQ(a.parts[p].files[f].crc32, b.parts[p].files[f].crc32) << a.parts[p].files[f].name;
  const CmdResult v =
      run(fmt::format("validate {} --dataset {}", (tmp / "low" / "c.json").string(), cora));
  EXPECT_EQ(v.rc, 0) << v.out;
}

// `tessera bench sample` end to end on a small R-MAT graph: the ratio comes from alternating
// rounds (the fastest of each side), and the JSON holds every figure the report prints.
TEST_F(Cli, BenchSampleReportsItsFigures) {
  TempDir tmp;
  const fs::path js = tmp / "new" / "sample.json";  // its folder is made
  CmdResult r = run(fmt::format(
      "bench sample --graph rmat:12,8 --fanouts 5,5 --batch-size 64 --threads 1 --batches 4 "
      "--ref-batches 3 --ref-repeats 2 --json {}",
      js.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  // Report paths that cannot be written fail before the run, not after it.
  std::ofstream(tmp / "file") << "";
  for (const auto& [flag, path, says] :
       {std::tuple{"--json", tmp.path(), "is a folder, not a file"},
        std::tuple{"--results", tmp / "file", "exists and is not a folder"}}) {
    const CmdResult bad =
        run(fmt::format("bench sample --graph rmat:12,8 --batches 4 {} {}", flag, path.string()));
    EXPECT_NE(bad.rc, 0);
    EXPECT_NE(bad.out.find(fmt::format("{} {}: {}", flag, path.string(), says)), std::string::npos)
        << bad.out;
    EXPECT_EQ(bad.out.find("paired rounds"), std::string::npos) << "it ran first: " << bad.out;
  }
  EXPECT_NE(r.out.find("median of 2 paired rounds"), std::string::npos) << r.out;
  nlohmann::json j;
  std::ifstream(js) >> j;
  EXPECT_EQ(j["graph"]["adjacency_copy_bytes_per_edge"], 8);  // 32-bit IDs: packed
  EXPECT_EQ(j["reference"]["batches"], 3);
  EXPECT_EQ(j["reference"]["repeats"], 2);
  ASSERT_EQ(j["reference"]["round_ratios"].size(), 2u);
  for (const auto& x : j["reference"]["round_ratios"])
    EXPECT_GT(x.get<double>(), 0);
  EXPECT_GT(j["reference"]["sampled_edges"].get<int64_t>(), 0);
  EXPECT_GT(j["tessera"]["sampled_edges"].get<int64_t>(), 0);
  // The ratio is the median of the paired rounds (of two: their mean).
  const double r0 = j["reference"]["round_ratios"][0], r1 = j["reference"]["round_ratios"][1];
  EXPECT_DOUBLE_EQ(j["ratio_per_core"].get<double>(), 0.5 * (r0 + r1));
  EXPECT_GT(j["ratio_fastest_rounds"].get<double>(), 0);
  EXPECT_EQ(j["graph"]["node_order"], "stored");
  // Fanouts that sample nothing leave nothing to time: refused before the run.
  const CmdResult zeros = run("bench sample --graph rmat:10,8 --batches 2 --fanouts 0,0");
  EXPECT_NE(zeros.rc, 0);
  EXPECT_NE(zeros.out.find("every fanout in '0,0' is 0"), std::string::npos) << zeros.out;

  // --order degree samples the same graph renumbered: same size, same kind of batches.
  r = run(fmt::format(
      "bench sample --graph rmat:12,8 --fanouts 5,5 --batch-size 64 --threads 1 --batches 4 "
      "--ref-batches 3 --ref-repeats 2 --order degree --json {} --results {}",
      js.string(), (tmp / "results").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("degree order"), std::string::npos) << r.out;  // its phase line
  // --results names the folder by every setting that differs from the reference configuration.
  const fs::path folder = tmp / "results" / "sample-cpu-t1-degree-fanouts-5-5-batch-64-rmat-12-8";
  ASSERT_TRUE(fs::is_directory(folder)) << r.out;
  int written = 0;
  for (const auto& e : fs::directory_iterator(folder)) {
    written += e.path().extension() == ".json" ? 1 : 0;
  }
  EXPECT_EQ(written, 1);
  nlohmann::json d;
  std::ifstream(js) >> d;
  EXPECT_EQ(d["graph"]["node_order"], "degree");
  EXPECT_EQ(d["graph"]["num_edges"], j["graph"]["num_edges"]);
  EXPECT_GT(d["tessera"]["sampled_edges"].get<int64_t>(), 0);
  r = run("bench sample --graph rmat:10,8 --order rcmk");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--order"), std::string::npos) << r.out;

  r = run("bench sample --graph rmat:10,8 --ref-repeats 0");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--ref-repeats"), std::string::npos) << r.out;
  // The GPU run's own options are checked before anything needs a GPU (or a CUDA build).
  r = run("bench sample --graph rmat:10,8 --device cuda --streams 0");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--streams 0: expected 1 to 64"), std::string::npos) << r.out;
  // A thread count that cannot start (it aborted the process) and sizes that overflow (a
  // segfault) are refused by name.
  r = run("bench sample --graph rmat:10,8 --threads 100000");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--threads 100000 is outside [1, "), std::string::npos) << r.out;
  // Options that were ignored or wrapped are refused by name.
  r = run("bench sample --graph rmat:10,8 --ref-batches -4");
  EXPECT_NE(r.out.find("--ref-batches -4 < 0"), std::string::npos) << r.out;
  r = run("bench sample --graph rmat:10,8 --seed 99999999999");
  EXPECT_NE(r.out.find("--seed 99999999999 out of range"), std::string::npos) << r.out;
  r = run("generate rmat --scale 4 --edge-factor 2 --seed -1 --out /nonexistent-never-made");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--seed: must be >= 0, got -1"), std::string::npos) << r.out;
  // Sizes that cannot be written are refused before anything is: features past a file's size
  // (it failed after writing the edges, naming no option), a dataset larger than the disk.
  {
    TempDir tmp;
    r =
        run(fmt::format("generate rmat --scale 0 --edge-factor 1 --feat-dim 4611686018427387904 "
                        "--out {}",
                        (tmp / "g").string()));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("--feat-dim 4611686018427387904: 1 nodes of"), std::string::npos) << r.out;
    r = run(
        fmt::format("generate rmat --scale 40 --edge-factor 16 --out {}", (tmp / "g").string()));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("the dataset needs 256.00 TiB but its file system has"), std::string::npos)
        << r.out;
    EXPECT_TRUE(fs::is_empty(tmp.path())) << "nothing written";
  }
  // The ranks' command given without `--`: its options are not launch's, and the error says
  // where the command goes.
  r = run("launch --nproc-per-node 1 true -x");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("put the command the ranks run after `--`"), std::string::npos) << r.out;
  // Options only the GPU run reads are refused on a CPU run, not silently ignored.
  r = run("bench sample --graph rmat:10,8 --streams 8 --no-cuda-graph");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--streams, --no-cuda-graph tune(s) the GPU run only"), std::string::npos)
      << r.out;
  r = run("bench sample --graph rmat:10,8 --device cuda --threads 2 --ref-repeats 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--threads, --ref-repeats tune(s) the CPU run only"), std::string::npos)
      << r.out;
  r = run("bench gather --placement uva --row-bytes 64 --iters 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--placement tune(s) the GPU run only"), std::string::npos) << r.out;
  r = run("bench gather --row-bytes 64 --rows 4611686018427387904 --batch 1 --iters 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--rows 4611686018427387904 / --batch 1 of 64-byte rows"), std::string::npos)
      << r.out;
}

// Empty inputs and more partitions than nodes are refused with one clear message unless asked
// for (--allow-empty); out-of-range options are refused by name before the input is read.
TEST_F(Cli, EmptyInputsAndOutOfRangeOptionsAreRefused) {
  TempDir tmp;
  const std::string cora = dataset("cora").string();
  const std::string out = (tmp / "o").string();
  std::ofstream(tmp / "comments.txt") << "# FromNodeId\tToNodeId\n# nothing else\n";
  std::ofstream(tmp / "empty.txt").flush();
  {
    // A 0-byte .gz file (gzip reads it as an empty stream).
    std::ofstream(tmp / "zero.txt.gz").flush();
  }
  for (const char* f : {"comments.txt", "empty.txt", "zero.txt.gz"}) {
    const std::string in = (tmp / f).string();
    CmdResult r = run(fmt::format("partition -i {} -k 2 --out {} -q", in, out));
    EXPECT_NE(r.rc, 0) << f;
    EXPECT_NE(r.out.find(in + ": the graph has no nodes"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp / "o")) << f;
    r = run(fmt::format("partition -i {} -k 2 --allow-empty --out {} -q", in, out));
    EXPECT_EQ(r.rc, 0) << r.out;
    fs::remove_all(tmp / "o");
  }
  CmdResult r = run(fmt::format("partition -i {} -k 1000000000 --out {} -q", cora, out));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--parts 1000000000 is more than the 2708 nodes"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o"));
  for (const char* u : {"-5", "0", "100001"}) {
    r = run(fmt::format("partition -i {} -k 2 --ufactor {} --out {} -q", cora, u, out));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find(fmt::format("--ufactor must be in [1, 100000] (allowed imbalance in "
                                     "1/1000), or unset for METIS's default, got {}",
                                     u)),
              std::string::npos)
        << r.out;
  }
  r = run(fmt::format("partition -i {} -k 2 --seed -5 --out {} -q", cora, out));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--seed must be >= 0"), std::string::npos) << r.out;
  // METIS's seed is 32 bits: 4294967303 gave seed 7's partitioning and was recorded as given.
  r = run(fmt::format("partition -i {} -k 2 --seed 4294967303 --out {} -q", cora, out));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--seed must be below 2^31 with --method metis"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o"));
}

TEST_F(Cli, BadArguments) {
  TempDir tmp;
  const std::string cora = dataset("cora").string();
  CmdResult r =
      run(fmt::format("partition -i {} --parts 0 --out {} -q", cora, (tmp / "o").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--parts must be >= 1, got 0"), std::string::npos) << r.out;
  r = run(fmt::format("partition -i {} --parts 2 --method random --balance-edges --out {} -q", cora,
                      (tmp / "o").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("need --method metis"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o"));
  r = run(fmt::format("partition -i {} --parts 2 --method random --low-memory --out {} -q", cora,
                      (tmp / "o").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--low-memory applies to --method metis"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o"));
  r = run(fmt::format("partition -i {} -k 2 --method random --ufactor 50 --out {} -q", cora,
                      (tmp / "o").string()));
  EXPECT_NE(r.out.find("--ufactor is METIS's imbalance tolerance"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o"));
  r = run(fmt::format("validate {} --max-errors -1", (tmp / "missing.json").string()));
  EXPECT_NE(r.out.find("--max-errors must be >= 0, got -1"), std::string::npos) << r.out;
  r = run(fmt::format("validate {}", (tmp / "missing.json").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("partition config not found"), std::string::npos) << r.out;
  // Random with --no-symmetrize keeps the 5278 stored edges.
  r =
      run(fmt::format("partition -i {} -k 3 --method random --no-symmetrize --halo-hops 0 --out {} "
                      "--name c -q",
                      cora, (tmp / "o").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("2708 nodes, 5278 edges into 3 parts (random, halo 0)"), std::string::npos)
      << r.out;
  r = run(fmt::format("validate {} --dataset {}", (tmp / "o" / "c.json").string(), cora));
  EXPECT_EQ(r.rc, 0) << r.out;
  // Outputs are checked before the input is read: an existing --out, and a --stats-json that is
  // a folder (it failed only after the partitioning was committed, leaving it behind).
  r = run(fmt::format("partition -i {} -k 2 --out {}", cora, (tmp / "o").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("already exists (pass --overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nodes,"), std::string::npos) << r.out;  // nothing was read
  r = run(fmt::format("partition -i {} -k 2 --out {} --stats-json {}", cora, (tmp / "o2").string(),
                      tmp.path().string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--stats-json " + tmp.path().string() + ": is a folder"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(tmp / "o2"));
  // A --stats-json in a folder still to be made is made (it failed 'cannot open for writing').
  r = run(fmt::format("partition -i {} -k 2 --out {} --stats-json {} -q", cora,
                      (tmp / "o3").string(), (tmp / "new" / "s.json").string()));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fs::exists(tmp / "new" / "s.json"));
  // One inside --out is refused before anything is read: written after the partitioning, it
  // replaced the config when named like it (cora.json), and --overwrite replaces the folder.
  const auto read_file = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string config = (tmp / "o3" / "cora.json").string(), before = read_file(config);
  for (const fs::path& stats : {tmp / "o3" / "cora.json", tmp / "o3" / "." / "s.json"}) {
    r = run(fmt::format("partition -i {} -k 2 --out {} --stats-json {} --overwrite -q", cora,
                        (tmp / "o3").string(), stats.string()));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find(": inside --out "), std::string::npos) << r.out;
  }
  EXPECT_EQ(read_file(config), before);
}

// --overwrite never destroys what the command did not write: generate gets partition's guard.
TEST_F(Cli, OverwriteRefusesAFolderHoldingForeignFiles) {
  TempDir tmp;
  const fs::path home = tmp / "home";
  fs::create_directories(home / "photos");
  std::ofstream(home / "notes.txt") << "mine";
  CmdResult r = run(
      fmt::format("generate rmat --scale 6 --edge-factor 4 --out {} --overwrite", home.string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("refusing to overwrite"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(home / "notes.txt"));
  EXPECT_TRUE(fs::exists(home / "photos"));
  // A folder generate wrote is replaced.
  const fs::path data = tmp / "rmat";
  r = run(
      fmt::format("generate rmat --scale 6 --edge-factor 4 --feat-dim 3 --out {}", data.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run(
      fmt::format("generate rmat --scale 7 --edge-factor 4 --out {} --overwrite", data.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(data / "feat.npy"));
  EXPECT_EQ(read_npy_header(data / "edge_index.npy").shape[1], 128 * 4);  // scale 7

  // partition: a folder of its own output is replaced; a user's JSON file beside the config, or
  // a file of theirs in a part<N>/ folder, is not taken for output (both were deleted).
  const fs::path parts = tmp / "parts";
  const auto partition = [&] {
    return run(fmt::format("partition -i {} -k 2 --method random --out {} --overwrite -q",
                           data.string(), parts.string()));
  };
  ASSERT_EQ(partition().rc, 0);
  ASSERT_EQ(partition().rc, 0) << "its own output is replaced";
  std::ofstream(parts / "train_config.json") << "{\"lr\": 0.01}";
  r = partition();
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("holds 'train_config.json'"), std::string::npos) << r.out;
  fs::remove(parts / "train_config.json");
  fs::create_directories(parts / "part7");
  std::ofstream(parts / "part7" / "notes.txt") << "mine";
  r = partition();
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("holds 'part7'"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(parts / "part7" / "notes.txt"));
}

// Stored edges of `tessera partition -i input flags` (from --stats-json); validates the result
// against the input read with the config's build options.
int64_t partitioned_edges(const fs::path& tmp, const std::string& input, const std::string& flags) {
  const fs::path out = tmp / "parts", stats = tmp / "stats.json";
  const CmdResult r =
      run(fmt::format("partition -i {} -k 2 --method random {} --overwrite --out {} "
                      "--name g --stats-json {}",
                      input, flags, out.string(), stats.string()));
  EXPECT_EQ(r.rc, 0) << r.out;
  const CmdResult v =
      run(fmt::format("validate {} --dataset {}", (out / "g.json").string(), input));
  EXPECT_EQ(v.rc, 0) << v.out;
  nlohmann::json st;
  std::ifstream(stats) >> st;
  return st.value("num_edges", int64_t{-1});
}

// An input that does not say whether its edges are directed (OGB's folders) is kept as stored,
// and the user is told so (Cora in OGB's layout has each pair once: half the edges of data/cora).
TEST_F(Cli, InputOfUnknownDirectionIsKeptAndSaysSo) {
  TempDir tmp;
  const CmdResult r = run(fmt::format("partition -i {} -k 1 --method random --out {}",
                                      dataset("cora-ogb").string(), (tmp / "p").string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("does not say whether its edges are directed: kept as stored"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(load_partition_config(tmp / "p" / "cora-ogb.json").num_edges, 5278);
}

// What `tessera generate rmat --symmetrize` writes (meta.json "symmetrized": true) is stored as
// written, one edge per stored row, whether or not --symmetrize is given.
TEST_F(Cli, SymmetrizedDatasetIsStoredOnce) {
  TempDir tmp;
  const std::string data = (tmp / "rmat").string();
  const CmdResult g =
      run(fmt::format("generate rmat --scale 10 --edge-factor 8 --symmetrize --out {}", data));
  ASSERT_EQ(g.rc, 0) << g.out;
  for (const char* flags : {"", "--symmetrize", "--no-symmetrize"})
    EXPECT_EQ(partitioned_edges(tmp.path(), data, flags), 2 * 8 * 1024) << "flags: " << flags;
  const CmdResult r =
      run(fmt::format("partition -i {} -k 2 --method random --symmetrize --out {} "
                      "--overwrite",
                      data, (tmp / "p").string()));
  EXPECT_NE(r.out.find("both directions stored: not adding reverse edges"), std::string::npos)
      << r.out;
}

// A directed input that lists both (u, v) and (v, u): --symmetrize stores each pair once per
// direction and adds only the reverses the input lacks.
TEST_F(Cli, SymmetrizeStoresAPairOncePerDirection) {
  TempDir tmp;
  const fs::path d = tmp / "directed";
  fs::create_directories(d);
  // 0->1, 1->0, 1->2, 2->2, 3->0: symmetrized, 0->1, 1->0, 1->2, 2->1, 2->2, 3->0, 0->3.
  const std::vector<int64_t> ei = {0, 1, 1, 2, 3, 1, 0, 2, 2, 0};
  write_npy(d / "edge_index.npy", DType::kInt64, {2, 5}, ei.data());
  std::ofstream(d / "meta.json") << R"({"num_nodes": 4, "directed": true})";
  EXPECT_EQ(partitioned_edges(tmp.path(), d.string(), ""), 5);
  EXPECT_EQ(partitioned_edges(tmp.path(), d.string(), "--symmetrize"), 7);
  EXPECT_EQ(partitioned_edges(tmp.path(), d.string(), "--symmetrize --dedup --drop-self-loops"), 6);
}

}  // namespace
}  // namespace tessera::test
