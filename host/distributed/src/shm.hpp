// SPDX-License-Identifier: Apache-2.0
// Memory shared by the trainers of one machine (POSIX shared memory): the segment that holds a
// machine's partition when several trainers per machine share it (docs/dist.md, "Several
// trainers per machine").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera::dist::detail {

/// A mapping of a POSIX shared memory segment (MAP_SHARED, read-write); unmapped when the last
/// reference goes.
struct ShmSegment {
  std::string name;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  ShmSegment() = default;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();
};

/// The segment name for `tag` created by process `pid`: "/tessera-<pid>-<tag>". The creator's
/// pid lets sweep_stale_segments() tell a dead job's segment from a live one.
std::string shm_segment_name(int64_t pid, const std::string& tag);
/// Creates (exclusively) and maps a zero-filled segment of `bytes` bytes.
std::shared_ptr<ShmSegment> shm_create(const std::string& name, size_t bytes);
/// Maps an existing segment, which must hold `bytes` bytes (IOError naming it otherwise).
std::shared_ptr<ShmSegment> shm_open_existing(const std::string& name, size_t bytes);
/// Removes the name (mappings stay valid; the memory goes with the last one). Idempotent.
void shm_unlink_name(const std::string& name);
/// Removes every /dev/shm/tessera-<pid>-* whose creating process no longer exists (a job killed
/// between creating a segment and unlinking it). Returns how many were removed.
int sweep_stale_segments();

}  // namespace tessera::dist::detail
