// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/fs.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "tessera/core/error.hpp"

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

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
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
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TESSERA_EXPECTS(f != nullptr, IOError, "cannot open {} to checksum it", path.string());
  std::vector<char> buf(1 << 22);
  uint32_t crc = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0)
    crc = crc32_update(crc, buf.data(), n);
  TESSERA_EXPECTS(!std::ferror(f.get()), IOError, "error reading {}", path.string());
  return crc;
}

std::string crc32_hex(uint32_t crc) {
  return fmt::format("{:08x}", crc);
}

}  // namespace tessera
