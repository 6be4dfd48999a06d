// SPDX-License-Identifier: Apache-2.0
// `tessera bench sample --device cuda --placement gpu|uva`: multi-layer sampling with compaction
// on the GPU (DeviceNeighborSampler), the graph in HBM or in pinned host memory read through UVA.
// In the same run: the limit (a plain kernel reading, for the frontier visits of the checked
// batches, only what the sampler must read of the placed graph: cuda::row_read_rate), the
// memcpy bound of the placement and a single-entry random-read rate beside it, a bit-for-bit
// check of the first batches against the CPU NeighborSampler (a mismatch fails the command), one
// stream and the best configuration, a sweep of batch sizes, and a digest of the blocks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_device.hpp"
#include "bench_sample.hpp"
#include "bench_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/device_sampler.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::tools {

using namespace tessera::ops;  // NOLINT(build/namespaces)

namespace {

// How a timed run schedules its batches.
struct Config {
  int per_call = 1;        // batches one call takes (one launch sequence serves them)
  int streams = 1;         // host threads, each with its own stream
  bool pipelined = false;  // keep two calls in flight per stream (else wait for each call)
};

struct Measure {
  Config config;
  int64_t batch_size = 0, batches = 0, seeds = 0, edges = 0;
  double seconds = 0;
  int64_t calls = 0, syncs = 0, graph_launches = 0;
  double edges_per_s() const { return seconds > 0 ? static_cast<double>(edges) / seconds : 0; }
  nlohmann::json json(double limit_edges_per_s) const {
    return {{"batches_per_call", config.per_call},
            {"streams", config.streams},
            {"pipelined", config.pipelined},
            {"batch_size", batch_size},
            {"batches", batches},
            {"seconds", seconds},
            {"seeds", seeds},
            {"sampled_edges", edges},
            {"seeds_per_s", seconds > 0 ? static_cast<double>(seeds) / seconds : 0},
            {"edges_per_s", edges_per_s()},
            {"fraction_of_limit", edges_per_s() / limit_edges_per_s},
            {"calls", calls},
            {"host_syncs", syncs},
            {"graph_launches", graph_launches}};
  }
};

std::string config_name(const Config& c) {
  return fmt::format("{} batch{}/call, {} stream{}{}", c.per_call, c.per_call > 1 ? "es" : "",
                     c.streams, c.streams > 1 ? "s" : "", c.pipelined ? ", 2 calls in flight" : "");
}

// The batches of one batch size: a Philox permutation of every node cut into batch_size seeds
// (the CPU bench's loader batches, epoch 0), keys (seed, 0, b, 0), seeds in device memory.
struct Batches {
  int64_t size = 0, count = 0;
  const int64_t* d = nullptr;  // the whole permutation in device memory
  uint64_t seed = 0;
  const int64_t* of(int64_t b) const { return d + b * size; }
  RngKey key(int64_t b) const { return make_rng_key(seed, 0, b, 0); }
};

// Samples `n` batches (from batch 0) with `c` on a fresh sampler over `dg`; times everything after
// a warm-up of two calls per stream (which captures the CUDA graphs and fills the allocator).
// The streams every timed run uses (created once, so the scratch the caching allocator keeps per
// stream is reused from one run to the next).
std::vector<cuda::Stream>& bench_streams(int n) {
  static auto* streams = new std::vector<cuda::Stream>;  // not destroyed: outlives the runtime
  while (static_cast<int>(streams->size()) < n)
    streams->emplace_back();
  return *streams;
}

// Returns the scratch cached for the bench streams to the device between runs of very different
// sizes (the caching allocator keeps freed blocks per stream and size class).
void release_scratch() {
  for (cuda::Stream& s : bench_streams(0))
    s.synchronize();
  cuda::scratch_allocator().release_cached();
}

Measure time_config(const DeviceGraph& dg, const SampleCudaRun& r, const Batches& bt, int64_t n,
                    const Config& c) {
  DeviceSamplerOptions so;
  so.max_batches = c.per_call;
  so.cuda_graph = r.cuda_graph;
  so.stage_bytes = r.stage_bytes;
  const DeviceNeighborSampler sampler(dg, r.fanouts, r.replace, EdgeDir::kIn, so);
  std::vector<cuda::Stream>& streams = bench_streams(c.streams);
  const int64_t calls = (n + c.per_call - 1) / c.per_call;
  auto call_args = [&](int64_t call, std::vector<int64_t>& offsets, std::vector<RngKey>& keys) {
    const int64_t first = call * c.per_call, last = std::min(n, first + c.per_call);
    offsets.assign(1, 0);
    keys.clear();
    for (int64_t b = first; b < last; ++b) {
      offsets.push_back(offsets.back() + bt.size);
      keys.push_back(bt.key(b));
    }
    return bt.of(first);
  };
  std::atomic<int64_t> edges{0};
  auto run_threads = [&](int64_t first_call, int64_t end_call) {
    std::atomic<int64_t> next{first_call};
    std::exception_ptr error;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < c.streams; ++t)
      threads.emplace_back([&, t] {
        try {
          const cuda::StreamHandle s = streams[static_cast<size_t>(t)].get();
          std::deque<DeviceNeighborSampler::Pending> inflight;
          std::vector<int64_t> offsets;
          std::vector<RngKey> keys;
          auto drain = [&](size_t keep) {
            while (inflight.size() > keep) {
              for (const DeviceBlocks& b : inflight.front().wait())
                edges += b.stats.sampled_edges;
              inflight.pop_front();
            }
          };
          for (int64_t call; (call = next.fetch_add(1)) < end_call;) {
            const int64_t* seeds = call_args(call, offsets, keys);
            inflight.push_back(sampler.sample_blocks_async(seeds, offsets, keys, s));
            drain(c.pipelined ? 1 : 0);
          }
          drain(0);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
          next = end_call;
        }
      });
    for (auto& th : threads)
      th.join();
    if (error) std::rethrow_exception(error);
  };
  const int64_t warm = std::min<int64_t>(calls, 2 * c.streams);
  run_threads(0, warm);
  const cuda::BlockSamplerStats s0 = sampler.engine().stats();
  edges = 0;
  Measure m;
  m.config = c;
  m.batch_size = bt.size;
  const double t0 = now_seconds();
  run_threads(0, calls);
  m.seconds = now_seconds() - t0;
  const cuda::BlockSamplerStats s1 = sampler.engine().stats();
  m.batches = n;
  m.seeds = n * bt.size;
  m.edges = edges;
  m.calls = s1.calls - s0.calls;
  m.syncs = s1.host_syncs - s0.host_syncs;
  m.graph_launches = s1.graph_launches - s0.graph_launches;
  return m;
}

// The first `n` batches' blocks, downloaded, sampled with `c` (one call at a time, one stream).
// `stage_bytes` (may be null) receives the row staging the sampler resolved.
std::vector<std::vector<Block>> sample_to_host(const DeviceGraph& dg, const SampleCudaRun& r,
                                               const Batches& bt, int64_t n, const Config& c,
                                               int* stage_bytes = nullptr) {
  DeviceSamplerOptions so;
  so.max_batches = c.per_call;
  so.cuda_graph = r.cuda_graph;
  so.stage_bytes = r.stage_bytes;
  const DeviceNeighborSampler sampler(dg, r.fanouts, r.replace, EdgeDir::kIn, so);
  if (stage_bytes) {
    *stage_bytes = sampler.engine().options().stage_bytes;
  }
  const cuda::StreamHandle stream = bench_streams(1)[0].get();
  std::vector<std::vector<Block>> out;
  for (int64_t first = 0; first < n; first += c.per_call) {
    std::vector<int64_t> offsets = {0};
    std::vector<RngKey> keys;
    for (int64_t b = first; b < std::min(n, first + c.per_call); ++b) {
      offsets.push_back(offsets.back() + bt.size);
      keys.push_back(bt.key(b));
    }
    for (const DeviceBlocks& d :
         sampler.sample_blocks_async(bt.of(first), offsets, keys, stream).wait())
      out.push_back(download_blocks(d, stream));
  }
  return out;
}

void check_same(int64_t b, const std::vector<Block>& got, const std::vector<Block>& want,
                const std::string& how) {
  for (size_t l = 0; l < want.size(); ++l) {
    const bool same = got[l].num_dst == want[l].num_dst && got[l].src_nodes == want[l].src_nodes &&
                      got[l].src == want[l].src && got[l].dst == want[l].dst &&
                      got[l].eids == want[l].eids;
    TESSERA_EXPECTS(same, Error,
                    "bench sample: batch {} block {} on the GPU ({}) differs from the CPU twin "
                    "({} vs {} edges, {} vs {} source nodes)",
                    b, l, how, got[l].num_edges(), want[l].num_edges(), got[l].num_src(),
                    want[l].num_src());
  }
}

// The limit's workload: every frontier visit of the sampled batches `blocks` (block l's
// destination nodes, sampled with fanouts[l]), as one device list in segments of equal fanout,
// and the edges they yield.
struct Visits {
  cuda::DeviceBuffer nodes;
  std::vector<cuda::VisitSegment> segments;
  int64_t count = 0, edges = 0;
};

Visits frontier_visits(const std::vector<std::vector<Block>>& blocks,
                       const std::vector<int64_t>& fanouts, cuda::StreamHandle stream) {
  Visits v;
  std::vector<int64_t> nodes;
  for (size_t l = 0; l < fanouts.size(); ++l) {
    cuda::VisitSegment seg;
    seg.begin = static_cast<int64_t>(nodes.size());
    seg.fanout = fanouts[l];
    for (const std::vector<Block>& batch : blocks) {
      const Block& b = batch[l];
      nodes.insert(nodes.end(), b.src_nodes.begin(), b.src_nodes.begin() + b.num_dst);
      v.edges += b.num_edges();
    }
    seg.end = static_cast<int64_t>(nodes.size());
    v.segments.push_back(seg);
  }
  v.count = static_cast<int64_t>(nodes.size());
  v.nodes = cuda::DeviceBuffer(std::max<size_t>(1, nodes.size()) * sizeof(int64_t));
  cuda::copy_async(v.nodes.data(), nodes.data(), nodes.size() * sizeof(int64_t), stream);
  cuda::synchronize(stream);
  return v;
}

}  // namespace

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
  DeviceGraphOptions go;
  go.interleave = r.interleave;
  go.split_arrays = false;
  const DeviceGraph dg(g, placement, r.weights, stream.get(), go);
  timer.end();
  const cuda::GraphView view = dg.view();
  const int edge_bytes = view.layout == cuda::Adjacency::kPairs ? 16 : 8;
  const char* layout = view.layout == cuda::Adjacency::kPacked  ? "packed 8 B/edge"
                       : view.layout == cuda::Adjacency::kPairs ? "pairs 16 B/edge"
                                                                : "split indices + eids";
  fmt::print("graph placed: {} ({}; adjacency {})\n", human_bytes(static_cast<double>(dg.bytes())),
             uva ? "pinned host memory read through UVA, node arrays in GPU memory" : "GPU memory",
             layout);

  const int64_t n_batches = std::min<int64_t>(r.batches, g.num_nodes / r.batch_size);
  TESSERA_EXPECTS(n_batches >= 1, ValueError, "the graph has fewer than --batch-size {} nodes",
                  r.batch_size);
  const std::vector<int64_t> perm =
      philox_permutation(g.num_nodes, static_cast<uint32_t>(r.seed), 0, RngStream::kShuffle);
  cuda::DeviceBuffer d_perm(perm.size() * sizeof(int64_t));
  cuda::copy_async(d_perm.data(), perm.data(), d_perm.size(), stream.get());
  stream.synchronize();
  auto batches_of = [&](int64_t size) {
    Batches bt;
    bt.size = size;
    bt.count = g.num_nodes / size;
    bt.d = static_cast<const int64_t*>(d_perm.data());
    bt.seed = r.seed;
    return bt;
  };
  const Batches main_bt = batches_of(r.batch_size);
  NeighborSamplerOptions co;
  co.fanouts = r.fanouts;
  co.replace = r.replace;
  SamplingGraphOptions prep;  // the CPU twin's default layouts
  prep.weights = r.weights;
  const NeighborSampler cpu(g, co, prep);
  auto cpu_blocks = [&](const Batches& bt, int64_t n) {
    std::vector<std::vector<Block>> out;
    for (int64_t b = 0; b < n; ++b) {
      const std::vector<int64_t> seeds(perm.begin() + b * bt.size,
                                       perm.begin() + (b + 1) * bt.size);
      out.push_back(cpu.sample_blocks(seeds, bt.key(b)));
    }
    return out;
  };

  // Check and digest: the first batches through one call per batch and through several batches
  // per call must both equal the CPU twin (the check: field by field; the digest: bit-identical).
  timer.begin("check against the CPU twin, digests");
  const int64_t dn = std::min<int64_t>(std::max(r.check_batches, r.digest_batches), n_batches);
  const std::vector<std::vector<Block>> want = cpu_blocks(main_bt, dn);
  int stage_bytes = 0;
  const std::vector<std::vector<Block>> got1 =
      sample_to_host(dg, r, main_bt, dn, Config{1, 1}, &stage_bytes);
  const std::vector<std::vector<Block>> got4 = sample_to_host(dg, r, main_bt, dn, Config{4, 1});
  const int64_t checks = std::min<int64_t>(r.check_batches, n_batches);
  for (int64_t b = 0; b < checks; ++b) {
    check_same(b, got1[b], want[b], "one batch per call");
    check_same(b, got4[b], want[b], "4 batches per call");
  }
  const int64_t digest_n = std::min<int64_t>(r.digest_batches, dn);
  auto first = [&](const std::vector<std::vector<Block>>& v) {
    return std::vector<std::vector<Block>>(v.begin(), v.begin() + digest_n);
  };
  const std::string digest = blocks_digest(first(got1)), digest4 = blocks_digest(first(got4)),
                    digest_cpu = blocks_digest(first(want));
  TESSERA_EXPECTS(digest == digest_cpu && digest4 == digest_cpu, Error,
                  "bench sample: blocks digest {} (1 batch/call), {} (4 batches/call) differ from "
                  "the CPU twin's {}",
                  digest, digest4, digest_cpu);
  timer.end();
  fmt::print(
      "check:     the first {} batch(es) are bit-identical to the CPU twin; digest of {} "
      "batches {} (CPU twin, 1 and 4 batches per call)\n",
      checks, digest_n, digest);

  // The limit: a plain kernel reading only what the sampler must read for the frontier visits
  // of the checked batches (edges they yield per second); beside it the memcpy bound and the
  // rate of single-entry random reads of the adjacency.
  // The limit of a batch size: the frontier visits of its first batches (the CPU twin's
  // samples), about as many seeds as the main run's checked batches hold.
  auto limit_of = [&](const std::vector<std::vector<Block>>& blocks) {
    Visits v = frontier_visits(blocks, r.fanouts, stream.get());
    const double rate =
        v.count > 0 ? cuda::row_read_rate(view, static_cast<const int64_t*>(v.nodes.data()),
                                          v.segments.data(), static_cast<int>(v.segments.size()),
                                          r.replace, stage_bytes, v.edges, 10)
                    : 0;
    return std::make_pair(rate, std::move(v));
  };
  timer.begin("limits");
  const int64_t vn = std::max<int64_t>(dn, std::min<int64_t>(8, n_batches));
  auto main_limit = limit_of(vn == dn ? want : cpu_blocks(main_bt, vn));
  const double limit_s = main_limit.first;  // a plain variable: lambdas below capture it
  const Visits& visits = main_limit.second;
  const void* adj = view.layout == cuda::Adjacency::kPacked ? static_cast<const void*>(view.packed)
                    : view.layout == cuda::Adjacency::kPairs
                        ? static_cast<const void*>(view.pairs)
                        : static_cast<const void*>(view.indices);
  const double reads_s =
      g.num_edges() > 0 ? cuda::random_read_rate(adj, g.num_edges(), edge_bytes, uva, 5) : 0;
  const size_t bound_bytes = size_t{256} << 20;
  const double bound_gbps = copy_bandwidth_gbps(bound_bytes, uva, 10);
  timer.end();
  fmt::print(
      "limit:     {} sampled edges/s: the reads the sampler must make for the {} frontier visits "
      "of {} batch(es) ({} edges; rows staged up to {} B), by a plain kernel ({})\n",
      human_count(limit_s), visits.count, vn, visits.edges, stage_bytes, uva ? "UVA" : "HBM");
  fmt::print(
      "beside:    {} single random {}-byte reads/s of the adjacency; memcpy {} {:.1f} GB/s\n",
      human_count(reads_s), edge_bytes, uva ? "pinned host-to-device" : "device-to-device",
      bound_gbps);

  // One stream, then the best configuration.
  timer.begin("sample: one stream and configurations");
  const Measure one = time_config(dg, r, main_bt, n_batches, Config{1, 1, false});
  const Measure one_pipe = time_config(dg, r, main_bt, n_batches, Config{1, 1, true});
  std::vector<Measure> configs;
  std::vector<int64_t> per_call =
      r.per_call.empty() ? std::vector<int64_t>{1, 2, 4, 8} : r.per_call;
  std::vector<int> stream_counts = {1};
  if (r.streams > 1) stream_counts.push_back(r.streams);
  for (int64_t k : per_call)
    for (int s : stream_counts)
      configs.push_back(
          time_config(dg, r, main_bt, n_batches, Config{static_cast<int>(k), s, true}));
  timer.end();
  release_scratch();
  const Measure* best = &one_pipe;
  for (const Measure& m : configs)
    if (m.edges_per_s() > best->edges_per_s()) best = &m;
  // The targets: uniform 5 G sampled edges/s from HBM and 0.5 G through UVA, weighted 1 G from
  // HBM; none is set for weighted sampling through UVA (0 here).
  const double target = r.weights.empty() ? (uva ? 0.5e9 : 5e9) : uva ? 0 : 1e9;
  auto line = [&](const char* what, const Measure& m) {
    fmt::print(
        "  {:<34} {:>8} edges/s  {:>6.0f} seeds/s  {:.3f} of the limit  {:.2f} syncs/batch\n", what,
        human_count(m.edges_per_s()), static_cast<double>(m.seeds) / m.seconds,
        m.edges_per_s() / limit_s,
        static_cast<double>(m.syncs) / static_cast<double>(std::max<int64_t>(m.batches, 1)));
  };
  fmt::print(
      "tessera:   {} batches x {} seeds, fanouts [{}], {}{}, graph in {} ({:.1f} edges/seed)\n",
      n_batches, r.batch_size, fmt::join(r.fanouts, ","),
      r.replace ? "with replacement" : "without replacement", r.weights.empty() ? "" : ", weighted",
      cuda::placement_name(placement),
      static_cast<double>(one.edges) / static_cast<double>(one.seeds));
  line("one stream, a call per batch", one);
  line("one stream, 2 calls in flight", one_pipe);
  for (const Measure& m : configs)
    line(config_name(m.config).c_str(), m);
  fmt::print("best:      {}: {} sampled edges/s, {:.3f} of the limit measured above ({})\n",
             config_name(best->config), human_count(best->edges_per_s()),
             best->edges_per_s() / limit_s,
             target > 0 ? fmt::format("{:.2f}x the {} target of {}", best->edges_per_s() / target,
                                      uva                 ? "UVA"
                                      : r.weights.empty() ? "HBM"
                                                          : "weighted, HBM",
                                      human_count(target))
                        : std::string("no target is set for weighted sampling through UVA"));

  // Batch sizes: one stream (a call per batch) and the best configuration.
  std::vector<nlohmann::json> sweep;
  if (!r.sweep.empty()) {
    timer.begin("sample: batch sizes");
    fmt::print("batch sizes (one stream | {} | the limit of that size):\n",
               config_name(best->config));
    for (int64_t bs : r.sweep) {
      const Batches bt = batches_of(bs);
      const int64_t n = std::clamp<int64_t>(n_batches * r.batch_size / bs, 8, bt.count);
      if (bt.count < 1) {
        continue;
      }
      const Measure a = time_config(dg, r, bt, std::min(n, bt.count), Config{1, 1, false});
      const Measure b = time_config(dg, r, bt, std::min(n, bt.count), best->config);
      release_scratch();
      // Its own limit: frontiers of another batch size overlap (and hit the cache) differently.
      const int64_t nv = std::clamp<int64_t>(vn * r.batch_size / bs, 1, bt.count);
      const double lim = limit_of(cpu_blocks(bt, nv)).first;
      fmt::print("  {:>6} seeds: {:>8} | {:>8} | {:>8} edges/s\n", bs, human_count(a.edges_per_s()),
                 human_count(b.edges_per_s()), human_count(lim));
      sweep.push_back({{"batch_size", bs},
                       {"limit_edges_per_s", lim},
                       {"limit_visit_batches", nv},
                       {"one_stream", a.json(lim)},
                       {"best", b.json(lim)}});
    }
    timer.end();
  }

  nlohmann::json j;
  j["benchmark"] = "sample";
  j["command"] = r.command;
  j["commit"] = source_commit();
  j["machine"] = machine_json();
  j["device"] = cuda::describe();
  j["graph"] = {{"spec", r.graph_spec},         {"num_nodes", g.num_nodes},
                {"num_edges", g.num_edges()},   {"max_degree", dg.max_degree()},
                {"symmetrized", r.symmetrized}, {"placement", cuda::placement_name(placement)},
                {"adjacency", layout},          {"placed_bytes", dg.bytes()}};
  j["params"] = {{"fanouts", r.fanouts},
                 {"batch_size", r.batch_size},
                 {"replace", r.replace},
                 {"weighted", !r.weights.empty()},
                 {"batches", n_batches},
                 {"seed", r.seed},
                 {"device", "cuda"},
                 {"check_batches", checks},
                 {"streams", r.streams},
                 {"cuda_graph", r.cuda_graph},
                 {"stage_bytes", r.stage_bytes},
                 {"batches_per_call", per_call}};
  j["limit"] = {{"edges_per_s", limit_s},
                {"definition",
                 "sampled edges/s of the checked batches' frontier visits when a plain kernel "
                 "reads only what the sampler must: indptr, then the row whole (staged or "
                 "all-taken) or the drawn entries (weighted: after a prefix-sum search)"},
                {"visits", visits.count},
                {"visit_batches", vn},
                {"visit_edges", visits.edges},
                {"stage_bytes", stage_bytes},
                {"single_entry_random_reads_per_s", reads_s},
                {"bytes_per_read", edge_bytes},
                {"memcpy_kind", uva ? "pinned_h2d" : "d2d"},
                {"memcpy_gbps", bound_gbps},
                {"memcpy_bytes", bound_bytes}};
  j["one_stream"] = one.json(limit_s);
  j["one_stream_pipelined"] = one_pipe.json(limit_s);
  j["configs"] = nlohmann::json::array();
  for (const Measure& m : configs)
    j["configs"].push_back(m.json(limit_s));
  j["best"] = best->json(limit_s);
  j["sweep"] = sweep;
  j["target"] = target > 0 ? nlohmann::json{{"edges_per_s", target},
                                            {"ratio_one_stream", one.edges_per_s() / target},
                                            {"ratio_best", best->edges_per_s() / target}}
                           : nlohmann::json();
  j["digest"] = {{"batches", digest_n}, {"value", digest}, {"cpu_twin", digest_cpu}};
  // Compared with the CPU twin: checked field by field and digested (null: nothing compared).
  j["check"] = {{"batches", checks},
                {"bit_identical_to_cpu",
                 checks + digest_n > 0 ? nlohmann::json(true) : nlohmann::json(nullptr)}};
  j["phases"] = phases_json(timer);
  if (!r.json.empty()) write_json_report(r.json, j);
  if (!r.results.empty()) {
    std::vector<std::string> switches;  // what sets this run apart from the defaults
    if (!r.symmetrized) {
      switches.emplace_back("directed");
    }
    if (!r.interleave) {
      switches.emplace_back("no-interleave");
    }
    if (!r.cuda_graph) {
      switches.emplace_back("no-cuda-graph");
    }
    if (r.stage_bytes >= 0) {
      switches.push_back(fmt::format("stage-bytes-{}", r.stage_bytes));
    }
    const std::string bench =
        fmt::format("sample-cuda-{}{}", uva ? "uva" : "hbm",
                    sample_config_tag(r.graph_spec, r.fanouts, r.batch_size, !r.weights.empty(),
                                      r.replace, r.order, switches));
    write_json_report(result_path(r.results, bench, machine_tag(true)), j);
  }
}

}  // namespace tessera::tools
