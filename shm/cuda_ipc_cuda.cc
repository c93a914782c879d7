// CUDA inter-process memory through the statically linked CUDA runtime (built when CMake
// found the toolkit). Plain C++ on purpose: shm/cuda_standalone/ compiles this file alone.
//
// The driver API is never linked: the one driver call we need (cuMemGetAddressRange, to
// learn how big an opened allocation is) is looked up through the runtime, so the binary
// still starts on a machine without libcuda.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "shm/cuda_ipc.h"

namespace infergate::shm {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes,
              "kCudaIpcHandleBytes must match the toolkit's cudaIpcMemHandle_t");
static_assert(sizeof(size_t) >= sizeof(uint64_t), "sizes are passed to CUDA as size_t");

// cuMemGetAddressRange as it has been since CUDA 3.2 (size_t sizes, 64-bit pointers).
constexpr unsigned int kAddressRangeVersion = 3020;

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// Records "<call> failed: <runtime's words>" and clears the runtime's last error, so that
// the next caller on this thread does not see our failure as its own.
bool cudaFail(std::string* error, const std::string& call, cudaError_t status) {
  std::string message = call + " failed: " + cudaGetErrorString(status);
  cudaGetLastError();
  return fail(error, std::move(message));
}

// cudaSetDevice is per thread, and any thread may use any object: select it every time.
bool selectDevice(int device, std::string* error) {
  cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess) {
    return cudaFail(error, "cudaSetDevice(" + std::to_string(device) + ")", status);
  }
  return true;
}

// Whether [offset, offset + size) lies inside `byte_size` bytes, without overflowing.
bool inBounds(uint64_t offset, uint64_t size, uint64_t byte_size, std::string* error) {
  if (offset > byte_size || size > byte_size - offset) {
    return fail(error, "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                           ") is outside the " + std::to_string(byte_size) + "-byte allocation");
  }
  return true;
}

bool copy(void* dst, const void* src, uint64_t size, cudaMemcpyKind kind, int device,
          std::string* error) {
  if (size == 0) return true;
  if (!selectDevice(device, error)) return false;
  cudaError_t status = cudaMemcpy(dst, src, static_cast<size_t>(size), kind);
  if (status != cudaSuccess) return cudaFail(error, "cudaMemcpy", status);
  return true;
}

// How many bytes of its allocation lie at and after `pointer` (the device is selected).
bool bytesAfter(void* pointer, uint64_t* bytes, std::string* error) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t status = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &entry,
                                                        kAddressRangeVersion, cudaEnableDefault,
                                                        &found);
  if (status != cudaSuccess) {
    return cudaFail(error,
                    "cudaGetDriverEntryPointByVersion(cuMemGetAddressRange) (needed to check "
                    "the allocation's size)",
                    status);
  }
  if (entry == nullptr || found != cudaDriverEntryPointSuccess) {
    return fail(error,
                "the CUDA driver does not provide cuMemGetAddressRange, so the allocation's "
                "size cannot be checked; refusing the handle");
  }
  auto address_range = reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(entry);
  CUdeviceptr base = 0;
  size_t size = 0;
  CUdeviceptr at = reinterpret_cast<CUdeviceptr>(pointer);
  CUresult result = address_range(&base, &size, at);
  if (result != CUDA_SUCCESS) {
    cudaGetLastError();
    return fail(error, "cuMemGetAddressRange failed with CUresult " + std::to_string(result));
  }
  // The opened pointer is the allocation's base; be exact anyway if it is not.
  if (at < base || at - base > size) {
    return fail(error, "cuMemGetAddressRange gave a range that does not contain the pointer");
  }
  *bytes = size - (at - base);
  return true;
}

}  // namespace

std::unique_ptr<CudaIpcMemory> CudaIpcMemory::open(const uint8_t* handle, int device,
                                                   uint64_t byte_size, std::string* error) {
  if (handle == nullptr) {
    fail(error, "no CUDA IPC handle given");
    return nullptr;
  }
  if (!selectDevice(device, error)) return nullptr;
  cudaIpcMemHandle_t ipc_handle;
  std::memcpy(&ipc_handle, handle, sizeof(ipc_handle));
  void* pointer = nullptr;
  cudaError_t status =
      cudaIpcOpenMemHandle(&pointer, ipc_handle, cudaIpcMemLazyEnablePeerAccess);
  if (status != cudaSuccess) {
    cudaFail(error, "cudaIpcOpenMemHandle on device " + std::to_string(device), status);
    return nullptr;
  }
  uint64_t available = 0;
  bool sized = bytesAfter(pointer, &available, error);
  if (sized && available < byte_size) {
    sized = fail(error, "the CUDA allocation behind the handle has " + std::to_string(available) +
                            " bytes, fewer than byte_size " + std::to_string(byte_size));
  }
  if (!sized) {
    if (cudaIpcCloseMemHandle(pointer) != cudaSuccess) cudaGetLastError();
    return nullptr;
  }
  return std::unique_ptr<CudaIpcMemory>(new CudaIpcMemory(pointer, device, byte_size));
}

CudaIpcMemory::~CudaIpcMemory() {
  if (cudaSetDevice(device_) != cudaSuccess || cudaIpcCloseMemHandle(pointer_) != cudaSuccess) {
    cudaGetLastError();  // nothing to report to; keep the thread's error state clean
  }
}

bool CudaMemory::copyToHost(uint64_t offset, void* dst, uint64_t size,
                            std::string* error) const {
  if (!inBounds(offset, size, byte_size_, error)) return false;
  return copy(dst, static_cast<const uint8_t*>(pointer_) + offset, size, cudaMemcpyDeviceToHost,
              device_, error);
}

bool CudaMemory::copyFromHost(uint64_t offset, const void* src, uint64_t size,
                              std::string* error) const {
  if (!inBounds(offset, size, byte_size_, error)) return false;
  return copy(static_cast<uint8_t*>(pointer_) + offset, src, size, cudaMemcpyHostToDevice,
              device_, error);
}

std::unique_ptr<CudaDeviceBuffer> CudaDeviceBuffer::create(int device, uint64_t byte_size,
                                                           std::string* error) {
  if (byte_size == 0) {
    fail(error, "a CUDA device buffer of 0 bytes cannot be exported");
    return nullptr;
  }
  if (!selectDevice(device, error)) return nullptr;
  void* pointer = nullptr;
  cudaError_t status = cudaMalloc(&pointer, static_cast<size_t>(byte_size));
  if (status != cudaSuccess) {
    cudaFail(error, "cudaMalloc of " + std::to_string(byte_size) + " bytes on device " +
                        std::to_string(device),
             status);
    return nullptr;
  }
  cudaIpcMemHandle_t ipc_handle;
  status = cudaIpcGetMemHandle(&ipc_handle, pointer);
  if (status != cudaSuccess) {
    cudaFail(error, "cudaIpcGetMemHandle", status);
    if (cudaFree(pointer) != cudaSuccess) cudaGetLastError();
    return nullptr;
  }
  std::unique_ptr<CudaDeviceBuffer> buffer(new CudaDeviceBuffer(pointer, device, byte_size));
  std::memcpy(buffer->handle_, &ipc_handle, kCudaIpcHandleBytes);
  return buffer;
}

CudaDeviceBuffer::~CudaDeviceBuffer() {
  if (cudaSetDevice(device_) != cudaSuccess || cudaFree(pointer_) != cudaSuccess) {
    cudaGetLastError();
  }
}

}  // namespace infergate::shm
