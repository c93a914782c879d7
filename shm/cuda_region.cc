// CUDA regions: a client's device allocation opened from its IPC handle. Only cuda_ipc.h
// and cuda_probe.h reach CUDA, so this file builds with or without the toolkit; without a
// usable GPU every registration answers UNIMPLEMENTED.

#include "shm/region.h"

#include <climits>
#include <string>
#include <utility>

#include "shm/cuda_ipc.h"
#include "shm/cuda_probe.h"
#include "shm/region_internal.h"

namespace infergate::shm {
codecs::StatusOr<std::shared_ptr<const CudaRegion>> CudaRegion::open(std::string name,
                                                                     std::string_view raw_handle,
                                                                     int64_t device_id,
                                                                     uint64_t byte_size) {
  auto refuse = [&](const auto&... why) {
    return codecs::invalidArgument("Unable to register CUDA shared memory region '", name,
                                   "': ", why...);
  };
  // Checked before the GPU so that a malformed request gets the same answer everywhere.
  if (raw_handle.size() != kCudaIpcHandleBytes) {
    return refuse("raw_handle has ", raw_handle.size(), " bytes; a cudaIpcMemHandle_t has ",
                  kCudaIpcHandleBytes);
  }
  if (byte_size == 0) return refuse("byte_size must be greater than 0");
  if (device_id < 0 || device_id > INT_MAX) return refuse("invalid device_id ", device_id);

  CudaStatus cuda = probeCuda();
  if (!cuda.usable) {
    return codecs::unimplemented("CUDA shared memory is not available: ", cuda.detail);
  }
  if (device_id >= cuda.device_count) {
    return refuse("device_id ", device_id, " does not exist (", cuda.device_count,
                  " CUDA device(s))");
  }
  std::string error;
  std::unique_ptr<CudaIpcMemory> memory =
      CudaIpcMemory::open(reinterpret_cast<const uint8_t*>(raw_handle.data()),
                          static_cast<int>(device_id), byte_size, &error);
  if (memory == nullptr) return refuse(error);
  return std::make_shared<CudaRegion>(std::move(name), byte_size, std::string(raw_handle),
                                      static_cast<int>(device_id), std::move(memory));
}

CudaRegion::CudaRegion(std::string name, uint64_t byte_size, std::string raw_handle,
                       int device_id, std::unique_ptr<CudaIpcMemory> memory)
    : Region(std::move(name), RegionKind::kCuda, byte_size),
      raw_handle_(std::move(raw_handle)),
      device_id_(device_id),
      memory_(std::move(memory)) {}

CudaRegion::~CudaRegion() = default;

int CudaRegion::deviceId() const { return device_id_; }

codecs::Status CudaRegion::notOpen() const {
  return absl::FailedPreconditionError(
      codecs::strCat("CUDA shared memory region '", name(), "' is not open"));
}

codecs::Status CudaRegion::read(uint64_t offset, std::span<uint8_t> dst) const {
  if (codecs::Status s = internal::checkRange(*this, offset, dst.size()); !s.ok()) return s;
  if (memory_ == nullptr) return notOpen();
  std::string error;
  if (!memory_->copyToHost(offset, dst.data(), dst.size(), &error)) {
    return codecs::internalError("reading CUDA shared memory region '", name(), "': ", error);
  }
  return absl::OkStatus();
}

codecs::Status CudaRegion::write(uint64_t offset, std::span<const uint8_t> src) const {
  if (codecs::Status s = internal::checkRange(*this, offset, src.size()); !s.ok()) return s;
  if (memory_ == nullptr) return notOpen();
  std::string error;
  if (!memory_->copyFromHost(offset, src.data(), src.size(), &error)) {
    return codecs::internalError("writing CUDA shared memory region '", name(), "': ", error);
  }
  return absl::OkStatus();
}

}  // namespace infergate::shm
