// SPDX-License-Identifier: Apache-2.0
// Writing small text and gzip files for the reader tests.
#pragma once

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tessera::test {

/// Writes `text` to `path` as is.
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

/// Writes `text` gzip-compressed to `path`.
inline void write_gz(const std::filesystem::path& path, const std::string& text) {
  gzFile gz = gzopen(path.string().c_str(), "wb");
  ASSERT_NE(gz, nullptr) << path;
  if (!text.empty()) {
    ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
  }
  ASSERT_EQ(gzclose(gz), Z_OK);
}

/// The decompressed contents of gzip file `path` (a plain file is returned as is).
inline std::string read_gz(const std::filesystem::path& path) {
  std::string text;
  gzFile gz = gzopen(path.string().c_str(), "rb");
  EXPECT_NE(gz, nullptr) << path;
  if (gz == nullptr) {
    return text;
  }
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(n, 0) << path << ": corrupt gzip data";
  gzclose(gz);
  return text;
}

/// Cuts a file to its first `keep` bytes (to simulate an interrupted download).
inline void truncate_file(const std::filesystem::path& path, uintmax_t keep) {
  std::filesystem::resize_file(path, keep);
}

}  // namespace tessera::test
