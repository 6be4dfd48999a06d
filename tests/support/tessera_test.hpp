// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the GoogleTest suites.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tessera::test {

/// Path of a dataset shipped in the repository's data/ folder (e.g. "cora",
/// "snap/ego-Twitter.txt.gz").
inline std::filesystem::path dataset(const std::string& rel) {
  return std::filesystem::path(TESSERA_DATA_DIR) / rel;
}

/// Skips a test that needs several ranks when the UCX transport is not compiled in
/// (TESSERA_WITH_UCX=OFF): the skip is reported, where compiling the test out would hide it.
#ifdef TESSERA_WITH_UCX
#define TESSERA_SKIP_WITHOUT_UCX() static_cast<void>(0)
#else
#define TESSERA_SKIP_WITHOUT_UCX() \
  GTEST_SKIP() << "built without UCX (TESSERA_WITH_UCX=OFF): needs several ranks"
#endif

/// A fresh scratch folder removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "t";
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = std::filesystem::temp_directory_path() /
            ("tessera-test-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

/// Asserts that `stmt` throws exception type `E` whose message contains `needle`.
#define TESSERA_EXPECT_THROW_MSG(stmt, E, needle)                         \
  do {                                                                    \
    try {                                                                 \
      stmt;                                                               \
      ADD_FAILURE() << "expected " #E " containing '" << (needle) << "'"; \
    } catch (const E& e) {                                                \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)    \
          << "message was: " << e.what();                                 \
    }                                                                     \
  } while (0)

}  // namespace tessera::test
