#include "commands.hpp"

namespace tessera::tools {
// Placeholder until the bench command lands.
void register_bench(CLI::App& app) {
  (void)app;
}
}  // namespace tessera::tools
