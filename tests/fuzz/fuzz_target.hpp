// SPDX-License-Identifier: Apache-2.0
// One fuzz target: TESSERA_FUZZ_TARGET(name) { ...use data, size... return 0; }
//
// Built with TESSERA_LIBFUZZER (scripts/fuzz, clang -fsanitize=fuzzer) it is libFuzzer's
// LLVMFuzzerTestOneInput; otherwise a plain function that test_fuzz_corpora.cpp replays every
// seed in corpus/<name>/ and every kept crash in regressions/<name>/ through, in every build.
//
// The contract a target checks: bad input is one of Tessera's typed errors (ValueError,
// IndexError, TypeError, IOError), caught by guarded(); anything else -- a crash, a sanitizer
// report, an InternalError, a std:: exception (std::bad_alloc from an allocation sized by the
// input, std::out_of_range, a JSON library exception) -- escapes and is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::fuzz {

/// A scratch folder of this process, created once.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d =
        std::filesystem::temp_directory_path() / ("tessera-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          std::filesystem::temp_directory_path() / ("tessera-fuzz-" + std::to_string(::getpid())),
          ec);
    });
    return d;
  }();
  return dir;
}

/// Writes `n` bytes to scratch()/name (replacing it) and returns the path.
inline std::filesystem::path write_file(const std::string& name, const void* data, size_t n) {
  auto p = scratch() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  return p;
}

/// Runs `f`; Tessera's errors for bad input are the expected outcome, an InternalError is not.
template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const InternalError&) {
    throw;
  } catch (const Error&) {
  }
}

}  // namespace tessera::fuzz

#ifdef TESSERA_LIBFUZZER
#define TESSERA_FUZZ_TARGET(name)                                           \
  static int tessera_fuzz_body(const uint8_t* data, size_t size);           \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    return tessera_fuzz_body(data, size);                                   \
  }                                                                         \
  static int tessera_fuzz_body(const uint8_t* data, size_t size)
#else
#define TESSERA_FUZZ_TARGET(name)                      \
  namespace tessera::fuzz {                            \
  int target_##name(const uint8_t* data, size_t size); \
  }                                                    \
  int tessera::fuzz::target_##name(const uint8_t* data, size_t size)
#endif
