// SPDX-License-Identifier: Apache-2.0
// Files and folders: atomic output folders and checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace tessera {

namespace fs = std::filesystem;

/// An output folder written atomically: files go into a hidden temporary sibling
/// (`.<name>.tmp-<host>-<pid>`); `commit()` syncs every file and folder in it to disk and renames
/// it onto `final_path`. Replacing an existing folder (only if `overwrite`) is one atomic
/// exchange (renameat2 RENAME_EXCHANGE), so readers see the old output or the new one, never
/// neither; the old one is removed after (file systems without the exchange get two renames).
/// If the object is destroyed without commit (an exception was thrown), the temporary folder is
/// removed, so nothing half-written is left behind; temporary folders of earlier runs on this
/// host whose process is gone (kill -9, a crash) are removed by the constructor.
class AtomicDir {
 public:
  /// Which entries an existing output folder may hold for --overwrite to replace it: called
  /// with each entry's name and whether it is a folder. Anything else is someone else's data.
  using Replaceable = std::function<bool(const std::string& name, bool is_dir)>;
  /// Throws ValueError when `final_path` exists and `overwrite` is false, or when it is not a
  /// folder or holds an entry `replaceable` refuses (none given: only an empty folder).
  AtomicDir(fs::path final_path, bool overwrite, const Replaceable& replaceable = nullptr);
  ~AtomicDir();
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  /// The temporary folder to write into.
  const fs::path& path() const { return tmp_; }
  const fs::path& final_path() const { return final_; }
  void commit();
  /// Throws ValueError naming the first entry of `dir` that `replaceable` refuses.
  static void check_replaceable(const fs::path& dir, const Replaceable& replaceable);

 private:
  fs::path final_, tmp_;
  bool overwrite_, committed_ = false;
};

/// Checks, before any work, that an output the job writes at its end can be written: a file
/// (`folder` false) must not be an existing folder; a folder (`folder` true) must be one if it
/// exists; and the nearest existing ancestor of what is still missing must be a folder this
/// process can create a file in (a probe file, removed at once). Creates nothing else. Throws
/// ValueError / IOError naming `option` (e.g.
/// "--results") and the path, so a bad path fails at once instead of after hours of training.
void check_output_path(const std::string& option, const fs::path& path, bool folder = false);

/// Writes `text` to `path` through a hidden temporary file beside it and a rename, creating
/// the missing folders above it: readers see the old file or the whole new one, never a part.
/// IOError naming `path` when it cannot be written.
void write_text_atomic(const fs::path& path, const std::string& text);

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
