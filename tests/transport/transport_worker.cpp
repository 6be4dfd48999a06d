// SPDX-License-Identifier: Apache-2.0
// A rank program for the launch tests: `transport_worker allreduce` prints the all-reduced sum of
// ranks; `transport_worker die R` makes rank R die (SIGKILL) after the first barrier while the
// others keep all-reducing until they see the loss; `transport_worker store-socket` prints the
// socket the launcher handed this rank for the store, before and after the rendezvous;
// `transport_worker bench-allreduce [N]` prints the mean time of N (default 20000) all-reduces
// of 2 float64 and of 1 M float32 (every rank).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tessera/transport/rendezvous.hpp"
#include "tessera/transport/transport.hpp"

namespace {

// "none", "closed", or the address the socket `fd` is bound to and whether it listens.
std::string describe_socket(int fd) {
  if (fd < 0) {
    return "none";
  }
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) {
    return "closed";
  }
  int listening = 0;
  len = sizeof listening;
  ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
  char ip[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return fmt::format("{}:{}/{}", ip, ntohs(a.sin_port), listening ? "listening" : "bound");
}

// Every rank meets in the store; prints what the launcher passed (kStoreSocketEnv) and what
// became of that socket.
int store_socket() {
  using namespace tessera::transport;
  const LaunchEnv env = detect_launch_env();
  const char* v = std::getenv(kStoreSocketEnv);
  const int fd = v != nullptr ? std::atoi(v) : -1;
  const std::string before = describe_socket(fd);
  Rendezvous rv = rendezvous(env, 30);
  rv.client->watch([](int, const std::string&) {});
  const std::string after = describe_socket(fd);
  const std::string key = "rank/" + std::to_string(env.rank);
  rv.client->set(key, ByteView(key.data(), key.size()));
  for (int r = 0; r < env.world_size; ++r) {
    rv.client->get("rank/" + std::to_string(r), 30);
  }
  fmt::print("store-socket rank={} var={} before={} after={} store-port={}\n", env.rank,
             v != nullptr ? v : "-", before, after, rv.server ? rv.server->port() : 0);
  std::fflush(stdout);
  return rv.client->finish(30) ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::transport;
  const std::string mode = argc > 1 ? argv[1] : "allreduce";
  try {
    if (mode == "store-socket") {
      return store_socket();
    }
    auto t = create_transport();
    int64_t x = t->rank();
    t->all_reduce(&x, 1, DType::i64, ReduceOp::sum);
    fmt::print("transport={} rank={} world={} sum={}\n", t->name(), t->rank(), t->world_size(), x);
    std::fflush(stdout);
    if (mode == "die") {
      const int victim = argc > 2 ? std::atoi(argv[2]) : 1;
      t->barrier();
      if (t->rank() == victim) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ::raise(SIGKILL);
      }
      for (;;) {
        int64_t y = 1;
        t->all_reduce(&y, 1, DType::i64, ReduceOp::sum);
      }
    }
    if (mode == "bench-allreduce") {
      using C = std::chrono::steady_clock;
      const int iters = argc > 2 ? std::atoi(argv[2]) : 20000;
      double small[2] = {1.0, 2.0};
      for (int i = 0; i < 200; ++i) {
        t->all_reduce(small, 2, DType::f64, ReduceOp::sum);  // warm-up
      }
      t->barrier();
      auto t0 = C::now();
      for (int i = 0; i < iters; ++i) {
        t->all_reduce(small, 2, DType::f64, ReduceOp::sum);
      }
      const double s = std::chrono::duration<double>(C::now() - t0).count() / iters;
      std::vector<float> big(1 << 20, 1.0f);
      t->barrier();
      const int big_iters = std::max(1, iters / 200);
      t0 = C::now();
      for (int i = 0; i < big_iters; ++i) {
        t->all_reduce(big.data(), big.size(), DType::f32, ReduceOp::sum);
      }
      const double b = std::chrono::duration<double>(C::now() - t0).count() / big_iters;
      fmt::print("bench-allreduce rank {}: 2 x float64 {:.2f} us, 1M x float32 {:.1f} us\n",
                 t->rank(), s * 1e6, b * 1e6);
    }
    if (mode == "bench" && t->world_size() >= 2) {
      // Rough figures for rank 0 talking to rank 1: request round trip, one-sided 4 KB row reads.
      t->register_handler(1, [](int, ByteView p) { return Bytes(p.bytes(), p.bytes() + p.size); });
      const bool alloc = argc > 2 && std::string(argv[2]) == "alloc";
      Bytes region(alloc ? 0 : 64 << 20, 7);
      auto mine =
          alloc ? t->allocate_memory(64 << 20) : t->register_memory(region.data(), region.size());
      auto remotes = t->exchange_regions(*mine);
      t->barrier();
      if (t->rank() == 0) {
        using C = std::chrono::steady_clock;
        const int iters = 2000;
        auto t0 = C::now();
        for (int i = 0; i < iters; ++i)
          t->request(1, 1, ByteView(&i, sizeof i));
        const double rtt = std::chrono::duration<double>(C::now() - t0).count() / iters;
        const size_t rows = 10000, row = 4096;
        Bytes dst(rows * row);
        std::vector<GetRange> ranges(rows);
        for (size_t k = 0; k < rows; ++k)
          ranges[k] = {((k * 7919) % ((64 << 20) / row)) * row, dst.data() + k * row, row};
        t->get(*remotes[1], ranges.data(), rows);  // warm-up
        t0 = C::now();
        const int reps = 5;
        for (int r = 0; r < reps; ++r)
          t->get(*remotes[1], ranges.data(), rows);
        const double s = std::chrono::duration<double>(C::now() - t0).count() / reps;
        t0 = C::now();
        t->get(*remotes[1], 0, dst.data(), rows * row);
        const double big = std::chrono::duration<double>(C::now() - t0).count();
        t0 = C::now();
        for (int i = 0; i < 1000; ++i)
          t->get(*remotes[1], ranges[i].remote_offset, dst.data(), row);
        const double one = std::chrono::duration<double>(C::now() - t0).count() / 1000;
        fmt::print("bench: one {} B get {:.2f} GB/s; single-row get latency {:.1f} us\n",
                   rows * row, rows * row / big / 1e9, one * 1e6);
        fmt::print(
            "bench: request round trip {:.1f} us; get of {} x {} B rows: {:.2f} GB/s, "
            "{:.2f} M rows/s\n",
            rtt * 1e6, rows, row, rows * row / s / 1e9, rows / s / 1e6);
      }
      t->barrier();
    }
    t->barrier();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 3;
  }
  return 0;
}
