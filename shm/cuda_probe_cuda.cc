// Built when CMake found the CUDA toolkit: asks the (statically linked) runtime.

#include <cuda_runtime_api.h>

#include "shm/cuda_probe.h"

namespace infergate::shm {

CudaStatus probeCuda() {
  CudaStatus status;
  status.compiled_in = true;
  cudaRuntimeGetVersion(&status.runtime_version);
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    status.detail = std::string("CUDA unavailable: ") + cudaGetErrorString(error);
    cudaGetLastError();  // clear the sticky error state for later callers
    return status;
  }
  status.device_count = count;
  status.usable = count > 0;
  status.detail = count > 0 ? std::to_string(count) + " CUDA device(s)" : "no CUDA device";
  return status;
}

}  // namespace infergate::shm
