// SPDX-License-Identifier: Apache-2.0
// `tessera bench dist-gather`: remote DistTensor read throughput (rows/s, GB/s) under
// `tessera launch --nproc-per-node N`, next to ucx_perftest measured on the same transport
// (UCX_TLS) in the same run. Every rank holds rows_per_rank rows; a read is a batch of random
// rows owned by other ranks. Two measurements per row size and read path: one reader (rank 0
// reads from rank 1, the others idle: comparable with ucx_perftest's one pair) and all ranks
// reading at once (aggregate). Paths: one-sided gets ("get") and one request per owner
// ("request").
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_commands.hpp"
#include "bench_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/transport/launch.hpp"

extern char** environ;

namespace tessera::tools {
namespace {

struct DistGatherArgs {
  std::string command;  // as given, for the results
  std::string row_bytes = "128..4096";
  int64_t batch = 10000;
  int64_t rows_per_rank = 0;  // 0: 64 MiB per rank (at least 2 batches)
  int warmup = 2;
  int iters = 10;
  std::string paths = "get,request";
  bool perftest = true;
  int perftest_window = 0;  // ucx_perftest -O (0: the batch, as many gets in flight as ours)
  uint64_t seed = 1;
  std::string json;
};

uint8_t pattern(int64_t row, int64_t k) {
  return static_cast<uint8_t>(row * 131 + k * 7 + (row >> 9));
}

// ucx_perftest on loopback, same UCX_TLS as this process: a server and a client; returns the
// client's overall bandwidth in bytes/s (perftest's MB are 2^20 bytes), 0 when it failed.
double run_perftest(const std::string& test, int64_t size, int64_t iters, int64_t warmup,
                    int window, std::string* cmdline) {
  const int port = transport::pick_free_port();
  std::vector<std::string> srv = {"ucx_perftest", "-p", std::to_string(port)};
  std::vector<char*> argv;
  for (auto& s : srv) {
    argv.push_back(s.data());
  }
  argv.push_back(nullptr);
  pid_t server = -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (posix_spawnp(&server, "ucx_perftest", &fa, nullptr, argv.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return 0;
  }
  posix_spawn_file_actions_destroy(&fa);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string cmd =
      fmt::format("timeout 60 ucx_perftest 127.0.0.1 -p {} -t {} -s {} -n {} -w {} -O {} -f 2>&1",
                  port, test, size, iters, warmup, window);
  *cmdline = cmd;
  const std::string out = run_capture(cmd);
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  // Last line: iterations, latency typical/avg/overall, bandwidth avg/overall (MB/s), rates.
  std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  std::stringstream ss(last);
  std::vector<double> v;
  std::string tok;
  while (ss >> tok) {
    try {
      v.push_back(std::stod(tok));
    } catch (const std::exception&) {
    }
  }
  if (v.size() < 6) {
    fmt::print(stderr, "[rank 0] ucx_perftest gave no figures: {}\n", out);
    return 0;
  }
  return v[5] * 1024.0 * 1024.0;
}

void run(const DistGatherArgs& a) {
  check_report_paths(a.json, "");
  TESSERA_EXPECTS(a.batch >= 1 && a.iters >= 1 && a.warmup >= 0, ValueError,
                  "--batch, --iters must be >= 1 and --warmup >= 0");
  auto rt = dist::Runtime::create();
  const int world = rt->world_size(), me = rt->rank();
  TESSERA_EXPECTS(world >= 2, ValueError,
                  "bench dist-gather needs at least 2 ranks: run it under `tessera launch "
                  "--nproc-per-node 2 -- tessera bench dist-gather ...`");
  const auto sizes = parse_size_list(a.row_bytes, "--row-bytes");
  std::vector<std::string> paths;
  {
    std::stringstream ss(a.paths);
    std::string t;
    while (std::getline(ss, t, ',')) {
      TESSERA_EXPECTS(t == "get" || t == "request", ValueError,
                      "--paths: '{}' is not 'get' or 'request'", t);
      paths.push_back(t);
    }
  }
  const char* tls_env = std::getenv("UCX_TLS");
  const std::string tls = tls_env && *tls_env ? tls_env : "auto";
  const bool one_sided_default = rt->one_sided_reads();
  // Without one-sided reads (TESSERA_DIST_GET=0) the get path cannot be measured: refused when
  // it is all that was asked for, else skipped and recorded as skipped (it vanished silently).
  std::string skipped;
  if (!one_sided_default && std::find(paths.begin(), paths.end(), "get") != paths.end()) {
    TESSERA_EXPECTS(std::find(paths.begin(), paths.end(), "request") != paths.end(), ValueError,
                    "--paths {}: one-sided reads are off in this job (TESSERA_DIST_GET=0), so "
                    "the get path has nothing to measure",
                    a.paths);
    skipped = "get: one-sided reads are off in this job (TESSERA_DIST_GET=0)";
    if (me == 0) {
      fmt::print("dist-gather: skipping {}\n", skipped);
    }
  }
  nlohmann::json results = nlohmann::json::array();
  if (me == 0) {
    fmt::print("dist-gather: {} ranks, transport {} (UCX_TLS={}), batch {} rows\n", world,
               rt->transport().name(), tls, a.batch);
  }
  for (int64_t rb : sizes) {
    const int64_t rows = a.rows_per_rank > 0
                             ? a.rows_per_rank
                             : std::max<int64_t>(2 * a.batch, (int64_t{64} << 20) / rb);
    for (const auto& path : paths) {
      rt->set_one_sided_reads(path == "get" && one_sided_default);
      if (path == "get" && !rt->one_sided_reads()) {
        continue;
      }
      dist::DistTensor t(rt, fmt::format("bench/{}/{}", path, rb), {rows * world, rb},
                         DType::kUInt8, dist::PartPolicy::even(rows * world, world),
                         [rb](int64_t b, int64_t e, void* dst) {
                           auto* d = static_cast<uint8_t*>(dst);
                           for (int64_t r = b; r < e; ++r) {
                             for (int64_t k = 0; k < rb; ++k) {
                               d[(r - b) * rb + k] = pattern(r, k);
                             }
                           }
                         });
      std::mt19937_64 rng(a.seed * 1000 + me);
      auto remote_ids = [&](bool only_rank1) {
        std::vector<int64_t> ids(static_cast<size_t>(a.batch));
        for (auto& id : ids) {
          int p = 1;
          if (!only_rank1) {
            p = static_cast<int>(rng() % (world - 1));
            if (p >= me) {
              ++p;
            }
          }
          id = p * rows + static_cast<int64_t>(rng() % rows);
        }
        return ids;
      };
      std::vector<uint8_t> out(static_cast<size_t>(a.batch * rb));
      nlohmann::json entry;
      entry["row_bytes"] = rb;
      entry["path"] = path;
      for (const char* mode : {"one_reader", "all_readers"}) {
        const bool one = std::string(mode) == "one_reader";
        const bool active = !one || me == 0;
        std::vector<double> times;
        rt->barrier();
        if (active) {
          for (int i = 0; i < a.warmup + a.iters; ++i) {
            const auto ids = remote_ids(one);
            const auto t0 = std::chrono::steady_clock::now();
            t.read_into(ids, out.data());
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (i >= a.warmup) {
              times.push_back(s);
            }
            if (i == 0) {
              for (int64_t j = 0; j < a.batch; ++j) {
                for (int64_t k = 0; k < rb; k += 61) {
                  TESSERA_EXPECTS(out[j * rb + k] == pattern(ids[j], k), Error,
                                  "dist-gather: wrong byte in row {}", ids[j]);
                }
              }
            }
          }
        }
        rt->barrier();
        double med = active ? median(times) : 0.0;
        std::vector<double> all(static_cast<size_t>(world));
        rt->transport().all_gather(&med, sizeof med, all.data());
        double agg_bps = 0, rank_bps_sum = 0;
        int n = 0;
        for (double m : all) {
          if (m > 0) {
            agg_bps += static_cast<double>(a.batch * rb) / m;
            rank_bps_sum += static_cast<double>(a.batch * rb) / m;
            ++n;
          }
        }
        nlohmann::json r;
        r["median_s_per_batch"] = one ? all[0] : median(std::vector<double>(all));
        r["rows_per_s"] = agg_bps / static_cast<double>(rb);
        r["gb_per_s"] = agg_bps / 1e9;
        r["gb_per_s_per_reader"] = n ? rank_bps_sum / n / 1e9 : 0.0;
        entry[mode] = r;
      }
      if (me == 0) {
        // The bound of the mapped shared-memory path: the same batch gathered from local rows.
        std::vector<double> lt;
        for (int i = 0; i < a.warmup + a.iters; ++i) {
          std::vector<int64_t> ids(static_cast<size_t>(a.batch));
          for (auto& id : ids) {
            id = static_cast<int64_t>(rng() % rows);
          }
          const auto t0 = std::chrono::steady_clock::now();
          t.read_into(ids, out.data());
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (i >= a.warmup) {
            lt.push_back(s);
          }
        }
        entry["local_gather_gb_per_s"] = static_cast<double>(a.batch * rb) / median(lt) / 1e9;
      }
      if (me == 0 && a.perftest && rt->transport().name() == "ucx") {
        std::string cmd_rows, cmd_bulk;
        const double pt_rows = run_perftest(
            "ucp_get", rb, std::max<int64_t>(5 * a.batch, 20000), std::max<int64_t>(a.batch, 2000),
            a.perftest_window > 0 ? a.perftest_window : static_cast<int>(a.batch), &cmd_rows);
        entry["perftest_ucp_get_gb_per_s"] = pt_rows / 1e9;
        entry["perftest_cmd"] = cmd_rows;
        const double one_bps = entry["one_reader"]["gb_per_s"].get<double>() * 1e9;
        entry["ratio_one_reader_vs_perftest"] = pt_rows > 0 ? one_bps / pt_rows : 0.0;
      }
      rt->barrier();  // perftest runs alone on rank 0
      if (me == 0) {
        const auto& o = entry["one_reader"];
        const auto& al = entry["all_readers"];
        fmt::print(
            "row {:>5} B  {:<7}  one reader {:>10.0f} rows/s {:6.3f} GB/s | all {} "
            "readers {:>10.0f} rows/s {:6.3f} GB/s",
            rb, path, o["rows_per_s"].get<double>(), o["gb_per_s"].get<double>(), world,
            al["rows_per_s"].get<double>(), al["gb_per_s"].get<double>());
        fmt::print(" | local gather {:6.3f} GB/s", entry["local_gather_gb_per_s"].get<double>());
        if (entry.contains("perftest_ucp_get_gb_per_s")) {
          fmt::print(" | ucx_perftest ucp_get {:6.3f} GB/s -> ratio {:.2f}",
                     entry["perftest_ucp_get_gb_per_s"].get<double>(),
                     entry["ratio_one_reader_vs_perftest"].get<double>());
        }
        fmt::print("\n");
        std::fflush(stdout);
      }
      results.push_back(entry);
    }
  }
  if (me == 0 && !a.json.empty()) {
    nlohmann::json j;
    j["benchmark"] = "dist-gather";
    j["command"] = fmt::format("tessera launch --nproc-per-node {} -- {}", world, a.command);
    j["world_size"] = world;
    j["transport"] = rt->transport().name();
    j["ucx_tls"] = tls;
    j["batch_rows"] = a.batch;
    j["iters"] = a.iters;
    j["commit"] = source_commit();
    j["machine"] = machine_json();
    j["ucx_version"] = run_capture("ucx_info -v 2>/dev/null | head -1");
    j["perftest_window"] = a.perftest_window > 0 ? a.perftest_window : a.batch;
    j["results"] = results;
    if (!skipped.empty()) {
      j["skipped"] = {skipped};
    }
    write_json_report(a.json, j);
  }
  rt->barrier();
}

}  // namespace

void register_bench_dist_gather(CLI::App& bench) {
  auto args = std::make_shared<DistGatherArgs>();
  auto* c = bench.add_subcommand(
      "dist-gather",
      "Remote DistTensor read throughput next to ucx_perftest (run under tessera launch)");
  c->add_option("--row-bytes", args->row_bytes, "row sizes: 128..4096 (doubling) or a list")
      ->capture_default_str();
  c->add_option("--batch", args->batch, "rows per read")->capture_default_str();
  c->add_option("--rows-per-rank", args->rows_per_rank,
                "rows each rank holds (0: 64 MiB, at least two batches)")
      ->capture_default_str();
  c->add_option("--warmup", args->warmup, "untimed reads first")->capture_default_str();
  c->add_option("--iters", args->iters, "timed reads (median reported)")->capture_default_str();
  c->add_option("--paths", args->paths, "read paths: get (one-sided), request (per owner)")
      ->capture_default_str();
  c->add_option("--perftest-window", args->perftest_window,
                "ucx_perftest -O (outstanding gets; 0: the batch size, as in our reads)")
      ->capture_default_str();
  c->add_flag("!--no-perftest", args->perftest, "skip ucx_perftest");
  c->add_option("--seed", args->seed, "RNG seed")->capture_default_str();
  c->add_option("--json", args->json, "write the results as JSON to this file (rank 0)");
  c->callback([args, c] {
    args->command = given_command(*c);
    run(*args);
  });
}

}  // namespace tessera::tools
