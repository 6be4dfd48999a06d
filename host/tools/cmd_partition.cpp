#include "commands.hpp"

namespace tessera::tools {
// Placeholder until the partition command lands.
void register_partition(CLI::App& app) {
  (void)app;
}
}  // namespace tessera::tools
