// A rank program for the launch tests: `transport_worker allreduce` prints the all-reduced sum of
// ranks; `transport_worker die R` makes rank R die (SIGKILL) after the first barrier while the
// others keep all-reducing until they see the loss.
#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <string>
#include <thread>

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
    t->barrier();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 3;
  }
  return 0;
}
