#include "codecs/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace infergate::codecs {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(BufferPool, SizeClassesWasteAtMostAnEighth) {
  EXPECT_EQ(BufferPool::classOf(1), BufferPool::kMinBytes);
  EXPECT_EQ(BufferPool::classOf(kMiB), kMiB);
  EXPECT_EQ(BufferPool::classOf(kMiB + 1), kMiB + kMiB / 8);
  EXPECT_EQ(BufferPool::classOf(64 * kMiB), 64 * kMiB);
  EXPECT_EQ(BufferPool::classOf(64 * kMiB + 100), 72 * kMiB);
  for (size_t size : {3 * kMiB + 7, 17 * kMiB, 100 * kMiB + 1}) {
    const size_t c = BufferPool::classOf(size);
    EXPECT_GE(c, size);
    EXPECT_LE(c - size, c / 8) << size;
  }
}

TEST(BufferPool, AFreedBlockIsReusedForTheSameClass) {
  auto pool = BufferPool::create(256 * kMiB);
  const uint8_t* first;
  {
    MutableBuffer m = pool->allocate(2 * kMiB);
    first = m.data();
    std::memset(m.data(), 1, m.size());
    Buffer frozen = std::move(m).freeze();
    Buffer slice = frozen.slice(10, 20);
    frozen = Buffer();
    EXPECT_EQ(pool->cachedBlocks(), 0u) << "a slice still holds the block";
  }
  EXPECT_EQ(pool->cachedBlocks(), 1u);
  EXPECT_EQ(pool->cachedBytes(), 2 * kMiB);
  MutableBuffer again = pool->allocate(2 * kMiB - 100);  // same class
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.size(), 2 * kMiB - 100);
  EXPECT_EQ(pool->cachedBlocks(), 0u);
  MutableBuffer other = pool->allocate(4 * kMiB);  // another class: a new block
  EXPECT_NE(other.data(), first);
}

TEST(BufferPool, TakeFreeOnlyHandsOutBlocksAlreadyHeld) {
  auto pool = BufferPool::create(256 * kMiB);
  EXPECT_EQ(pool->takeFree(72 * kMiB).size(), 0u) << "nothing free: nothing allocated";
  EXPECT_EQ(pool->takeFree(100).size(), 0u) << "below kMinBytes: never pooled";
  const uint8_t* block;
  {
    MutableBuffer m = pool->allocate(64 * kMiB + 100);  // class 72 MiB
    block = m.data();
  }
  ASSERT_EQ(pool->cachedBytes(), 72 * kMiB);
  EXPECT_EQ(pool->takeFree(64 * kMiB).size(), 0u) << "the 64 MiB class has no free block";
  MutableBuffer taken = pool->takeFree(70 * kMiB);  // the same class
  EXPECT_EQ(taken.data(), block);
  EXPECT_EQ(taken.size(), 70 * kMiB);
  EXPECT_EQ(pool->cachedBlocks(), 0u);
  EXPECT_EQ(pool->takeFree(70 * kMiB).size(), 0u) << "the one free block is taken";
  taken = MutableBuffer();
  EXPECT_EQ(pool->cachedBytes(), 72 * kMiB) << "a taken block comes back like an allocated one";
}

// The VmFlags line of the mapping of /proc/self/smaps that holds `address` ("" if none).
std::string vmFlagsOf(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= at && at < end;
    } else if (inside && line.starts_with("VmFlags:")) {
      return line;
    }
  }
  return "";
}

TEST(BufferPool, LargeBlocksLieOnHugePagesAndAreAdvisedForThem) {
  auto pool = BufferPool::create(256 * kMiB);
  for (size_t size : {2 * kMiB, 9 * kMiB + 5, 64 * kMiB + 100}) {
    MutableBuffer m = pool->allocate(size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % BufferPool::kHugePageBytes, 0u) << size;
    std::memset(m.data(), 7, m.size());  // the whole block is writable
    const std::string flags = vmFlagsOf(m.data());
    ASSERT_FALSE(flags.empty()) << "no mapping holds the block of " << size;
    EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << size << ": " << flags;
  }
  // A block below a huge page comes from the allocator, not advised on its own.
  MutableBuffer small = pool->allocate(kMiB + 1);
  EXPECT_EQ(vmFlagsOf(small.data()).find(" hg"), std::string::npos);
}

TEST(BufferPool, SmallSizesAreNotPooled) {
  auto pool = BufferPool::create(256 * kMiB);
  { MutableBuffer m = pool->allocate(1000); }
  EXPECT_EQ(pool->cachedBlocks(), 0u);
}

TEST(BufferPool, KeepsAtMostItsCapAndFreesTheRest) {
  auto pool = BufferPool::create(3 * kMiB);
  {
    std::vector<MutableBuffer> held;
    for (int i = 0; i < 4; ++i) held.push_back(pool->allocate(kMiB));
  }
  EXPECT_EQ(pool->cachedBlocks(), 3u);
  EXPECT_EQ(pool->cachedBytes(), 3 * kMiB);
}

TEST(BufferPool, BlocksOutliveTheirPool) {
  auto pool = BufferPool::create(8 * kMiB);
  MutableBuffer m = pool->allocate(kMiB);
  std::memset(m.data(), 2, m.size());
  pool.reset();  // the block is freed, not returned, when it goes (ASan checks)
  EXPECT_EQ(m.data()[kMiB - 1], 2);
}

TEST(BufferPool, ConcurrentAllocateAndFreeNeverShareABlock) {
  auto pool = BufferPool::create(64 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 50; ++i) {
        MutableBuffer m = pool->allocate(kMiB + static_cast<size_t>(i % 3) * kMiB);
        std::memset(m.data(), t + 1, m.size());
        for (size_t at = 0; at < m.size(); at += 4096) ASSERT_EQ(m.data()[at], t + 1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_LE(pool->cachedBytes(), 64 * kMiB);
}

}  // namespace
}  // namespace infergate::codecs
