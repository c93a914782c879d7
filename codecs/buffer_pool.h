#pragma once

// Large blocks kept for reuse (DESIGN.md, zero-copy rules: "large bodies land in reused
// buffers, never a fresh allocation per request"). A fresh multi-MiB allocation is paid in
// first-touch page faults on every use (BASELINES.md: a fresh 64 MiB buffer costs 8x a
// memcpy into a warm one; 16,384 faults per 64 MiB message across a gRPC hop); a block
// from the pool is already mapped.
//
//   allocate(size)  a MutableBuffer of `size` bytes in a block of the size's class, reused
//                   when one is free; blocks below kMinBytes are plain allocations.
//   takeFree(size)  the same, only when a free block of the class is there: memory the
//                   process already holds, never a new allocation (an empty MutableBuffer
//                   otherwise). For reserving ahead of bytes an untrusted peer announced.
//   The block goes back to the pool when the last owner of the bytes drops it (the frozen
//   Buffer and every slice of it), on whatever thread that is; the pool keeps at most
//   max_cached_bytes of free blocks and frees the rest.
//
// Size classes: powers of two split in 8 steps, so a block wastes at most 1/8 of its size.
// Blocks of kHugePageBytes and more are mappings of their own on huge-page boundaries,
// advised to the kernel for transparent huge pages (buffer_pool.cc, newBlock).
//
// Threads: any; one mutex, held only for a free-list push or pop.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "codecs/buffer.h"

namespace infergate::codecs {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  // Owned through the shared_ptr: blocks in use hold a weak reference to come back.
  static std::shared_ptr<BufferPool> create(size_t max_cached_bytes);
  ~BufferPool();

  // The process's pool (512 MiB of free blocks at most), alive until exit.
  static BufferPool& shared();

  MutableBuffer allocate(size_t size);
  MutableBuffer takeFree(size_t size);

  size_t cachedBytes() const;
  size_t cachedBlocks() const;
  // The block size allocate(size) uses.
  static size_t classOf(size_t size);

 private:
  explicit BufferPool(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  void release(uint8_t* block, size_t block_size);
  uint8_t* popFree(size_t block_size);
  MutableBuffer own(uint8_t* block, size_t block_size, size_t size);

  const size_t max_cached_bytes_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<uint8_t*>> free_;  // block size -> free blocks
  size_t cached_bytes_ = 0;
};

}  // namespace infergate::codecs
