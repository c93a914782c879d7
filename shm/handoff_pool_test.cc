// The handoff pool: the object it creates and removes, slot alignment, exhaustion,
// coalescing, slots keeping the pool alive, and allocation from several threads at once.

#include "shm/handoff_pool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "shm/cuda_probe.h"
#include "shm/test_shm_object.h"

namespace infergate::shm {
namespace {

using test_util::contains;

std::shared_ptr<HandoffPool> systemPool(uint64_t byte_size) {
  HandoffPool::Options options;
  options.byte_size = byte_size;
  options.key_prefix = "/infergate_test_pool_";
  auto pool = HandoffPool::create(options);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

std::string objectPath(const HandoffPool& pool) { return "/dev/shm" + pool.key(); }

TEST(HandoffPool, CreatesAPrivateObjectAndRemovesItWhenDestroyed) {
  std::shared_ptr<HandoffPool> pool = systemPool(8192);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->kind(), RegionKind::kSystem);
  EXPECT_EQ(pool->byteSize(), 8192u);
  EXPECT_EQ(pool->cudaHandle(), nullptr);
  ASSERT_NE(pool->hostData(), nullptr);
  const std::string prefix = "/infergate_test_pool_" + HandoffPool::processTag() + "_";
  EXPECT_EQ(pool->key().rfind(prefix, 0), 0u) << pool->key();

  const std::string path = objectPath(*pool);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_size, 8192);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  std::shared_ptr<HandoffPool> other = systemPool(64);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->key(), pool->key());

  pool.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(objectPath(*other)));
}

// An object made as a dead gateway's pool would be, or under another name; `lock` keeps it
// flocked through a descriptor of its own (a live owner).
class ShmFile {
 public:
  explicit ShmFile(std::string key, bool lock = false) : key_(std::move(key)) {
    fd_ = ::shm_open(key_.c_str(), O_CREAT | O_RDWR, 0600);
    EXPECT_GE(fd_, 0) << key_;
    EXPECT_EQ(::ftruncate(fd_, 4096), 0);
    if (lock) EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0);
  }
  ~ShmFile() {
    ::close(fd_);
    ::shm_unlink(key_.c_str());
  }
  bool exists() const { return std::filesystem::exists("/dev/shm" + key_); }

 private:
  std::string key_;
  int fd_ = -1;
};

TEST(HandoffPool, ProcessTagIsPidAndARandomWord) {
  const std::string& tag = HandoffPool::processTag();
  const std::string pid = std::to_string(::getpid()) + "_";
  ASSERT_EQ(tag.rfind(pid, 0), 0u) << tag;
  const std::string word = tag.substr(pid.size());
  EXPECT_EQ(word.size(), 8u) << tag;
  EXPECT_EQ(word.find_first_not_of("0123456789abcdef"), std::string::npos) << tag;
  EXPECT_EQ(&HandoffPool::processTag(), &tag);  // one for the process
}

TEST(HandoffPool, ALivePoolHoldsTheLockOnItsObject) {
  std::shared_ptr<HandoffPool> pool = systemPool(4096);
  ASSERT_NE(pool, nullptr);
  int fd = ::shm_open(pool->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::close(fd);
}

TEST(HandoffPool, RemoveStaleFreesOnlyUnlockedPoolsOfThePrefix) {
  const std::string prefix = "/infergate_test_stale_" + std::to_string(::getpid()) + "_";
  ShmFile dead(prefix + "4242_deadbeef_0");
  ShmFile held(prefix + "4243_cafef00d_0", /*lock=*/true);       // another live gateway
  ShmFile old_format(prefix + "4244_0");                         // not a name create() makes
  ShmFile not_hex(prefix + "4245_DEADBEEF_0");
  ShmFile other_prefix("/infergate_test_other_" + std::to_string(::getpid()) + "_1_deadbeef_0");
  HandoffPool::Options options;
  options.byte_size = 4096;
  options.key_prefix = prefix;
  auto live = HandoffPool::create(options);  // this process's own, under the same prefix
  ASSERT_TRUE(live.ok()) << live.status();

  // Too young to judge: nothing goes.
  EXPECT_EQ(HandoffPool::removeStale(prefix, std::chrono::seconds(3600)), 0u);
  EXPECT_TRUE(dead.exists());

  EXPECT_EQ(HandoffPool::removeStale(prefix, std::chrono::seconds(0)), 1u);
  EXPECT_FALSE(dead.exists());
  EXPECT_TRUE(held.exists());
  EXPECT_TRUE(old_format.exists());
  EXPECT_TRUE(not_hex.exists());
  EXPECT_TRUE(other_prefix.exists());
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + (*live)->key()));
  EXPECT_EQ(HandoffPool::removeStale("no-slash", std::chrono::seconds(0)), 0u);
}

TEST(HandoffPool, RefusesAZeroSizeAndABadPrefix) {
  HandoffPool::Options options;
  EXPECT_EQ(HandoffPool::create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.byte_size = 64;
  options.key_prefix = "/infergate_test_no/such_dir_";
  auto pool = HandoffPool::create(options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(contains(pool.status(), "shm_open"));
}

TEST(HandoffPool, CudaIsUnimplementedWithoutAUsableGpu) {
  CudaStatus cuda = probeCuda();
  if (cuda.usable) GTEST_SKIP() << "a GPU is usable here";
  HandoffPool::Options options;
  options.kind = RegionKind::kCuda;
  options.byte_size = 1 << 20;
  auto pool = HandoffPool::create(options);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(pool.status(), cuda.detail));
}

TEST(HandoffPool, SlotsStartOn64ByteBoundariesAndCoverTheRequest) {
  std::shared_ptr<HandoffPool> pool = systemPool(4096);
  ASSERT_NE(pool, nullptr);
  std::vector<std::shared_ptr<HandoffPool::Slot>> slots;
  uint64_t expected_bytes = 0;
  for (uint64_t size : {1, 65, 100, 64, 200}) {
    auto slot = pool->allocate(size);
    ASSERT_NE(slot, nullptr) << size;
    EXPECT_EQ(slot->offset() % 64, 0u) << size;
    EXPECT_GE(slot->size(), size);
    EXPECT_EQ(slot->size() % 64, 0u);
    EXPECT_LT(slot->size() - size, 64u);
    EXPECT_EQ(slot->data(), pool->hostData() + slot->offset());
    expected_bytes += slot->size();
    slots.push_back(std::move(slot));
  }
  EXPECT_EQ(pool->slotsInUse(), 5u);
  EXPECT_EQ(pool->bytesInUse(), expected_bytes);
  slots.clear();
  EXPECT_EQ(pool->slotsInUse(), 0u);
  EXPECT_EQ(pool->bytesInUse(), 0u);
}

TEST(HandoffPool, OffsetOfFindsBytesWhollyInsideThePoolOnly) {
  std::shared_ptr<HandoffPool> pool = systemPool(4096);
  ASSERT_NE(pool, nullptr);
  uint8_t* base = pool->hostData();
  EXPECT_EQ(pool->offsetOf({base, 4096}), std::optional<uint64_t>(0));
  EXPECT_EQ(pool->offsetOf({base + 100, 50}), std::optional<uint64_t>(100));
  EXPECT_EQ(pool->offsetOf({base + 4095, 1}), std::optional<uint64_t>(4095));
  EXPECT_EQ(pool->offsetOf({base + 4000, 97}), std::nullopt) << "runs past the end";
  EXPECT_EQ(pool->offsetOf({base + 4096, 1}), std::nullopt);
  EXPECT_EQ(pool->offsetOf({base + 10, 0}), std::nullopt) << "nothing to hand over";
  uint8_t outside[16] = {};
  EXPECT_EQ(pool->offsetOf({outside, sizeof(outside)}), std::nullopt);
  // Wrapping arithmetic never makes bytes below the pool look inside it.
  EXPECT_EQ(pool->offsetOf({base - 1, 2}), std::nullopt);
}

TEST(HandoffPool, ExhaustionGivesNullptr) {
  std::shared_ptr<HandoffPool> pool = systemPool(256);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->allocate(0), nullptr);
  EXPECT_EQ(pool->allocate(257), nullptr);
  EXPECT_EQ(pool->allocate(std::numeric_limits<uint64_t>::max()), nullptr);
  auto a = pool->allocate(200);  // takes 256
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool->allocate(1), nullptr);
  a.reset();
  EXPECT_NE(pool->allocate(1), nullptr);
}

TEST(HandoffPool, FreedNeighboursCoalesceIntoAFullSizeSlot) {
  std::shared_ptr<HandoffPool> pool = systemPool(1024);
  ASSERT_NE(pool, nullptr);
  std::vector<std::shared_ptr<HandoffPool::Slot>> quarters;
  for (int i = 0; i < 4; ++i) {
    quarters.push_back(pool->allocate(256));
    ASSERT_NE(quarters.back(), nullptr);
    EXPECT_EQ(quarters.back()->offset(), 256u * i);
  }
  EXPECT_EQ(pool->allocate(1), nullptr);

  quarters[1].reset();
  quarters[2].reset();  // joins its left neighbour
  auto half = pool->allocate(512);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->offset(), 256u);
  half.reset();

  quarters[0].reset();  // joins the free range on its right
  quarters[3].reset();  // joins the range on its left
  auto whole = pool->allocate(1024);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->offset(), 0u);
}

TEST(HandoffPool, CoalescesOnBothSidesAtOnce) {
  std::shared_ptr<HandoffPool> pool = systemPool(192);
  ASSERT_NE(pool, nullptr);
  auto a = pool->allocate(64);
  auto b = pool->allocate(64);
  auto c = pool->allocate(64);
  ASSERT_TRUE(a && b && c);
  a.reset();
  c.reset();
  EXPECT_EQ(pool->allocate(128), nullptr);  // two free ranges of 64, not adjacent
  b.reset();
  EXPECT_NE(pool->allocate(192), nullptr);
}

TEST(HandoffPool, APoolSizeNotAMultipleOf64IsUsableToTheLastByte) {
  std::shared_ptr<HandoffPool> pool = systemPool(1000);
  ASSERT_NE(pool, nullptr);
  auto whole = pool->allocate(1000);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->size(), 1000u);
  whole.reset();
  auto head = pool->allocate(900);  // 960 bytes
  auto tail = pool->allocate(40);   // the last 40
  ASSERT_TRUE(head && tail);
  EXPECT_EQ(tail->offset(), 960u);
  EXPECT_EQ(tail->size(), 40u);
  EXPECT_EQ(pool->allocate(1), nullptr);
}

TEST(HandoffPool, SlotWritesReachTheSharedObject) {
  std::shared_ptr<HandoffPool> pool = systemPool(4096);
  ASSERT_NE(pool, nullptr);
  auto skip = pool->allocate(100);
  auto slot = pool->allocate(10);
  ASSERT_NE(slot, nullptr);
  const std::vector<uint8_t> bytes = {9, 8, 7, 6, 5};
  ASSERT_TRUE(slot->write(3, bytes).ok());

  // Another mapping of the object, as the upstream would make.
  int fd = ::shm_open(pool->key().c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  void* other = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(other, MAP_FAILED);
  const uint8_t* seen = static_cast<const uint8_t*>(other) + slot->offset();
  for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(seen[3 + i], bytes[i]);
  ::munmap(other, 4096);

  std::vector<uint8_t> back(5);
  ASSERT_TRUE(slot->read(3, back).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(slot->write(slot->size() - 4, bytes).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slot->read(std::numeric_limits<uint64_t>::max(), back).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HandoffPool, ASlotKeepsItsPoolAlive) {
  std::shared_ptr<HandoffPool> pool = systemPool(512);
  ASSERT_NE(pool, nullptr);
  const std::string path = objectPath(*pool);
  std::weak_ptr<HandoffPool> watch = pool;
  auto slot = pool->allocate(100);
  ASSERT_NE(slot, nullptr);
  pool.reset();  // a reload replaced the pool
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(std::filesystem::exists(path));
  const std::vector<uint8_t> bytes = {1, 2, 3};
  EXPECT_TRUE(slot->write(0, bytes).ok());
  EXPECT_EQ(slot->pool().slotsInUse(), 1u);
  slot.reset();
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(HandoffPool, ConcurrentSlotsNeverOverlap) {
  constexpr uint64_t kPoolBytes = 64 * 1024;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::shared_ptr<HandoffPool> pool = systemPool(kPoolBytes);
  ASSERT_NE(pool, nullptr);

  std::mutex mu;
  std::map<uint64_t, uint64_t> live;  // offset -> end, every slot held by any thread
  std::atomic<int> overlaps{0};
  std::atomic<int> corrupted{0};
  std::atomic<int> allocated{0};

  auto worker = [&](int id) {
    std::minstd_rand random(static_cast<unsigned>(id) + 1);
    std::vector<std::shared_ptr<HandoffPool::Slot>> held;
    for (int round = 0; round < kRounds; ++round) {
      if (held.size() < 8 && random() % 3 != 0) {
        auto slot = pool->allocate(1 + random() % 4000);
        if (slot == nullptr) continue;  // full: the caller would forward inline
        ++allocated;
        {
          std::lock_guard lock(mu);
          auto next = live.lower_bound(slot->offset());
          bool clash = next != live.end() && next->first < slot->offset() + slot->size();
          if (next != live.begin() && std::prev(next)->second > slot->offset()) clash = true;
          if (clash) ++overlaps;
          live[slot->offset()] = slot->offset() + slot->size();
        }
        std::memset(slot->data(), id + 1, slot->size());
        held.push_back(std::move(slot));
      } else if (!held.empty()) {
        size_t pick = random() % held.size();
        std::shared_ptr<HandoffPool::Slot> slot = std::move(held[pick]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(pick));
        for (uint64_t i = 0; i < slot->size(); ++i) {
          if (slot->data()[i] != id + 1) {
            ++corrupted;
            break;
          }
        }
        {
          std::lock_guard lock(mu);
          live.erase(slot->offset());
        }
        slot.reset();  // back to the pool only after leaving `live`
      }
    }
    std::lock_guard lock(mu);
    for (const auto& slot : held) live.erase(slot->offset());
    held.clear();
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_GT(allocated.load(), kRounds);  // the test really exercised the allocator
  EXPECT_EQ(pool->slotsInUse(), 0u);
  EXPECT_EQ(pool->bytesInUse(), 0u);
  auto whole = pool->allocate(kPoolBytes);  // every range coalesced back into one
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->offset(), 0u);
}

TEST(HandoffPool, CudaSlotsRoundTripThroughTheDevice) {
  if (!probeCuda().usable) GTEST_SKIP() << "no usable GPU: " << probeCuda().detail;
  HandoffPool::Options options;
  options.kind = RegionKind::kCuda;
  options.byte_size = 1 << 16;
  auto pool = HandoffPool::create(options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_NE((*pool)->cudaHandle(), nullptr);
  EXPECT_EQ((*pool)->hostData(), nullptr);
  auto skip = (*pool)->allocate(100);
  auto slot = (*pool)->allocate(1000);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->data(), nullptr);
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = test_util::patternByte(i);
  ASSERT_TRUE(slot->write(0, bytes).ok());
  std::vector<uint8_t> back(1000);
  ASSERT_TRUE(slot->read(0, back).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(slot->write(slot->size(), std::vector<uint8_t>(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infergate::shm
