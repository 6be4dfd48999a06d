#include "commands.hpp"

namespace tessera::tools {
// Placeholder until the launch command lands.
void register_launch(CLI::App& app) { (void)app; }
}  // namespace tessera::tools
