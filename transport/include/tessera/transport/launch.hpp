// SPDX-License-Identifier: Apache-2.0
// `tessera launch`: start this node's ranks with the rendezvous environment set, prefix their
// output with the rank, and stop them all when one fails.
#pragma once

#include <string>
#include <vector>

namespace tessera::transport {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  /// 0: a free port on a single node, reserved for rank 0's store until that rank holds it
  /// (inherited; see kStoreSocketEnv in rendezvous.hpp); 29500 when nnodes > 1.
  int master_port = 0;
  /// Empty: job_token_from_env() (TESSERA_JOB_TOKEN or TESSERA_JOB_TOKEN_FILE), else a fresh
  /// random token (single node only; with several nodes every node must be given the same
  /// token).
  std::string job_token;
  /// A file holding the job token (the --token-file option), read by launch() with
  /// read_token_file's checks and errors naming "--token-file <path>" when job_token is empty.
  std::string token_file;
  /// Seconds between SIGTERM and SIGKILL when stopping the ranks.
  double grace_s = 5;
  /// Prefix each output line with "[rank R] ".
  bool prefix_output = true;
  /// The command and its arguments, run once per local rank.
  std::vector<std::string> command;
};

/// Runs `command` as ranks node_rank*nproc_per_node ... +nproc_per_node-1 with RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT and TESSERA_JOB_TOKEN set.
/// When a rank exits non-zero (or is killed), the others get SIGTERM, then SIGKILL after grace_s,
/// and its exit code (128+signal when killed) is returned. SIGINT, SIGTERM, SIGHUP and SIGQUIT
/// sent to the launcher are forwarded to every rank; signals go to each rank's process group, a
/// failed rank's included. The processes launch() starts get SIGKILL when the thread that
/// called it ends (PR_SET_PDEATHSIG), so a launcher killed by SIGKILL leaves none of them
/// behind (their own children only when the command execs: `sh -c 'exec ...'`). grace_s = inf:
/// no SIGKILL. Returns 0 when every rank succeeded. Throws ValueError for bad options.
int launch(const LaunchOptions& options);

/// A TCP port that was free a moment ago (bind to port 0, read it, close). Any process may take
/// it before the caller binds it; PortReservation (rendezvous.hpp) holds one instead.
int pick_free_port();

}  // namespace tessera::transport
