// SPDX-License-Identifier: Apache-2.0
#include "tessera/core/progress.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <system_error>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tessera {

namespace {
std::atomic<bool> g_quiet{false};

int64_t read_status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t klen = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, klen, key) == 0) return std::stoll(line.substr(klen + 1)) * 1024;
  }
  return 0;
}
}  // namespace

void set_quiet(bool q) {
  g_quiet = q;
}
bool quiet() {
  return g_quiet;
}

int64_t current_rss_bytes() {
  return read_status_kb("VmRSS");
}
int64_t peak_rss_bytes() {
  return read_status_kb("VmHWM");
}
bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = std::fputs("5", f) >= 0;
  ok = (std::fclose(f) == 0) && ok;
  return ok;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

void PhaseTimer::begin(const std::string& name) {
  end();
  open_ = name;
  t0_ = now_seconds();
  if (!quiet()) fmt::print(stderr, "[{}] {} ...\n", prefix_, name);
}

void PhaseTimer::end() {
  if (open_.empty()) return;
  PhaseRecord r;
  r.name = open_;
  r.seconds = now_seconds() - t0_;
  r.peak_rss = peak_rss_bytes();
  r.rss_after = current_rss_bytes();
  if (!quiet())
    fmt::print(stderr, "[{}] {}: {:.3f} s (RSS {}, peak {})\n", prefix_, r.name, r.seconds,
               human_bytes(r.rss_after), human_bytes(r.peak_rss));
  phases_.push_back(std::move(r));
  open_.clear();
}

double PhaseTimer::total_seconds() const {
  double s = 0;
  for (const auto& p : phases_)
    s += p.seconds;
  return s;
}

Progress::Progress(std::string what, int64_t total, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total) {
  start_ = last_ = now_seconds();
}

Progress::~Progress() {
  done();
}

void Progress::update(int64_t d) {
  done_ = d;
  const double t = now_seconds();
  if (t - last_ >= 0.5) {
    last_ = t;
    print(false);
  }
}

void Progress::done() {
  if (finished_) return;
  finished_ = true;
  if (printed_) print(true);
}

void Progress::print(bool final) {
  if (quiet()) return;
  printed_ = true;
  const double el = now_seconds() - start_;
  std::string line;
  if (total_ > 0) {
    line = fmt::format("[tessera] {}: {} / {}{} ({:.0f}%) {:.1f} s", what_, human_count(done_),
                       human_count(total_), unit_.empty() ? "" : " " + unit_,
                       100.0 * done_ / total_, el);
  } else {
    line = fmt::format("[tessera] {}: {}{} {:.1f} s", what_, human_count(done_),
                       unit_.empty() ? "" : " " + unit_, el);
  }
  // A carriage return keeps one updating line on a terminal; a newline in logs.
  const bool tty = isatty(STDERR_FILENO);
  fmt::print(stderr, "{}{}", line, (final || !tty) ? "\n" : "\r");
}

Heartbeat::Heartbeat(std::string what, double first, double every) : what_(std::move(what)) {
  if (quiet()) return;
  try {
    thread_ = std::thread([this, first, every] {
      const double start = now_seconds();
      double wait = first;
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return stop_; })) {
        lock.unlock();  // a stalled stderr must not hold up the destructor's stop
        try {
          fmt::print(stderr, "[tessera] {}: still running, {:.0f} s, RSS {}\n", what_,
                     now_seconds() - start, human_bytes(static_cast<double>(current_rss_bytes())));
        } catch (...) {
          return;  // stderr is gone (a closed pipe): nothing to tell, and never terminate
        }
        lock.lock();
        ++beats_;
        wait = every;
      }
    });
  } catch (const std::system_error&) {
    // No thread to spare: the call runs without its heartbeat.
  }
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace tessera
