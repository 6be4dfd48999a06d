// SPDX-License-Identifier: Apache-2.0
// cuSPARSE is loaded on the first call that needs it (cuda/src/cusparse_lib.hpp), not when a
// program linking Tessera starts: its own executable, so no other case loads it first. Runs
// without a GPU (loading the library and naming a status need none).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cusparse_lib.hpp"

namespace tessera::cuda::detail {
namespace {

// Whether this process has mapped a file whose name contains `name`.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(CusparseLib, LoadsOnFirstUseWithEveryEntryPoint) {
  const std::string soname = cusparse_soname();
  EXPECT_EQ(soname.rfind("libcusparse.so.", 0), 0u) << soname;
  EXPECT_FALSE(cusparse_loaded());
  EXPECT_FALSE(mapped("libcusparse")) << "cuSPARSE was loaded at start-up";
  const CusparseLib& lib = cusparse_lib();
  EXPECT_TRUE(cusparse_loaded());
  EXPECT_TRUE(mapped(soname));
  for (const void* fn :
       {reinterpret_cast<const void*>(lib.create), reinterpret_cast<const void*>(lib.destroy),
        reinterpret_cast<const void*>(lib.set_stream),
        reinterpret_cast<const void*>(lib.create_csr),
        reinterpret_cast<const void*>(lib.destroy_sp_mat),
        reinterpret_cast<const void*>(lib.create_dn_mat),
        reinterpret_cast<const void*>(lib.destroy_dn_mat),
        reinterpret_cast<const void*>(lib.spmm_buffer_size),
        reinterpret_cast<const void*>(lib.spmm), reinterpret_cast<const void*>(lib.get_error_name),
        reinterpret_cast<const void*>(lib.get_error_string)}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_STREQ(lib.get_error_name(CUSPARSE_STATUS_NOT_SUPPORTED), "CUSPARSE_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(&cusparse_lib(), &lib);  // loaded once
}

}  // namespace
}  // namespace tessera::cuda::detail
