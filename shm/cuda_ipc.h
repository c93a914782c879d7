#pragma once

// CUDA inter-process memory, through the statically linked CUDA runtime. Plain C++ (no
// abseil, nothing else of the project) so that these files and a small test program build
// alone on a GPU machine that has only CMake and nvcc (shm/cuda_standalone/).
//
//   CudaMemory         what both share: the allocation, its device, copies to and from
//                      host memory (bounds checked).
//   CudaIpcMemory      another process's device allocation, opened from the 64-byte
//                      cudaIpcMemHandle_t it exported (what a client sends in a CUDA
//                      shared-memory registration); closed when destroyed.
//   CudaDeviceBuffer   a device allocation of this process with its exportable handle
//                      (the CUDA handoff pool; the standalone test's exporter).
//
// Errors: nullptr / false with `*error` set to a sentence naming the CUDA call and the
// runtime's words. Built without the toolkit (cuda_ipc_none.cc), every open/create fails
// with "built without CUDA support".
//
// Threads: each call selects its device first (cudaSetDevice is per thread), so any thread
// may use any object; copies are synchronous (cudaMemcpy).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace infergate::shm {

inline constexpr size_t kCudaIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)

// A device allocation reachable from this process, with its device: what both kinds below
// share. Copies select the device first and check the range (overflow-safe); they fail
// rather than overrun.
class CudaMemory {
 public:
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  // Bytes [offset, offset + size) of the allocation to or from host memory.
  bool copyToHost(uint64_t offset, void* dst, uint64_t size, std::string* error) const;
  bool copyFromHost(uint64_t offset, const void* src, uint64_t size, std::string* error) const;

  int device() const { return device_; }
  uint64_t byteSize() const { return byte_size_; }
  void* devicePointer() const { return pointer_; }

 protected:
  CudaMemory(void* pointer, int device, uint64_t byte_size)
      : pointer_(pointer), device_(device), byte_size_(byte_size) {}
  ~CudaMemory() = default;  // the owner's destructor releases the allocation

  void* pointer_;
  int device_;
  uint64_t byte_size_;
};

class CudaIpcMemory final : public CudaMemory {
 public:
  // Opens `handle` (kCudaIpcHandleBytes bytes) on `device`. Fails when the device does not
  // exist, the handle does not open (e.g. a handle of this same process, or of a process
  // that freed it), or the allocation is smaller than `byte_size`.
  static std::unique_ptr<CudaIpcMemory> open(const uint8_t* handle, int device,
                                             uint64_t byte_size, std::string* error);
  ~CudaIpcMemory();  // cudaIpcCloseMemHandle

 private:
  using CudaMemory::CudaMemory;
};

class CudaDeviceBuffer final : public CudaMemory {
 public:
  // cudaMalloc of `byte_size` bytes on `device`, and its IPC handle.
  static std::unique_ptr<CudaDeviceBuffer> create(int device, uint64_t byte_size,
                                                  std::string* error);
  ~CudaDeviceBuffer();  // cudaFree

  // The cudaIpcMemHandle_t bytes another process opens with CudaIpcMemory::open.
  const uint8_t* ipcHandle() const { return handle_; }

 private:
  using CudaMemory::CudaMemory;
  uint8_t handle_[kCudaIpcHandleBytes] = {};
};

}  // namespace infergate::shm
