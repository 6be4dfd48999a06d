#include "commands.hpp"

namespace tessera::tools {
// Placeholder until the validate command lands.
void register_validate(CLI::App& app) {
  (void)app;
}
}  // namespace tessera::tools
