// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera_test.hpp"
#include "text_files.hpp"

namespace tessera {
namespace {

// True if the CSC equals its transpose (every edge has its reverse, with multiplicity).
bool symmetric(const Graph& g) {
  const Graph t = transpose(g);
  return t.indptr == g.indptr && t.indices == g.indices;
}

TEST(ReadMetis, Mdual) {
  const auto path = test::dataset("metis/mdual.graph.gz");
  EXPECT_EQ(detect_format(path), Format::kMetis);
  Dataset ds = read_dataset(path, Format::kAuto, {});
  EXPECT_EQ(ds.format, "metis");
  EXPECT_EQ(ds.name, "mdual");
  EXPECT_EQ(ds.num_nodes, 258569);
  EXPECT_EQ(ds.num_input_edges, 2 * 513132);
  EXPECT_EQ(ds.meta.at("undirected_edges"), 513132);
  EXPECT_TRUE(ds.ndata.empty());
  EXPECT_TRUE(ds.edata.empty());
  EXPECT_TRUE(symmetric(ds.graph));
  // Line 2 of the file is vertex 1: "83818 60365 237973 217958" (1-based).
  const Graph& g = ds.graph;
  ASSERT_EQ(g.degree(0), 4);
  EXPECT_EQ(std::vector<int64_t>(g.indices.begin() + g.indptr[0], g.indices.begin() + g.indptr[1]),
            (std::vector<int64_t>{60364, 83817, 217957, 237972}));
}

TEST(ReadMetis, FourEltAndCopter2Headers) {
  Dataset a = read_dataset(test::dataset("metis/4elt.graph.gz"), Format::kMetis, {});
  EXPECT_EQ(a.num_nodes, 7434);
  EXPECT_EQ(a.graph.num_edges(), 2 * 43031);
  EXPECT_TRUE(symmetric(a.graph));
  Dataset b = read_dataset(test::dataset("metis/copter2.graph.gz"), Format::kMetis, {});
  EXPECT_EQ(b.num_nodes, 55476);
  EXPECT_EQ(b.graph.num_edges(), 2 * 352238);
  EXPECT_TRUE(symmetric(b.graph));
}

TEST(ReadMetis, WeightsSizesCommentsAndIsolatedVertices) {
  test::TempDir tmp;
  const auto p = tmp / "w.graph";
  // 4 vertices, 2 edges {1-2 (w 5), 2-3 (w 7)}, vertex 4 isolated; fmt 111: sizes, 2 weights,
  // edge weights.
  test::write_text(p,
                   "% a comment\n4 2 111 2\n"
                   "9 1 10 2 5\n"
                   "% between vertex lines\n"
                   "8 2 20 1 5 3 7\n"
                   "7 3 30 2 7\n"
                   "6 4 40\n");
  Dataset ds = read_metis(p, {});
  EXPECT_EQ(ds.edges.num_nodes, 4);
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{1, 0, 2, 1}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{0, 1, 1, 2}));
  const Array& vw = ds.ndata.at("node_weight");
  EXPECT_EQ(vw.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(vw.to_int64_vector("w"), (std::vector<int64_t>{1, 10, 2, 20, 3, 30, 4, 40}));
  EXPECT_EQ(ds.ndata.at("node_size").to_int64_vector("s"), (std::vector<int64_t>{9, 8, 7, 6}));
  EXPECT_EQ(ds.edata.at("edge_weight").to_int64_vector("e"), (std::vector<int64_t>{5, 5, 7, 7}));

  // fmt 1 (edge weights only) with an isolated vertex as an empty line in the middle.
  test::write_text(p, "3 1 1\n3 4\n\n1 4\n");
  ds = read_metis(p, {});
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(ds.edata.at("edge_weight").to_int64_vector("e"), (std::vector<int64_t>{4, 4}));
  EXPECT_FALSE(ds.ndata.count("node_weight"));

  // fmt 10 with ncon defaulting to 1.
  test::write_text(p, "2 1 10\n3 2\n4 1\n");
  ds = read_metis(p, {});
  EXPECT_EQ(ds.ndata.at("node_weight").shape(), (std::vector<int64_t>{2, 1}));
  Dataset fin = read_dataset(p, Format::kMetis, {});
  EXPECT_EQ(fin.graph.num_edges(), 2);
}

TEST(ReadMetis, RejectsMalformed) {
  test::TempDir tmp;
  const auto p = tmp / "bad.graph";
  const std::string f = p.string();
  test::write_text(p, "3 2\n2\n1 3\n2\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, f + ":5: extra data after the 3");
  test::write_text(p, "3 3\n2\n1 3\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           "4 adjacency entries, but the header (line 1) says m = 3");
  test::write_text(p, "3 1\n2\n1 3\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ":3: more adjacency entries than the header's 2*m = 2");
  test::write_text(p, "3 2\n2\n1 4\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), IndexError,
                           f + ":3: neighbor 4 of vertex 2 is outside [1, 3]");
  test::write_text(p, "3 2\n0\n1 3\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), IndexError, "neighbor 0 of vertex 1");
  test::write_text(p, "3 2\n-2\n1 3\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), IndexError, "neighbor -2 of vertex 1");
  test::write_text(p, "3 2\n2\n1 three\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ":3: neighbor of vertex 2 is not an integer: 'three'");
  test::write_text(p, "3 2\n2\n1 3\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           "file ends after 2 vertex lines but the header (line 1) says n = 3");
  test::write_text(p, "3 2 1\n2 1\n1 1 3\n2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ":3: neighbor 3 of vertex 2 has no edge weight");
  test::write_text(p, "3 2 11 2\n1\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "vertex 1 has 1 of its 2 weights");
  test::write_text(p, "3 two\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ":1: header field 2 is not an integer");
  test::write_text(p, "3\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "got 1 field(s)");
  test::write_text(p, "3 2 201\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "fmt field must be");
  test::write_text(p, "% only a comment\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, f + ": empty file");
  test::write_text(p, "-3 2\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "negative vertex or edge count");
  // Counts no file of this size can hold are refused before anything is sized from them.
  test::write_text(p, "1 1000000000000\n\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ":1: the header's counts (n = 1, m = 1000000000000) are more than a "
                               "file of 17 bytes can hold");
  test::write_text(p, "4000000000000 1\n2\n1\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "(n = 4000000000000, m = 1) are more");
  test::write_text(p, "2 1 10 1000\n1 2\n1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "ncon = 1000) are more than a file");
}

// Right counts, asymmetric lists: refused, naming the pair, whichever side lacks it or holds it
// a different number of times.
TEST(ReadMetis, RejectsAsymmetricAdjacency) {
  test::TempDir tmp;
  const auto p = tmp / "asym.graph";
  const std::string f = p.string();
  test::write_text(p, "3 2\n2\n3\n1 2\n");  // 1 lists 2, 2 does not list 1
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError,
                           f + ": the adjacency is not symmetric: vertex 1 lists neighbor 2 1 "
                               "time(s), vertex 2 lists 1 0 time(s)");
  test::write_text(p, "3 3\n2 2 3\n1 3\n1\n");  // 1 lists 2 twice, 2 lists 1 once
  TESSERA_EXPECT_THROW_MSG(read_metis(p, {}), ValueError, "vertex 1 lists neighbor 2 2 time(s)");
  test::write_text(p, "4 3\n\n3 4\n2 4\n3 2\n");  // a symmetric triangle, in any order
  EXPECT_EQ(read_metis(p, {}).edges.src.size(), 6u);
}

TEST(ReadMetis, GzipAndTruncated) {
  test::TempDir tmp;
  const auto p = tmp / "g.graph.gz";
  test::write_gz(p, "3 2\n2\n1 3\n2\n");
  EXPECT_EQ(detect_format(p), Format::kMetis);
  Dataset ds = read_dataset(p, Format::kAuto, {});
  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.name, "g");
  // A METIS file cut mid-way (e.g. an interrupted copy) reports the missing vertex lines.
  const auto q = tmp / "cut.graph";
  const std::string text = test::read_gz(test::dataset("metis/4elt.graph.gz"));
  ASSERT_GT(text.size(), 1000u);
  test::write_text(q, text.substr(0, text.size() / 2));
  TESSERA_EXPECT_THROW_MSG(read_metis(q, {}), ValueError, q.string() + ":");
}

}  // namespace
}  // namespace tessera
