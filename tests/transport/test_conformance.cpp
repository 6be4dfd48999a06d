// SPDX-License-Identifier: Apache-2.0
// One conformance suite, instantiated for every backend that can run here: local (world of 1),
// ucx over tcp and ucx over shared memory at 2, 3 and 4 ranks. Every case forks real processes
// on loopback with a deadline and asserts on what every rank saw.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "multiprocess.hpp"
#include "tessera/transport/transport.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

using transport::Bytes;
using transport::ByteView;
using transport::DType;
using transport::ReduceOp;
using transport::Transport;

struct Config {
  std::string backend;  // "local" or "ucx"
  std::string tls;      // UCX_TLS ("" for local)
  int world;
  std::string label() const {
    std::string t = tls;
    for (char& c : t)
      if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return backend + (t.empty() ? "" : "_" + t) + "_" + std::to_string(world);
  }
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.label();
}

class Conformance : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    if (GetParam().backend == "ucx") {
      TESSERA_SKIP_WITHOUT_UCX();
    }
  }
  JobSpec spec(double deadline_s = 60) const {
    JobSpec s;
    s.world = GetParam().world;
    s.deadline_s = deadline_s;
    s.env["TESSERA_TRANSPORT"] = GetParam().backend;
    s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "20";
    s.env["TESSERA_OP_TIMEOUT"] = "30";
    if (!GetParam().tls.empty()) s.env["UCX_TLS"] = GetParam().tls;
    return s;
  }
  /// Runs `body` with a transport on every rank; expects every rank to succeed.
  std::vector<RankResult> run_ok(const std::function<std::string(Transport&)>& body,
                                 double deadline_s = 60) {
    auto res = run_ranks(spec(deadline_s), [&](int) {
      auto t = transport::create_transport();
      std::string out = body(*t);
      return out;
    });
    for (const auto& r : res)
      EXPECT_EQ(r.exit_code, 0) << describe(res);
    return res;
  }
};

// Cases that need a peer (timeouts, faults, refusals): instantiated for the worlds of two or more.
class MultiRankConformance : public Conformance {};

// Deterministic test bytes: what rank s sends to rank d at index i.
uint8_t pattern(int s, int d, size_t i) {
  return static_cast<uint8_t>((s * 131 + d * 31 + i * 7 + (i >> 8)) & 0xFF);
}

TEST_P(Conformance, IdentityAndCapabilities) {
  run_ok([&](Transport& t) {
    RANK_CHECK(t.world_size() == GetParam().world, "world {}", t.world_size());
    RANK_CHECK(t.rank() >= 0 && t.rank() < t.world_size(), "rank {}", t.rank());
    RANK_CHECK(t.name() == GetParam().backend, "name {}", t.name());
    const auto c = t.capabilities();
    RANK_CHECK(c.collectives && c.request_response && c.one_sided_get && c.host_memory, "caps");
    return std::string();
  });
}

TEST_P(Conformance, BarrierSynchronizes) {
  run_ok([&](Transport& t) {
    for (int round = 0; round < 3; ++round) {
      // Ranks arrive staggered; nobody may leave before the last one arrived.
      std::this_thread::sleep_for(std::chrono::milliseconds(30 * t.rank()));
      const double enter =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      t.barrier();
      const double leave =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      std::vector<double> enters(t.world_size());
      t.all_gather(&enter, sizeof enter, enters.data());
      for (double e : enters)
        RANK_CHECK(leave >= e, "left barrier at {} before a rank entered at {}", leave, e);
    }
    for (int i = 0; i < 50; ++i)
      t.barrier();
    return std::string();
  });
}

template <typename T>
void check_all_reduce(Transport& t, DType dt, size_t count) {
  const int n = t.world_size(), me = t.rank();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    std::vector<T> v(count);
    auto val = [](int r, size_t i) {
      return static_cast<T>(static_cast<int64_t>((i * 7 + r * 13) % 101) - 50);
    };
    for (size_t i = 0; i < count; ++i)
      v[i] = val(me, i);
    t.all_reduce(v.data(), count, dt, op);
    for (size_t i = 0; i < count; ++i) {
      T want = val(0, i);
      for (int r = 1; r < n; ++r) {
        const T x = val(r, i);
        want = op == ReduceOp::sum   ? static_cast<T>(want + x)
               : op == ReduceOp::max ? std::max(want, x)
                                     : std::min(want, x);
      }
      RANK_CHECK(v[i] == want, "all_reduce {} {} count {} element {}: got {} want {}",
                 transport::dtype_name(dt), transport::reduce_op_name(op), count, i,
                 static_cast<double>(v[i]), static_cast<double>(want));
    }
  }
}

TEST_P(Conformance, AllReduce) {
  run_ok([&](Transport& t) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, size_t{65537}}) {
      check_all_reduce<float>(t, DType::f32, count);
      check_all_reduce<double>(t, DType::f64, count);
      check_all_reduce<int64_t>(t, DType::i64, count);
      check_all_reduce<int32_t>(t, DType::i32, count);
    }
    return std::string();
  });
}

TEST_P(Conformance, AllGather) {
  run_ok([&](Transport& t) {
    const int n = t.world_size();
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}}) {
      Bytes mine(bytes), all(bytes * n);
      for (size_t i = 0; i < bytes; ++i)
        mine[i] = pattern(t.rank(), 0, i);
      t.all_gather(mine.data(), bytes, all.data());
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < bytes; ++i)
          RANK_CHECK(all[r * bytes + i] == pattern(r, 0, i), "all_gather byte {} of rank {}", i, r);
    }
    // Variable sizes: rank r contributes r*3 bytes.
    Bytes mine(t.rank() * 3);
    for (size_t i = 0; i < mine.size(); ++i)
      mine[i] = pattern(t.rank(), 1, i);
    auto got = t.all_gather(ByteView(mine));
    RANK_CHECK(static_cast<int>(got.size()) == n, "{} parts", got.size());
    for (int r = 0; r < n; ++r) {
      RANK_CHECK(got[r].size() == static_cast<size_t>(r) * 3, "size from {}", r);
      for (size_t i = 0; i < got[r].size(); ++i)
        RANK_CHECK(got[r][i] == pattern(r, 1, i), "byte {} from {}", i, r);
    }
    return std::string();
  });
}

// Uneven sizes, including empty ones: rank s sends size(s, d) bytes to d.
size_t a2a_size(int s, int d) {
  return ((s * 7 + d * 3) % 5) * 97;
}

TEST_P(Conformance, AllToAllVUnevenAndEmpty) {
  run_ok([&](Transport& t) {
    const int n = t.world_size(), me = t.rank();
    std::vector<size_t> sc(n), so(n), rc(n), ro(n);
    size_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = a2a_size(me, p);
      so[p] = st;
      st += sc[p];
      rc[p] = a2a_size(p, me);
      ro[p] = rt;
      rt += rc[p];
    }
    Bytes send(st), recv(rt, 0xEE);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < sc[p]; ++i)
        send[so[p] + i] = pattern(me, p, i);
    t.all_to_all_v(send.data(), sc.data(), so.data(), recv.data(), rc.data(), ro.data());
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < rc[p]; ++i)
        RANK_CHECK(recv[ro[p] + i] == pattern(p, me, i), "byte {} from rank {}", i, p);
    // All empty.
    std::vector<size_t> zero(n, 0);
    t.all_to_all_v(send.data(), zero.data(), zero.data(), recv.data(), zero.data(), zero.data());
    // Convenience form with unknown receive sizes.
    std::vector<Bytes> per(n);
    for (int p = 0; p < n; ++p) {
      per[p].resize(a2a_size(me, p));
      for (size_t i = 0; i < per[p].size(); ++i)
        per[p][i] = pattern(me, p, i);
    }
    auto got = t.all_to_all_v(per);
    for (int p = 0; p < n; ++p) {
      RANK_CHECK(got[p].size() == a2a_size(p, me), "size from {}", p);
      for (size_t i = 0; i < got[p].size(); ++i)
        RANK_CHECK(got[p][i] == pattern(p, me, i), "byte {} from rank {}", i, p);
    }
    return std::string();
  });
}

TEST_P(MultiRankConformance, AllToAllVSizeMismatchIsNamed) {
  auto res = run_ranks(spec(), [&](int) {
    auto t = transport::create_transport();
    const int n = t->world_size(), me = t->rank();
    std::vector<size_t> sc(n, 4), so(n, 0), rc(n, 4), ro(n);
    for (int p = 0; p < n; ++p)
      ro[p] = p * 8;
    if (me == 1) sc.assign(n, 8);  // rank 1 sends more than the others expect
    Bytes send(8, 1), recv(8 * n);
    t->all_to_all_v(send.data(), sc.data(), so.data(), recv.data(), rc.data(), ro.data());
    return std::string("no error");
  });
  // Every rank but 1 received 8 bytes from rank 1 where it expected 4.
  for (int r = 0; r < GetParam().world; ++r) {
    if (r == 1) continue;
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_NE(res[r].message.find("rank 1 sent 8 bytes"), std::string::npos) << describe(res);
  }
}

// Rank 0 all-gathers 8 bytes (as node_split does) while the others all-reduce two float64: the
// same bytes per peer in a world of two, which used to return garbage there. Every rank fails,
// naming what each rank called, and the collectives pair up again afterwards.
TEST_P(MultiRankConformance, DifferentCollectivesFailEveryRankNamingEachCall) {
  auto res = run_ranks(spec(), [&](int) {
    auto t = transport::create_transport();
    const int n = t->world_size(), me = t->rank();
    std::string seen;
    try {
      if (me == 0) {
        const transport::CollectiveLabel label(*t, "node_split");
        const int64_t c = 3;
        std::vector<int64_t> counts(n);
        t->all_gather(&c, sizeof c, counts.data());
      } else {
        const transport::CollectiveLabel label(*t, "all_reduce");
        double v[2] = {1.0, 2.0};
        t->all_reduce(v, 2, DType::f64, ReduceOp::sum);
      }
      return std::string("no error");
    } catch (const transport::CollectiveMismatchError& e) {
      seen = e.what();
    }
    int64_t x = me + 1;  // the next collective pairs up again
    t->all_reduce(&x, 1, DType::i64, ReduceOp::sum);
    RANK_CHECK(x == int64_t{n} * (n + 1) / 2, "all_reduce after the mismatch gave {}", x);
    return seen;
  });
  const int n = GetParam().world;
  const std::string others = n == 2   ? "rank 1 called"
                             : n == 3 ? "ranks 1, 2 called"
                                      : "ranks 1-3 called";
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    const std::string& m = res[r].message;
    EXPECT_NE(
        m.find(fmt::format("rank {}: the ranks called different collectives at collective #", r)),
        std::string::npos)
        << describe(res);
    EXPECT_NE(m.find("rank 0 called node_split (all_gather, 8 bytes per rank); " + others +
                     " all_reduce (float64 sum of 2)"),
              std::string::npos)
        << describe(res);
  }
}

// The same collective with other arguments (4 float32 against 2 float64: the same bytes), or
// under another operation's name, is a mismatch too; nested names join.
TEST_P(MultiRankConformance, SameCollectiveWithOtherArgumentsOrNameIsAMismatch) {
  auto res = run_ranks(spec(), [&](int) {
    auto t = transport::create_transport();
    const int me = t->rank();
    std::string seen;
    try {
      if (me == 1) {
        float v[4] = {1, 2, 3, 4};
        t->all_reduce(v, 4, DType::f32, ReduceOp::sum);
      } else {
        double v[2] = {1, 2};
        t->all_reduce(v, 2, DType::f64, ReduceOp::sum);
      }
      return std::string("no error (arguments)");
    } catch (const transport::CollectiveMismatchError& e) {
      seen = e.what();
    }
    try {
      const transport::CollectiveLabel outer(*t, "DistGraph 'cora'");
      const transport::CollectiveLabel inner(*t, me == 1 ? "exit_client" : "barrier");
      t->barrier();
      return std::string("no error (names)");
    } catch (const ValueError& e) {  // CollectiveMismatchError is a ValueError
      seen += "\n" + std::string(e.what());
    }
    RANK_CHECK(t->collective_label().empty(), "label left behind: {}", t->collective_label());
    t->barrier();
    return seen;
  });
  const int n = GetParam().world;
  const std::string others = n == 2 ? "rank 0" : n == 3 ? "ranks 0, 2" : "ranks 0, 2, 3";
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << describe(res);
    const std::string& m = res[r].message;
    EXPECT_NE(m.find(others + " called all_reduce (float64 sum of 2); rank 1 called all_reduce "
                              "(float32 sum of 4)"),
              std::string::npos)
        << describe(res);
    EXPECT_NE(m.find(others + " called DistGraph 'cora' > barrier (barrier); rank 1 called "
                              "DistGraph 'cora' > exit_client (barrier)"),
              std::string::npos)
        << describe(res);
  }
}

TEST_P(Conformance, RequestResponseFromAllRanksConcurrently) {
  run_ok([&](Transport& t) {
    const int n = t.world_size(), me = t.rank();
    // Echo handler: response = [server rank][source rank][payload reversed].
    t.register_handler(1, [me](int src, ByteView p) {
      Bytes out(2 + p.size);
      out[0] = static_cast<uint8_t>(me);
      out[1] = static_cast<uint8_t>(src);
      for (size_t i = 0; i < p.size; ++i)
        out[2 + i] = p.bytes()[p.size - 1 - i];
      return out;
    });
    t.register_handler(2, [](int, ByteView) -> Bytes { throw ValueError("row 42 is not mine"); });
    t.barrier();
    std::atomic<int> bad{0};
    std::string first_error;
    std::mutex emu;
    auto worker = [&](int thread) {
      std::mt19937 rng(me * 100 + thread);
      for (int k = 0; k < 40; ++k) {
        const int peer = static_cast<int>(rng() % n);
        Bytes payload(1 + rng() % 300);
        for (auto& b : payload)
          b = static_cast<uint8_t>(rng());
        try {
          Bytes r = t.request(peer, 1, ByteView(payload));
          bool ok = r.size() == payload.size() + 2 && r[0] == peer && r[1] == me;
          for (size_t i = 0; ok && i < payload.size(); ++i)
            ok = r[2 + i] == payload[payload.size() - 1 - i];
          if (!ok) ++bad;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lk(emu);
          if (first_error.empty()) first_error = e.what();
          ++bad;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int th = 0; th < 4; ++th)
      threads.emplace_back(worker, th);
    for (auto& th : threads)
      th.join();
    RANK_CHECK(bad == 0, "{} bad responses; first error: {}", bad.load(), first_error);
    // A batch: one request per owner, all in flight at once.
    std::vector<transport::PendingResponse> pending;
    for (int p = 0; p < n; ++p) {
      const uint8_t b = static_cast<uint8_t>(p);
      pending.push_back(t.request_async(p, 1, ByteView(&b, 1)));
    }
    for (int p = 0; p < n; ++p) {
      Bytes r = pending[p].wait();
      RANK_CHECK(r.size() == 3 && r[0] == p && r[2] == p, "batched response from {}", p);
    }
    // Errors travel back with the remote rank's message.
    const int peer = (me + 1) % n;
    bool threw = false;
    try {
      t.request(peer, 2, ByteView());
    } catch (const transport::RemoteError& e) {
      threw = std::string(e.what()).find("row 42 is not mine") != std::string::npos &&
              std::string(e.what()).find(fmt::format("rank {}", peer)) != std::string::npos;
    }
    RANK_CHECK(threw, "handler error did not come back as RemoteError");
    threw = false;
    try {
      t.request(peer, 77, ByteView());
    } catch (const transport::RemoteError& e) {
      threw = std::string(e.what()).find("no handler is registered for message id 77") !=
              std::string::npos;
    }
    RANK_CHECK(threw, "unknown message id did not come back as RemoteError");
    t.barrier();  // keep serving until everyone is done
    return std::string();
  });
}

TEST_P(Conformance, OneSidedGet) {
  run_ok([&](Transport& t) {
    const int n = t.world_size(), me = t.rank();
    const size_t size = 1 << 20;
    Bytes mine(size);
    for (size_t i = 0; i < size; ++i)
      mine[i] = pattern(me, 9, i);
    auto region = t.register_memory(mine.data(), mine.size());
    auto remotes = t.exchange_regions(*region);
    RANK_CHECK(static_cast<int>(remotes.size()) == n, "{} remotes", remotes.size());
    std::mt19937 rng(me);
    for (int p = 0; p < n; ++p) {
      RANK_CHECK(remotes[p]->owner() == p && remotes[p]->size() == size, "remote {}", p);
      // A batch of random rows of 1..4096 bytes.
      const size_t nr = 500;
      std::vector<transport::GetRange> ranges(nr);
      std::vector<Bytes> dst(nr);
      for (size_t k = 0; k < nr; ++k) {
        const size_t len = 1 + rng() % 4096;
        const size_t off = rng() % (size - len);
        dst[k].assign(len, 0);
        ranges[k] = {off, dst[k].data(), len};
      }
      t.get(*remotes[p], ranges.data(), nr);
      for (size_t k = 0; k < nr; ++k)
        for (size_t i = 0; i < dst[k].size(); ++i)
          RANK_CHECK(dst[k][i] == pattern(p, 9, ranges[k].remote_offset + i),
                     "get from rank {} range {} byte {}", p, k, i);
      // The whole region in one read.
      Bytes all(size);
      t.get(*remotes[p], 0, all.data(), size);
      RANK_CHECK(std::memcmp(all.data(), Bytes(size).data(), 0) == 0, "");
      for (size_t i = 0; i < size; i += 997)
        RANK_CHECK(all[i] == pattern(p, 9, i), "whole-region byte {} from {}", i, p);
      // Out of bounds is refused before anything is sent.
      bool threw = false;
      try {
        t.get(*remotes[p], size - 10, all.data(), 11);
      } catch (const IndexError& e) {
        threw = std::string(e.what()).find("outside rank") != std::string::npos;
      }
      RANK_CHECK(threw, "out-of-range get was not refused");
    }
    // Memory the transport allocates (and owns) reads the same way.
    auto owned = t.allocate_memory(64 << 10);
    auto* o = static_cast<uint8_t*>(owned->data());
    for (size_t i = 0; i < owned->size(); ++i)
      RANK_CHECK(o[i] == 0, "allocated memory is not zero-filled at {}", i);
    for (size_t i = 0; i < owned->size(); ++i)
      o[i] = pattern(me, 10, i);
    auto owned_remotes = t.exchange_regions(*owned);
    for (int p = 0; p < n; ++p) {
      Bytes got(4096);
      const size_t off = (p * 4099) % (owned->size() - got.size());
      t.get(*owned_remotes[p], off, got.data(), got.size());
      for (size_t i = 0; i < got.size(); ++i)
        RANK_CHECK(got[i] == pattern(p, 10, off + i), "allocated region of rank {} byte {}", p, i);
    }
    // A blob claimed for the wrong owner, or corrupted, is refused.
    Bytes key = region->remote_key();
    bool threw = false;
    try {
      t.attach((me + 1) % n == me ? me : (me + 1) % n, ByteView(key));
    } catch (const ValueError&) {
      threw = true;
    }
    RANK_CHECK(threw || n == 1, "attach with the wrong owner was accepted");
    key[0] ^= 0xFF;
    threw = false;
    try {
      t.attach(me, ByteView(key));
    } catch (const ValueError& e) {
      threw = std::string(e.what()).find("malformed") != std::string::npos;
    }
    RANK_CHECK(threw, "a corrupted remote key was accepted");
    t.barrier();  // peers may still be reading our regions
    remotes.clear();
    owned_remotes.clear();
    return std::string();
  });
}

TEST_P(Conformance, LargeMessages) {
  run_ok([&](Transport& t) {
    const int n = t.world_size(), me = t.rank();
    const size_t big = 3u << 20;  // 3 MiB per peer
    std::vector<Bytes> per(n, Bytes(big));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < big; ++i)
        per[p][i] = pattern(me, p, i);
    auto got = t.all_to_all_v(per);
    for (int p = 0; p < n; ++p) {
      RANK_CHECK(got[p].size() == big, "size from {}", p);
      for (size_t i = 0; i < big; i += 101)
        RANK_CHECK(got[p][i] == pattern(p, me, i), "byte {} from {}", i, p);
    }
    std::vector<float> v(1 << 20, 1.0f);
    t.all_reduce(v.data(), v.size(), DType::f32, ReduceOp::sum);
    for (size_t i = 0; i < v.size(); i += 1001)
      RANK_CHECK(v[i] == static_cast<float>(n), "sum at {}", i);
    t.register_handler(5, [](int, ByteView p) { return Bytes(p.bytes(), p.bytes() + p.size); });
    t.barrier();
    const int peer = (me + 1) % n;
    Bytes r = t.request(peer, 5, ByteView(per[peer]));
    RANK_CHECK(r == per[peer], "3 MiB echo from rank {}", peer);
    t.barrier();
    return std::string();
  });
}

// --- faults -----------------------------------------------------------------------------------

TEST_P(MultiRankConformance, PeerThatNeverShowsUpTimesOut) {
  JobSpec s = spec(30);
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "1";
  const int missing = s.world - 1;
  s.absent = {missing};
  auto res = run_ranks(s, [&](int) {
    auto t = transport::create_transport();
    return std::string("created");
  });
  for (int r = 0; r < s.world; ++r) {
    if (r == missing) continue;
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_FALSE(res[r].timed_out) << describe(res);
    EXPECT_NE(res[r].message.find(fmt::format("rank {}", missing)), std::string::npos)
        << describe(res);
    EXPECT_NE(res[r].message.find("timed out"), std::string::npos) << describe(res);
    EXPECT_LT(res[r].seconds, 15) << describe(res);
  }
}

TEST_P(MultiRankConformance, MissingRankZeroTimesOut) {
  JobSpec s = spec(30);
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "1";
  s.absent = {0};
  auto res = run_ranks(s, [&](int) {
    auto t = transport::create_transport();
    return std::string("created");
  });
  for (int r = 1; r < s.world; ++r) {
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_NE(res[r].message.find("rendezvous store"), std::string::npos) << describe(res);
    EXPECT_NE(res[r].message.find("rank 0"), std::string::npos) << describe(res);
    EXPECT_LT(res[r].seconds, 15) << describe(res);
  }
}

// A rank dies (SIGKILL) in the middle of the job; every other rank must fail with an error that
// names it, well within the 30 s contract, whatever it was doing.
void killed_rank_case(const JobSpec& s, int victim) {
  auto res = run_ranks(s, [&](int) {
    auto t = transport::create_transport();
    t->register_handler(3, [](int, ByteView) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return Bytes(1, 1);
    });
    t->barrier();
    if (t->rank() == victim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::raise(SIGKILL);
    }
    // Survivors: alternate collectives and requests to the victim until something fails.
    for (int i = 0;; ++i) {
      int64_t x = 1;
      t->all_reduce(&x, 1, DType::i64, ReduceOp::sum);
      t->request(victim, 3, ByteView());
    }
    return std::string("unreachable");
  });
  for (int r = 0; r < s.world; ++r) {
    if (r == victim) {
      EXPECT_EQ(res[r].exit_code, 128 + SIGKILL) << describe(res);
      continue;
    }
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_FALSE(res[r].timed_out) << describe(res);
    EXPECT_NE(res[r].message.find(fmt::format("rank {} was lost", victim)), std::string::npos)
        << describe(res);
    EXPECT_LT(res[r].seconds, 30) << describe(res);
  }
}

TEST_P(MultiRankConformance, KilledRankIsNamedByEveryOtherRank) {
  killed_rank_case(spec(40), GetParam().world - 1);
}

TEST_P(MultiRankConformance, KilledRankZeroIsNamedByEveryOtherRank) {
  killed_rank_case(spec(40), 0);
}

TEST_P(MultiRankConformance, RankThatLeavesEarlyIsNamed) {
  // Rank 1 fails with an ordinary exception right after joining (its transport says goodbye);
  // the others must not wait for it until the op deadline (30 s here).
  auto res = run_ranks(spec(40), [&](int) {
    auto t = transport::create_transport();
    if (t->rank() == 1) throw ValueError("rank 1's own bug");
    int64_t x = 1;
    t->all_reduce(&x, 1, DType::i64, ReduceOp::sum);
    return std::string("unreachable");
  });
  EXPECT_NE(res[1].message.find("rank 1's own bug"), std::string::npos) << describe(res);
  for (int r = 0; r < GetParam().world; ++r) {
    if (r == 1) continue;
    EXPECT_EQ(res[r].exit_code, 1) << describe(res);
    EXPECT_NE(res[r].message.find("rank 1 left the job"), std::string::npos) << describe(res);
    EXPECT_LT(res[r].seconds, 15) << describe(res);
  }
}

TEST_P(MultiRankConformance, WrongTokenIsRefused) {
  JobSpec s = spec(30);
  s.env["TESSERA_RENDEZVOUS_TIMEOUT"] = "1";
  s.token_of[1] = "a-token-of-another-job";
  auto res = run_ranks(s, [&](int) {
    auto t = transport::create_transport();
    return std::string("created");
  });
  EXPECT_EQ(res[1].exit_code, 1) << describe(res);
  EXPECT_NE(res[1].message.find("refused rank 1"), std::string::npos) << describe(res);
  EXPECT_NE(res[1].message.find("token mismatch"), std::string::npos) << describe(res);
  EXPECT_EQ(res[1].message.find("a-token-of-another-job"), std::string::npos)
      << "the token leaked into the message: " << describe(res);
  EXPECT_EQ(res[0].exit_code, 1) << describe(res);
  EXPECT_NE(res[0].message.find("rank 1"), std::string::npos) << describe(res);
}

// Worlds of two or more run over UCX; without it (TESSERA_WITH_UCX=OFF) they skip.
std::vector<Config> multi_rank_configs() {
  std::vector<Config> c;
  for (int w : {2, 3, 4}) {
    c.push_back({"ucx", "tcp", w});
    c.push_back({"ucx", "posix,sysv,cma", w});
  }
  return c;
}

std::vector<Config> configs() {
  std::vector<Config> c{{"local", "", 1}};
  const std::vector<Config> multi = multi_rank_configs();
  c.insert(c.end(), multi.begin(), multi.end());
  return c;
}

std::string config_name(const ::testing::TestParamInfo<Config>& i) {
  return i.param.label();
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(configs()), config_name);
INSTANTIATE_TEST_SUITE_P(Backends, MultiRankConformance, ::testing::ValuesIn(multi_rank_configs()),
                         config_name);

}  // namespace
}  // namespace tessera::test
