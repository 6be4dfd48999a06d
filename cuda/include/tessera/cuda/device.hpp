// SPDX-License-Identifier: Apache-2.0
// The calling thread's current CUDA device. Plain C++ (no cuda_runtime.h). Threads that did not
// choose a device run on device 0, so code that works on memory of a known device from another
// thread (e.g. a transport's handler thread serving a DistTensor's device rows) selects it
// first with a DeviceGuard.
#pragma once

namespace tessera::cuda {

/// The calling thread's current device (cudaGetDevice). CPU-only build: NotCompiledError.
int current_device();
/// Makes `device` the calling thread's current device (cudaSetDevice).
void set_device(int device);

/// Selects a device for the lifetime of the guard and restores the previous one afterwards.
/// A negative device selects nothing (the guard is then a no-op).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace tessera::cuda
