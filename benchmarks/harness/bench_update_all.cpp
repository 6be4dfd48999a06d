// SPDX-License-Identifier: Apache-2.0
// `tessera bench update-all`: one full aggregation (dist::update_all, copy_src / sum) over a
// partitioned graph under `tessera launch --nproc-per-node N`, as a rate (edges x features per
// second over the whole graph) next to the local SpMM's rate measured in the same run: every
// rank runs ops::spmm on its own aggregation matrix (the exact call update_all makes, without
// the exchange and the copies) at the same time as the others. The ratio says what the exchange
// of remote rows, the copy of local rows and the result tensor cost on top of the arithmetic.
// --device cuda: features placed on each rank's GPU, cuSPARSE against cuSPARSE.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_commands.hpp"
#include "bench_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/dist/update_all.hpp"
#include "tessera/ops/spmm.hpp"
#include "tessera/partition/format.hpp"

namespace tessera::tools {
namespace {

struct UpdateAllArgs {
  std::string command;  // as given, for the results
  std::string part_config;
  std::string graph_spec;  // recorded only (what the partitioning was made from)
  int64_t feat = 100;
  int warmup = 1;
  int iters = 3;
  std::string device = "cpu";
  std::string json;
  std::string results;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The largest of every rank's value (collective).
double max_over_ranks(dist::Runtime& rt, double v) {
  std::vector<double> all(static_cast<size_t>(rt.world_size()));
  rt.transport().all_gather(&v, sizeof v, all.data());
  return *std::max_element(all.begin(), all.end());
}

void run(const UpdateAllArgs& a) {
  check_report_paths(a.json, a.results);
  TESSERA_EXPECTS(a.feat >= 1 && a.iters >= 1 && a.warmup >= 0, ValueError,
                  "--feat and --iters must be >= 1 and --warmup >= 0");
  TESSERA_EXPECTS(a.device == "cpu" || a.device == "cuda", ValueError,
                  "--device must be cpu or cuda, got '{}'", a.device);
  const bool gpu = a.device == "cuda";
  if (gpu) {
    cuda::require_cuda("bench update-all --device cuda");
  }
  auto rt = dist::Runtime::create();
  const int world = rt->world_size(), me = rt->rank();
  auto t0 = std::chrono::steady_clock::now();
  const PartitionConfig config = load_partition_config(a.part_config);
  dist::DistGraph g(rt, config.graph_name, a.part_config);
  const double load_s = max_over_ranks(*rt, seconds_since(t0));
  const int64_t F = a.feat;
  if (me == 0) {
    fmt::print("update-all: {} ranks, transport {}, {} nodes, {} edges, {} features, {}\n", world,
               rt->transport().name(), g.num_nodes(), g.num_edges(), F, a.device);
  }
  t0 = std::chrono::steady_clock::now();
  const dist::UpdateAllPlan plan(g);
  const double plan_s = max_over_ranks(*rt, seconds_since(t0));
  const auto init = [F](int64_t b, int64_t e, void* dst) {
    auto* p = static_cast<float*>(dst);
    std::mt19937 rng(static_cast<uint32_t>(b));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < (e - b) * F; ++i) {
      p[i] = u(rng);
    }
  };
  dist::DistTensor x(rt, "bench/update-all/x", {g.num_nodes(), F}, DType::kFloat32,
                     dist::PartPolicy::node(g.book()), init, false,
                     gpu ? dist::Placement::kDevice : dist::Placement::kHost);
  if (gpu && world > 1) {
    rt->attach_device_transport("nccl");
  }

  // update_all, every rank at once.
  std::vector<double> t_all;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    rt->barrier();
    t0 = std::chrono::steady_clock::now();
    const dist::DistTensor out = plan.run(x);
    const double s = max_over_ranks(*rt, seconds_since(t0));
    if (i >= a.warmup) {
      t_all.push_back(s);
    }
    if (me == 0) {
      fmt::print("  update_all {} of {}: {:.3f} s\n", i + 1, a.warmup + a.iters, s);
    }
  }

  // The local SpMM on the same matrix, every rank at once.
  const int64_t owned = plan.num_owned();
  const int64_t ncols = owned + static_cast<int64_t>(plan.remote_ids().size());
  std::vector<float> hb(static_cast<size_t>(ncols * F));
  init(0, ncols, hb.data());
  std::vector<float> hc(gpu ? 0 : static_cast<size_t>(owned * F));
  cuda::DeviceBuffer db, dc, dip, dcols;
  ops::CsrRef csr;
  ops::MatrixRef b{hb.data(), DType::kFloat32, ncols, F, ops::Memory::kHost};
  ops::MatrixRef c{hc.data(), DType::kFloat32, owned, F, ops::Memory::kHost};
  csr.indptr = ops::IndexRef::of(plan.indptr().data(), owned + 1);
  csr.indices = ops::IndexRef::of(plan.cols().data(), plan.num_edges());
  std::optional<cuda::Stream> gpu_stream;
  if (gpu) {
    gpu_stream.emplace();
    const cuda::Stream& stream = *gpu_stream;
    db = cuda::DeviceBuffer(hb.size() * sizeof(float) + 4);
    dc = cuda::DeviceBuffer(static_cast<size_t>(owned * F) * sizeof(float) + 4);
    dip = cuda::DeviceBuffer(plan.indptr().size() * sizeof(int64_t));
    dcols = cuda::DeviceBuffer(plan.cols().size() * sizeof(int64_t) + 8);
    cuda::copy_async(db.data(), hb.data(), hb.size() * sizeof(float), stream.get());
    cuda::copy_async(dip.data(), plan.indptr().data(), plan.indptr().size() * sizeof(int64_t),
                     stream.get());
    cuda::copy_async(dcols.data(), plan.cols().data(), plan.cols().size() * sizeof(int64_t),
                     stream.get());
    stream.synchronize();
    csr.indptr =
        ops::IndexRef::of(static_cast<const int64_t*>(dip.data()), owned + 1, ops::Memory::kDevice);
    csr.indices = ops::IndexRef::of(static_cast<const int64_t*>(dcols.data()), plan.num_edges(),
                                    ops::Memory::kDevice);
    b = {db.data(), DType::kFloat32, ncols, F, ops::Memory::kDevice};
    c = {dc.data(), DType::kFloat32, owned, F, ops::Memory::kDevice};
  }
  csr.num_rows = owned;
  csr.num_cols = ncols;
  ops::ExecOptions eo;
  eo.stream = gpu ? gpu_stream->get() : nullptr;
  std::vector<double> t_spmm;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    rt->barrier();
    t0 = std::chrono::steady_clock::now();
    if (owned > 0) {
      ops::spmm(csr, b, c, ops::Reduce::kSum, false, eo);
    }
    if (gpu) {
      gpu_stream->synchronize();
    }
    const double s = max_over_ranks(*rt, seconds_since(t0));
    if (i >= a.warmup) {
      t_spmm.push_back(s);
    }
    if (me == 0) {
      fmt::print("  local spmm {} of {}: {:.3f} s\n", i + 1, a.warmup + a.iters, s);
    }
  }

  const double e = static_cast<double>(g.num_edges());
  const double upd = median(t_all), sp = median(t_spmm);
  const double remote_rows = max_over_ranks(*rt, static_cast<double>(plan.remote_ids().size()));
  if (me == 0) {
    fmt::print(
        "update_all {:.3f} s ({:.1f} M edges/s, {:.2f} GFLOP/s) | local {} {:.3f} s ({:.1f} M "
        "edges/s) | ratio {:.3f} | plan {:.2f} s, most remote rows on a rank {:.0f}\n",
        upd, e / upd / 1e6, e * static_cast<double>(F) / upd / 1e9,
        gpu ? "cuSPARSE" : "SpMM (CPU twin)", sp, e / sp / 1e6, sp / upd, plan_s, remote_rows);
  }
  if (me == 0 && (!a.json.empty() || !a.results.empty())) {
    nlohmann::json j;
    j["benchmark"] = "update-all";
    j["command"] = fmt::format("tessera launch --nproc-per-node {} -- {}", world, a.command);
    // What the partitioning records it was made from (--graph only where it records nothing:
    // a free label could name another graph than the one measured).
    const nlohmann::json& source =
        config.json.contains("source") ? config.json["source"] : nlohmann::json::object();
    j["graph"] = source.contains("path") && source["path"].is_string() &&
                         !source["path"].get<std::string>().empty()
                     ? source["path"].get<std::string>()
                     : a.graph_spec;
    j["num_parts"] = config.num_parts;  // ranks = num_parts x trainers per machine
    j["trainers_per_machine"] = world / config.num_parts;
    j["num_nodes"] = g.num_nodes();
    j["num_edges"] = g.num_edges();
    j["features"] = F;
    j["world_size"] = world;
    j["transport"] = rt->transport().name();
    j["device"] = a.device;
    j["message"] = "copy_src";
    j["reduce"] = "sum";
    j["load_seconds"] = load_s;
    j["plan_seconds"] = plan_s;
    j["max_remote_rows_per_rank"] = remote_rows;
    j["update_all_seconds"] = t_all;
    j["update_all_median_seconds"] = upd;
    j["update_all_edges_per_second"] = e / upd;
    j["local_spmm"] = gpu ? "cuSPARSE" : "ops::spmm CPU twin";
    j["local_spmm_seconds"] = t_spmm;
    j["local_spmm_median_seconds"] = sp;
    j["local_spmm_edges_per_second"] = e / sp;
    j["ratio_update_all_vs_local_spmm"] = sp / upd;
    j["commit"] = source_commit();
    j["machine"] = machine_json();
    if (gpu) {
      j["machine"]["cuda"] = cuda::describe();
    }
    if (!a.json.empty()) {
      write_json_report(a.json, j);
    }
    if (!a.results.empty()) {
      // Runs of another world size keep their own folder (the machine tag names the device).
      const std::string bench = world > 1 ? fmt::format("update-all-{}ranks", world) : "update-all";
      write_json_report(result_path(a.results, bench, machine_tag(gpu)), j);
    }
  }
  rt->barrier();
}

}  // namespace

void register_bench_update_all(CLI::App& bench) {
  auto args = std::make_shared<UpdateAllArgs>();
  auto* c = bench.add_subcommand(
      "update-all",
      "Distributed update_all against the local SpMM of the same rows (run under tessera "
      "launch with a multiple of the partitions' count of ranks: each machine's trainers share "
      "its partition; the JSON records num_parts and trainers_per_machine)");
  c->add_option("--part-config", args->part_config, "partition config JSON (one part per rank)")
      ->required();
  c->add_option("--graph", args->graph_spec,
                "what the partitioning was made from, recorded in the JSON when its config "
                "does not say (its source.path)");
  c->add_option("--feat", args->feat, "feature columns")->capture_default_str();
  c->add_option("--warmup", args->warmup, "untimed runs first")->capture_default_str();
  c->add_option("--iters", args->iters, "timed runs (median reported)")->capture_default_str();
  c->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  c->add_option("--json", args->json, "write the results as JSON to this file (rank 0)");
  c->add_option("--results", args->results,
                "write the results as JSON under DIR/update-all/<date>-<commit>-<machine>.json");
  c->callback([args, c] {
    args->command = given_command(*c);
    run(*args);
  });
}

}  // namespace tessera::tools
