// SPDX-License-Identifier: Apache-2.0
// Errors: TESSERA_EXPECTS for the caller's mistakes, TESSERA_ASSERT for our own invariants.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tessera {

/// Base of every exception Tessera throws. `what()` is the full, user-facing message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// A bad argument or malformed input (Python: ValueError).
class ValueError : public Error {
 public:
  using Error::Error;
};
/// An ID or index outside its valid range (Python: IndexError).
class IndexError : public Error {
 public:
  using Error::Error;
};
/// A wrong dtype or kind of object (Python: TypeError).
class TypeError : public Error {
 public:
  using Error::Error;
};
/// A file that cannot be opened, read or written, or a system call that failed (Python: OSError).
class IOError : public Error {
 public:
  using Error::Error;
};
/// A feature that was not compiled into this build, e.g. CUDA ops in a CPU-only build.
class NotCompiledError : public Error {
 public:
  using Error::Error;
};
/// A broken internal invariant: a bug in Tessera, not in the caller's input (Python: RuntimeError).
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_internal(const char* cond, const char* file, int line,
                                 const std::string& msg);
}  // namespace detail

}  // namespace tessera

/// Checks a precondition on the caller's input; throws `Kind` with the formatted message.
/// Usage: TESSERA_EXPECTS(n >= 0, ValueError, "{}: negative count {}", path, n);
#define TESSERA_EXPECTS(cond, Kind, ...)                          \
  do {                                                            \
    if (!(cond)) throw ::tessera::Kind(fmt::format(__VA_ARGS__)); \
  } while (0)

/// Throws `Kind` unconditionally with the formatted message.
#define TESSERA_FAIL(Kind, ...) throw ::tessera::Kind(fmt::format(__VA_ARGS__))

/// Checks an internal invariant (always on); failure is a bug and throws InternalError.
#define TESSERA_ASSERT(cond, ...)                                                                \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::tessera::detail::throw_internal(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

/// Debug-only variant of TESSERA_ASSERT for hot loops.
#ifdef NDEBUG
#define TESSERA_DEBUG_ASSERT(cond, ...) \
  do {                                  \
  } while (0)
#else
#define TESSERA_DEBUG_ASSERT(cond, ...) TESSERA_ASSERT(cond, __VA_ARGS__)
#endif
