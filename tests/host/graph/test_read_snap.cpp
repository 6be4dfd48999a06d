// SPDX-License-Identifier: Apache-2.0
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera_test.hpp"
#include "text_files.hpp"

namespace tessera {
namespace {

std::vector<int64_t> as_vec(const Array& a) {
  return a.to_int64_vector("array");
}

TEST(ReadSnap, EgoTwitter) {
  const auto path = test::dataset("snap/ego-Twitter.txt.gz");
  EXPECT_EQ(detect_format(path), Format::kSnap);
  Dataset ds = read_dataset(path, Format::kAuto, {});
  EXPECT_EQ(ds.format, "snap");
  EXPECT_EQ(ds.name, "ego-Twitter");
  EXPECT_EQ(ds.num_nodes, 81306);
  EXPECT_EQ(ds.num_input_edges, 1342310);
  EXPECT_EQ(ds.graph.num_edges(), 1342310);
  EXPECT_EQ(ds.meta.value("directed", true), false);
  // IDs were already 0..N-1: the mapping is the identity.
  const auto orig = as_vec(ds.ndata.at("orig_id"));
  ASSERT_EQ(orig.size(), 81306u);
  for (int64_t i = 0; i < 81306; ++i)
    ASSERT_EQ(orig[i], i);
  // First data line is "0\t1": node 1 has node 0 as an in-neighbor.
  const Graph& g = ds.graph;
  EXPECT_EQ(g.indices[g.indptr[1]], 0);
}

TEST(ReadSnap, PeakMemoryWithinThreeTimesTheCsr) {
  // The memory contract: reading and building stay within about 3x the final CSR.
  if (!reset_peak_rss()) GTEST_SKIP() << "cannot reset the peak-RSS counter here";
  const int64_t before = current_rss_bytes();
  Dataset ds = read_dataset(test::dataset("snap/ego-Twitter.txt.gz"), Format::kSnap, {});
  const int64_t grew = peak_rss_bytes() - before;
  EXPECT_LT(grew, 3 * ds.graph.nbytes())
      << "peak grew by " << grew << " B for a CSR of " << ds.graph.nbytes() << " B";
}

TEST(ReadSnap, SlashdotSymmetrized) {
  ReadOptions o;
  o.build.symmetrize = true;
  Dataset ds = read_dataset(test::dataset("snap/soc-Slashdot0902.txt.gz"), Format::kSnap, o);
  EXPECT_EQ(ds.num_nodes, 82168);
  EXPECT_EQ(ds.num_input_edges, 948464);
  // 810165 of the input edges have their reverse in the input already (checked with a set in
  // Python): only the 138299 others gain one.
  EXPECT_EQ(ds.graph.num_edges(), 948464 + 138299);
  EXPECT_EQ(ds.meta.value("directed", false), true);
}

TEST(ReadSnap, SparseIdsAreRenumberedInSortedOrder) {
  test::TempDir tmp;
  const auto p = tmp / "sparse.txt";
  // Tabs, runs of spaces, CRLF, a blank line, a comment in the middle, no final newline.
  test::write_text(p,
                   "# Directed graph: toy\r\n# FromNodeId\tToNodeId\r\n"
                   "100\t7\r\n7  100000000000\n\n# mid comment\n  100000000000 \t 100\n5 7");
  Dataset ds = read_snap(p, {});
  EXPECT_EQ(ds.edges.num_nodes, 4);
  EXPECT_EQ(as_vec(ds.ndata.at("orig_id")), (std::vector<int64_t>{5, 7, 100, 100000000000}));
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{2, 1, 3, 0}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{1, 3, 2, 1}));
  // The dense-rank path (largest ID small) gives the same numbering.
  test::write_text(p, "10 3\n3 20\n20 10\n");
  ds = read_snap(p, {});
  EXPECT_EQ(as_vec(ds.ndata.at("orig_id")), (std::vector<int64_t>{3, 10, 20}));
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{0, 2, 1}));
}

TEST(ReadSnap, HeaderNodeCountKeepsIsolatedNodes) {
  test::TempDir tmp;
  const auto p = tmp / "iso.txt";
  test::write_text(p, "# Nodes: 6 Edges: 2\n0 1\n1 3\n");
  Dataset ds = read_dataset(p, Format::kSnap, {});
  EXPECT_EQ(ds.num_nodes, 6);
  EXPECT_EQ(ds.graph.degree(5), 0);
  EXPECT_EQ(as_vec(ds.ndata.at("orig_id")), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ReadSnap, GzipDetectedByMagicNotName) {
  test::TempDir tmp;
  const auto p = tmp / "edges.txt";  // gzip content, no .gz suffix
  test::write_gz(p, "# c\n1 2\n2 3\n3 1\n");
  Dataset ds = read_dataset(p, Format::kAuto, {});
  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.num_input_edges, 3);
  EXPECT_EQ(as_vec(ds.ndata.at("orig_id")), (std::vector<int64_t>{1, 2, 3}));
}

TEST(ReadSnap, LongLinesAcrossChunksAndManyEdges) {
  // Enough edges to span several 1 MiB decompression chunks, with geometric growth.
  test::TempDir tmp;
  const auto p = tmp / "big.txt.gz";
  std::string text;
  const int64_t e = 300000;
  for (int64_t i = 0; i < e; ++i)
    text += std::to_string(i * 7919 % 100003) + "\t" + std::to_string((i * 31 + 5) % 100003) + "\n";
  test::write_gz(p, text);
  Dataset ds = read_snap(p, {});
  ASSERT_EQ(ds.edges.num_edges(), e);
  EXPECT_EQ(ds.edges.src[12345], 12345 * 7919 % 100003);  // dense IDs: identity
  EXPECT_EQ(ds.edges.dst[e - 1], ((e - 1) * 31 + 5) % 100003);
}

TEST(ReadSnap, RejectsMalformedLines) {
  test::TempDir tmp;
  const auto p = tmp / "bad.txt";
  const std::string f = p.string();
  test::write_text(p, "# ok\n1 2\n1 x\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, f + ":3: node ID 'x' is not an integer");
  test::write_text(p, "1 2\n3\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, f + ":2: expected two node IDs");
  test::write_text(p, "1 2 3\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, f + ":1: expected two node IDs");
  test::write_text(p, "1 2\n-4 2\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), IndexError, f + ":2: negative node ID -4");
  test::write_text(p, "1 2.5\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, "'2.5' is not an integer");
  test::write_text(p, "1 99999999999999999999\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, "is not an integer");
  TESSERA_EXPECT_THROW_MSG(read_snap(tmp / "missing.txt", {}), IOError, "no such file");
}

TEST(ReadSnap, RejectsHeaderCountMismatch) {
  test::TempDir tmp;
  const auto p = tmp / "hdr.txt";
  test::write_text(p, "# Nodes: 3 Edges: 5\n0 1\n1 2\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError,
                           p.string() + ": header (line 1) says Edges: 5 but the file has 2");
  test::write_text(p, "# Nodes: 2 Edges: 2\n10 11\n11 12\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, "says Nodes: 2 but the edges name 3");
  // A node count no edge list of this size could mean is refused, not allocated.
  test::write_text(p, "# Nodes: 4444444444444444440 Edges: 1\n0 1\n");
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError,
                           "says Nodes: 4444444444444444440 but the 1 edge lines name IDs up to 1");
  test::write_text(p, "# Nodes: 100 Edges: 1\n0 1\n");
  EXPECT_EQ(read_snap(p, {}).edges.num_nodes, 100);
}

// A truncated stream smaller than one read chunk: the lines before the cut are parsed, and the
// error names the last of them, not line 0.
TEST(ReadSnap, TruncatedGzipNamesTheLastLineRead) {
  test::TempDir tmp;
  const auto p = tmp / "cut.txt.gz";
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    text += std::to_string(i) + " " + std::to_string(i + 1) + "\n";
  }
  test::write_gz(p, text);
  test::truncate_file(p, std::filesystem::file_size(p) / 2);
  std::string msg;
  try {
    read_snap(p, {});
  } catch (const ValueError& e) {
    msg = e.what();
  }
  const std::string key = "unexpected end of file after line ";
  const size_t at = msg.find(key);
  ASSERT_NE(at, std::string::npos) << msg;
  const int64_t line = std::stoll(msg.substr(at + key.size()));
  EXPECT_GT(line, 1000) << msg;
  EXPECT_LT(line, 20000) << msg;
}

TEST(ReadSnap, RejectsTruncatedAndCorruptGzip) {
  test::TempDir tmp;
  const auto p = tmp / "cut.txt.gz";
  std::string text;
  for (int i = 0; i < 200000; ++i)
    text += std::to_string(i) + "\t" + std::to_string(i * 13 % 99991) + "\n";
  test::write_gz(p, text);
  const auto full = std::filesystem::file_size(p);
  test::truncate_file(p, full / 2);
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, p.string() + ": truncated gzip stream");
  // Lose only the 8-byte trailer (CRC and length): still truncated, never silently accepted.
  test::write_gz(p, text);
  test::truncate_file(p, full - 4);
  TESSERA_EXPECT_THROW_MSG(read_snap(p, {}), ValueError, "gzip");
  // Flip bytes inside the compressed data.
  test::write_gz(p, text);
  {
    std::fstream io(p, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(full / 3));
    const std::string junk(64, '\x55');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  try {
    read_snap(p, {});
    ADD_FAILURE() << "corrupt gzip accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  }
}

TEST(ReadSnap, EmptyFileIsAnEmptyGraph) {
  test::TempDir tmp;
  const auto p = tmp / "empty.txt";
  test::write_text(p, "# nothing\n");
  Dataset ds = read_dataset(p, Format::kSnap, {});
  EXPECT_EQ(ds.num_nodes, 0);
  EXPECT_EQ(ds.graph.num_edges(), 0);
}

}  // namespace
}  // namespace tessera
