#pragma once

// The handoff pool: shared memory the gateway creates for one colocated upstream, which
// each of that upstream's endpoints registers once; a request borrows slots of it to pass
// tensors by reference instead of through the socket.
//
//   system  a POSIX shm object the gateway creates (shm_open O_CREAT|O_EXCL, mode 0600,
//           ftruncate, mmap), named `<key_prefix><processTag()>_<n>`; unlinked and
//           unmapped when the pool is destroyed. The tag (pid and a random word) keeps
//           apart gateways that share a /dev/shm from different pid namespaces, and a
//           gateway restarted in a container from its predecessor with the same pid
//           (both pid 1). The pool holds an exclusive flock on its object while it lives,
//           so removeStale() can tell a dead gateway's pool (left by a kill) from a live
//           one and free its memory.
//   cuda    a device allocation on `device` (CudaDeviceBuffer) exported by IPC handle.
//
// Slots: allocate(size) gives a Slot of at least `size` bytes at a 64-byte aligned offset,
// or nullptr when no free range is big enough (the caller forwards inline: a full pool is
// never an error). A Slot is freed when its last shared_ptr goes (response sent, request
// failed or cancelled); it keeps the pool alive, so a pool replaced on reload lives until
// its last slot is freed. First fit over an ordered free list with coalescing; one mutex,
// held only for the list update.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "codecs/status.h"
#include "shm/cuda_ipc.h"
#include "shm/region.h"

namespace infergate::shm {

class HandoffPool : public std::enable_shared_from_this<HandoffPool> {
 public:
  struct Options {
    RegionKind kind = RegionKind::kSystem;
    uint64_t byte_size = 0;
    std::string key_prefix = "/infergate_pool_";  // system
    int device = 0;                              // cuda
  };

  // Errors: INVALID_ARGUMENT for a zero size; UNIMPLEMENTED for cuda without a usable
  // GPU; INTERNAL with the system call's words when the object cannot be created.
  static codecs::StatusOr<std::shared_ptr<HandoffPool>> create(const Options& options);
  ~HandoffPool();

  // "<pid>_<8 hex digits>": this process's part of every name it gives its pools (and,
  // gateway/upstream/endpoint_handoff.h, its registrations at upstreams). The same for the
  // life of the process.
  static const std::string& processTag();

  // Removes the system pools under `key_prefix` that no live process holds: objects named
  // as create() names them (`<key_prefix><pid>_<8 hex>_<n>`) whose flock can be taken and
  // that are at least `min_age` old (a pool between its creation and its flock is young).
  // Other names under the prefix are left alone. Returns how many were removed.
  static size_t removeStale(const std::string& key_prefix,
                            std::chrono::seconds min_age = std::chrono::seconds(10));

  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    uint64_t offset() const { return offset_; }  // inside the pool
    uint64_t size() const { return size_; }
    // System pools: the slot's bytes. CUDA pools: nullptr (use write/read).
    uint8_t* data() const;
    codecs::Status write(uint64_t at, std::span<const uint8_t> src) const;
    codecs::Status read(uint64_t at, std::span<uint8_t> dst) const;
    const HandoffPool& pool() const { return *pool_; }

    // Use HandoffPool::allocate().
    Slot(std::shared_ptr<HandoffPool> pool, uint64_t offset, uint64_t size)
        : pool_(std::move(pool)), offset_(offset), size_(size) {}

   private:
    std::shared_ptr<HandoffPool> pool_;
    uint64_t offset_;
    uint64_t size_;
  };

  std::shared_ptr<Slot> allocate(uint64_t size);

  RegionKind kind() const { return options_.kind; }
  uint64_t byteSize() const { return options_.byte_size; }
  const std::string& key() const { return key_; }        // system: the object's name ("/...")
  int device() const { return options_.device; }         // cuda
  const uint8_t* cudaHandle() const;                     // cuda: kCudaIpcHandleBytes; else nullptr
  uint8_t* hostData() const { return data_; }            // system; nullptr for cuda
  // The offset of `bytes` when they lie wholly inside a system pool's memory (a request
  // body read straight into a slot), else nullopt. The caller keeps their slot allocated.
  std::optional<uint64_t> offsetOf(std::span<const uint8_t> bytes) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(bytes.data());
    const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
    if (data_ == nullptr || bytes.empty() || at < base) return std::nullopt;
    const uint64_t offset = at - base;
    if (offset > options_.byte_size || bytes.size() > options_.byte_size - offset) return std::nullopt;
    return offset;
  }

  uint64_t bytesInUse() const;
  uint64_t slotsInUse() const;

  // `fd`: the system object, held open (and flocked) until destruction; -1 for cuda.
  HandoffPool(const Options& options, std::string key, uint8_t* data, int fd,
              std::unique_ptr<CudaDeviceBuffer> device_buffer);

 private:
  void release(uint64_t offset, uint64_t size);

  Options options_;
  std::string key_;
  uint8_t* data_ = nullptr;
  int fd_ = -1;
  std::unique_ptr<CudaDeviceBuffer> device_buffer_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, non-adjacent ranges
  uint64_t in_use_bytes_ = 0;
  uint64_t in_use_slots_ = 0;
};

}  // namespace infergate::shm
