// SPDX-License-Identifier: Apache-2.0
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
#include "tessera/core/fs.hpp"

namespace tessera::detail {

SpilledArrays::SpilledArrays(const std::filesystem::path& dir,
                             std::vector<std::vector<int64_t>*> arrays)
    : dir_(dir), arrays_(std::move(arrays)) {
  std::string tmpl = (dir_ / ".csr-spill-XXXXXX").string();
  fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);  // not inherited by a process forked meanwhile
  TESSERA_EXPECTS(fd_ >= 0, IOError, "--low-memory: cannot create a temporary file in {}: {}",
                  dir_.string(), std::strerror(errno));
  ::unlink(tmpl.c_str());  // nameless from now on: gone with the descriptor, even on a crash
  try {
    for (auto* a : arrays_) {
      sizes_.push_back(a->size());
      const size_t n = a->size() * sizeof(int64_t);
      pwrite_all(fd_, a->data(), n, bytes_, what());
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
  int64_t off = 0;
  try {
    for (size_t i = 0; i < arrays_.size(); ++i) {
      arrays_[i]->resize(sizes_[i]);
      const size_t n = sizes_[i] * sizeof(int64_t);
      pread_all(fd_, arrays_[i]->data(), n, off, what());
      off += static_cast<int64_t>(n);
    }
  } catch (...) {
    // Never half restored: all arrays empty (still parked) rather than some zero-filled.
    for (auto* a : arrays_)
      std::vector<int64_t>().swap(*a);
    throw;
  }
  parked_ = false;
}

std::string SpilledArrays::what() const {
  return "--low-memory: the CSR's temporary file in " + dir_.string();
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
