// Temporary: readers not yet written. Replaced by read_ogb.cpp, read_snap.cpp, read_metis.cpp,
// read_mtx.cpp.
#include "tessera/core/error.hpp"
#include "tessera/graph/dataset.hpp"

namespace tessera {
Dataset read_ogb_dir(const std::filesystem::path& p, const ReadOptions&) {
  TESSERA_FAIL(NotCompiledError, "{}: OGB reader not implemented yet", p.string());
}
Dataset read_snap(const std::filesystem::path& p, const ReadOptions&) {
  TESSERA_FAIL(NotCompiledError, "{}: SNAP reader not implemented yet", p.string());
}
Dataset read_metis(const std::filesystem::path& p, const ReadOptions&) {
  TESSERA_FAIL(NotCompiledError, "{}: METIS reader not implemented yet", p.string());
}
Dataset read_mtx(const std::filesystem::path& p, const ReadOptions&) {
  TESSERA_FAIL(NotCompiledError, "{}: MTX reader not implemented yet", p.string());
}
}  // namespace tessera
