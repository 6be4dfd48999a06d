// SPDX-License-Identifier: Apache-2.0
// `tessera bench gather`: feature-row gather bandwidth next to the bound it is measured against
// in the same run. cuda: the library's gather from HBM (--placement gpu) or from pinned host
// memory through UVA (--placement uva; small rows sort their indices first, inside the timed
// region) against a device-to-device or pinned host-to-device cudaMemcpy of the same payload
// (CUDA events, warm-up, L2 flush, medians). cpu: the CPU twin against a parallel memcpy of the
// same payload.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_commands.hpp"
#include "bench_device.hpp"
#include "bench_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/gather.hpp"

namespace tessera::tools {
namespace {

struct GatherArgs {
  std::string device = "cpu";
  std::string placement = "gpu";
  std::string row_bytes = "128..4096";
  int64_t rows = 0;   // 0: about 1 GiB of source on cuda, 256 MiB on cpu
  int64_t batch = 0;  // 0: about 64 MiB of payload (at least 1024 rows)
  int warmup = 3;
  int iters = 20;
  uint64_t seed = 1;
  bool probe = false;
  std::string json;
  std::string results;
};

struct Row {
  int64_t row_bytes, rows, batch;
  double gather_ms, bound_ms, gather_gbps, bound_gbps;
  bool sorted = false;  // cuda: the gather sorted its indices first (inside gather_ms)
};

Row run_cpu(int64_t rb, int64_t rows, int64_t n, const GatherArgs& a) {
  std::vector<unsigned char> src(static_cast<size_t>(rows * rb), 0x5a);
  std::vector<unsigned char> out(static_cast<size_t>(n * rb)), copy_src(out.size(), 0xa5);
  std::mt19937_64 rng(a.seed);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (auto& x : idx)
    x = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  const ops::MatrixRef s{src.data(), DType::kUInt8, rows, rb};
  const ops::MatrixRef o{out.data(), DType::kUInt8, n, rb};
  const ops::IndexRef ix = ops::IndexRef::of(idx.data(), n);
  auto gather = [&] { ops::gather_rows(s, ix, o); };
  auto bound = [&] {
    const size_t total = out.size();
    parallel_for(0, static_cast<int64_t>(total), int64_t{1} << 20,
                 [&](int64_t lo, int64_t hi, int64_t) {
                   std::memcpy(out.data() + lo, copy_src.data() + lo, static_cast<size_t>(hi - lo));
                 });
  };
  for (int i = 0; i < a.warmup; ++i) {
    gather();
    bound();
  }
  std::vector<double> tg, tb;
  for (int i = 0; i < a.iters; ++i) {
    double t0 = now_seconds();
    gather();
    tg.push_back((now_seconds() - t0) * 1e3);
    t0 = now_seconds();
    bound();
    tb.push_back((now_seconds() - t0) * 1e3);
  }
  Row r{rb, rows, n, median(tg), median(tb), 0, 0, false};
  const double payload = static_cast<double>(n) * static_cast<double>(rb);
  r.gather_gbps = r.gather_ms > 0 ? payload / (r.gather_ms * 1e6) : 0;
  r.bound_gbps = r.bound_ms > 0 ? payload / (r.bound_ms * 1e6) : 0;
  return r;
}

Row run_cuda(int64_t rb, int64_t rows, int64_t n, bool uva, const GatherArgs& a) {
  const size_t bytes = static_cast<size_t>(rows * rb);
  cuda::DeviceBuffer dev;
  cuda::PinnedBuffer pinned;
  const void* src = nullptr;
  if (uva) {
    pinned = cuda::PinnedBuffer(bytes);
    std::memset(pinned.data(), 0x5a, bytes);
    src = pinned.data();
  } else {
    dev = cuda::DeviceBuffer(bytes);
    cuda::memset_async(dev.data(), 0x5a, bytes, nullptr);
    cuda::synchronize(nullptr);
    src = dev.data();
  }
  const GatherBenchResult g = bench_gather_device(src, rows, rb, n, uva, a.warmup, a.iters, a.seed);
  return {rb, rows, n, g.gather_ms, g.bound_ms, g.gather_gbps, g.bound_gbps, g.sorted};
}

struct Probe {
  std::string name;
  int64_t row_bytes, source_bytes;
  double ms, gbps, bound_gbps;
  double share = 0;  // sort alone: its share of the sorted gather's time
};

// Diagnostics of the small-row gather, each the library's gather with its plan forced, next to
// the memcpy bound of its own payload (64 MiB). HBM: one or four rows per thread group (the
// library takes four up to gather::kGroupRowsMaxBytes). UVA: the indices as given, sorted (the
// sort included), and the sort alone (what sorting costs per batch).
std::vector<Probe> run_probes(bool uva, const std::vector<Row>& rows_done, const GatherArgs& a) {
  std::vector<Probe> out;
  const int64_t src_bytes = int64_t{1} << 30;
  cuda::DeviceBuffer dev;
  cuda::PinnedBuffer pinned;
  const void* src = nullptr;
  if (uva) {
    pinned = cuda::PinnedBuffer(static_cast<size_t>(src_bytes));
    std::memset(pinned.data(), 0x5a, static_cast<size_t>(src_bytes));
    src = pinned.data();
  } else {
    dev = cuda::DeviceBuffer(static_cast<size_t>(src_bytes));
    cuda::memset_async(dev.data(), 0x5a, dev.size(), nullptr);
    cuda::synchronize(nullptr);
    src = dev.data();
  }
  const std::vector<int64_t> widths =
      uva ? std::vector<int64_t>{128, 256, 512, 1024} : std::vector<int64_t>{128, 256, 512};
  for (int64_t rb : widths) {
    const int64_t n = (int64_t{64} << 20) / rb;
    const double payload = static_cast<double>(n) * static_cast<double>(rb);
    // The bound of the same payload: the main run's at this width when it moved as many rows
    // (the defaults), else measured here.
    double bound = 0;
    for (const Row& r : rows_done) {
      if (r.row_bytes == rb && r.batch == n) {
        bound = r.bound_gbps;
      }
    }
    if (bound == 0) {
      bound = copy_bandwidth_gbps(static_cast<size_t>(payload), uva, a.iters);
    }
    auto probe = [&](const std::string& name, cuda::GatherOrder order, int per, bool sort_only) {
      const double ms =
          cuda::probe_gather_ms(src, src_bytes / rb, rb, n, order, per, sort_only, a.iters, a.seed);
      Probe p{name, rb, src_bytes, ms, sort_only ? 0.0 : payload / (ms * 1e6), bound};
      out.push_back(p);
      if (sort_only) {
        fmt::print("probe: {:>4} B rows, {:<34} {:>9.3f} ms\n", rb, name, ms);
      } else {
        fmt::print("probe: {:>4} B rows, {:<34} {:>9.3f} ms {:>7.1f} GB/s {:>5.0f}% of the bound\n",
                   rb, name, ms, p.gbps, bound > 0 ? 100 * p.gbps / bound : 0.0);
      }
      std::fflush(stdout);
      return ms;
    };
    if (uva) {
      probe("indices as given", cuda::GatherOrder::kAsGiven, 0, false);
      const double sorted_ms =
          probe("sorted, the sort included", cuda::GatherOrder::kSorted, 0, false);
      const double sort_ms = probe("the sort alone", cuda::GatherOrder::kSorted, 0, true);
      out.back().share = sorted_ms > 0 ? sort_ms / sorted_ms : 0;
    } else {
      probe("1 row per group", cuda::GatherOrder::kAsGiven, 1, false);
      probe("2 rows per group", cuda::GatherOrder::kAsGiven, 2, false);
      probe("4 rows per group", cuda::GatherOrder::kAsGiven, 4, false);
      probe("8 rows per group", cuda::GatherOrder::kAsGiven, 8, false);
    }
  }
  return out;
}

void run(const GatherArgs& a, const std::string& cmdline) {
  check_report_paths(a.json, a.results);
  TESSERA_EXPECTS(a.device == "cpu" || a.device == "cuda", ValueError,
                  "--device: expected cpu or cuda, got '{}'", a.device);
  const cuda::Placement placement = cuda::parse_placement(a.placement, "--placement");
  const bool on_gpu = a.device == "cuda";
  TESSERA_EXPECTS(!on_gpu || placement != cuda::Placement::kHost, ValueError,
                  "--placement host: the GPU gather reads gpu or uva (pinned) memory only");
  TESSERA_EXPECTS(a.iters > 0 && a.warmup >= 0, ValueError,
                  "--iters must be > 0 and --warmup >= 0 (got {}, {})", a.iters, a.warmup);
  TESSERA_EXPECTS(a.rows >= 0 && a.batch >= 0, ValueError,
                  "--rows and --batch must be >= 0 (got {}, {})", a.rows, a.batch);
  if (on_gpu) cuda::require_cuda("bench gather --device cuda");
  const bool uva = placement == cuda::Placement::kPinnedHost;
  const std::string bound_name =
      on_gpu ? (uva ? "pinned H2D cudaMemcpy" : "D2D cudaMemcpy") : "parallel memcpy";
  fmt::print("gather on {} from {}: bound = {} of the same payload (median of {} runs)\n", a.device,
             on_gpu ? cuda::placement_name(placement) : "host", bound_name, a.iters);
  fmt::print("{:>9} {:>10} {:>9} {:>11} {:>11} {:>11} {:>7}  {}\n", "row_bytes", "rows", "batch",
             "gather_ms", "gather_GB/s", "bound_GB/s", "ratio", "order");
  std::vector<Row> results;
  for (int64_t rb : parse_size_list(a.row_bytes, "--row-bytes")) {
    const int64_t src_target = on_gpu ? (int64_t{1} << 30) : (int64_t{256} << 20);
    const int64_t rows = a.rows ? a.rows : std::max<int64_t>(1, src_target / rb);
    const int64_t n = a.batch ? a.batch : std::max<int64_t>(1024, (int64_t{64} << 20) / rb);
    int64_t bytes = 0;
    TESSERA_EXPECTS(
        !__builtin_mul_overflow(rows, rb, &bytes) && !__builtin_mul_overflow(n, rb, &bytes),
        ValueError,
        "--rows {} / --batch {} of {}-byte rows: more bytes than fit in "
        "memory",
        rows, n, rb);
    const Row r = on_gpu ? run_cuda(rb, rows, n, uva, a) : run_cpu(rb, rows, n, a);
    fmt::print("{:>9} {:>10} {:>9} {:>11.4f} {:>11.1f} {:>11.1f} {:>6.0f}%  {}\n", r.row_bytes,
               r.rows, r.batch, r.gather_ms, r.gather_gbps, r.bound_gbps,
               r.bound_gbps > 0 ? 100.0 * r.gather_gbps / r.bound_gbps : 0.0,
               r.sorted ? "sorted (sort timed)" : "as given");
    std::fflush(stdout);
    results.push_back(r);
  }
  std::vector<Probe> probes;
  if (a.probe && on_gpu) probes = run_probes(uva, results, a);
  if (a.json.empty() && a.results.empty()) return;
  nlohmann::json j;
  j["benchmark"] = "gather";
  j["command"] = cmdline;
  j["commit"] = source_commit();
  j["machine"] = machine_json();
  j["machine"]["cuda"] = cuda::describe();
  j["device"] = a.device;
  j["placement"] = on_gpu ? cuda::placement_name(placement) : "host";
  j["bound"] = bound_name;
  j["units"] = "GB/s of payload (batch x row_bytes) per second, 1 GB = 1e9 bytes";
  j["iterations"] = a.iters;
  j["warmup"] = a.warmup;
  j["results"] = nlohmann::json::array();
  for (const Row& r : results)
    j["results"].push_back(
        {{"row_bytes", r.row_bytes},
         {"rows", r.rows},
         {"batch", r.batch},
         {"gather_ms", r.gather_ms},
         {"bound_ms", r.bound_ms},
         {"gather_gbps", r.gather_gbps},
         {"bound_gbps", r.bound_gbps},
         {"fraction_of_bound", r.bound_gbps > 0 ? r.gather_gbps / r.bound_gbps : 0.0},
         {"order", r.sorted ? "sorted" : "as_given"}});
  j["probes"] = nlohmann::json::array();
  for (const Probe& p : probes)
    j["probes"].push_back({{"name", p.name},
                           {"row_bytes", p.row_bytes},
                           {"source_bytes", p.source_bytes},
                           {"ms", p.ms},
                           {"gather_gbps", p.gbps},
                           {"bound_gbps", p.bound_gbps},
                           {"fraction_of_bound", p.bound_gbps > 0 ? p.gbps / p.bound_gbps : 0.0},
                           {"share_of_sorted_gather", p.share}});
  if (!a.json.empty()) write_json_report(a.json, j);
  if (!a.results.empty()) {
    const std::string bench =
        on_gpu ? fmt::format("gather-cuda-{}", uva ? "uva" : "hbm") : std::string("gather-cpu");
    write_json_report(result_path(a.results, bench, machine_tag(on_gpu)), j);
  }
}

}  // namespace

void register_bench_gather(CLI::App& bench) {
  auto a = std::make_shared<GatherArgs>();
  auto* cmd = bench.add_subcommand(
      "gather", "Feature-row gather bandwidth against a memcpy bound measured in the same run");
  cmd->add_option("--device", a->device, "cpu (the CPU twin) or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--placement", a->placement,
                  "cuda: where the source rows live: gpu (HBM) or uva (pinned host)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpu", "uva", "pinned"}));
  cmd->add_option("--row-bytes", a->row_bytes,
                  "row widths in bytes: A..B (doubling), a list a,b,c, or one value")
      ->capture_default_str();
  cmd->add_option("--rows", a->rows, "source rows (0: ~1 GiB on cuda, ~256 MiB on cpu)")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "rows gathered per run (0: ~64 MiB of payload)")
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "untimed runs")->capture_default_str();
  cmd->add_option("--iters", a->iters, "timed runs (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the random row indices")->capture_default_str();
  cmd->add_flag("--probe", a->probe,
                "cuda: also run the library's gather with its plan forced (gpu: 1 or 4 rows per "
                "thread group at 128-512 B; uva: indices as given, sorted, and the sort alone at "
                "128 B-1 KiB)");
  cmd->add_option("--json", a->json, "write the results as JSON to this file");
  cmd->add_option("--results", a->results,
                  "write the results as JSON under DIR/<bench>/<date>-<commit>-<machine>.json");
  cmd->callback([a, cmd] {
    refuse_options_of_device(*cmd, a->device, "cuda", {"--placement", "--probe"});
    run(*a, given_command(*cmd));
  });
}

}  // namespace tessera::tools
