#include "commands.hpp"

namespace tessera::tools {
// Placeholder until the generate command lands.
void register_generate(CLI::App& app) {
  (void)app;
}
}  // namespace tessera::tools
