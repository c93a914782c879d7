// Built when CMake did not find the CUDA toolkit: nothing opens or allocates, so no object
// of either class ever exists and the members below only satisfy the linker.

#include <string>

#include "shm/cuda_ipc.h"

namespace infergate::shm {
namespace {

constexpr const char* kNoCuda =
    "built without CUDA support (the CUDA toolkit was not found at build time)";

bool noCuda(std::string* error) {
  if (error != nullptr) *error = kNoCuda;
  return false;
}

}  // namespace

std::unique_ptr<CudaIpcMemory> CudaIpcMemory::open(const uint8_t*, int, uint64_t,
                                                   std::string* error) {
  noCuda(error);
  return nullptr;
}

CudaIpcMemory::~CudaIpcMemory() = default;

bool CudaMemory::copyToHost(uint64_t, void*, uint64_t, std::string* error) const {
  return noCuda(error);
}

bool CudaMemory::copyFromHost(uint64_t, const void*, uint64_t, std::string* error) const {
  return noCuda(error);
}

std::unique_ptr<CudaDeviceBuffer> CudaDeviceBuffer::create(int, uint64_t, std::string* error) {
  noCuda(error);
  return nullptr;
}

CudaDeviceBuffer::~CudaDeviceBuffer() = default;

}  // namespace infergate::shm
