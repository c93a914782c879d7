// Built when CMake did not find the CUDA toolkit.

#include "shm/cuda_probe.h"

namespace infergate::shm {

CudaStatus probeCuda() {
  CudaStatus status;
  status.detail = "built without CUDA support (the CUDA toolkit was not found at build time)";
  return status;
}

}  // namespace infergate::shm
