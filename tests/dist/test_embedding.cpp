// SPDX-License-Identifier: Apache-2.0
// host/distributed sparse optimizers and DistTensor save/load, in real forked ranks (1 rank on the
// local transport; 2 and 4 ranks over ucx/tcp): a distributed SparseAdagrad / SparseAdam step
// equals a single-process reference computed here on plain arrays (bit for bit: the reference
// sums in the documented order), repeated IDs are summed, ranks may bring no IDs, bad IDs and
// mismatched calls fail every rank, learnable embeddings reduce a loss, and save -> load round
// trips bit for bit, refuses what does not match, and a run resumed from a save continues
// exactly as the uninterrupted run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "dist_fixtures.hpp"
#include "tessera/dist/embedding.hpp"
#include "tessera/dist/io.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using dist::DistTensor;
using dist::PartPolicy;
using dist::Runtime;
using dist::SparseOptimizer;

// --- jobs --------------------------------------------------------------------------------------

struct Backend {
  int world;
  std::string tls;  // "" = local transport
  std::string label() const {
    return (tls.empty() ? std::string("local") : tls) + "_" + std::to_string(world);
  }
};

void PrintTo(const Backend& b, std::ostream* os) {
  *os << b.label();
}

void expect_all_ok(const std::vector<RankResult>& res) {
  for (const auto& r : res)
    EXPECT_EQ(r.exit_code, 0) << describe(res);
}

// --- tensors -----------------------------------------------------------------------------------

constexpr int64_t kRows = 37, kDim = 5;

// Uneven ownership, with an empty rank at 4 ranks: "any PartPolicy".
PartPolicy uneven(int64_t rows, int world) {
  if (world == 2) return PartPolicy{"node", {0, rows * 2 / 3, rows}};
  if (world == 4) return PartPolicy{"node", {0, rows / 3, rows / 3, rows * 4 / 5, rows}};
  return PartPolicy::even(rows, world);
}

float init_value(int64_t row, int64_t col) {
  return static_cast<float>((row * 7 + col * 3) % 11) * 0.1f - 0.5f;
}

dist::InitFn init_fn(int64_t dim) {
  return [dim](int64_t b, int64_t e, void* dst) {
    auto* p = static_cast<float*>(dst);
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < dim; ++c)
        p[(r - b) * dim + c] = init_value(r, c);
  };
}

DistTensor embedding(const std::shared_ptr<Runtime>& rt, const std::string& name,
                     int64_t rows = kRows, int64_t dim = kDim, bool zero = false) {
  return DistTensor(rt, name, {rows, dim}, DType::kFloat32, uneven(rows, rt->world_size()),
                    zero ? dist::InitFn() : init_fn(dim), /*persistent=*/true);
}

std::vector<int64_t> iota_ids(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

// The whole tensor as bytes, read by this rank.
std::vector<uint8_t> whole(const DistTensor& t) {
  const Array a = t.read(iota_ids(t.num_rows()));
  const auto* p = static_cast<const uint8_t*>(a.raw());
  return std::vector<uint8_t>(p, p + a.nbytes());
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

// --- gradients of one step: every rank can compute every rank's -------------------------------

struct Grad {
  std::vector<int64_t> ids;
  std::vector<float> g;  // ids.size() * dim
};

float uniform(std::mt19937_64& rng) {
  return static_cast<float>(static_cast<double>(rng() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Rank r's IDs and gradients at step s: repeats within the rank and across ranks, every rank
// empty on some steps, all ranks empty on step 4.
Grad make_grad(int step, int rank, int64_t rows, int64_t dim) {
  Grad out;
  if (step == 4 || (step + rank) % 3 == 0) return out;
  std::mt19937_64 rng(static_cast<uint64_t>(step) * 1000 + static_cast<uint64_t>(rank) + 17);
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i)
    out.ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(rows / 2 + step)));
  out.ids.push_back(out.ids.front());  // a repeat for sure
  for (size_t i = 0; i < out.ids.size() * static_cast<size_t>(dim); ++i)
    out.g.push_back(uniform(rng));
  return out;
}

// --- the single-process reference ----------------------------------------------------------------

struct Reference {
  SparseOptimizer::Kind kind;
  int64_t rows, dim;
  double lr, eps, beta1 = 0, beta2 = 0;
  std::vector<float> w, sum, m, v;
  std::vector<int64_t> steps;

  Reference(SparseOptimizer::Kind k, int64_t rows_, int64_t dim_, double lr_, double eps_,
            float acc0 = 0)
      : kind(k), rows(rows_), dim(dim_), lr(lr_), eps(eps_) {
    w.resize(static_cast<size_t>(rows * dim));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < dim; ++c)
        w[r * dim + c] = init_value(r, c);
    sum.assign(w.size(), acc0);
    m.assign(w.size(), 0.0f);
    v.assign(w.size(), 0.0f);
    steps.assign(static_cast<size_t>(rows), 0);
  }

  // One collective step given every rank's (ids, grads): each rank's repeats summed from 0 in
  // the order given, then the ranks' sums added from 0 in rank order.
  void step(const std::vector<Grad>& per_rank) {
    std::map<int64_t, std::vector<float>> total;
    for (const Grad& gr : per_rank) {
      std::map<int64_t, std::vector<float>> mine;
      for (size_t i = 0; i < gr.ids.size(); ++i) {
        auto& acc = mine[gr.ids[i]];
        acc.resize(static_cast<size_t>(dim), 0.0f);
        for (int64_t c = 0; c < dim; ++c)
          acc[c] += gr.g[i * dim + c];
      }
      for (const auto& [id, row] : mine) {
        auto& acc = total[id];
        acc.resize(static_cast<size_t>(dim), 0.0f);
        for (int64_t c = 0; c < dim; ++c)
          acc[c] += row[c];
      }
    }
    const float flr = static_cast<float>(lr), feps = static_cast<float>(eps);
    for (const auto& [id, g] : total) {
      if (kind == SparseOptimizer::Kind::kAdagrad) {
        for (int64_t c = 0; c < dim; ++c) {
          float& s = sum[id * dim + c];
          s += g[c] * g[c];
          w[id * dim + c] -= flr * g[c] / (std::sqrt(s) + feps);
        }
        continue;
      }
      const int64_t t = ++steps[id];
      const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
      const float omb1 = static_cast<float>(1.0 - beta1), omb2 = static_cast<float>(1.0 - beta2);
      const float bc1 = static_cast<float>(1.0 - std::pow(beta1, static_cast<double>(t)));
      const float bc2 = static_cast<float>(1.0 - std::pow(beta2, static_cast<double>(t)));
      for (int64_t c = 0; c < dim; ++c) {
        float& mm = m[id * dim + c];
        float& vv = v[id * dim + c];
        mm = b1 * mm + omb1 * g[c];
        vv = b2 * vv + omb2 * g[c] * g[c];
        const float mhat = mm / bc1, vhat = vv / bc2;
        w[id * dim + c] -= flr * mhat / (std::sqrt(vhat) + feps);
      }
    }
  }
};

std::vector<Grad> all_grads(int step, int world, int64_t rows, int64_t dim) {
  std::vector<Grad> v;
  for (int r = 0; r < world; ++r)
    v.push_back(make_grad(step, r, rows, dim));
  return v;
}

// step() through both overloads (the Array one on odd steps).
void do_step(SparseOptimizer& opt, const Grad& g, int step) {
  if (step % 2 == 1) {
    std::vector<float> copy = g.g;
    opt.step(g.ids, Array::from_vector(std::move(copy), {static_cast<int64_t>(g.ids.size()),
                                                         opt.embedding().shape()[1]}));
  } else {
    opt.step(g.ids, g.g.empty() ? nullptr : g.g.data());
  }
}

size_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) return i;
  return a.size() == b.size() ? SIZE_MAX : std::min(a.size(), b.size());
}

void check_same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                const std::string& what) {
  const size_t d = first_difference(got, want);
  RANK_CHECK(d == SIZE_MAX, "{}: {} bytes against {}, first difference at byte {}", what,
             got.size(), want.size(), d);
}

void check_reference(const SparseOptimizer& opt, const Reference& ref, const std::string& what) {
  check_same(whole(opt.embedding()), bytes_of(ref.w), what + ": embedding");
  if (ref.kind == SparseOptimizer::Kind::kAdagrad) {
    check_same(whole(opt.state("adagrad_sum")), bytes_of(ref.sum), what + ": adagrad_sum");
  } else {
    check_same(whole(opt.state("adam_m")), bytes_of(ref.m), what + ": adam_m");
    check_same(whole(opt.state("adam_v")), bytes_of(ref.v), what + ": adam_v");
    check_same(whole(opt.state("adam_step")), bytes_of(ref.steps), what + ": adam_step");
  }
}

const double kAdagradLr = 0.05, kAdamLr = 0.01;

SparseOptimizer make_adagrad(const DistTensor& emb) {
  dist::SparseAdagradOptions o;
  o.lr = kAdagradLr;
  o.initial_accumulator_value = 0.1;
  return SparseOptimizer::adagrad(emb, o);
}

Reference adagrad_reference() {
  return Reference(SparseOptimizer::Kind::kAdagrad, kRows, kDim, kAdagradLr, 1e-10,
                   static_cast<float>(0.1));
}

SparseOptimizer make_adam(const DistTensor& emb) {
  dist::SparseAdamOptions o;
  o.lr = kAdamLr;
  return SparseOptimizer::adam(emb, o);
}

Reference adam_reference() {
  Reference r(SparseOptimizer::Kind::kAdam, kRows, kDim, kAdamLr, 1e-8);
  r.beta1 = 0.9;
  r.beta2 = 0.999;
  return r;
}

class DistEmbedding : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam().world > 1) {
      TESSERA_SKIP_WITHOUT_UCX();
    }
  }
};

// (a) + (b) + (c): several steps with repeats and empty ranks, both optimizers.
TEST_P(DistEmbedding, EqualsSingleProcessReference) {
  const Backend b = GetParam();
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    RANK_CHECK(world == b.world && rt->transport().name() == (b.tls.empty() ? "local" : "ucx"),
               "transport {} with {} ranks", rt->transport().name(), world);
    DistTensor ea = embedding(rt, "emb_adagrad"), em = embedding(rt, "emb_adam");
    SparseOptimizer adagrad = make_adagrad(ea), adam = make_adam(em);
    RANK_CHECK(adagrad.state("adagrad_sum").name() == "emb_adagrad:adagrad_sum", "state name");
    RANK_CHECK(adam.state("adam_step").dtype() == DType::kInt64 &&
                   adam.state("adam_step").shape() == std::vector<int64_t>{kRows},
               "adam_step is int64 [N]");
    RANK_CHECK(adam.state_tensors().size() == 3 && adagrad.state_tensors().size() == 1, "state");
    Reference ra = adagrad_reference(), rm = adam_reference();
    check_reference(adagrad, ra, "initial adagrad");
    int64_t ids_sent = 0;
    for (int s = 0; s < 8; ++s) {
      const auto grads = all_grads(s, world, kRows, kDim);
      ids_sent += static_cast<int64_t>(grads[me].ids.size());
      do_step(adagrad, grads[me], s);
      do_step(adam, grads[me], s);
      ra.step(grads);
      rm.step(grads);
      check_reference(adagrad, ra, fmt::format("adagrad after step {}", s));
      check_reference(adam, rm, fmt::format("adam after step {}", s));
    }
    RANK_CHECK(adam.num_steps() == 8, "num_steps {}", adam.num_steps());
    // The reference moved: the test can fail.
    const Reference untouched = adam_reference();
    RANK_CHECK(rm.w != untouched.w, "the reference did not move");
    // set_lr applies from the next step.
    adagrad.set_lr(0.5);
    RANK_CHECK(adagrad.lr() == 0.5, "lr");
    ra.lr = 0.5;
    const auto grads = all_grads(9, world, kRows, kDim);
    adagrad.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
    ra.step(grads);
    check_reference(adagrad, ra, "adagrad after set_lr");
    return fmt::format("rank {}: {} ids over 9 steps", me, ids_sent);
  });
  expect_all_ok(res);
  std::cout << describe(res);
}

// (b) Repeated IDs on a rank give what their sum (added in the order given) gives.
TEST_P(DistEmbedding, DuplicateIdsAreSummed) {
  const Backend b = GetParam();
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank();
    for (const bool adam : {false, true}) {
      const std::string k = adam ? "adam" : "adagrad";
      DistTensor e1 = embedding(rt, "dup1_" + k), e2 = embedding(rt, "dup2_" + k);
      SparseOptimizer o1 = adam ? make_adam(e1) : make_adagrad(e1);
      SparseOptimizer o2 = adam ? make_adam(e2) : make_adagrad(e2);
      std::mt19937_64 rng(static_cast<uint64_t>(me) + 3);
      std::vector<float> a(kDim), bb(kDim), c(kDim), d(kDim);
      for (auto* x : {&a, &bb, &c, &d})
        for (auto& f : *x)
          f = uniform(rng);
      // o1: 5, 5, 9, 5 (rows a, b, c, d); o2: 9 (c), 5 (((0 + a) + b) + d).
      std::vector<int64_t> ids1{5, 5, 9, 5}, ids2{9, 5};
      std::vector<float> g1, g2(c);
      for (auto* x : {&a, &bb, &c, &d})
        g1.insert(g1.end(), x->begin(), x->end());
      for (int64_t j = 0; j < kDim; ++j)
        g2.push_back(((0.0f + a[j]) + bb[j]) + d[j]);
      const auto before = whole(e1);
      o1.step(ids1, g1.data());
      o2.step(ids2, g2.data());
      const auto after = whole(e1);
      check_same(after, whole(e2), k + ": embedding with repeats vs summed");
      for (size_t i = 0; i < o1.state_tensors().size(); ++i)
        check_same(whole(o1.state_tensors()[i]), whole(o2.state_tensors()[i]),
                   k + ": " + o1.state_tensors()[i].name());
      RANK_CHECK(
          std::memcmp(before.data() + 5 * kDim * 4, after.data() + 5 * kDim * 4, kDim * 4) != 0,
          "{}: row 5 did not change", k);
      if (adam) {
        // One step for the row, however many times and ranks it came from.
        const Array st = o1.state("adam_step").read(std::vector<int64_t>{5, 9, 0});
        RANK_CHECK(
            st.data<int64_t>()[0] == 1 && st.data<int64_t>()[1] == 1 && st.data<int64_t>()[2] == 0,
            "adam_step of rows 5, 9, 0: {}, {}, {}", st.data<int64_t>()[0], st.data<int64_t>()[1],
            st.data<int64_t>()[2]);
      }
    }
    return std::string("ok");
  });
  expect_all_ok(res);
}

// (c) Ranks with no IDs take part; a step where nobody has IDs changes nothing.
TEST_P(DistEmbedding, EmptyIdsOnSomeRanks) {
  const Backend b = GetParam();
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    DistTensor e = embedding(rt, "emb");
    SparseOptimizer adam = make_adam(e);
    Reference ref = adam_reference();
    // Only the last rank brings IDs (rows owned by every rank, the empty one's range included).
    std::vector<Grad> grads(static_cast<size_t>(world));
    grads.back().ids = {0, kRows - 1, kRows / 3, 20};
    for (size_t i = 0; i < grads.back().ids.size() * kDim; ++i)
      grads.back().g.push_back(0.25f * static_cast<float>(i % 7) - 0.5f);
    adam.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
    ref.step(grads);
    check_reference(adam, ref, "one rank with IDs");
    const Array st = adam.state("adam_step").read(iota_ids(kRows));
    int64_t touched = 0;
    for (int64_t i = 0; i < kRows; ++i)
      touched += st.data<int64_t>()[i];
    RANK_CHECK(touched == 4, "{} rows stepped, expected 4", touched);
    // Nobody has IDs: nothing changes.
    const auto w = whole(e), m = whole(adam.state("adam_m"));
    adam.step(ops::Span<const int64_t>(), static_cast<const float*>(nullptr));
    check_same(whole(e), w, "embedding after an empty step");
    check_same(whole(adam.state("adam_m")), m, "adam_m after an empty step");
    return std::string("ok");
  });
  expect_all_ok(res);
}

// (d) Bad arguments on one rank fail every rank before anything is applied; then the ranks go
// on. Bad embeddings are refused naming the tensor; mismatched optimizers fail every rank.
TEST_P(DistEmbedding, ErrorsFailEveryRankWithoutHanging) {
  const Backend b = GetParam();
  auto res = run_ranks(job(b.world, b.tls, 60), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    DistTensor e = embedding(rt, "emb");
    SparseOptimizer opt = make_adagrad(e);
    Reference ref = adagrad_reference();
    const auto before = whole(e);
    std::vector<int64_t> ids = me == 0 ? std::vector<int64_t>{1, kRows} : std::vector<int64_t>{2};
    std::vector<float> g(ids.size() * kDim, 1.0f);
    std::string msg;
    try {
      opt.step(ids, g.data());
    } catch (const IndexError& x) {
      msg = x.what();
    }
    RANK_CHECK(!msg.empty(), "an out-of-range ID did not throw IndexError on rank {}", me);
    RANK_CHECK(msg.find("row ID 37 at position 1 is outside [0, 37)") != std::string::npos &&
                   msg.find("'emb'") != std::string::npos,
               "message: {}", msg);
    if (me != 0) RANK_CHECK(msg.find("rank 0 failed") != std::string::npos, "message: {}", msg);
    check_same(whole(e), before, "embedding after a refused step");
    // Negative IDs too, and the Array overload's shape check on one rank only.
    bool threw = false;
    try {
      std::vector<int64_t> neg{me == world - 1 ? -1 : 0};
      std::vector<float> gg(kDim, 1.0f);
      opt.step(neg, gg.data());
    } catch (const IndexError& x) {
      threw = std::string(x.what()).find(fmt::format("rank {}", world - 1)) != std::string::npos ||
              me == world - 1;
    }
    RANK_CHECK(threw, "a negative ID was not refused on every rank");
    threw = false;
    try {
      std::vector<int64_t> one{3};
      opt.step(one, Array::zeros(DType::kFloat32, {1, me == 0 ? kDim + 1 : kDim}));
    } catch (const ValueError& x) {
      threw = std::string(x.what()).find("gradients of shape [1, 6]") != std::string::npos;
    }
    RANK_CHECK(threw, "a gradient Array of the wrong shape was not refused on every rank");
    check_same(whole(e), before, "embedding after refused steps");
    // The ranks are still in step: a valid step works and equals the reference.
    const auto grads = all_grads(1, world, kRows, kDim);
    opt.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
    ref.step(grads);
    check_reference(opt, ref, "after the refused steps");
    // Embeddings that are not float32 [N, dim], named.
    DistTensor ints(rt, "ints", {kRows, 4}, DType::kInt64, PartPolicy::even(kRows, world));
    DistTensor flat(rt, "flat", {kRows}, DType::kFloat32, PartPolicy::even(kRows, world));
    threw = false;
    try {
      SparseOptimizer::adagrad(ints);
    } catch (const ValueError& x) {
      threw =
          std::string(x.what()).find("'ints' must be float32 of 2 dimensions") != std::string::npos;
    }
    RANK_CHECK(threw, "an int64 embedding was accepted");
    threw = false;
    try {
      SparseOptimizer::adam(flat);
    } catch (const ValueError& x) {
      threw = std::string(x.what()).find("'flat'") != std::string::npos;
    }
    RANK_CHECK(threw, "a 1-D embedding was accepted");
    // Ranks stepping different optimizers fail, naming both.
    if (world > 1) {
      DistTensor other = embedding(rt, "other");
      SparseOptimizer oo = make_adagrad(other);
      threw = false;
      try {
        std::vector<int64_t> none;
        (me == 0 ? opt : oo).step(none, nullptr);
      } catch (const ValueError& x) {
        threw = std::string(x.what()).find("called step of") != std::string::npos;
      }
      RANK_CHECK(threw, "mismatched optimizers did not fail rank {}", me);
    }
    return std::string("ok");
  });
  expect_all_ok(res);
  std::cout << describe(res);
}

// (e) Learnable embeddings pulled towards fixed targets: the loss goes down.
TEST_P(DistEmbedding, LearnableEmbeddingsReduceTheLoss) {
  const Backend b = GetParam();
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    const int64_t rows = 64, dim = 8;
    auto target = [](int64_t r, int64_t c) {
      return static_cast<float>(std::cos(0.3 * static_cast<double>(r * dim + c)));
    };
    std::string out;
    for (const bool adam : {false, true}) {
      DistTensor e(rt, adam ? "learn_adam" : "learn_adagrad", {rows, dim}, DType::kFloat32,
                   PartPolicy::even(rows, world), [](int64_t bg, int64_t en, void* dst) {
                     std::mt19937_64 rng(static_cast<uint64_t>(bg) + 1);
                     for (int64_t i = 0; i < (en - bg) * 8; ++i)
                       static_cast<float*>(dst)[i] = uniform(rng);
                   });
      SparseOptimizer opt;
      if (adam) {
        dist::SparseAdamOptions o;
        o.lr = 0.1;
        opt = SparseOptimizer::adam(e, o);
      } else {
        dist::SparseAdagradOptions o;
        o.lr = 0.3;
        opt = SparseOptimizer::adagrad(e, o);
      }
      auto loss = [&] {
        const Array w = e.read(iota_ids(rows));
        double l = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < dim; ++c) {
            const double d = w.data<float>()[r * dim + c] - target(r, c);
            l += 0.5 * d * d;
          }
        return l;
      };
      std::vector<double> losses{loss()};
      std::mt19937_64 rng(static_cast<uint64_t>(me) * 7 + 1);
      for (int s = 0; s < 20; ++s) {
        // A batch of rows (repeats possible, other ranks' rows too): grad of 0.5 |w - t|^2.
        std::vector<int64_t> ids;
        for (int i = 0; i < 24; ++i)
          ids.push_back(static_cast<int64_t>(rng() % rows));
        const Array w = e.read(ids);
        std::vector<float> g(ids.size() * dim);
        for (size_t i = 0; i < ids.size(); ++i)
          for (int64_t c = 0; c < dim; ++c)
            g[i * dim + c] = w.data<float>()[i * dim + c] - target(ids[i], c);
        opt.step(ids, g.data());
        losses.push_back(loss());
      }
      RANK_CHECK(losses[10] < losses[0] && losses[20] < 0.5 * losses[0],
                 "{}: loss {} -> {} (step 10) -> {} (step 20)", adam ? "adam" : "adagrad",
                 losses[0], losses[10], losses[20]);
      out += fmt::format("{} loss {:.3f} -> {:.3f} -> {:.3f}; ", adam ? "adam" : "adagrad",
                         losses[0], losses[10], losses[20]);
    }
    return out;
  });
  expect_all_ok(res);
  std::cout << describe(res);
}

// (f) save -> load round trip bit for bit; what does not match is refused on every rank.
TEST_P(DistEmbedding, SaveLoadRoundTripAndRefusals) {
  // The file-name stem of a tensor name.
  EXPECT_EQ(dist::sanitized_tensor_name("emb:adam_m"), "emb_adam_m");
  EXPECT_EQ(dist::sanitized_tensor_name("cora:node:feat"), "cora_node_feat");
  EXPECT_EQ(dist::sanitized_tensor_name("a/b c"), "a_b_c");
  EXPECT_EQ(dist::sanitized_tensor_name(".."), "_..");
  EXPECT_EQ(dist::sanitized_tensor_name("ok-1.x"), "ok-1.x");
  const Backend b = GetParam();
  TempDir tmp;
  const fs::path dir = tmp / "ckpt";
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    DistTensor e = embedding(rt, "emb");
    DistTensor e2 = embedding(rt, "emb2");
    SparseOptimizer adam = make_adam(e), adagrad = make_adagrad(e2);
    for (int s = 0; s < 3; ++s) {
      const auto grads = all_grads(s, world, kRows, kDim);
      adam.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
      adagrad.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
    }
    dist::save_dist_tensor(e, dir);
    dist::save_dist_tensor(e2, dir);
    adam.save(dir);
    adagrad.save(dir);
    // Every rank's part is there when save returns.
    for (const char* stem :
         {"emb", "emb2", "emb_adam_m", "emb_adam_v", "emb_adam_step", "emb2_adagrad_sum"}) {
      RANK_CHECK(fs::exists(dir / (std::string(stem) + ".json")), "{}.json missing", stem);
      for (int r = 0; r < world; ++r)
        RANK_CHECK(fs::exists(dir / fmt::format("{}.part{}.npy", stem, r)), "{} part {} missing",
                   stem, r);
    }
    std::vector<DistTensor> all{e, e2};
    for (const auto& t : adam.state_tensors())
      all.push_back(t);
    for (const auto& t : adagrad.state_tensors())
      all.push_back(t);
    std::vector<std::vector<uint8_t>> saved;
    for (const auto& t : all)
      saved.push_back(whole(t));
    // Move on, then load: everything is back as saved.
    for (int s = 3; s < 5; ++s) {
      const auto grads = all_grads(s + 2, world, kRows, kDim);
      adam.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
      adagrad.step(grads[me].ids, grads[me].g.empty() ? nullptr : grads[me].g.data());
    }
    RANK_CHECK(whole(e) != saved[0] && whole(adam.state("adam_step")) != saved[4],
               "the steps after the save changed nothing");
    dist::load_dist_tensor(e, dir);
    dist::load_dist_tensor(e2, dir);
    adam.load(dir);
    adagrad.load(dir);
    for (size_t i = 0; i < all.size(); ++i)
      check_same(whole(all[i]), saved[i], "loaded " + all[i].name());
    // A tensor whose files would have the names of another's saved in the folder ("emb_adam_m"
    // against Adam's "emb:adam_m") is refused on every rank before anything is written.
    {
      DistTensor clash = embedding(rt, "emb_adam_m");
      std::string msg;
      try {
        dist::save_dist_tensor(clash, dir);
      } catch (const ValueError& x) {
        msg = x.what();
      }
      RANK_CHECK(msg.find("holds the saved DistTensor 'emb:adam_m'") != std::string::npos,
                 "message: {}", msg);
      adam.load(dir);
      for (size_t i = 0; i < all.size(); ++i) {
        check_same(whole(all[i]), saved[i], "after the refused save, " + all[i].name());
      }
    }
    // A save cut short leaves its marker behind, and its state is refused on every rank (its
    // tensors may come from different steps).
    const fs::path marker = dir / "emb.optimizer-saving";
    RANK_CHECK(!fs::exists(marker), "a finished save left {}", marker.string());
    rt->barrier();
    if (me == 0) {
      std::ofstream(marker) << "cut short\n";
    }
    rt->barrier();
    std::string msg;
    try {
      adam.load(dir);
    } catch (const ValueError& x) {
      msg = x.what();
    }
    RANK_CHECK(msg.find("from a save that did not finish") != std::string::npos, "message: {}",
               msg);
    rt->barrier();
    if (me == 0) {
      fs::remove(marker);
    }
    rt->barrier();
    return std::string("ok");
  });
  expect_all_ok(res);
  // Nothing half-written is left behind.
  for (const auto& ent : fs::directory_iterator(dir))
    EXPECT_NE(ent.path().filename().string().front(), '.') << ent.path();

  // Refusals, in a new job (a restarted program): another shape, a missing part, a corrupt part.
  const int last = b.world - 1;
  fs::remove(dir / "emb_adam_m.part0.npy");
  {
    const fs::path p = dir / fmt::format("emb_adam_v.part{}.npy", last);
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    const int me = rt->rank(), world = rt->world_size();
    auto expect_refusal = [&](DistTensor t, const std::string& own, const std::string& others,
                              int culprit) {
      std::string msg;
      try {
        dist::load_dist_tensor(t, dir);
      } catch (const Error& x) {
        msg = x.what();
      }
      RANK_CHECK(!msg.empty(), "loading '{}' was not refused", t.name());
      if (culprit < 0 || me == culprit) {
        RANK_CHECK(msg.find(own) != std::string::npos, "'{}': message: {}", t.name(), msg);
      } else {
        RANK_CHECK(msg.find(others) != std::string::npos && msg.find(own) != std::string::npos,
                   "'{}': message: {}", t.name(), msg);
      }
    };
    const auto pol = uneven(kRows, world);
    // Another shape: every rank reads the JSON rank 0 shared, and refuses it.
    DistTensor wide(rt, "emb", {kRows, kDim + 1}, DType::kFloat32, pol, nullptr, true);
    const auto before = whole(wide);
    expect_refusal(wide, "emb.json: field 'shape' [37, 5] differs from the tensor's [37, 6]", "",
                   -1);
    check_same(whole(wide), before, "a refused load changed the tensor");
    DistTensor other_dtype(rt, "emb2", {kRows, kDim}, DType::kFloat64, pol, nullptr, true);
    expect_refusal(other_dtype, "field 'dtype' float32 differs from the tensor's float64", "", -1);
    // A missing part on rank 0, a corrupt part on the last rank: every rank fails, naming it.
    DistTensor m(rt, "emb:adam_m", {kRows, kDim}, DType::kFloat32, pol, nullptr, true);
    expect_refusal(m, "emb_adam_m.part0.npy is missing", "rank 0 failed", 0);
    DistTensor v(rt, "emb:adam_v", {kRows, kDim}, DType::kFloat32, pol, nullptr, true);
    expect_refusal(v, "differs from field 'parts[" + std::to_string(last) + "].crc32'",
                   fmt::format("rank {} failed", last), last);
    // What is intact still loads.
    DistTensor st(rt, "emb:adam_step", {kRows}, DType::kInt64, pol, nullptr, true);
    dist::load_dist_tensor(st, dir);
    int64_t steps = 0;
    const Array a = st.read(iota_ids(kRows));
    for (int64_t i = 0; i < kRows; ++i)
      steps += a.data<int64_t>()[i];
    RANK_CHECK(steps > 0, "adam_step loaded as zeros");
    return std::string("ok");
  });
  expect_all_ok(res);
  if (b.world > 1) {
    // Another partitioning of the rows (a world of one) is refused.
    res = run_ranks(job(1, ""), [&](int) {
      auto rt = Runtime::create();
      DistTensor st(rt, "emb:adam_step", {kRows}, DType::kInt64, PartPolicy::even(kRows, 1),
                    nullptr, true);
      std::string msg;
      try {
        dist::load_dist_tensor(st, dir);
      } catch (const ValueError& x) {
        msg = x.what();
      }
      RANK_CHECK(msg.find("field 'policy.offsets'") != std::string::npos, "message: {}", msg);
      return std::string("ok");
    });
    expect_all_ok(res);
  }
}

// (g) A run resumed from a save (new processes) continues exactly as the uninterrupted run.
TEST_P(DistEmbedding, StepAfterLoadContinuesIdentically) {
  const Backend b = GetParam();
  TempDir tmp;
  const fs::path dir = tmp / "ckpt";
  const fs::path expect = tmp / "expected";
  fs::create_directories(expect);
  auto names = [](const std::vector<SparseOptimizer>& opts) {
    std::vector<DistTensor> v;
    for (const auto& o : opts) {
      v.push_back(o.embedding());
      for (const auto& t : o.state_tensors())
        v.push_back(t);
    }
    return v;
  };
  auto run = [&](const std::shared_ptr<Runtime>& rt, std::vector<SparseOptimizer>& opts, int from,
                 int to) {
    const int me = rt->rank(), world = rt->world_size();
    for (int s = from; s < to; ++s) {
      const auto grads = all_grads(s, world, kRows, kDim);
      for (auto& o : opts)
        do_step(o, grads[me], s);
    }
  };
  // The uninterrupted run saves after 3 of 7 steps and keeps what it ends with.
  auto res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    std::vector<SparseOptimizer> opts{make_adam(embedding(rt, "e_adam")),
                                      make_adagrad(embedding(rt, "e_adagrad"))};
    run(rt, opts, 0, 3);
    for (auto& o : opts) {
      dist::save_dist_tensor(o.embedding(), dir);
      o.save(dir);
    }
    run(rt, opts, 3, 7);
    if (rt->rank() == 0)
      for (const auto& t : names(opts)) {
        const auto bytes = whole(t);
        std::ofstream(expect / dist::sanitized_tensor_name(t.name()), std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()),
                   static_cast<std::streamsize>(bytes.size()));
      }
    rt->barrier();
    return std::string("ok");
  });
  expect_all_ok(res);
  // The resumed run starts from zeros, loads, and does steps 3..6 again.
  res = run_ranks(job(b.world, b.tls), [&](int) {
    auto rt = Runtime::create();
    std::vector<SparseOptimizer> opts{make_adam(embedding(rt, "e_adam", kRows, kDim, true)),
                                      make_adagrad(embedding(rt, "e_adagrad", kRows, kDim, true))};
    for (auto& o : opts) {
      DistTensor e = o.embedding();
      dist::load_dist_tensor(e, dir);
      o.load(dir);
    }
    run(rt, opts, 3, 7);
    for (const auto& t : names(opts)) {
      std::ifstream in(expect / dist::sanitized_tensor_name(t.name()), std::ios::binary);
      std::vector<uint8_t> want((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
      RANK_CHECK(!want.empty(), "no expected file for {}", t.name());
      check_same(whole(t), want, "resumed " + t.name());
    }
    return std::string("ok");
  });
  expect_all_ok(res);
}

std::vector<Backend> backends() {
  return {{1, ""}, {2, "tcp"}, {4, "tcp"}};
}

INSTANTIATE_TEST_SUITE_P(embedding, DistEmbedding, ::testing::ValuesIn(backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return i.param.label();
                         });

}  // namespace
}  // namespace tessera::test
