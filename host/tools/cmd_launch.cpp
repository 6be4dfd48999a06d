// SPDX-License-Identifier: Apache-2.0
// `tessera launch`: start the local ranks of a job (see tessera/transport/launch.hpp).
#include <cstdlib>

#include "commands.hpp"
#include "tessera/transport/launch.hpp"

namespace tessera::tools {

void register_launch(CLI::App& app) {
  auto opts = std::make_shared<transport::LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch",
      "Start --nproc-per-node ranks of CMD on this node with RANK, WORLD_SIZE, LOCAL_RANK, "
      "LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT and TESSERA_JOB_TOKEN set; "
      "prefix their output with the rank; when one fails, stop the others and return its "
      "exit code (torchrun's spellings --nproc_per_node, --node_rank, --master_addr and "
      "--master_port work too)");
  sub->add_option("--nproc-per-node,--nproc_per_node", opts->nproc_per_node,
                  "Ranks to start on this node")
      ->required();
  sub->add_option("--nnodes", opts->nnodes, "Number of nodes in the job")->capture_default_str();
  sub->add_option("--node-rank,--node_rank", opts->node_rank, "This node's index in [0, nnodes)")
      ->capture_default_str();
  sub->add_option("--master-addr,--master_addr", opts->master_addr,
                  "Host of rank 0 (the rendezvous store)")
      ->capture_default_str();
  sub->add_option("--master-port,--master_port", opts->master_port,
                  "Port of the rendezvous store (default: a free port on one node, 29500 on "
                  "several)");
  // No --token: a command line is readable by every user of the host (ps, /proc/PID/cmdline).
  sub->add_option("--token-file", opts->token_file,
                  "File holding the job token, readable only by you (default: TESSERA_JOB_TOKEN "
                  "or TESSERA_JOB_TOKEN_FILE, else a random token on a single node)");
  sub->add_option("--grace", opts->grace_s, "Seconds between SIGTERM and SIGKILL when stopping")
      ->capture_default_str();
  auto no_prefix = std::make_shared<bool>(false);
  sub->add_flag("--no-prefix", *no_prefix, "Do not prefix output lines with [rank R]");
  sub->add_option("command", opts->command, "The command to run for every rank (after --)")
      ->required();
  sub->callback([opts, no_prefix] {
    opts->prefix_output = !*no_prefix;
    const int code = transport::launch(*opts);
    if (code != 0) {
      std::exit(code);
    }
  });
}

}  // namespace tessera::tools
