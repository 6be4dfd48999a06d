#include "tessera/core/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera {

AtomicDir::AtomicDir(fs::path final_path, bool overwrite)
    : final_(std::move(final_path)), overwrite_(overwrite) {
  final_ = fs::absolute(final_).lexically_normal();
  if (final_.filename().empty()) final_ = final_.parent_path();
  const fs::path parent = final_.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot create output folder {}: {}", parent.string(),
                  ec.message());
  if (fs::exists(final_) && !overwrite_)
    TESSERA_FAIL(ValueError, "output {} already exists (pass --overwrite to replace it)",
                 final_.string());
  tmp_ = parent / fmt::format(".{}.tmp-{}", final_.filename().string(), ::getpid());
  fs::remove_all(tmp_, ec);
  fs::create_directory(tmp_, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot create temporary folder {}: {}", tmp_.string(),
                  ec.message());
}

AtomicDir::~AtomicDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void AtomicDir::commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(final_)) {
    TESSERA_EXPECTS(overwrite_, ValueError, "output {} already exists", final_.string());
    old = final_.parent_path() / fmt::format(".{}.old-{}", final_.filename().string(), ::getpid());
    fs::rename(final_, old, ec);
    TESSERA_EXPECTS(!ec, IOError, "cannot move away old output {}: {}", final_.string(),
                    ec.message());
  }
  fs::rename(tmp_, final_, ec);
  TESSERA_EXPECTS(!ec, IOError, "cannot rename {} to {}: {}", tmp_.string(), final_.string(),
                  ec.message());
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

namespace {

uint32_t crc32_serial(uint32_t crc, const unsigned char* p, size_t n) {
  uLong c = crc;
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  // zlib's CRC-32 runs at about 7 GB/s per core; a large buffer is cut into one slice per thread
  // and the slices' CRCs joined with crc32_combine (O(log n)), so checking a partition on load
  // costs a fraction of reading it.
  constexpr size_t kSlice = size_t{16} << 20;
  const auto* p = static_cast<const unsigned char*>(data);
  const auto slices = static_cast<int64_t>(n / kSlice);
  if (slices < 2 || num_threads() < 2) {
    return crc32_serial(crc, p, n);
  }
  std::vector<uint32_t> part(static_cast<size_t>(std::min<int64_t>(slices, num_threads())));
  const auto chunks = static_cast<int64_t>(part.size());
  std::vector<size_t> len(part.size());
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t b = n * static_cast<size_t>(c) / static_cast<size_t>(chunks);
      const size_t e = n * static_cast<size_t>(c + 1) / static_cast<size_t>(chunks);
      part[c] = crc32_serial(0, p + b, e - b);
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
    if (k < 0 && errno == EINTR) continue;
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
    if (k < 0 && errno == EINTR) continue;
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

}  // namespace tessera
