// SPDX-License-Identifier: Apache-2.0
// R-MAT / Kronecker generator (Chakrabarti et al. 2004; Graph500 parameters a=.57, b=c=.19).
//
// Determinism: every random value is a pure function of (seed, stream, index): edge k walks
// the scale levels of the recursive quadrant choice with a splitmix64 sequence started from
// hash(seed, k), so edges can be generated in any chunks, on any number of threads, and in
// any order with identical results. Node permutation, labels, features and splits use other
// streams of the same hash.
//
// The node permutation (Graph500 scrambles vertex IDs so degree does not correlate with ID)
// is a keyed bijection on [0, 2^scale) built from rounds of multiply-by-odd, add and
// xor-shift, all invertible modulo 2^scale: O(1) memory and parallel, instead of a
// 2^scale-entry shuffled table (512 MiB at scale 26).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/rmat.hpp"

namespace tessera {

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Independent streams of the same seed.
enum Stream : uint64_t { kEdges = 1, kPerm = 2, kLabel = 3, kFeat = 4, kCentroid = 5, kSplit = 6 };

inline uint64_t stream_key(uint64_t seed, Stream s) {
  return mix64(mix64(seed + kGolden) ^ (static_cast<uint64_t>(s) * 0xd1b54a32d192ed03ULL));
}

// The i-th value of a stream: a counter-based draw.
inline uint64_t draw(uint64_t key, uint64_t i) {
  return mix64(key + i * kGolden);
}

// Uniform double in [0, 1) from the high 53 bits.
inline double unit(uint64_t r) {
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

// Keyed bijection on [0, 2^scale).
struct Permutation {
  static constexpr int kRounds = 3;
  uint64_t mask = 0, mul[kRounds] = {}, add[kRounds] = {};
  int shift = 1;
  bool identity = true;

  Permutation(const RmatOptions& o) {
    identity = !o.permute || o.scale == 0;
    mask = o.scale >= 64 ? ~uint64_t{0} : (uint64_t{1} << o.scale) - 1;
    shift = std::max(1, (o.scale + 1) / 2);
    const uint64_t key = stream_key(o.seed, kPerm);
    for (int r = 0; r < kRounds; ++r) {
      mul[r] = draw(key, 2 * r) | 1;  // odd: invertible modulo 2^scale
      add[r] = draw(key, 2 * r + 1);
    }
  }
  uint64_t operator()(uint64_t x) const {
    if (identity) return x;
    for (int r = 0; r < kRounds; ++r) {
      x = (x * mul[r] + add[r]) & mask;
      x ^= x >> shift;
    }
    return x;
  }
};

bool parse_i64(const std::string& s, int64_t& out) {
  const char* b = s.data();
  const char* e = b + s.size();
  const auto r = std::from_chars(b, e, out);
  return !s.empty() && r.ec == std::errc() && r.ptr == e;
}

}  // namespace

bool is_rmat_spec(const std::string& s) {
  return s.rfind("rmat:", 0) == 0;
}

RmatOptions parse_rmat_spec(const std::string& spec) {
  TESSERA_EXPECTS(is_rmat_spec(spec), ValueError,
                  "R-MAT spec '{}' must look like rmat:SCALE,EDGE_FACTOR[,SEED]", spec);
  std::vector<std::string> parts;
  std::string cur;
  for (char c : spec.substr(5)) {
    if (c == ',') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  TESSERA_EXPECTS(parts.size() == 2 || parts.size() == 3, ValueError,
                  "R-MAT spec '{}' must look like rmat:SCALE,EDGE_FACTOR[,SEED] (got {} fields)",
                  spec, parts.size());
  RmatOptions o;
  int64_t v = 0;
  TESSERA_EXPECTS(parse_i64(parts[0], v), ValueError,
                  "R-MAT spec '{}': SCALE '{}' is not an integer", spec, parts[0]);
  TESSERA_EXPECTS(v >= 0 && v <= 40, ValueError, "R-MAT spec '{}': SCALE {} is outside [0, 40]",
                  spec, v);
  o.scale = static_cast<int>(v);
  TESSERA_EXPECTS(parse_i64(parts[1], v), ValueError,
                  "R-MAT spec '{}': EDGE_FACTOR '{}' is not an integer", spec, parts[1]);
  TESSERA_EXPECTS(v >= 0, ValueError, "R-MAT spec '{}': EDGE_FACTOR {} is negative", spec, v);
  o.edge_factor = v;
  if (parts.size() == 3) {
    TESSERA_EXPECTS(parse_i64(parts[2], v) && v >= 0, ValueError,
                    "R-MAT spec '{}': SEED '{}' is not a non-negative integer", spec, parts[2]);
    o.seed = static_cast<uint64_t>(v);
  }
  validate_rmat_options(o);
  return o;
}

void validate_rmat_options(const RmatOptions& o) {
  TESSERA_EXPECTS(o.scale >= 0 && o.scale <= 40, ValueError, "R-MAT scale {} is outside [0, 40]",
                  o.scale);
  TESSERA_EXPECTS(o.edge_factor >= 0 && o.edge_factor <= (int64_t{1} << 20), ValueError,
                  "R-MAT edge factor {} is outside [0, 2^20]", o.edge_factor);
  TESSERA_EXPECTS(o.edge_factor <= (int64_t{1} << (62 - o.scale)), ValueError,
                  "R-MAT edge count edge_factor * 2^scale = {} * 2^{} overflows int64",
                  o.edge_factor, o.scale);
  TESSERA_EXPECTS(o.a >= 0 && o.b >= 0 && o.c >= 0 && o.a + o.b + o.c <= 1 + 1e-12, ValueError,
                  "R-MAT probabilities a={}, b={}, c={} must be >= 0 with a+b+c <= 1", o.a, o.b,
                  o.c);
  TESSERA_EXPECTS(o.feat_dim >= 0, ValueError, "R-MAT feat_dim {} is negative", o.feat_dim);
  TESSERA_EXPECTS(o.num_classes >= 0, ValueError, "R-MAT num_classes {} is negative",
                  o.num_classes);
  TESSERA_EXPECTS(o.train_frac >= 0 && o.val_frac >= 0 && o.test_frac >= 0 &&
                      o.train_frac + o.val_frac + o.test_frac <= 1 + 1e-12,
                  ValueError,
                  "R-MAT split fractions train={}, val={}, test={} must be >= 0 and sum to <= 1",
                  o.train_frac, o.val_frac, o.test_frac);
}

int64_t rmat_num_nodes(const RmatOptions& o) {
  return int64_t{1} << o.scale;
}

int64_t rmat_num_edges(const RmatOptions& o) {
  return o.edge_factor << o.scale;
}

void rmat_edges(const RmatOptions& o, int64_t begin, int64_t end, int64_t* src, int64_t* dst) {
  const Permutation perm(o);
  const uint64_t key = stream_key(o.seed, kEdges);
  // Quadrant thresholds on 16-bit uniforms: four levels per 64-bit draw. 16 bits resolve the
  // probabilities to 1.5e-5, far below R-MAT's own modelling error, and halve the hashing.
  const double d16 = 65536.0;
  const uint32_t ta = static_cast<uint32_t>(std::llround(o.a * d16));
  const uint32_t tab = static_cast<uint32_t>(std::llround((o.a + o.b) * d16));
  const uint32_t tabc = static_cast<uint32_t>(std::llround((o.a + o.b + o.c) * d16));
  const int scale = o.scale;
  parallel_for(begin, end, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t k = lo; k < hi; ++k) {
      uint64_t s = mix64(key ^ (static_cast<uint64_t>(k) * 0xd1b54a32d192ed03ULL));
      uint64_t u = 0, v = 0;
      for (int lvl = 0; lvl < scale; lvl += 4) {
        s += kGolden;
        uint64_t r = mix64(s);
        const int levels = std::min(4, scale - lvl);
        for (int j = 0; j < levels; ++j, r >>= 16) {
          const auto x = static_cast<uint32_t>(r & 0xffff);
          // a: (0,0)  b: (0,1)  c: (1,0)  d: (1,1) -- row bit = source, column bit = destination
          const uint64_t row = x >= tab;
          const uint64_t col = (x >= ta) & ((x < tab) | (x >= tabc));
          u = (u << 1) | row;
          v = (v << 1) | col;
        }
      }
      src[k - begin] = static_cast<int64_t>(perm(u));
      dst[k - begin] = static_cast<int64_t>(perm(v));
    }
  });
}

void rmat_labels(const RmatOptions& o, int64_t begin, int64_t end, int64_t* label) {
  TESSERA_EXPECTS(o.num_classes > 0, ValueError, "R-MAT labels need num_classes > 0");
  const uint64_t key = stream_key(o.seed, kLabel);
  const auto c = static_cast<uint64_t>(o.num_classes);
  parallel_for(begin, end, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      // Multiply-high maps 32 random bits onto [0, C) without a modulo's bias pattern.
      const uint64_t r = draw(key, static_cast<uint64_t>(i)) >> 32;
      label[i - begin] = static_cast<int64_t>((r * c) >> 32);
    }
  });
}

void rmat_features(const RmatOptions& o, int64_t begin, int64_t end, float* feat) {
  const int64_t f = o.feat_dim;
  if (f == 0) return;
  const uint64_t key = stream_key(o.seed, kFeat), ckey = stream_key(o.seed, kCentroid);
  const uint64_t lkey = stream_key(o.seed, kLabel);
  const auto c = static_cast<uint64_t>(o.num_classes);
  parallel_for(begin, end, 1024, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      float* row = feat + (i - begin) * f;
      int64_t lab = -1;
      if (c > 0)
        lab = static_cast<int64_t>(((draw(lkey, static_cast<uint64_t>(i)) >> 32) * c) >> 32);
      for (int64_t j = 0; j < f; ++j) {
        double x = 2.0 * unit(draw(key, static_cast<uint64_t>(i * f + j))) - 1.0;
        if (lab >= 0) x += 2.0 * unit(draw(ckey, static_cast<uint64_t>(lab * f + j))) - 1.0;
        row[j] = static_cast<float>(x);
      }
    }
  });
}

void rmat_splits(const RmatOptions& o, int64_t begin, int64_t end, uint8_t* split) {
  const uint64_t key = stream_key(o.seed, kSplit);
  const double t1 = o.train_frac, t2 = t1 + o.val_frac, t3 = t2 + o.test_frac;
  parallel_for(begin, end, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      const double u = unit(draw(key, static_cast<uint64_t>(i)));
      split[i - begin] = u < t1 ? 1 : u < t2 ? 2 : u < t3 ? 3 : 0;
    }
  });
}

Dataset generate_rmat(const RmatOptions& o) {
  validate_rmat_options(o);
  const int64_t n = rmat_num_nodes(o), e = rmat_num_edges(o);
  // The edge list (two int64 per edge) and the node data are held in memory: refuse up front,
  // by name, what cannot fit, instead of a bare std::bad_alloc (or minutes of swapping).
  const double need = 16.0 * static_cast<double>(e) +
                      static_cast<double>(n) * (4.0 * static_cast<double>(o.feat_dim) + 9.0);
  const double have = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                      static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  TESSERA_EXPECTS(have <= 0 || need <= have, ValueError,
                  "R-MAT scale {}, edge factor {}: {} nodes and {} edges need at least {} in "
                  "memory, more than this machine's {}; use a smaller SCALE or EDGE_FACTOR",
                  o.scale, o.edge_factor, n, e, human_bytes(need), human_bytes(have));
  Dataset ds;
  ds.format = "rmat";
  ds.name = fmt::format("rmat-s{}-ef{}-seed{}", o.scale, o.edge_factor, o.seed);
  ds.edges.num_nodes = n;
  ds.edges.src.resize(static_cast<size_t>(e));
  ds.edges.dst.resize(static_cast<size_t>(e));
  {
    Progress prog("generating R-MAT edges", e, "edges");
    const int64_t chunk = int64_t{1} << 24;
    for (int64_t b = 0; b < e; b += chunk) {
      const int64_t hi = std::min(e, b + chunk);
      rmat_edges(o, b, hi, ds.edges.src.data() + b, ds.edges.dst.data() + b);
      prog.update(hi);
    }
  }
  if (o.num_classes > 0) {
    std::vector<int64_t> label(static_cast<size_t>(n));
    rmat_labels(o, 0, n, label.data());
    ds.ndata["label"] = Array::from_vector(std::move(label), {n});
  }
  if (o.feat_dim > 0) {
    std::vector<float> feat(static_cast<size_t>(n * o.feat_dim));
    rmat_features(o, 0, n, feat.data());
    ds.ndata["feat"] = Array::from_vector(std::move(feat), {n, o.feat_dim});
  }
  if (o.train_frac > 0 || o.val_frac > 0 || o.test_frac > 0) {
    std::vector<uint8_t> split(static_cast<size_t>(n));
    rmat_splits(o, 0, n, split.data());
    const char* names[] = {"train_mask", "val_mask", "test_mask"};
    for (int s = 0; s < 3; ++s) {
      Array m = Array::zeros(DType::kBool, {n});
      auto* p = m.mut_data<uint8_t>();
      for (int64_t i = 0; i < n; ++i)
        p[i] = split[i] == s + 1;
      ds.ndata[names[s]] = m;
    }
  }
  ds.meta = {{"generator", "rmat"},
             {"scale", o.scale},
             {"edge_factor", o.edge_factor},
             {"a", o.a},
             {"b", o.b},
             {"c", o.c},
             {"seed", o.seed},
             {"permute", o.permute},
             {"feat_dim", o.feat_dim},
             {"num_classes", o.num_classes},
             {"train_frac", o.train_frac},
             {"val_frac", o.val_frac},
             {"test_frac", o.test_frac}};
  return ds;
}

}  // namespace tessera
