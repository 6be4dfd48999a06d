// SPDX-License-Identifier: Apache-2.0
// dist::update_all against the whole-graph computation: Cora and Citeseer (symmetrized,
// deduplicated) partitioned by METIS and at random into 1-4 parts, with and without halo, every
// message (copy_src, u_mul_e) and reduce (sum, mean, max), each rank's rows against a float64
// reference over the unpartitioned dataset graph within the float32 summation bound of the SpMM
// tests (max: exactly). Features and weights are formulas of the original IDs. Forked ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "dist_fixtures.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/dist/update_all.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/format.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using dist::Aggregate;
using dist::DistGraph;
using dist::DistTensor;
using dist::Message;
using dist::PartPolicy;
using dist::Runtime;

ScratchCleanup cleanup{"update-all-test"};
constexpr int64_t kF = 7;

float feature(int64_t orig, int64_t f) {
  return static_cast<float>((orig * 131 + f * 71) % 997) / 498.5f - 1.0f;
}

float weight(int64_t orig_eid) {
  return 0.25f + static_cast<float>((orig_eid * 2654435761LL) % 1000) / 1000.0f;
}

struct Case {
  std::string dataset;
  int parts;
  std::string method;
  std::string tls;  // "" = local
  int halo = 1;
  std::string label() const {
    std::string t = tls.empty() ? "local" : (tls == "tcp" ? "tcp" : "shm");
    return dataset + "_" + std::to_string(parts) + "_" + method + "_" + t +
           (halo == 1 ? "" : "_halo" + std::to_string(halo));
  }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.label();
}

// new node / edge ID -> original, from every partition on disk.
void load_maps(const PartitionConfig& c, std::vector<int64_t>& orig_nid,
               std::vector<int64_t>& orig_eid) {
  orig_nid.assign(static_cast<size_t>(c.num_nodes), -1);
  orig_eid.assign(static_cast<size_t>(c.num_edges), -1);
  for (int64_t p = 0; p < c.num_parts; ++p) {
    const LocalPartition lp = load_partition(c, p);
    const int64_t lo = c.node_offsets[p];
    const auto* on = lp.orig_nid.data<int64_t>();
    for (int64_t i = 0; i < lp.num_inner_nodes; ++i) {
      orig_nid[lo + i] = on[i];
    }
    const auto* inner = lp.inner_edge.data<uint8_t>();
    const auto* eid = lp.eid.data<int64_t>();
    const auto* oe = lp.orig_eid.data<int64_t>();
    for (int64_t k = 0; k < lp.num_edges(); ++k) {
      if (inner[k] != 0) {
        orig_eid[eid[k]] = oe[k];
      }
    }
  }
}

// The whole-graph result for original node v in float64, and its float32 bound.
void reference(const Graph& g, Message msg, Aggregate red, std::vector<double>& ref,
               std::vector<double>& bound) {
  const int64_t n = g.num_nodes;
  ref.assign(static_cast<size_t>(n * kF), 0.0);
  bound.assign(static_cast<size_t>(n * kF), 0.0);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t deg = g.degree(v);
    for (int64_t f = 0; f < kF; ++f) {
      double acc = red == Aggregate::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      double mag = 0;
      for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
        // The message as float32 computes it (a product of two floats, rounded once).
        const float m = msg == Message::kUMulE ? weight(g.eid(k)) * feature(g.indices[k], f)
                                               : feature(g.indices[k], f);
        if (red == Aggregate::kMax) {
          acc = std::max(acc, static_cast<double>(m));
        } else {
          acc += m;
        }
        mag += std::abs(static_cast<double>(m));
      }
      if (deg == 0) {
        acc = 0;
      }
      if (red == Aggregate::kMean && deg > 0) {
        acc /= static_cast<double>(deg);
        mag /= static_cast<double>(deg);
      }
      ref[v * kF + f] = acc;
      bound[v * kF + f] = red == Aggregate::kMax
                              ? 0.0
                              : static_cast<double>(deg + 2) * std::ldexp(1.0, -23) * mag + 1e-30;
    }
  }
}

// The options of one (message, reduce) case; `w` serves u_mul_e.
dist::UpdateAllOptions options(Message msg, Aggregate red, const DistTensor& w) {
  dist::UpdateAllOptions o;
  o.message = msg;
  o.reduce = red;
  if (msg == Message::kUMulE) {
    o.edge_weight = &w;
  }
  return o;
}

// The edge weights weight(original edge ID) as a host DistTensor over the edge policy.
DistTensor edge_weights(const std::shared_ptr<Runtime>& rt, const std::string& name,
                        const DistGraph& g, const std::vector<int64_t>& orig_eid) {
  return DistTensor(rt, name, {g.num_edges()}, DType::kFloat32, PartPolicy::edge(g.book()),
                    [&](int64_t b, int64_t e, void* dst) {
                      auto* p = static_cast<float*>(dst);
                      for (int64_t k = b; k < e; ++k) {
                        p[k - b] = weight(orig_eid[k]);
                      }
                    });
}

std::string body(const Case& c, const fs::path& cfg_path) {
  auto rt = Runtime::create();
  const PartitionConfig cfg = load_partition_config(cfg_path);
  DistGraph g(rt, cfg.graph_name, cfg_path);
  ReadOptions ro;
  ro.build = cfg.build;
  const Dataset ds = read_dataset(dataset(c.dataset), Format::kAuto, ro);
  std::vector<int64_t> orig_nid, orig_eid;
  load_maps(cfg, orig_nid, orig_eid);
  DistTensor x(rt, "x", {g.num_nodes(), kF}, DType::kFloat32, PartPolicy::node(g.book()),
               [&](int64_t b, int64_t e, void* dst) {
                 auto* p = static_cast<float*>(dst);
                 for (int64_t v = b; v < e; ++v) {
                   for (int64_t f = 0; f < kF; ++f) {
                     p[(v - b) * kF + f] = feature(orig_nid[v], f);
                   }
                 }
               });
  const DistTensor w = edge_weights(rt, "w", g, orig_eid);
  const dist::UpdateAllPlan plan(g);
  const auto [lo, hi] = g.local_node_range();
  RANK_CHECK(plan.num_owned() == hi - lo, "owned rows");
  for (const int64_t u : plan.remote_ids()) {
    RANK_CHECK(u < lo || u >= hi, "remote ID {} is owned", u);
  }
  std::vector<double> ref, bound;
  int64_t checked = 0;
  for (const Message msg : {Message::kCopySrc, Message::kUMulE}) {
    for (const Aggregate red : {Aggregate::kSum, Aggregate::kMean, Aggregate::kMax}) {
      reference(ds.graph, msg, red, ref, bound);
      const DistTensor out = plan.run(x, options(msg, red, w));
      RANK_CHECK(out.shape() == x.shape() && out.policy() == x.policy(), "result shape/policy");
      const auto* got = static_cast<const float*>(out.local_data());
      for (int64_t v = lo; v < hi; ++v) {
        const int64_t o_v = orig_nid[v];
        for (int64_t f = 0; f < kF; ++f) {
          const double want = ref[o_v * kF + f];
          const double have = got[(v - lo) * kF + f];
          RANK_CHECK(std::abs(have - want) <= bound[o_v * kF + f],
                     "message {} reduce {}: node {} (original {}) feature {}: {} vs {} (bound {})",
                     static_cast<int>(msg), static_cast<int>(red), v, o_v, f, have, want,
                     bound[o_v * kF + f]);
          ++checked;
        }
      }
      // Any rank reads any row of the result.
      const std::vector<int64_t> probe{0, g.num_nodes() / 2, g.num_nodes() - 1};
      const Array rows = out.read(probe);
      for (size_t i = 0; i < probe.size(); ++i) {
        const int64_t o_v = orig_nid[probe[i]];
        for (int64_t f = 0; f < kF; ++f) {
          const double have = rows.data<float>()[i * kF + f];
          RANK_CHECK(std::abs(have - ref[o_v * kF + f]) <= bound[o_v * kF + f],
                     "remote read of result row {}", probe[i]);
        }
      }
    }
  }
  // The free function and a second run of the plan give the same rows (deterministic).
  const DistTensor a = dist::update_all(g, x);
  const DistTensor b = plan.run(x);
  RANK_CHECK(a.name() != b.name(), "result names differ");
  RANK_CHECK(hi == lo || std::memcmp(a.local_data(), b.local_data(),
                                     static_cast<size_t>((hi - lo) * kF) * sizeof(float)) == 0,
             "two runs differ");
  rt->barrier();
  return fmt::format("rank {} checked {} values, {} remote rows", rt->rank(), checked,
                     plan.remote_ids().size());
}

class DistUpdateAll : public ::testing::TestWithParam<Case> {};

TEST_P(DistUpdateAll, EqualsWholeGraph) {
  const Case c = GetParam();
  if (c.parts > 1) {
    TESSERA_SKIP_WITHOUT_UCX();
  }
  const fs::path cfg = cached_partitions("update-all-test", c.dataset, c.parts, c.method, c.halo);
  auto res = run_ranks(job(c.parts, c.tls, 90), [&](int) { return body(c, cfg); });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  }
  std::cout << describe(res);
}

std::vector<Case> cases() {
  const std::string shm = "posix,sysv,cma";
  return {
      {"cora", 1, "metis", ""},         {"citeseer", 1, "random", ""},
      {"cora", 2, "metis", "tcp"},      {"cora", 2, "random", shm},
      {"cora", 3, "random", "tcp"},     {"cora", 4, "metis", shm},
      {"cora", 4, "random", "tcp"},     {"citeseer", 2, "metis", shm},
      {"citeseer", 4, "random", "tcp"}, {"cora", 2, "metis", "tcp", 0},
      {"cora", 4, "random", "tcp", 2},
  };
}

INSTANTIATE_TEST_SUITE_P(Datasets, DistUpdateAll, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label(); });

// Device-placed features (CUDA builds with a GPU; every case skips elsewhere): every message and
// reduce, one plan run after another, against the whole-graph reference (cuSPARSE for copy_src
// sum / mean, the row aggregation kernel for u_mul_e and max), at 1 rank (local, the exchange
// over NCCL) and 2 ranks over ucx tcp with the NCCL exchange when every rank has a GPU of its own
// (else the owners' servers). The checks run inside the ranks so the test process never initializes
// CUDA before a fork.
void device_case(int world) {
  const fs::path cfg = cached_partitions("update-all-test", "cora", world, "metis", 1);
  auto res = run_ranks(job(world, world == 1 ? "" : "tcp", 240), [&](int rank) -> std::string {
    const int n = cuda::device_count();
    if (n < 1) {
      return fmt::format("SKIP: no CUDA device ({})", cuda::describe());
    }
    cuda::set_device(rank % n);
    auto rt = Runtime::create();
    // NCCL carries the exchange at one rank (a world of one on one GPU) and where every rank
    // has a GPU of its own; ranks sharing a GPU read through the owners' servers.
    if (world == 1 || n >= world) {
      rt->attach_device_transport("nccl");
    }
    const PartitionConfig pc = load_partition_config(cfg);
    DistGraph g(rt, pc.graph_name, cfg);
    ReadOptions ro;
    ro.build = pc.build;
    const Dataset ds = read_dataset(dataset("cora"), Format::kAuto, ro);
    std::vector<int64_t> orig_nid, orig_eid;
    load_maps(pc, orig_nid, orig_eid);
    DistTensor x(
        rt, "xd", {g.num_nodes(), kF}, DType::kFloat32, PartPolicy::node(g.book()),
        [&](int64_t b, int64_t e, void* dst) {
          auto* p = static_cast<float*>(dst);
          for (int64_t v = b; v < e; ++v) {
            for (int64_t f = 0; f < kF; ++f) {
              p[(v - b) * kF + f] = feature(orig_nid[v], f);
            }
          }
        },
        false, dist::Placement::kDevice);
    const DistTensor w = edge_weights(rt, "wd", g, orig_eid);
    const auto [lo, hi] = g.local_node_range();
    std::vector<int64_t> ids(static_cast<size_t>(hi - lo));
    for (int64_t v = lo; v < hi; ++v) {
      ids[v - lo] = v;
    }
    std::vector<double> ref, bound;
    // One plan for every case: the first run uploads the pattern (and stages the remote rows),
    // the later ones reuse both.
    const dist::UpdateAllPlan plan(g);
    for (const Message msg : {Message::kCopySrc, Message::kUMulE}) {
      for (const Aggregate red : {Aggregate::kSum, Aggregate::kMean, Aggregate::kMax}) {
        reference(ds.graph, msg, red, ref, bound);
        const DistTensor out = plan.run(x, options(msg, red, w));
        RANK_CHECK(out.placement() == dist::Placement::kDevice, "result placement");
        const Array got = out.read(ids);
        for (int64_t v = lo; v < hi; ++v) {
          for (int64_t f = 0; f < kF; ++f) {
            const int64_t k = orig_nid[v] * kF + f;
            RANK_CHECK(std::abs(got.data<float>()[(v - lo) * kF + f] - ref[k]) <= bound[k],
                       "message {} reduce {}: node {} feature {}", static_cast<int>(msg),
                       static_cast<int>(red), v, f);
          }
        }
      }
    }
    rt->barrier();
    return std::string("ok");
  });
  for (const auto& r : res) {
    if (r.exit_code == 0 && r.message.rfind("SKIP:", 0) == 0) {
      GTEST_SKIP() << r.message.substr(6);
    }
  }
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  }
}

TEST(DistUpdateAllDevice, OneRank) {
  device_case(1);
}

TEST(DistUpdateAllDevice, TwoRanks) {
  TESSERA_SKIP_WITHOUT_UCX();
  device_case(2);
}

// Bad arguments: one clear error each, on a world of one.
TEST(DistUpdateAllErrors, RefusesBadArguments) {
  const fs::path cfg = cached_partitions("update-all-test", "cora", 1, "metis", 1);
  auto res = run_ranks(job(1, ""), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg);
    auto expect_error = [](auto fn, const std::string& needle) {
      try {
        fn();
      } catch (const std::exception& e) {
        RANK_CHECK(std::string(e.what()).find(needle) != std::string::npos, "'{}' lacks '{}'",
                   e.what(), needle);
        return;
      }
      RANK_CHECK(false, "no error for '{}'", needle);
    };
    expect_error([] { dist::parse_aggregate("min"); }, "reduce 'min' is not one of");
    expect_error([] { dist::parse_message("e_add_u"); }, "message 'e_add_u' is not one of");
    const DistTensor& label = g.node_data("label");
    expect_error([&] { dist::update_all(g, label); }, "must be float32");
    DistTensor small(rt, "small", {5, 3}, DType::kFloat32, PartPolicy::even(5, 1));
    expect_error([&] { dist::update_all(g, small); }, "not over the node policy");
    DistTensor x(rt, "x", {g.num_nodes(), 3}, DType::kFloat32, PartPolicy::node(g.book()));
    dist::UpdateAllOptions o;
    o.message = Message::kUMulE;
    expect_error([&] { dist::update_all(g, x, o); }, "needs edge_weight");
    DistTensor w2(rt, "w2", {g.num_edges(), 2}, DType::kFloat32, PartPolicy::edge(g.book()));
    o.edge_weight = &w2;
    expect_error([&] { dist::update_all(g, x, o); }, "[num_edges] or [num_edges, 1]");
    DistTensor w(rt, "w", {g.num_edges()}, DType::kFloat32, PartPolicy::edge(g.book()));
    o.message = Message::kCopySrc;
    o.edge_weight = &w;
    expect_error([&] { dist::update_all(g, x, o); }, "edge_weight is given");
    return std::string("ok");
  });
  for (const auto& r : res) {
    EXPECT_EQ(r.exit_code, 0) << describe(res);
  }
}

}  // namespace
}  // namespace tessera::test
