// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera_test.hpp"
#include "text_files.hpp"

namespace tessera {
namespace {

std::vector<double> weights(const Dataset& ds) {
  const Array& a = ds.edata.at("edge_weight");
  EXPECT_EQ(a.dtype(), DType::kFloat64);
  return std::vector<double>(a.data<double>(), a.data<double>() + a.rows());
}

TEST(ReadMtx, GeneralReal) {
  test::TempDir tmp;
  const auto p = tmp / "a.mtx";
  test::write_text(p,
                   "%%MatrixMarket matrix coordinate real general\n"
                   "% comment\n"
                   "%another\n"
                   "3 3 4\n"
                   "1 2 0.5\n"
                   "2 3 -1.25e2\n"
                   "3 1 7\n"
                   "2 2 1e-3\n");
  EXPECT_EQ(detect_format(p), Format::kMtx);
  Dataset ds = read_mtx(p, {});
  EXPECT_EQ(ds.name, "a");
  EXPECT_EQ(ds.edges.num_nodes, 3);
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{0, 1, 2, 1}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{1, 2, 0, 1}));
  EXPECT_EQ(weights(ds), (std::vector<double>{0.5, -125.0, 7.0, 1e-3}));
  Dataset fin = read_dataset(p, Format::kAuto, {});
  EXPECT_EQ(fin.graph.num_edges(), 4);
  EXPECT_EQ(fin.format, "mtx");
}

TEST(ReadMtx, SymmetricPatternAddsMirrorsButNotDiagonal) {
  test::TempDir tmp;
  const auto p = tmp / "s.mtx.gz";
  test::write_gz(p,
                 "%%MatrixMarket Matrix Coordinate Pattern Symmetric\n"
                 "4 4 3\n2 1\n4 4\n4 3\n");
  EXPECT_EQ(detect_format(p), Format::kMtx);
  Dataset ds = read_dataset(p, Format::kAuto, {});
  EXPECT_EQ(ds.name, "s");
  EXPECT_EQ(ds.num_nodes, 4);
  EXPECT_EQ(ds.num_input_edges, 5);  // 2 mirrored pairs + one diagonal entry
  EXPECT_FALSE(ds.edata.count("edge_weight"));
  const Graph t = transpose(ds.graph);
  EXPECT_EQ(t.indptr, ds.graph.indptr);
  EXPECT_EQ(t.indices, ds.graph.indices);
}

TEST(ReadMtx, IntegerAndSkewSymmetric) {
  test::TempDir tmp;
  const auto p = tmp / "i.mtx";
  test::write_text(p, "%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n1 1 3\n2 1 -4\n");
  Dataset ds = read_mtx(p, {});
  EXPECT_EQ(ds.edges.src, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(ds.edges.dst, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(weights(ds), (std::vector<double>{3, -4, -4}));
  test::write_text(p, "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1.5\n");
  ds = read_mtx(p, {});
  EXPECT_EQ(weights(ds), (std::vector<double>{1.5, -1.5}));
}

TEST(ReadMtx, RejectsMalformed) {
  test::TempDir tmp;
  const auto p = tmp / "bad.mtx";
  const std::string f = p.string();
  const std::string real = "%%MatrixMarket matrix coordinate real general\n";
  test::write_text(p, real + "3 4 1\n1 1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError,
                           f + ":2: matrix is 3 x 4; only square matrices are graphs");
  test::write_text(p, "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), TypeError, f + ":1: field 'complex' is not supported");
  test::write_text(p, "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "format 'array' is not supported");
  test::write_text(p, "%%MatrixMarket matrix coordinate pattern general\n2 2 1000000000000\n1 2\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError,
                           f + ":2: the size line's 1000000000000 entries are more than a file of");
  test::write_text(p, "%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n1 1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "symmetry 'hermitian'");
  test::write_text(p, "1 2 3\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, f + ":1: not a Matrix Market banner");
  test::write_text(p, real + "3 3 3\n1 1 1\n2 2 2\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError,
                           f + ": file has 2 entries but the size line (line 2) declares nnz = 3");
  test::write_text(p, real + "3 3 1\n1 1 1\n2 2 2\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, f + ":4: more entries than the 1");
  test::write_text(p, real + "3 3 1\n4 1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), IndexError, f + ":3: entry (4, 1) is outside [1, 3]");
  test::write_text(p, real + "3 3 1\n0 1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), IndexError, "entry (0, 1) is outside");
  test::write_text(p, real + "3 3 1\n-1 1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), IndexError, "entry (-1, 1) is outside");
  test::write_text(p, real + "3 3 1\n1 1 abc\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, f + ":3: value 'abc' is not a real");
  test::write_text(p, real + "3 3 1\n1 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "entry (1, 1) has no value");
  test::write_text(p, real + "3 3 1\n1 1 2 9\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "too many fields");
  test::write_text(p, real + "3 3 1\n+-1 1 2\n");  // '+' then '-': no number, not -1
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "row index '+-1' is not an integer");
  test::write_text(p, real + "3 3 1\n1 1 +-2\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "value '+-2' is not a real number");
  test::write_text(p, real + "3 3 1\n+1 1 +2\n");  // a plain '+' still reads
  EXPECT_EQ(read_mtx(p, {}).edges.src.at(0), 0);
  test::write_text(p, real + "3 3 1\n1.5 1 2\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "row index '1.5' is not an integer");
  test::write_text(p, "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 2.5\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "value '2.5' is not an integer");
  // A size line far beyond what the entries could touch: refused, not gigabytes of empty rows.
  test::write_text(p, real + "1000000000000000 1000000000000000 1\n1 2 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError,
                           f + ":2: the size line says 1000000000000000 rows but the 1 entries");
  test::write_text(p, real + "1000 1000 1\n1 2 1\n");  // isolated rows within the bound
  EXPECT_EQ(read_mtx(p, {}).edges.num_nodes, 1000);
  test::write_text(p, real + "3 x 1\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, f + ":2: size field 2");
  test::write_text(p, real + "% no size line\n");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, "missing the size line");
  test::write_text(p, "");
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, f + ": empty file");
}

TEST(ReadMtx, RejectsTruncatedGzip) {
  test::TempDir tmp;
  const auto p = tmp / "t.mtx.gz";
  std::string text = "%%MatrixMarket matrix coordinate real general\n1000 1000 100000\n";
  for (int i = 0; i < 100000; ++i)
    text += std::to_string(i % 1000 + 1) + " " + std::to_string(i * 7 % 1000 + 1) + " 0." +
            std::to_string(i) + "\n";
  test::write_gz(p, text);
  test::truncate_file(p, std::filesystem::file_size(p) * 2 / 3);
  TESSERA_EXPECT_THROW_MSG(read_mtx(p, {}), ValueError, p.string() + ": truncated gzip stream");
}

}  // namespace
}  // namespace tessera
