// SPDX-License-Identifier: Apache-2.0
#include "shm.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera::dist::detail {

namespace {
constexpr const char* kPrefix = "tessera-";
}  // namespace

ShmSegment::~ShmSegment() {
  if (base != nullptr && bytes > 0) {
    ::munmap(base, bytes);
  }
}

std::string shm_segment_name(int64_t pid, const std::string& tag) {
  return fmt::format("/{}{}-{}", kPrefix, pid, tag);
}

namespace {
std::shared_ptr<ShmSegment> map_fd(int fd, const std::string& name, size_t bytes) {
  auto seg = std::make_shared<ShmSegment>();
  seg->name = name;
  seg->bytes = bytes;
  if (bytes > 0) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    TESSERA_EXPECTS(p != MAP_FAILED, IOError, "shared memory {}: mmap of {} bytes failed: {}", name,
                    bytes, std::strerror(err));
    seg->base = static_cast<uint8_t*>(p);
  } else {
    ::close(fd);
  }
  return seg;
}
}  // namespace

std::shared_ptr<ShmSegment> shm_create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  TESSERA_EXPECTS(fd >= 0, IOError, "shared memory {}: cannot create it: {}", name,
                  std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    TESSERA_FAIL(IOError,
                 "shared memory {}: cannot size it to {} bytes: {} (is /dev/shm large "
                 "enough?)",
                 name, bytes, std::strerror(err));
  }
  try {
    return map_fd(fd, name, bytes);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
}

std::shared_ptr<ShmSegment> shm_open_existing(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  TESSERA_EXPECTS(fd >= 0, IOError,
                  "shared memory {}: cannot open it: {} (the trainers of one machine must run on "
                  "one host: global rank = machine * trainers_per_machine + local rank)",
                  name, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    TESSERA_FAIL(IOError, "shared memory {}: holds {} bytes, {} expected", name,
                 static_cast<int64_t>(st.st_size), bytes);
  }
  return map_fd(fd, name, bytes);
}

void shm_unlink_name(const std::string& name) {
  ::shm_unlink(name.c_str());
}

int sweep_stale_segments() {
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) {
    return 0;
  }
  int removed = 0;
  const size_t plen = std::strlen(kPrefix);
  while (const dirent* e = ::readdir(d)) {
    const std::string f = e->d_name;
    if (f.compare(0, plen, kPrefix) != 0) {
      continue;
    }
    char* end = nullptr;
    const long pid = std::strtol(f.c_str() + plen, &end, 10);
    if (end == f.c_str() + plen || *end != '-' || pid <= 0) {
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      if (::shm_unlink(("/" + f).c_str()) == 0) {
        ++removed;
      }
    }
  }
  ::closedir(d);
  return removed;
}

}  // namespace tessera::dist::detail
