// SpilledArrays: the CSC parked in an unlinked temporary file while METIS runs (--low-memory).
#include <fcntl.h>
#include <sys/vfs.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cerrno>
#include <cstring>
#include <string>

#include "internal.hpp"
#include "tessera/core/error.hpp"

namespace tessera::detail {

namespace {

// Whole-buffer write/read with the retries POSIX allows (short counts, EINTR).
void write_all(int fd, const char* p, size_t n, const std::filesystem::path& dir) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    TESSERA_EXPECTS(k > 0, IOError,
                    "--low-memory: writing the CSR to a temporary file in {} failed: {}",
                    dir.string(), k < 0 ? std::strerror(errno) : "no progress");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, char* p, size_t n, off_t off, const std::filesystem::path& dir) {
  while (n > 0) {
    const ssize_t k = ::pread(fd, p, n, off);
    if (k < 0 && errno == EINTR) continue;
    TESSERA_EXPECTS(k > 0, IOError,
                    "--low-memory: reading the CSR back from its temporary file in {} failed: {}",
                    dir.string(), k < 0 ? std::strerror(errno) : "file shorter than written");
    p += k;
    off += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

SpilledArrays::SpilledArrays(const std::filesystem::path& dir,
                             std::vector<std::vector<int64_t>*> arrays)
    : dir_(dir), arrays_(std::move(arrays)) {
  std::string tmpl = (dir_ / ".csr-spill-XXXXXX").string();
  fd_ = ::mkstemp(tmpl.data());
  TESSERA_EXPECTS(fd_ >= 0, IOError, "--low-memory: cannot create a temporary file in {}: {}",
                  dir_.string(), std::strerror(errno));
  ::unlink(tmpl.c_str());  // nameless from now on: gone with the descriptor, even on a crash
  try {
    for (auto* a : arrays_) {
      sizes_.push_back(a->size());
      const size_t n = a->size() * sizeof(int64_t);
      write_all(fd_, reinterpret_cast<const char*>(a->data()), n, dir_);
      bytes_ += static_cast<int64_t>(n);
    }
  } catch (...) {
    ::close(fd_);  // the destructor does not run for a throwing constructor: free the blocks now
    fd_ = -1;
    throw;
  }
  // Only once everything is on disk: a failed write above leaves the arrays as they were.
  park();
}

void SpilledArrays::park() {
  if (parked_) return;
  for (size_t i = 0; i < arrays_.size(); ++i) {
    TESSERA_ASSERT(arrays_[i]->size() == sizes_[i], "spilled array {} changed size", i);
    std::vector<int64_t>().swap(*arrays_[i]);
  }
  parked_ = true;
}

void SpilledArrays::restore() {
  if (!parked_) return;
#ifdef __GLIBC__
  // What was freed while the arrays were out (METIS's working memory) stays in glibc's heap
  // and in the resident set; hand it back first, or the arrays read back and the relabelled
  // copy built next would sit on top of it and the peak would only move later.
  ::malloc_trim(0);
#endif
  off_t off = 0;
  try {
    for (size_t i = 0; i < arrays_.size(); ++i) {
      arrays_[i]->resize(sizes_[i]);
      const size_t n = sizes_[i] * sizeof(int64_t);
      read_all(fd_, reinterpret_cast<char*>(arrays_[i]->data()), n, off, dir_);
      off += static_cast<off_t>(n);
    }
  } catch (...) {
    // Never half restored: all arrays empty (still parked) rather than some zero-filled.
    for (auto* a : arrays_)
      std::vector<int64_t>().swap(*a);
    throw;
  }
  parked_ = false;
}

bool on_tmpfs(const std::filesystem::path& dir) {
  struct statfs st {};
  constexpr decltype(st.f_type) kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC, <linux/magic.h>
  return ::statfs(dir.c_str(), &st) == 0 && st.f_type == kTmpfsMagic;
}

SpilledArrays::~SpilledArrays() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tessera::detail
