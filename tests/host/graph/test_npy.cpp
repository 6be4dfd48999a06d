// SPDX-License-Identifier: Apache-2.0
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/graph/npy.hpp"
#include "tessera_test.hpp"

namespace tessera {
namespace {

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  test::TempDir tmp;
  for (DType t : {DType::kBool, DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64,
                  DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{0}, {1}, {5}, {3, 4}, {2, 0, 3}}) {
      Array a = Array::zeros(t, shape);
      auto* p = static_cast<uint8_t*>(a.raw_mut());
      for (size_t i = 0; i < a.nbytes(); ++i)
        p[i] = static_cast<uint8_t>(i * 7 + 1);
      if (t == DType::kBool)
        for (size_t i = 0; i < a.nbytes(); ++i)
          p[i] &= 1;
      const auto f = tmp / "a.npy";
      write_npy(f, a);
      for (const Array& b : {read_npy(f), mmap_npy(f)}) {
        ASSERT_EQ(b.dtype(), t);
        ASSERT_EQ(b.shape(), a.shape());
        ASSERT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()));
      }
    }
  }
}

TEST(Npy, ReadsRealDatasetFiles) {
  const Array ei = read_npy_header(test::dataset("cora/edge_index.npy")).shape.size() == 2
                       ? mmap_npy(test::dataset("cora/edge_index.npy"))
                       : Array();
  EXPECT_EQ(ei.dtype(), DType::kInt64);
  EXPECT_EQ(ei.shape(), (std::vector<int64_t>{2, 5278}));
  const NpyHeader f = read_npy_header(test::dataset("cora/feat.npy"));
  EXPECT_EQ(f.dtype, DType::kUInt8);  // the binary features, stored compactly
  EXPECT_EQ(f.shape, (std::vector<int64_t>{2708, 1433}));
  EXPECT_EQ(read_npy_header(test::dataset("tolokers/train_mask.npy")).dtype, DType::kBool);
}

// Writes raw bytes to a file.
void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string header(const std::string& dict) {
  std::string h = "\x93NUMPY";
  h.push_back(1);
  h.push_back(0);
  std::string d = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
  h.push_back(static_cast<char>(d.size() & 0xff));
  h.push_back(static_cast<char>(d.size() >> 8));
  return h + d;
}

TEST(Npy, RejectsMalformedFilesNamingTheProblem) {
  test::TempDir tmp;
  const auto f = tmp / "bad.npy";
  spit(f, "not a numpy file at all");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "bad magic");
  spit(f, header("{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }") + "abc");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "truncated");
  spit(f, header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + "abcd");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), TypeError, "big-endian");
  spit(f, header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") + "abcdefgh");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), TypeError, "unsupported dtype");
  spit(f, header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + "abcd");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "Fortran");
  spit(f, header("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }") + "abcd");
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "shape");
  spit(f, std::string("\x93NUMPY\x01\x00\x40", 9));
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "truncated");
  TESSERA_EXPECT_THROW_MSG(read_npy(tmp / "missing.npy"), IOError, "missing.npy");
  // Shapes whose size overflows: 3 x 6148914691236517206 one-byte elements is 2 modulo 2^64, so
  // without the overflow check two data bytes passed the size check for a huge array.
  spit(f, header("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 6148914691236517206), }") +
              "ab");
  TESSERA_EXPECT_THROW_MSG(read_npy_header(f), ValueError, "too large");
  TESSERA_EXPECT_THROW_MSG(mmap_npy(f), ValueError, "bad.npy");
  spit(f, header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4611686018427387904), }"));
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "too large");
  spit(f, header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"));
  TESSERA_EXPECT_THROW_MSG(read_npy(f), ValueError, "dimension '99999999999999999999'");
}

TEST(Npy, TypedAccessChecksDtype) {
  Array a = Array::from_vector(std::vector<int64_t>{1, 2, 3});
  EXPECT_EQ(a.data<int64_t>()[2], 3);
  EXPECT_THROW(a.data<float>(), TypeError);
  Array f = Array::zeros(DType::kFloat32, {2});
  EXPECT_THROW(f.to_int64_vector("f"), TypeError);
  const int64_t idx[] = {2, 0};
  Array t = a.take_rows(idx, 2);
  EXPECT_EQ(t.data<int64_t>()[0], 3);
  const int64_t bad[] = {3};
  EXPECT_THROW(a.take_rows(bad, 1), IndexError);
}

}  // namespace
}  // namespace tessera
