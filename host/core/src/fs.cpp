// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <libdeflate.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera {

namespace {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') {
    return "localhost";
  }
  std::string h(buf);
  for (char& c : h) {
    if (c == '/' || c == '-') {
      c = '_';  // '-' separates the host from the pid in the name
    }
  }
  return h;
}

// ".<name>.tmp-<host>-<pid>" (".<name>.tmp-<pid>" before hosts were recorded) and ".old-".
// Returns the pid when `entry` is such a folder of this host, else -1.
long stale_owner(const std::string& entry, const std::string& name, const std::string& host) {
  for (const char* kind : {".tmp-", ".old-"}) {
    const std::string prefix = "." + name + kind;
    if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    std::string rest = entry.substr(prefix.size());
    const size_t dash = rest.rfind('-');
    if (dash != std::string::npos) {
      if (rest.substr(0, dash) != host) {
        return -1;  // another host's: it may be running there
      }
      rest = rest.substr(dash + 1);
    }
    if (rest.empty() || rest.size() > 10 ||
        rest.find_first_not_of("0123456789") != std::string::npos) {
      return -1;
    }
    return std::stol(rest);
  }
  return -1;
}

// Removes the temporary folders that runs on this host killed before they could clean up
// (kill -9, a crash, a power cut): their process is gone.
void remove_stale_temporaries(const fs::path& parent, const std::string& name) {
  const std::string host = host_name();
  std::error_code ec;
  for (const auto& ent : fs::directory_iterator(parent, ec)) {
    const long pid = stale_owner(ent.path().filename().string(), name, host);
    if (pid <= 0 || pid == ::getpid()) {
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) {
      continue;  // alive, or not ours
    }
    std::error_code rm;
    fs::remove_all(ent.path(), rm);
    if (!rm) {
      fmt::print(stderr, "[tessera] removed {}, left by process {} which is no longer running\n",
                 ent.path().string(), pid);
    }
  }
}

void fsync_path(const fs::path& p, bool dir) {
  const int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  TESSERA_EXPECTS(fd >= 0, IOError, "cannot open {} to sync it: {}", p.string(),
                  std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  TESSERA_EXPECTS(rc == 0, IOError, "{}: fsync failed: {}", p.string(), std::strerror(err));
}

// Every file, then every folder bottom-up, so the tree is on disk before it is renamed into place.
void fsync_tree(const fs::path& root) {
  std::vector<fs::path> dirs{root};
  for (const auto& ent : fs::recursive_directory_iterator(root)) {
    if (ent.is_directory()) {
      dirs.push_back(ent.path());
    } else if (ent.is_regular_file()) {
      fsync_path(ent.path(), false);
    }
  }
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    fsync_path(*it, true);
  }
}

}  // namespace

AtomicDir::AtomicDir(fs::path final_path, bool overwrite, const Replaceable& replaceable)
    : final_(std::move(final_path)), overwrite_(overwrite) {
  final_ = fs::absolute(final_).lexically_normal();
  if (final_.filename().empty()) {
    final_ = final_.parent_path();
  }
  const fs::path parent = final_.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot create output folder {}: {}", parent.string(),
                  ec.message());
  if (fs::exists(final_)) {
    TESSERA_EXPECTS(overwrite_, ValueError,
                    "output {} already exists (pass --overwrite to replace it)", final_.string());
    check_replaceable(final_, replaceable);
  }
  remove_stale_temporaries(parent, final_.filename().string());
  tmp_ = parent / fmt::format(".{}.tmp-{}-{}", final_.filename().string(), host_name(), ::getpid());
  fs::remove_all(tmp_, ec);
  fs::create_directory(tmp_, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot create temporary folder {}: {}", tmp_.string(),
                  ec.message());
}

void AtomicDir::check_replaceable(const fs::path& dir, const Replaceable& replaceable) {
  TESSERA_EXPECTS(fs::is_directory(dir), ValueError,
                  "--out {}: exists and is not a folder; refusing to replace it", dir.string());
  for (const auto& ent : fs::directory_iterator(dir)) {
    const std::string f = ent.path().filename().string();
    const bool ok = replaceable && replaceable(f, ent.is_directory() && !ent.is_symlink());
    TESSERA_EXPECTS(ok, ValueError,
                    "--out {}: refusing to overwrite a folder that holds '{}', which is not "
                    "output of this command (choose an empty or new folder, or remove it "
                    "yourself)",
                    dir.string(), f);
  }
}

AtomicDir::~AtomicDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void AtomicDir::commit() {
  fsync_tree(tmp_);
  std::error_code ec;
  const fs::path parent = final_.parent_path();
  if (!fs::exists(final_)) {
    fs::rename(tmp_, final_, ec);
    TESSERA_EXPECTS(!ec, IOError, "cannot rename {} to {}: {}", tmp_.string(), final_.string(),
                    ec.message());
    committed_ = true;
    fsync_path(parent, true);
    return;
  }
  TESSERA_EXPECTS(overwrite_, ValueError, "output {} already exists", final_.string());
  // One atomic exchange: readers see the old output or the new one, never neither. The old one
  // is then at tmp_, removed below, or by the next run if this process dies first.
  if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) == 0) {
    committed_ = true;
    fsync_path(parent, true);
    fs::remove_all(tmp_, ec);
    return;
  }
  const int err = errno;
  TESSERA_EXPECTS(err == EINVAL || err == ENOSYS || err == EOPNOTSUPP, IOError,
                  "cannot swap {} into {}: {}", tmp_.string(), final_.string(), std::strerror(err));
  // A file system without RENAME_EXCHANGE: two renames, with a moment between them when the
  // output is missing (but the old one is kept until the new one is in place).
  const fs::path old =
      parent / fmt::format(".{}.old-{}-{}", final_.filename().string(), host_name(), ::getpid());
  fs::rename(final_, old, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot move away old output {}: {}", final_.string(),
                  ec.message());
  fs::rename(tmp_, final_, ec);
  if (ec) {
    std::error_code back;
    fs::rename(old, final_, back);
    TESSERA_FAIL(IOError, "cannot rename {} to {}: {}", tmp_.string(), final_.string(),
                 ec.message());
  }
  committed_ = true;
  fsync_path(parent, true);
  fs::remove_all(old, ec);
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  // libdeflate's CRC-32 (zlib's polynomial, carry-less multiplication) runs at about 14 GB/s per
  // core; a large buffer is cut into one slice per thread and the slices' CRCs joined with zlib's
  // crc32_combine (O(log n)), so checking a partition on load costs a fraction of reading it.
  constexpr size_t kSlice = size_t{16} << 20;
  const auto* p = static_cast<const unsigned char*>(data);
  const auto slices = static_cast<int64_t>(n / kSlice);
  if (n == 0) {
    return crc;  // libdeflate (as zlib) answers 0 for a null buffer, whatever `crc` was
  }
  if (slices < 2 || num_threads() < 2) {
    return libdeflate_crc32(crc, p, n);
  }
  std::vector<uint32_t> part(static_cast<size_t>(std::min<int64_t>(slices, num_threads())));
  const auto chunks = static_cast<int64_t>(part.size());
  std::vector<size_t> len(part.size());
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t b = n * static_cast<size_t>(c) / static_cast<size_t>(chunks);
      const size_t e = n * static_cast<size_t>(c + 1) / static_cast<size_t>(chunks);
      part[c] = libdeflate_crc32(0, p + b, e - b);
      len[c] = e - b;
    }
  });
  uLong c = crc;
  for (size_t i = 0; i < part.size(); ++i) {
    c = ::crc32_combine(c, part[i], static_cast<z_off_t>(len[i]));
  }
  return static_cast<uint32_t>(c);
}

void pwrite_all(int fd, const void* data, size_t n, int64_t off, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (k < 0 && errno == EINTR) {
      continue;
    }
    TESSERA_EXPECTS(k > 0, IOError, "{}: write failed: {}", what,
                    k < 0 ? std::strerror(errno) : "no progress");
    p += k;
    off += k;
    n -= static_cast<size_t>(k);
  }
}

void pread_all(int fd, void* data, size_t n, int64_t off, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::pread(fd, p, n, static_cast<off_t>(off));
    if (k < 0 && errno == EINTR) {
      continue;
    }
    TESSERA_EXPECTS(k > 0, IOError, "{}: {}", what,
                    k < 0 ? fmt::format("read failed: {}", std::strerror(errno))
                          : std::string("file ends early"));
    p += k;
    off += k;
    n -= static_cast<size_t>(k);
  }
}

uint32_t file_crc32(const fs::path& path) {
  // Mapped, so that crc32_update can checksum slices of a large file on several threads.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TESSERA_EXPECTS(fd >= 0, IOError, "cannot open {} to checksum it: {}", path.string(),
                  std::strerror(errno));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    const int err = errno;
    ::close(fd);
    TESSERA_FAIL(IOError, "cannot checksum {}: {}", path.string(),
                 S_ISREG(sb.st_mode) ? std::strerror(err) : "not a regular file");
  }
  const auto n = static_cast<size_t>(sb.st_size);
  if (n == 0) {
    ::close(fd);
    return 0;
  }
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  TESSERA_EXPECTS(p != MAP_FAILED, IOError, "cannot map {} to checksum it: {}", path.string(),
                  std::strerror(err));
  ::madvise(p, n, MADV_SEQUENTIAL);
  const uint32_t crc = crc32_update(0, p, n);
  ::munmap(p, n);
  return crc;
}

std::string crc32_hex(uint32_t crc) {
  return fmt::format("{:08x}", crc);
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  if (!path.parent_path().empty()) {
    fs::create_directories(path.parent_path());
  }
  const fs::path tmp =
      path.parent_path() / fmt::format(".{}.tmp-{}", path.filename().string(), ::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    TESSERA_EXPECTS(f.good(), IOError, "{}: cannot open {} for writing", path.string(),
                    tmp.string());
    f << text;
    f.flush();
    if (!f.good()) {
      f.close();
      fs::remove(tmp);
      TESSERA_FAIL(IOError, "{}: writing failed (disk full?)", path.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    TESSERA_FAIL(IOError, "{}: cannot rename {} onto it: {}", path.string(), tmp.string(),
                 ec.message());
  }
}

void check_output_path(const std::string& option, const fs::path& path, bool folder) {
  if (path.empty()) {
    return;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    TESSERA_EXPECTS(folder == fs::is_directory(st), ValueError, "{} {}: {}", option, path.string(),
                    folder ? "exists and is not a folder" : "is a folder, not a file");
  }
  // The nearest existing ancestor of what the job will create (the folder itself when it
  // exists and is one): it must be a folder we may create entries in.
  fs::path at = folder && fs::is_directory(st) ? path : path.parent_path();
  if (at.empty()) {
    at = ".";
  }
  while (!fs::exists(at, ec)) {
    const fs::path up = at.parent_path();
    if (up.empty() || up == at) {
      at = up.empty() ? fs::path(".") : up;
      break;
    }
    at = up;
  }
  TESSERA_EXPECTS(fs::is_directory(at, ec), ValueError, "{} {}: {} is not a folder", option,
                  path.string(), at.string());
  // A probe file, removed at once: access() would pass root everywhere, and says nothing of
  // file systems that refuse new entries (read-only mounts, /proc).
  const fs::path probe = at / fmt::format(".tessera-probe-{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  TESSERA_EXPECTS(fd >= 0, IOError, "{} {}: cannot write in {}: {}", option, path.string(),
                  at.string(), std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace tessera
