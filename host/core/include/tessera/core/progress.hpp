// SPDX-License-Identifier: Apache-2.0
// Progress lines and per-phase timing on stderr, plus peak-memory readings.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {

/// Global switch for progress output (stderr). Default on; `set_quiet(true)` silences it.
void set_quiet(bool quiet);
bool quiet();

/// Resident set size of this process now, and its peak so far (bytes, from /proc/self/status).
int64_t current_rss_bytes();
int64_t peak_rss_bytes();
/// Resets the kernel's peak-RSS counter (writes /proc/self/clear_refs); returns false if refused.
bool reset_peak_rss();

/// Wall-clock seconds since an arbitrary epoch (steady clock).
double now_seconds();

/// One timed phase of a pipeline: name, seconds, peak RSS at its end (bytes).
struct PhaseRecord {
  std::string name;
  double seconds = 0;
  int64_t peak_rss = 0;
  int64_t rss_after = 0;
};

/// Records named phases and prints "[tessera] phase: 1.23 s (peak RSS 456 MiB)" on stderr.
/// Phases are begun and ended in order; `phases()` returns the records for JSON reports.
class PhaseTimer {
 public:
  explicit PhaseTimer(std::string prefix = "tessera") : prefix_(std::move(prefix)) {}
  void begin(const std::string& name);
  /// Ends the current phase (no-op if none is open).
  void end();
  const std::vector<PhaseRecord>& phases() const { return phases_; }
  double total_seconds() const;

 private:
  std::string prefix_;
  std::string open_;
  double t0_ = 0;
  std::vector<PhaseRecord> phases_;
};

/// A throttled progress line: "[tessera] reading edges: 12.3M / 40.0M (31%)" at most every
/// 0.5 s on stderr, finished with a newline by `done()` or the destructor.
class Progress {
 public:
  Progress(std::string what, int64_t total, std::string unit = "");
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Sets the absolute amount done; cheap when called often (prints at most twice a second).
  void update(int64_t done);
  void add(int64_t n) { update(done_ + n); }
  void done();

 private:
  void print(bool final);
  std::string what_, unit_;
  int64_t total_, done_ = 0;
  double last_ = 0, start_ = 0;
  bool printed_ = false, finished_ = false;
};

/// For one long call that reports nothing itself (METIS): while it lives, a thread prints
/// "[tessera] METIS: still running, 40 s, RSS 9.10 GiB" on stderr after `first` seconds and then
/// every `every` seconds, unless quiet. Stops (and joins) in the destructor without waiting out
/// the interval.
class Heartbeat {
 public:
  explicit Heartbeat(std::string what, double first = 10.0, double every = 30.0);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  int beats() const { return beats_.load(); }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> beats_{0};
  std::thread thread_;
};

/// Formats a byte count as "1.23 GiB".
std::string human_bytes(double bytes);
/// Formats a count as "12.3M".
std::string human_count(double n);

}  // namespace tessera
