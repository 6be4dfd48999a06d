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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
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

// Emits every complete line of `buf` (all of it when `flush`) to `fd` with the rank prefix.
void emit_lines(std::string& buf, int fd, const std::string& prefix, bool flush) {
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) {
      break;
    }
    out += prefix;
    out.append(buf, start, nl - start + 1);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    out += prefix + buf + "\n";
    buf.clear();
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

}  // namespace

int launch(const LaunchOptions& o) {
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
  TESSERA_EXPECTS(o.grace_s >= 0, ValueError, "grace period {} s is negative", o.grace_s);

  std::string token = o.job_token;
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
  int port = o.master_port;
  if (port == 0) {
    port = o.nnodes == 1 ? pick_free_port() : 29500;
  }
  const int world = o.nnodes * o.nproc_per_node;

  TESSERA_EXPECTS(::pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) == 0, IOError, "pipe2 failed: {}",
                  std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old_int {
  }, old_term{}, old_chld{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGCHLD, &sa, &old_chld);

  std::vector<Child> kids(o.nproc_per_node);
  const pid_t launcher_pid = ::getpid();
  std::vector<char*> argv;
  for (const auto& s : o.command) {
    argv.push_back(const_cast<char*>(s.c_str()));
  }
  argv.push_back(nullptr);
  for (int i = 0; i < o.nproc_per_node; ++i) {
    Child& c = kids[i];
    c.rank = o.node_rank * o.nproc_per_node + i;
    int out[2], err[2];
    TESSERA_EXPECTS(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, IOError,
                    "pipe2 failed: {}", std::strerror(errno));
    const pid_t pid = ::fork();
    TESSERA_EXPECTS(pid >= 0, IOError, "fork failed: {}", std::strerror(errno));
    if (pid == 0) {
      // The rank dies with the launcher, even when the launcher is killed by SIGKILL and cannot
      // stop it (it would otherwise run on, unseen, until its next write to the closed pipe).
      // The launcher may already be gone by the time the request takes effect: check.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher_pid) {
        ::_exit(128 + SIGKILL);
      }
      ::setpgid(0, 0);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGCHLD, SIG_DFL);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::setenv("RANK", std::to_string(c.rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(i).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
      ::setenv("NODE_RANK", std::to_string(o.node_rank).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("TESSERA_JOB_TOKEN", token.c_str(), 1);
      ::execvp(argv[0], argv.data());
      const std::string msg =
          fmt::format("tessera launch: cannot run '{}': {}\n", argv[0], std::strerror(errno));
      write_all(2, msg);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so signalling the group never races the child's setpgid
    ::close(out[1]);
    ::close(err[1]);
    c.pid = pid;
    c.out_fd = out[0];
    c.err_fd = err[0];
  }

  using Clock = std::chrono::steady_clock;
  int result = 0;
  int failed_rank = -1;
  bool stopping = false;
  Clock::time_point kill_at = Clock::time_point::max();
  bool killed = false;
  Clock::time_point drain_until = Clock::time_point::max();

  auto signal_all = [&](int sig) {
    for (Child& c : kids) {
      if (c.running) {
        ::kill(-c.pid, sig);
      }
    }
  };
  auto begin_stop = [&](int sig) {
    if (stopping) {
      return;
    }
    stopping = true;
    signal_all(sig);
    kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
  };

  for (;;) {
    // Reap. When a rank fails, ranks that noticed its death usually exit a moment later: wait
    // briefly and blame a rank killed by a signal over ranks that exited with an error code.
    std::vector<Child*> failed_now;
    auto reap = [&] {
      for (;;) {
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
          return;
        }
        for (Child& c : kids) {
          if (c.pid != pid || !c.running) {
            continue;
          }
          c.running = false;
          c.signaled = WIFSIGNALED(status);
          c.code =
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (c.signaled ? WTERMSIG(status) : 0);
          if (c.code != 0) {
            failed_now.push_back(&c);
          }
        }
      }
    };
    reap();
    if (!failed_now.empty() && failed_rank < 0 && !stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      reap();
      Child* culprit = failed_now.front();
      for (Child* c : failed_now) {
        if (c->signaled && !culprit->signaled) {
          culprit = c;
        }
      }
      failed_rank = culprit->rank;
      result = culprit->code;
      write_all(2, fmt::format("[tessera launch] rank {} exited with code {}; stopping the other "
                               "ranks\n",
                               culprit->rank, culprit->code));
      begin_stop(SIGTERM);
    }
    bool any_running = false;
    for (const Child& c : kids) {
      any_running |= c.running;
    }
    if (!any_running && drain_until == Clock::time_point::max()) {
      drain_until = Clock::now() + std::chrono::seconds(1);  // grandchildren may hold the pipes
    }
    if (stopping && !killed && any_running && Clock::now() >= kill_at) {
      killed = true;
      write_all(2,
                "[tessera launch] ranks still running after the grace period; sending "
                "SIGKILL\n");
      signal_all(SIGKILL);
    }

    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> who;
    for (Child& c : kids) {
      if (c.out_fd >= 0) {
        fds.push_back({c.out_fd, POLLIN, 0});
        who.emplace_back(&c, false);
      }
      if (c.err_fd >= 0) {
        fds.push_back({c.err_fd, POLLIN, 0});
        who.emplace_back(&c, true);
      }
    }
    if (fds.empty() && !any_running) {
      break;
    }
    if (!any_running && Clock::now() >= drain_until) {
      break;
    }
    fds.push_back({g_sig_pipe[0], POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) {
      break;
    }
    for (size_t k = 0; k + 1 < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) {
        continue;
      }
      Child* c = who[k].first;
      const std::string prefix = o.prefix_output ? fmt::format("[rank {}] ", c->rank) : "";
      if (who[k].second) {
        pump(c->err_fd, c->err_buf, 2, prefix);
      } else {
        pump(c->out_fd, c->out_buf, 1, prefix);
      }
    }
    if (fds.back().revents & POLLIN) {
      unsigned char sig;
      while (::read(g_sig_pipe[0], &sig, 1) == 1) {
        if (sig == SIGINT || sig == SIGTERM) {
          write_all(2, fmt::format("[tessera launch] got signal {}; forwarding it to every rank\n",
                                   static_cast<int>(sig)));
          if (failed_rank < 0 && result == 0) {
            result = 128 + sig;
          }
          if (!stopping) {
            begin_stop(sig);
          } else {
            signal_all(sig);
          }
        }
      }
    }
  }
  for (Child& c : kids) {
    if (c.out_fd >= 0) {
      ::close(c.out_fd);
    }
    if (c.err_fd >= 0) {
      ::close(c.err_fd);
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  ::close(g_sig_pipe[0]);
  ::close(g_sig_pipe[1]);
  return result;
}

}  // namespace tessera::transport
