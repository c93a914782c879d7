#pragma once

// A registered shared-memory region (PROTOCOL.md section 8): a client's POSIX shm object
// mapped into this process, or a client's CUDA allocation opened from its IPC handle.
//
// Lifetime: a Region is immutable once opened and shared as std::shared_ptr<const Region>.
// The registry holds one reference while the name is registered; every request that uses
// the region holds another until it finishes, so unregistering a region in use only drops
// the name: the mapping (or IPC handle) goes away with the last request (Triton's lazy
// unregister). A Buffer viewing a system region's bytes (viewOf) is one such reference.
//
// Bounds: checkReference() is the one place a tensor reference (offset, byte_size inside
// the region) is checked, with overflow-safe arithmetic; read()/write() check again and
// refuse rather than touch memory outside the region.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "codecs/buffer.h"
#include "codecs/status.h"

namespace infergate::shm {

enum class RegionKind { kSystem, kCuda };

// "system" / "cuda".
std::string_view kindName(RegionKind kind);

class Region {
 public:
  virtual ~Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  const std::string& name() const { return name_; }
  RegionKind kind() const { return kind_; }
  uint64_t byteSize() const { return byte_size_; }
  // A number unique to this registration in this process (never reused), so that a name
  // registered, unregistered and registered again is told apart (pass-through names).
  uint64_t serial() const { return serial_; }

  // The region's first byte in this process's address space for system regions; nullptr
  // for CUDA regions (their bytes are only reached through read()/write()).
  virtual uint8_t* hostData() const = 0;

  // Whether the memory behind the region is still all there. A system region's object can
  // be shrunk by its owner (ftruncate) after registration, and touching the mapping past
  // its new end would fault (SIGBUS): requests check this before using a region and get
  // FAILED_PRECONDITION instead. (A shrink between the check and the copy is not caught:
  // only trusted clients should get the shared-memory API.) CUDA regions: always OK.
  virtual codecs::Status stillBacked() const { return absl::OkStatus(); }

  // Copies bytes [offset, offset + size) of the region out / in. INVALID_ARGUMENT when the
  // range is not inside the region; INTERNAL when a CUDA copy fails.
  virtual codecs::Status read(uint64_t offset, std::span<uint8_t> dst) const = 0;
  virtual codecs::Status write(uint64_t offset, std::span<const uint8_t> src) const = 0;

 protected:
  Region(std::string name, RegionKind kind, uint64_t byte_size);

 private:
  std::string name_;
  RegionKind kind_;
  uint64_t byte_size_;
  uint64_t serial_;
};

// A client's POSIX shared-memory object, mapped read-write.
class SystemRegion final : public Region {
 public:
  // shm_open(key, O_RDWR) (never O_CREAT: the object must exist), fstat: a regular object
  // of at least offset + byte_size bytes (overflow-safe), then mmap of byte_size bytes at
  // `offset` (mapped from the page boundary below it, so any offset works). byte_size 0 is
  // refused. Errors: INVALID_ARGUMENT naming the key and what is wrong (missing object,
  // permission, too small, not a regular object). The descriptor stays open while the
  // region lives (stillBacked() fstats it).
  static codecs::StatusOr<std::shared_ptr<const SystemRegion>> open(std::string name,
                                                                    std::string key,
                                                                    uint64_t offset,
                                                                    uint64_t byte_size);
  ~SystemRegion() override;

  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }  // of the region inside the object
  uint8_t* hostData() const override { return data_; }
  codecs::Status stillBacked() const override;
  codecs::Status read(uint64_t offset, std::span<uint8_t> dst) const override;
  codecs::Status write(uint64_t offset, std::span<const uint8_t> src) const override;

  // Use open().
  SystemRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size, int fd,
               void* mapping, size_t mapping_size, uint8_t* data);

 private:
  std::string key_;
  uint64_t offset_;
  int fd_;               // the object's, for stillBacked()
  void* mapping_;        // what mmap returned (page aligned)
  size_t mapping_size_;  // what munmap takes
  uint8_t* data_;        // mapping_ + (offset % page size)
};

class CudaIpcMemory;

// A client's CUDA allocation, opened from its IPC handle on `device_id`.
class CudaRegion final : public Region {
 public:
  // raw_handle: exactly 64 bytes (cudaIpcMemHandle_t) else INVALID_ARGUMENT. Without a
  // usable GPU (or built without CUDA): UNIMPLEMENTED saying so. A handle that does not
  // open, or an allocation smaller than byte_size: INVALID_ARGUMENT with CUDA's words.
  static codecs::StatusOr<std::shared_ptr<const CudaRegion>> open(std::string name,
                                                                  std::string_view raw_handle,
                                                                  int64_t device_id,
                                                                  uint64_t byte_size);
  ~CudaRegion() override;

  int deviceId() const;
  // The cudaIpcMemHandle_t the client registered (kCudaIpcHandleBytes raw bytes): what a
  // colocated upstream is given to open the same allocation (the handoff's pass-through).
  const std::string& rawHandle() const { return raw_handle_; }
  uint8_t* hostData() const override { return nullptr; }
  codecs::Status read(uint64_t offset, std::span<uint8_t> dst) const override;
  codecs::Status write(uint64_t offset, std::span<const uint8_t> src) const override;

  // Use open(). (Tests make one without `memory`: reads and writes then fail.)
  CudaRegion(std::string name, uint64_t byte_size, std::string raw_handle, int device_id,
             std::unique_ptr<CudaIpcMemory> memory);

 private:
  codecs::Status notOpen() const;

  std::string raw_handle_;
  int device_id_;
  std::unique_ptr<CudaIpcMemory> memory_;
};

// A tensor reference against its region (PROTOCOL.md 8.3), overflow-safe:
//   offset >= region size              INVALID_ARGUMENT "Invalid offset for shared memory region: 'r'"
//   offset + byte_size > region size   INVALID_ARGUMENT "Invalid offset + byte size for shared memory region: 'r'"
// (each message also gives the numbers).
codecs::Status checkReference(const Region& region, uint64_t offset, uint64_t byte_size);

// Bytes [offset, offset + size) of a system region as a Buffer that keeps the region
// mapped while any copy of it lives. The range must have passed checkReference.
codecs::Buffer viewOf(std::shared_ptr<const Region> region, uint64_t offset, uint64_t size);

}  // namespace infergate::shm
