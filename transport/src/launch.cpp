// SPDX-License-Identifier: Apache-2.0
// The launcher: fork/exec one process per local rank, relay their output line by line with a
// rank prefix, and tear the job down when any rank fails or the launcher is signalled.
#include "tessera/transport/launch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/transport/rendezvous.hpp"

namespace tessera::transport {

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TESSERA_EXPECTS(fd >= 0, IOError, "socket() failed: {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    TESSERA_FAIL(IOError, "could not find a free TCP port: {}", std::strerror(err));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

namespace {

int g_sig_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char c = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t k = ::write(g_sig_pipe[1], &c, 1);
  errno = saved;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool running = true;
  bool signaled = false;
  int code = 0;
};

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      return;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Emits every complete line of `buf` (all of it when `flush`) to `fd` with the rank prefix. A
// line ends at '\n' or at '\r' (progress bars redraw a line with '\r'; "\r\n" is one end), so
// such output shows as it comes instead of as one line at the end; a line longer than
// kMaxLine without an end is emitted in pieces.
constexpr size_t kMaxLine = size_t{1} << 16;

void emit_lines(std::string& buf, int fd, const std::string& prefix, bool flush) {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t end = buf.find_first_of("\r\n", start);
    if (end == std::string::npos) {
      break;
    }
    if (buf[end] == '\r' && end + 1 == buf.size() && !flush) {
      break;  // a '\n' may follow
    }
    if (buf[end] == '\r' && end + 1 < buf.size() && buf[end + 1] == '\n') {
      ++end;
    } else if (buf[end] == '\r' && end == start) {
      start = end + 1;  // the '\r' that begins a progress bar's redraw ends nothing
      continue;
    }
    out += prefix;
    out.append(buf, start, end - start + 1);
    start = end + 1;
  }
  buf.erase(0, start);
  if ((flush && !buf.empty()) || buf.size() > kMaxLine) {
    out += prefix + buf + "\n";
    buf.clear();
  } else if (flush && !out.empty() && out.back() == '\r') {
    out += '\n';  // the rank's last output was a redrawn line: end it, or the next overwrites it
  }
  if (!out.empty()) {
    write_all(fd, out);
  }
}

bool pump(int& fd, std::string& buf, int out_fd, const std::string& prefix) {
  char tmp[65536];
  const ssize_t k = ::read(fd, tmp, sizeof tmp);
  if (k > 0) {
    buf.append(tmp, static_cast<size_t>(k));
    emit_lines(buf, out_fd, prefix, false);
    return true;
  }
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
    return true;
  }
  emit_lines(buf, out_fd, prefix, true);
  ::close(fd);
  fd = -1;
  return false;
}

void check_options(const LaunchOptions& o) {
  TESSERA_EXPECTS(o.nproc_per_node >= 1, ValueError, "--nproc-per-node must be >= 1, got {}",
                  o.nproc_per_node);
  TESSERA_EXPECTS(o.nnodes >= 1, ValueError, "--nnodes must be >= 1, got {}", o.nnodes);
  TESSERA_EXPECTS(o.node_rank >= 0 && o.node_rank < o.nnodes, ValueError,
                  "--node-rank {} is outside [0, {}) for --nnodes {}", o.node_rank, o.nnodes,
                  o.nnodes);
  TESSERA_EXPECTS(!o.command.empty(), ValueError,
                  "no command to launch: tessera launch [options] -- CMD [ARGS...]");
  TESSERA_EXPECTS(o.master_port >= 0 && o.master_port <= 65535, ValueError,
                  "--master-port {} is not a TCP port", o.master_port);
  TESSERA_EXPECTS(o.grace_s >= 0, ValueError,
                  "grace period {} s is not a number of seconds >= 0 (inf: no SIGKILL)", o.grace_s);
  // The launcher holds two pipes per rank (stdout and stderr) and four while one starts.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    const auto need = static_cast<rlim_t>(2 * static_cast<int64_t>(o.nproc_per_node) + 32);
    TESSERA_EXPECTS(need <= files.rlim_cur, ValueError,
                    "--nproc-per-node {} needs about {} open files in the launcher, more than its "
                    "limit of {} (raise it with `ulimit -n`, or start fewer ranks per node)",
                    o.nproc_per_node, need, files.rlim_cur);
  }
}

// The job's token: the option (or its file), else the environment's, else (one node only) a
// fresh one.
std::string job_token(const LaunchOptions& o) {
  std::string token = o.job_token;
  if (token.empty() && !o.token_file.empty()) {
    token = read_token_file(o.token_file, "--token-file " + o.token_file);
  }
  if (token.empty()) {
    token = job_token_from_env();
  }
  if (token.empty()) {
    TESSERA_EXPECTS(o.nnodes == 1, ValueError,
                    "with --nnodes {} every node needs the same job token: put one (e.g. from "
                    "`openssl rand -hex 32`) in a file only you can read on every node and pass "
                    "--token-file, or set TESSERA_JOB_TOKEN or TESSERA_JOB_TOKEN_FILE",
                    o.nnodes);
    token = generate_job_token();
  }
  return token;
}

// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD written to a self-pipe (read by the supervision
// loop) while it lives; the previous handlers are restored when it ends.
class SignalRelay {
 public:
  SignalRelay() {
    TESSERA_EXPECTS(::pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) == 0, IOError, "pipe2 failed: {}",
                    std::strerror(errno));
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGHUP, &sa, &old_hup_);
    ::sigaction(SIGQUIT, &sa, &old_quit_);
    ::sigaction(SIGCHLD, &sa, &old_chld_);
  }
  ~SignalRelay() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    ::sigaction(SIGQUIT, &old_quit_, nullptr);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::close(g_sig_pipe[0]);
    ::close(g_sig_pipe[1]);
    g_sig_pipe[0] = g_sig_pipe[1] = -1;
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return g_sig_pipe[0]; }

 private:
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{}, old_quit_{}, old_chld_{};
};

// What every rank's environment gets besides its own numbers.
struct JobEnv {
  int world = 1;
  int port = 0;
  std::string token;
  // The socket reserved for the store on `port` that rank 0 inherits (kStoreSocketEnv), or -1.
  int store_fd = -1;
};

// The environment of local rank i: the launcher's, with the job's variables set.
std::vector<std::string> rank_environment(const LaunchOptions& o, int i, int rank,
                                          const JobEnv& env) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(env.world)},
      {"LOCAL_RANK", std::to_string(i)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"NODE_RANK", std::to_string(o.node_rank)},
      // torchrun's names of the same numbers (one role: every rank a trainer).
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(env.world)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(env.port)},
      {"TESSERA_JOB_TOKEN", env.token}};
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    // kStoreSocketEnv is this launcher's to give (a launcher started by a rank of another job
    // inherits that job's), and only to the rank that hosts the store.
    if (name != kStoreSocketEnv &&
        std::none_of(set.begin(), set.end(), [&](const auto& p) { return p.first == name; })) {
      out.emplace_back(kv);
    }
  }
  if (rank == 0 && env.store_fd >= 0) {
    out.push_back(fmt::format("{}={}:{}", kStoreSocketEnv, env.store_fd, env.port));
  }
  // A rank's stdout is a pipe: a Python rank would hold what it prints in an 8 KiB buffer, shown
  // late and lost when the rank is stopped (SIGTERM ends Python unflushed). Unless set.
  if (::getenv("PYTHONUNBUFFERED") == nullptr) {
    out.emplace_back("PYTHONUNBUFFERED=1");
  }
  for (const auto& [name, value] : set) {
    out.push_back(name);
    out.back().append("=").append(value);
  }
  return out;
}

// Signals the process group of the rank started as `pid` (its session, see spawn_rank), or the
// rank itself while it has not made its session yet (no group `pid` exists until then).
void signal_rank(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0 && errno == ESRCH) {
    ::kill(pid, sig);
  }
}

// Forks local rank i running the command, its stdout and stderr on pipes to the launcher.
// Everything the child needs is built before the fork: between fork and exec it only calls
// async-signal-safe functions (the launcher may have threads, e.g. under `tessera.launch()`).
Child spawn_rank(const LaunchOptions& o, int i, const JobEnv& env, std::vector<char*>& argv,
                 pid_t launcher_pid) {
  Child c;
  c.rank = o.node_rank * o.nproc_per_node + i;
  std::vector<std::string> env_strings = rank_environment(o, i, c.rank, env);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& kv : env_strings) {
    envp.push_back(kv.data());
  }
  envp.push_back(nullptr);
  const std::string cannot_run = fmt::format("tessera launch: cannot run '{}': ", argv[0]);
  int out[2], err[2];
  TESSERA_EXPECTS(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, IOError,
                  "pipe2 failed: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      ::close(fd);
    }
    TESSERA_FAIL(IOError, "fork failed: {}", std::strerror(e));
  }
  if (pid == 0) {
    // The rank dies with the launcher, even when the launcher is killed by SIGKILL and cannot
    // stop it (it would otherwise run on, unseen, until its next write to the closed pipe).
    // The launcher may already be gone by the time the request takes effect: check.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher_pid) {
      ::_exit(128 + SIGKILL);
    }
    // A session of its own (as torchrun's ranks): its process group is signalled as one, and
    // the terminal is not its controlling one, so reading it (input(), breakpoint()) reads,
    // where a background group of the launcher's session was stopped by SIGTTIN for ever.
    ::setsid();
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
      ::signal(sig, SIG_DFL);
    }
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (c.rank == 0 && env.store_fd >= 0) {
      ::fcntl(env.store_fd, F_SETFD, 0);  // rank 0 inherits the reserved socket; no other rank
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* why = ::strerrordesc_np(errno);  // async-signal-safe, unlike strerror
    ::write(2, cannot_run.data(), cannot_run.size());
    ::write(2, why, std::strlen(why));
    ::write(2, "\n", 1);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  c.pid = pid;
  c.out_fd = out[0];
  c.err_fd = err[0];
  return c;
}

// Watches the ranks until every one has ended and its output is drained: relays their output
// line by line, stops them all when one fails (SIGTERM, SIGKILL after the grace period), and
// forwards SIGINT / SIGTERM sent to the launcher.
class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  Supervisor(const LaunchOptions& o, std::vector<Child>& kids, int sig_fd)
      : o_(o), kids_(kids), sig_fd_(sig_fd) {}

  // The job's exit code: the failed rank's (128 + signal when killed), 128 + the signal the
  // launcher got, or 0.
  int run() {
    for (;;) {
      handle_exits();
      bool any_running = false;
      for (const Child& c : kids_) {
        any_running |= c.running;
      }
      if (!any_running && drain_until_ == Clock::time_point::max()) {
        drain_until_ = Clock::now() + std::chrono::seconds(1);  // grandchildren may hold pipes
      }
      if (stopping_ && !killed_ && any_running && Clock::now() >= kill_at_) {
        killed_ = true;
        write_all(2,
                  "[tessera launch] ranks still running after the grace period; sending "
                  "SIGKILL\n");
        signal_all(SIGKILL);
      }
      if (!any_running && (!has_open_output() || Clock::now() >= drain_until_)) {
        break;
      }
      if (!relay_output()) {
        break;
      }
    }
    for (Child& c : kids_) {
      if (c.out_fd >= 0) {
        ::close(c.out_fd);
      }
      if (c.err_fd >= 0) {
        ::close(c.err_fd);
      }
      ::waitpid(c.pid, nullptr, 0);  // the zombie reap() left
    }
    return result_;
  }

 private:
  // Every rank's process group, also of ranks that ended: what a rank started (a shell's
  // background job, its own children) lives on in its group after it ended.
  void signal_all(int sig) {
    for (Child& c : kids_) {
      signal_rank(c.pid, sig);
    }
  }

  void begin_stop(int sig) {
    if (stopping_) {
      return;
    }
    stopping_ = true;
    signal_all(sig);
    // inf (or any grace beyond a year) never sends SIGKILL; the conversion would overflow.
    kill_at_ =
        o_.grace_s > 3.2e7
            ? Clock::time_point::max()
            : Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.grace_s * 1000));
  }

  // Notes ranks that ended; those that failed go to `failed`. An ended rank is left a zombie
  // (WNOWAIT) until run() returns: its process ID, which is its process group's, stays taken,
  // so signalling the group (signal_all) can never reach a process that reused the ID.
  void reap(std::vector<Child*>& failed) {
    for (Child& c : kids_) {
      if (!c.running) {
        continue;
      }
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid != c.pid) {
        continue;
      }
      c.running = false;
      c.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
      c.code = c.signaled ? 128 + info.si_status : info.si_status;
      if (c.code != 0) {
        failed.push_back(&c);
      }
    }
  }

  // Reaps; on the first failure stops the job. When a rank fails, ranks that noticed its death
  // usually exit a moment later: wait briefly and blame a rank killed by a signal over ranks
  // that exited with an error code.
  void handle_exits() {
    std::vector<Child*> failed_now;
    reap(failed_now);
    if (failed_now.empty() || failed_rank_ >= 0 || stopping_) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reap(failed_now);
    Child* culprit = failed_now.front();
    for (Child* c : failed_now) {
      if (c->signaled && !culprit->signaled) {
        culprit = c;
      }
    }
    failed_rank_ = culprit->rank;
    result_ = culprit->code;
    const std::string how = culprit->signaled
                                ? fmt::format("was killed by signal {} ({})", culprit->code - 128,
                                              ::strsignal(culprit->code - 128))
                                : fmt::format("exited with code {}", culprit->code);
    write_all(2, fmt::format("[tessera launch] rank {} {}; stopping the other ranks\n",
                             culprit->rank, how));
    begin_stop(SIGTERM);
  }

  bool has_open_output() const {
    for (const Child& c : kids_) {
      if (c.out_fd >= 0 || c.err_fd >= 0) {
        return true;
      }
    }
    return false;
  }

  // Waits up to 100 ms for output or a signal and handles what came. False when poll failed.
  bool relay_output() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> who;  // the rank, and whether it is its stderr
    for (Child& c : kids_) {
      if (c.out_fd >= 0) {
        fds.push_back({c.out_fd, POLLIN, 0});
        who.emplace_back(&c, false);
      }
      if (c.err_fd >= 0) {
        fds.push_back({c.err_fd, POLLIN, 0});
        who.emplace_back(&c, true);
      }
    }
    fds.push_back({sig_fd_, POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) {
      return false;
    }
    for (size_t k = 0; k + 1 < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
        continue;
      }
      Child* c = who[k].first;
      const std::string prefix = o_.prefix_output ? fmt::format("[rank {}] ", c->rank) : "";
      if (who[k].second) {
        pump(c->err_fd, c->err_buf, 2, prefix);
      } else {
        pump(c->out_fd, c->out_buf, 1, prefix);
      }
    }
    if (fds.back().revents & POLLIN) {
      forward_signals();
    }
    return true;
  }

  void forward_signals() {
    unsigned char sig;
    while (::read(sig_fd_, &sig, 1) == 1) {
      if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGQUIT) {
        continue;  // SIGCHLD only wakes the loop up
      }
      write_all(2, fmt::format("[tessera launch] got signal {}; forwarding it to every rank\n",
                               static_cast<int>(sig)));
      if (failed_rank_ < 0 && result_ == 0) {
        result_ = 128 + sig;
      }
      if (!stopping_) {
        begin_stop(sig);
      } else {
        signal_all(sig);
      }
    }
  }

  const LaunchOptions& o_;
  std::vector<Child>& kids_;
  const int sig_fd_;
  int result_ = 0;
  int failed_rank_ = -1;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point drain_until_ = Clock::time_point::max();
};

// The port of rank 0's store when the launcher picks it (one node, no --master-port): a socket
// bound to a free port as the store binds it (its address: store_bind_address of the ranks'
// environment), held until rank 0 has inherited it. Rank 0's store listens on that very socket
// (rendezvous), so the port is never free between the pick and the store: a port that was
// merely free a moment ago could be taken meanwhile by any process's outgoing connection or
// bind to port 0, which draw from the same range. The socket does not listen: a rank 0 that
// binds MASTER_PORT itself (torch's TCPStore, which sets SO_REUSEADDR) still can, while the
// reservation keeps the port from every bind to port 0 and connect() until then.
PortReservation reserve_store_port(const LaunchOptions& o) {
  LaunchEnv ranks;
  ranks.world_size = ranks.local_world_size = o.nproc_per_node;
  ranks.master_addr = o.master_addr;
  PortReservation r(store_bind_address(ranks));
  if (r.fd() < 3) {
    // stdin, stdout or stderr was closed: a rank's 0-2 are replaced before it runs.
    const int fd = ::fcntl(r.fd(), F_DUPFD_CLOEXEC, 3);
    TESSERA_EXPECTS(fd >= 0, IOError, "fcntl(F_DUPFD_CLOEXEC) failed: {}", std::strerror(errno));
    r = PortReservation::adopt(fd);
  }
  return r;
}

}  // namespace

int launch(const LaunchOptions& o) {
  check_options(o);
  JobEnv env;
  env.token = job_token(o);
  env.port = o.master_port;
  PortReservation reserved;
  if (env.port == 0 && o.nnodes == 1) {
    try {
      reserved = reserve_store_port(o);
      env.port = reserved.port();
      env.store_fd = reserved.fd();
    } catch (const std::exception&) {
      // E.g. TESSERA_STORE_BIND names no address of this host: rank 0's store will say so if
      // the command runs one; a command that does not is not stopped by it.
      env.port = pick_free_port();
    }
  } else if (env.port == 0) {
    env.port = 29500;
  }
  env.world = o.nnodes * o.nproc_per_node;

  SignalRelay relay;
  std::vector<char*> argv;
  for (const auto& s : o.command) {
    argv.push_back(const_cast<char*>(s.c_str()));
  }
  argv.push_back(nullptr);
  const pid_t launcher_pid = ::getpid();
  std::vector<Child> kids;
  try {
    for (int i = 0; i < o.nproc_per_node; ++i) {
      kids.push_back(spawn_rank(o, i, env, argv, launcher_pid));
      if (env.store_fd >= 0) {
        reserved = PortReservation();  // rank 0 holds it now
        env.store_fd = -1;
      }
    }
  } catch (...) {
    // A rank could not start: the ones that did are stopped before the error goes up.
    for (Child& c : kids) {
      signal_rank(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.out_fd);
      ::close(c.err_fd);
    }
    throw;
  }
  return Supervisor(o, kids, relay.fd()).run();
}

}  // namespace tessera::transport
