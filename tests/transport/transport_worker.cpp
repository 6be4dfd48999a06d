// SPDX-License-Identifier: Apache-2.0
// A rank program for the launch tests: `transport_worker allreduce` prints the all-reduced sum of
// ranks; `transport_worker die R` makes rank R die (SIGKILL) after the first barrier while the
// others keep all-reducing until they see the loss.
#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tessera/transport/transport.hpp"

int main(int argc, char** argv) {
  using namespace tessera::transport;
  const std::string mode = argc > 1 ? argv[1] : "allreduce";
  try {
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
