#include "codecs/buffer_pool.h"

#include <sys/mman.h>

#include <bit>
#include <cstdint>
#include <new>

namespace infergate::codecs {

namespace {

// A block of at least kHugePageBytes is mapped on its own, aligned to a huge page, and the
// kernel is asked to back it with huge pages (MADV_HUGEPAGE: transparent huge pages in
// their default `madvise` mode). First touch then costs one fault per 2 MiB instead of one
// per 4 KiB: on the VMs this project is measured on, 5.5 ms for 64 MiB instead of 180
// (bench/README.md, "Blocks on huge pages"). Where the kernel gives none, the advice is
// ignored and the block is an ordinary mapping. Smaller blocks come from the allocator.
uint8_t* newBlock(size_t block_size) {
  if (block_size < BufferPool::kHugePageBytes) return new uint8_t[block_size];  // no zero fill
  constexpr size_t kAlign = BufferPool::kHugePageBytes;
  const size_t length = block_size + kAlign;
  void* raw = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kAlign - 1) & ~(uintptr_t{kAlign} - 1);
  // The slack before and after the aligned block goes back at once.
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + block_size;
  if (start + length > end) munmap(reinterpret_cast<void*>(end), start + length - end);
  auto* block = reinterpret_cast<uint8_t*>(aligned);
  madvise(block, block_size, MADV_HUGEPAGE);
  return block;
}

void freeBlock(uint8_t* block, size_t block_size) {
  if (block_size < BufferPool::kHugePageBytes) {
    delete[] block;
  } else {
    munmap(block, block_size);
  }
}

}  // namespace

BufferPool::~BufferPool() {
  for (auto& [size, blocks] : free_) {
    for (uint8_t* b : blocks) freeBlock(b, size);
  }
}

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool& BufferPool::shared() {
  // Never destroyed: blocks in use at exit come back to it from static destructors.
  static auto* pool = new std::shared_ptr<BufferPool>(create(size_t{512} << 20));
  return **pool;
}

size_t BufferPool::classOf(size_t size) {
  if (size <= kMinBytes) return kMinBytes;
  // The power of two at or below size, split in 8 steps: round up to the next step.
  const size_t power = std::bit_floor(size);
  const size_t step = power / 8;
  return (size + step - 1) / step * step;
}

MutableBuffer BufferPool::allocate(size_t size) {
  if (size < kMinBytes) return MutableBuffer::allocate(size);
  const size_t block_size = classOf(size);
  uint8_t* block = popFree(block_size);
  if (block == nullptr) block = newBlock(block_size);
  return own(block, block_size, size);
}

MutableBuffer BufferPool::takeFree(size_t size) {
  if (size < kMinBytes) return MutableBuffer();
  const size_t block_size = classOf(size);
  uint8_t* block = popFree(block_size);
  if (block == nullptr) return MutableBuffer();
  return own(block, block_size, size);
}

uint8_t* BufferPool::popFree(size_t block_size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find(block_size);
  if (it == free_.end() || it->second.empty()) return nullptr;
  uint8_t* block = it->second.back();
  it->second.pop_back();
  cached_bytes_ -= block_size;
  return block;
}

MutableBuffer BufferPool::own(uint8_t* block, size_t block_size, size_t size) {
  std::weak_ptr<BufferPool> pool = weak_from_this();
  std::shared_ptr<uint8_t[]> storage(block, [pool, block_size](uint8_t* b) {
    if (std::shared_ptr<BufferPool> p = pool.lock()) return p->release(b, block_size);
    freeBlock(b, block_size);
  });
  return MutableBuffer(std::move(storage), block, size);
}

void BufferPool::release(uint8_t* block, size_t block_size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_bytes_ + block_size <= max_cached_bytes_) {
      free_[block_size].push_back(block);
      cached_bytes_ += block_size;
      return;
    }
  }
  freeBlock(block, block_size);
}

size_t BufferPool::cachedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

size_t BufferPool::cachedBlocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [size, blocks] : free_) n += blocks.size();
  return n;
}

}  // namespace infergate::codecs
