// SPDX-License-Identifier: Apache-2.0
// Files and folders: atomic output folders and checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace tessera {

namespace fs = std::filesystem;

/// An output folder written atomically: files go into a hidden temporary sibling
/// (`.<name>.tmp-<pid>`); `commit()` renames it onto `final_path` (replacing an existing
/// folder only if `overwrite`). If the object is destroyed without commit (an exception was
/// thrown), the temporary folder is removed, so nothing half-written is left behind.
class AtomicDir {
 public:
  AtomicDir(fs::path final_path, bool overwrite);
  ~AtomicDir();
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  /// The temporary folder to write into.
  const fs::path& path() const { return tmp_; }
  const fs::path& final_path() const { return final_; }
  void commit();

 private:
  fs::path final_, tmp_;
  bool overwrite_, committed_ = false;
};

/// Writes / reads exactly `n` bytes at offset `off` of an open descriptor, retrying short counts
/// and EINTR; throws IOError "<what>: write failed: <reason>" (or "read failed", "file ends
/// early" for a read past the end).
void pwrite_all(int fd, const void* data, size_t n, int64_t off, const std::string& what);
void pread_all(int fd, void* data, size_t n, int64_t off, const std::string& what);

/// CRC-32 (zlib polynomial) of a whole file, streamed; throws IOError naming the file.
uint32_t file_crc32(const fs::path& path);
/// CRC-32 of a buffer, continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);
/// Hex form of a CRC-32, 8 lowercase digits.
std::string crc32_hex(uint32_t crc);

}  // namespace tessera
