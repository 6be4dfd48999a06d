// `tessera bench sample --device cuda --placement gpu|uva`: multi-layer sampling with compaction
// on the GPU (DeviceNeighborSampler), the graph in HBM or in pinned host memory read through UVA.
// In the same run: the copy bound of that placement (D2D or pinned H2D cudaMemcpy), the
// issue's throughput target, and a bit-for-bit check of the first batches against the CPU
// NeighborSampler on the same seeds and keys (a mismatch fails the command).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <exception>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_sample.hpp"
#include "bench_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/device_sampler.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::tools {

using namespace tessera::ops;  // NOLINT(build/namespaces)

void run_bench_sample_cuda(const SampleCudaRun& r) {
  cuda::require_cuda("bench sample --device cuda");
  const Graph& g = *r.graph;
  const cuda::Placement placement = cuda::parse_placement(r.placement, "--placement");
  TESSERA_EXPECTS(placement != cuda::Placement::kHost, ValueError,
                  "--placement host: the GPU sampler reads gpu or uva (pinned) memory only");
  const bool uva = placement == cuda::Placement::kPinnedHost;
  PhaseTimer& timer = *r.timer;
  fmt::print("device: {}\n", cuda::describe());

  timer.begin(fmt::format("place graph ({})", cuda::placement_name(placement)));
  cuda::Stream stream;
  const DeviceGraph dg(g, placement, r.weights, stream.get());
  timer.end();
  fmt::print("graph placed: {} ({})\n", human_bytes(static_cast<double>(dg.bytes())),
             uva ? "pinned host memory, read through UVA" : "GPU memory");
  const DeviceNeighborSampler sampler(dg, r.fanouts, r.replace);

  // Batches: a Philox permutation of all nodes cut into batch_size seeds (unique per batch).
  const int64_t n_batches = std::min<int64_t>(r.batches, g.num_nodes / r.batch_size);
  TESSERA_EXPECTS(n_batches >= 1, ValueError, "the graph has fewer than --batch-size {} nodes",
                  r.batch_size);
  const std::vector<int64_t> perm =
      philox_permutation(g.num_nodes, static_cast<uint32_t>(r.seed), 0, RngStream::kShuffle);
  const size_t seed_count = static_cast<size_t>(n_batches * r.batch_size);
  cuda::DeviceBuffer d_seeds(seed_count * sizeof(int64_t));
  cuda::copy_async(d_seeds.data(), perm.data(), d_seeds.size(), stream.get());
  auto seeds_of = [&](int64_t b) {
    return static_cast<const int64_t*>(d_seeds.data()) + b * r.batch_size;
  };
  auto key_of = [&](int64_t b) { return make_rng_key(r.seed, 0, b, 0); };

  // Check: the first batches against the CPU twin, bit for bit.
  timer.begin("check against the CPU twin");
  const int64_t checks = std::min<int64_t>(r.check_batches, n_batches);
  std::vector<std::vector<Block>> cpu_blocks;  // the CPU twin's blocks of the checked batches
  auto check_same = [](int64_t b, const std::vector<Block>& got, const std::vector<Block>& want,
                       const char* how) {
    for (size_t l = 0; l < want.size(); ++l) {
      const bool same = got[l].num_dst == want[l].num_dst &&
                        got[l].src_nodes == want[l].src_nodes && got[l].src == want[l].src &&
                        got[l].dst == want[l].dst && got[l].eids == want[l].eids;
      TESSERA_EXPECTS(same, Error,
                      "bench sample: batch {} block {} on the GPU ({}) differs from the CPU twin "
                      "({} vs {} edges, {} vs {} source nodes)",
                      b, l, how, got[l].num_edges(), want[l].num_edges(), got[l].num_src(),
                      want[l].num_src());
    }
  };
  {
    NeighborSamplerOptions so;
    so.fanouts = r.fanouts;
    so.replace = r.replace;
    so.weights = r.weights;
    const NeighborSampler cpu(g, so);
    for (int64_t b = 0; b < checks; ++b) {
      const std::vector<int64_t> seeds(perm.begin() + b * r.batch_size,
                                       perm.begin() + (b + 1) * r.batch_size);
      cpu_blocks.push_back(cpu.sample_blocks(seeds, key_of(b)));
      check_same(
          b,
          download_blocks(sampler.sample_blocks(seeds_of(b), r.batch_size, key_of(b), stream.get()),
                          stream.get()),
          cpu_blocks.back(), "one stream");
    }
  }
  timer.end();
  fmt::print("check:     the first {} batch(es) are bit-identical to the CPU twin\n", checks);

  // One stream: warm-up (the caching allocator fills), then the timed batches in order.
  for (int64_t b = 0; b < std::min<int64_t>(3, n_batches); ++b)
    sampler.sample_blocks(seeds_of(b), r.batch_size, key_of(b), stream.get());
  stream.synchronize();
  timer.begin("sample (cuda, 1 stream)");
  SampleStats total;
  double wall = 0;
  {
    Progress progress("sampling", n_batches, " batches");
    const double t0 = now_seconds();
    for (int64_t b = 0; b < n_batches; ++b) {
      const DeviceBlocks blocks =
          sampler.sample_blocks(seeds_of(b), r.batch_size, key_of(b), stream.get());
      total.add(blocks.stats);
      progress.update(b + 1);
    }
    stream.synchronize();
    wall = now_seconds() - t0;
    progress.done();
  }
  timer.end();

  // Several streams: `streams` host threads, each sampling whole batches (taken in turn from a
  // shared counter) on its own stream, so one batch's synchronizations and launches overlap
  // another's kernels, as a loader with several sampler threads runs. A warm-up pass over the
  // first batches fills each stream's cached scratch and checks those batches against the CPU
  // twin again (the concurrent path shares the allocator and the graph).
  SampleStats multi_total;
  double multi_wall = 0;
  const int streams = r.streams;
  if (streams > 1) {
    std::vector<cuda::Stream> ss(static_cast<size_t>(streams));
    auto run_threads = [&](int64_t count, bool check, SampleStats& acc) {
      std::atomic<int64_t> next{0};
      std::vector<SampleStats> per(ss.size());
      std::exception_ptr error;
      std::mutex mu;
      std::vector<std::thread> threads;
      for (size_t t = 0; t < ss.size(); ++t)
        threads.emplace_back([&, t] {
          try {
            for (int64_t b; (b = next.fetch_add(1)) < count;) {
              const DeviceBlocks blocks =
                  sampler.sample_blocks(seeds_of(b), r.batch_size, key_of(b), ss[t].get());
              per[t].add(blocks.stats);
              if (check && b < static_cast<int64_t>(cpu_blocks.size()))
                check_same(b, download_blocks(blocks, ss[t].get()), cpu_blocks[b], "stream");
            }
            ss[t].synchronize();
          } catch (...) {
            std::lock_guard<std::mutex> lock(mu);
            if (!error) error = std::current_exception();
            next = count;  // the other threads stop at their next batch
          }
        });
      for (auto& th : threads)
        th.join();
      if (error) std::rethrow_exception(error);
      for (const SampleStats& st : per)
        acc.add(st);
    };
    SampleStats warm;
    run_threads(std::min<int64_t>(n_batches, std::max<int64_t>(checks, 2 * streams)), true, warm);
    timer.begin(fmt::format("sample (cuda, {} streams)", streams));
    const double t0 = now_seconds();
    run_threads(n_batches, false, multi_total);
    multi_wall = now_seconds() - t0;
    timer.end();
    ss.clear();  // each thread synchronized its stream before it ended
    // The scratch cached for those streams can be reused by no other stream: hand it back
    // before the copy bound allocates its own buffers.
    cuda::scratch_allocator().release_cached();
  }

  timer.begin("copy bound");
  const size_t bound_bytes = size_t{256} << 20;
  const double bound_gbps = cuda::copy_bandwidth_gbps(bound_bytes, uva, 10);
  timer.end();

  const double edges_s = static_cast<double>(total.sampled_edges) / wall;
  const double seeds_s = static_cast<double>(total.seeds) / wall;
  // Graph bytes each sampled edge reads at random: its neighbor and its edge ID (8 B each), plus
  // the weight prefix sums' binary search when weighted (not counted: it varies with degree).
  const double bytes_per_edge = dg.eids() ? 16.0 : 8.0;
  const double touched_gbps = edges_s * bytes_per_edge / 1e9;
  const double target = uva ? 0.3e9 : 1.5e9;
  fmt::print("tessera:   {} batches x {} seeds, fanouts [{}], {}{}, graph in {}\n", n_batches,
             r.batch_size, fmt::join(r.fanouts, ","),
             r.replace ? "with replacement" : "without replacement",
             r.weights.empty() ? "" : ", weighted", cuda::placement_name(placement));
  fmt::print("  {:.0f} seeds/s, {} sampled edges/s, {:.1f} edges/seed (wall {:.3f} s)\n", seeds_s,
             human_count(edges_s), static_cast<double>(total.sampled_edges) / total.seeds, wall);
  print_sample_stages(
      total.sample_seconds, total.compact_seconds,
      "host wall incl. syncs; a layer's sampling kernel finishes inside the compaction's sync");
  fmt::print(
      "bound:     {} cudaMemcpy {:.1f} GB/s (same run); the sampler's random graph reads "
      "{:.2f} GB/s ({:.0f} B per sampled edge) = {:.3f} of it\n",
      uva ? "pinned host-to-device" : "device-to-device", bound_gbps, touched_gbps, bytes_per_edge,
      touched_gbps / bound_gbps);
  const double multi_edges_s =
      streams > 1 ? static_cast<double>(multi_total.sampled_edges) / multi_wall : 0.0;
  if (streams > 1) {
    fmt::print(
        "{} streams: {:.0f} seeds/s, {} sampled edges/s (wall {:.3f} s; {:.2f}x one stream)\n",
        streams, static_cast<double>(multi_total.seeds) / multi_wall, human_count(multi_edges_s),
        multi_wall, multi_edges_s / edges_s);
    print_sample_stages(
        multi_total.sample_seconds, multi_total.compact_seconds,
        "host wall summed over the threads; sampling kernels finish inside the compaction's sync");
  }
  const std::string where = uva ? "graph in pinned host memory" : "graph in GPU memory";
  fmt::print("target:    {} sampled edges/s ({}): one stream {:.2f}x the target",
             human_count(target), where, edges_s / target);
  if (streams > 1) fmt::print(", {} streams {:.2f}x", streams, multi_edges_s / target);
  fmt::print("\n");

  if (!r.json.empty()) {
    nlohmann::json j;
    j["benchmark"] = "sample";
    j["command"] = r.command;
    j["commit"] = commit_id();
    j["machine"] = machine_json();
    j["device"] = cuda::describe();
    j["graph"] = {{"spec", r.graph_spec},
                  {"num_nodes", g.num_nodes},
                  {"num_edges", g.num_edges()},
                  {"symmetrized", r.symmetrized},
                  {"placement", cuda::placement_name(placement)},
                  {"placed_bytes", dg.bytes()}};
    j["params"] = {{"fanouts", r.fanouts}, {"batch_size", r.batch_size},
                   {"replace", r.replace}, {"weighted", !r.weights.empty()},
                   {"batches", n_batches}, {"seed", r.seed},
                   {"device", "cuda"},     {"check_batches", checks},
                   {"streams", streams}};
    j["tessera"] = {{"seconds", wall},
                    {"seeds", total.seeds},
                    {"sampled_edges", total.sampled_edges},
                    {"seeds_per_s", seeds_s},
                    {"edges_per_s", edges_s},
                    {"stage_seconds",
                     {{"sampling", total.sample_seconds}, {"compaction", total.compact_seconds}}}};
    j["bound"] = {{"kind", uva ? "pinned_h2d_memcpy" : "d2d_memcpy"},
                  {"gbps", bound_gbps},
                  {"bytes", bound_bytes},
                  {"sampler_random_read_gbps", touched_gbps},
                  {"bytes_per_sampled_edge", bytes_per_edge}};
    if (streams > 1)
      j["streams"] = {{"streams", streams},
                      {"seconds", multi_wall},
                      {"seeds", multi_total.seeds},
                      {"sampled_edges", multi_total.sampled_edges},
                      {"edges_per_s", multi_edges_s},
                      {"speedup_over_one_stream", multi_edges_s / edges_s},
                      {"stage_seconds_summed",
                       {{"sampling", multi_total.sample_seconds},
                        {"compaction", multi_total.compact_seconds}}}};
    j["target"] = {{"edges_per_s", target},
                   {"ratio", edges_s / target},
                   {"ratio_streams", streams > 1 ? multi_edges_s / target : edges_s / target}};
    j["check"] = {{"batches", checks}, {"bit_identical_to_cpu", true}};
    j["phases"] = phases_json(timer);
    write_json_report(r.json, j);
  }
}

}  // namespace tessera::tools
