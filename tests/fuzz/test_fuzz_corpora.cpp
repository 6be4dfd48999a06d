// SPDX-License-Identifier: Apache-2.0
// Every fuzz target's seed corpus (corpus/<target>/) and every input that once made it fail
// (regressions/<target>/, kept when the finding was fixed) replayed through it: each must come
// back with a clean run or one of Tessera's typed errors, in every build (and under the
// sanitizers in CI's sanitize phase).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace tessera::fuzz {
#define TESSERA_DECLARE_TARGET(name) int target_##name(const uint8_t* data, size_t size);
TESSERA_DECLARE_TARGET(npy)
TESSERA_DECLARE_TARGET(ogb)
TESSERA_DECLARE_TARGET(snap)
TESSERA_DECLARE_TARGET(metis)
TESSERA_DECLARE_TARGET(mtx)
TESSERA_DECLARE_TARGET(meta_json)
TESSERA_DECLARE_TARGET(partition_config)
TESSERA_DECLARE_TARGET(store)
TESSERA_DECLARE_TARGET(transport_framing)
#undef TESSERA_DECLARE_TARGET
}  // namespace tessera::fuzz

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using Target = int (*)(const uint8_t*, size_t);

// Replays every file of corpus/<name>/ and regressions/<name>/; returns how many.
size_t replay(const std::string& name, Target target) {
  size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(TESSERA_FUZZ_DIR) / kind / name;
    if (!fs::is_directory(dir)) {
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file()) {
        files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      SCOPED_TRACE(f.string());
      EXPECT_NO_THROW(target(bytes.data(), bytes.size()));
      ++n;
    }
  }
  return n;
}

#define TESSERA_REPLAY(name)                                    \
  TEST(FuzzCorpus, name) {                                      \
    EXPECT_GT(replay(#name, &tessera::fuzz::target_##name), 0u) \
        << "no seeds in " TESSERA_FUZZ_DIR "/corpus/" #name;    \
  }
TESSERA_REPLAY(npy)
TESSERA_REPLAY(ogb)
TESSERA_REPLAY(snap)
TESSERA_REPLAY(metis)
TESSERA_REPLAY(mtx)
TESSERA_REPLAY(meta_json)
TESSERA_REPLAY(partition_config)
TESSERA_REPLAY(store)
TESSERA_REPLAY(transport_framing)

}  // namespace
}  // namespace tessera::test
