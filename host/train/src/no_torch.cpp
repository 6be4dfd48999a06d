// SPDX-License-Identifier: Apache-2.0
// `tessera train` in a build without libtorch (TESSERA_WITH_TORCH=OFF): it says so.
#include "tessera/core/error.hpp"
#include "tessera/train/train.hpp"

namespace tessera::train {

bool torch_compiled() {
  return false;
}

int run_training(const TrainOptions& /*opts*/) {
  TESSERA_FAIL(NotCompiledError,
               "tessera train: not_compiled_with_torch: this tessera was built without libtorch; "
               "rebuild with -DTESSERA_WITH_TORCH=ON (it uses the libtorch of an installed "
               "PyTorch, e.g. pip install torch==2.11.0), or train with "
               "python/examples/train_sage.py");
}

}  // namespace tessera::train
