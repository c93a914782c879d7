// Regions against real POSIX shm objects: mapping at any offset, writes reaching the
// object, every refusal of SystemRegion::open, the reference bounds check, views that keep
// a mapping alive, and CUDA regions on a machine without a usable GPU.

#include "shm/region.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "shm/cuda_ipc.h"
#include "shm/cuda_probe.h"
#include "shm/test_shm_object.h"

namespace infergate::shm {
namespace {

using test_util::patternByte;
using test_util::TestShmObject;
using test_util::contains;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

std::shared_ptr<const SystemRegion> openOk(const std::string& key, uint64_t offset,
                                           uint64_t byte_size) {
  auto region = SystemRegion::open("r", key, offset, byte_size);
  EXPECT_TRUE(region.ok()) << region.status();
  return region.ok() ? *region : nullptr;
}

TEST(SystemRegion, MapsAtANonPageAlignedOffset) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  TestShmObject object(3 * page + 100);
  object.fillPattern();
  const uint64_t offset = page + 17;
  const uint64_t size = page + 50;
  auto region = openOk(object.key(), offset, size);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->byteSize(), size);
  EXPECT_EQ(region->offset(), offset);
  EXPECT_EQ(region->key(), object.key());
  EXPECT_EQ(region->kind(), RegionKind::kSystem);
  for (uint64_t i = 0; i < size; ++i) {
    ASSERT_EQ(region->hostData()[i], patternByte(offset + i)) << "byte " << i;
  }
  std::vector<uint8_t> tail(10);
  ASSERT_TRUE(region->read(size - 10, tail).ok());
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(tail[i], patternByte(offset + size - 10 + i));
}

TEST(SystemRegion, MapsAnOffsetInsideTheFirstPageAndTheWholeObject) {
  TestShmObject object(1000);
  object.fillPattern();
  auto small = openOk(object.key(), 5, 3);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->hostData()[0], patternByte(5));
  EXPECT_EQ(small->hostData()[2], patternByte(7));
  auto whole = openOk(object.key(), 0, 1000);  // offset + byte_size == object size
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->hostData()[999], patternByte(999));
}

TEST(SystemRegion, WritesReachTheObject) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  TestShmObject object(2 * page);
  const uint64_t offset = page - 3;  // the region straddles a page boundary
  auto region = openOk(object.key(), offset, 8);
  ASSERT_NE(region, nullptr);
  const std::vector<uint8_t> src = {1, 2, 3, 4, 5};
  ASSERT_TRUE(region->write(2, src).ok());
  region->hostData()[7] = 0xAB;

  std::vector<uint8_t> seen = object.contents();
  EXPECT_EQ(seen[offset + 1], 0);
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(seen[offset + 2 + i], src[i]);
  EXPECT_EQ(seen[offset + 7], 0xAB);
  EXPECT_EQ(seen[offset + 8], 0);  // nothing past the region
}

TEST(SystemRegion, ReadAndWriteRefuseRangesOutsideTheRegion) {
  TestShmObject object(64);
  auto region = openOk(object.key(), 0, 16);
  ASSERT_NE(region, nullptr);
  std::vector<uint8_t> two(2);
  EXPECT_TRUE(region->read(14, two).ok());
  EXPECT_EQ(region->read(15, two).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(region->read(kMax, two).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(region->write(15, two).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(region->write(kMax - 1, two).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(region->write(16, std::span<const uint8_t>()).ok());  // empty, at the end
}

TEST(SystemRegion, RefusesAMissingObject) {
  const std::string key = test_util::uniqueKey("/infergate_test_missing_");
  auto region = SystemRegion::open("r", key, 0, 16);
  ASSERT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(region.status(), key));
  EXPECT_TRUE(contains(region.status(), "shm_open"));
  // Never created on the client's behalf.
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + key));
}

TEST(SystemRegion, RefusesAnObjectSmallerThanOffsetPlusByteSize) {
  TestShmObject object(1000);
  auto region = SystemRegion::open("r", object.key(), 500, 501);
  ASSERT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(region.status(), "1000 bytes"));
  EXPECT_EQ(SystemRegion::open("r", object.key(), 1001, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SystemRegion::open("r", object.key(), 500, 500).ok());
}

TEST(SystemRegion, RefusesAnOffsetPlusByteSizeThatOverflows) {
  TestShmObject object(1000);
  auto region = SystemRegion::open("r", object.key(), kMax - 10, 20);
  ASSERT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(region.status(), "overflows"));
  EXPECT_EQ(SystemRegion::open("r", object.key(), kMax, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SystemRegion::open("r", object.key(), 1, kMax).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Large but not overflowing: refused for size, not mapped.
  EXPECT_EQ(SystemRegion::open("r", object.key(), kMax / 2, kMax / 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SystemRegion, RefusesByteSizeZero) {
  TestShmObject object(1000);
  auto region = SystemRegion::open("r", object.key(), 0, 0);
  ASSERT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(region.status(), "byte_size"));
}

TEST(SystemRegion, RefusesADirectoryUnderDevShm) {
  const std::string key = test_util::uniqueKey("/infergate_test_dir_");
  const std::string path = "/dev/shm" + key;
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0) << std::strerror(errno);
  auto region = SystemRegion::open("r", key, 0, 1);
  ::rmdir(path.c_str());
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
}

// An allowed key must not lead, through a link someone placed under /dev/shm, to a file
// outside it (glibc's shm_open opens with O_NOFOLLOW).
TEST(SystemRegion, RefusesASymbolicLinkUnderDevShm) {
  TestShmObject target(64);
  const std::string key = test_util::uniqueKey("/infergate_test_link_");
  const std::string path = "/dev/shm" + key;
  ASSERT_EQ(::symlink(("/dev/shm" + target.key()).c_str(), path.c_str()), 0)
      << std::strerror(errno);
  auto region = SystemRegion::open("r", key, 0, 64);
  ::unlink(path.c_str());
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SystemRegion, RefusesKeysThatAreNotObjectNames) {
  TestShmObject object(64);
  for (const std::string& key : {std::string("/"), std::string("///"), std::string(""),
                                 object.key() + "/x", "/dev/shm" + object.key()}) {
    EXPECT_EQ(SystemRegion::open("r", key, 0, 1).status().code(),
              absl::StatusCode::kInvalidArgument)
        << key;
  }
}

TEST(SystemRegion, EveryOpenHasANewSerial) {
  TestShmObject object(64);
  auto a = openOk(object.key(), 0, 8);
  auto b = openOk(object.key(), 0, 8);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->serial(), 0u);
  EXPECT_GT(b->serial(), a->serial());
}

TEST(CheckReference, AcceptsRangesInsideAndRefusesTheBoundaries) {
  TestShmObject object(100);
  auto region = openOk(object.key(), 0, 100);
  ASSERT_NE(region, nullptr);
  EXPECT_TRUE(checkReference(*region, 0, 100).ok());
  EXPECT_TRUE(checkReference(*region, 99, 1).ok());  // offset + size == region size
  EXPECT_TRUE(checkReference(*region, 0, 0).ok());
  EXPECT_TRUE(checkReference(*region, 99, 0).ok());

  codecs::Status at_end = checkReference(*region, 100, 0);  // offset == size
  EXPECT_EQ(at_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(at_end, "Invalid offset for shared memory region: 'r'"));
  EXPECT_TRUE(contains(at_end, "100"));

  codecs::Status past = checkReference(*region, 50, 51);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(past, "Invalid offset + byte size for shared memory region: 'r'"));
  EXPECT_TRUE(contains(past, "51"));

  // offset + byte_size wraps around to a small number: still refused.
  EXPECT_TRUE(contains(checkReference(*region, 1, kMax), "Invalid offset + byte"));
  EXPECT_TRUE(contains(checkReference(*region, kMax, 2), "Invalid offset for"));
}

TEST(ViewOf, SharesTheMappingAndKeepsItAlive) {
  TestShmObject object(256);
  object.fillPattern();
  std::shared_ptr<const Region> region = openOk(object.key(), 10, 100);
  ASSERT_NE(region, nullptr);
  codecs::Buffer view = viewOf(region, 5, 20);
  EXPECT_EQ(view.size(), 20u);
  EXPECT_EQ(view.data(), region->hostData() + 5);  // a view, not a copy
  EXPECT_EQ(view.owner().get(), static_cast<const void*>(region.get()));

  std::weak_ptr<const Region> watch = region;
  region.reset();
  EXPECT_FALSE(watch.expired());  // the Buffer is a reference
  for (size_t i = 0; i < view.size(); ++i) EXPECT_EQ(view.data()[i], patternByte(15 + i));
  view = codecs::Buffer();
  EXPECT_TRUE(watch.expired());
}

TEST(ViewOf, GivesNothingForARangeOutsideTheRegion) {
  TestShmObject object(64);
  std::shared_ptr<const Region> region = openOk(object.key(), 0, 64);
  ASSERT_NE(region, nullptr);
  EXPECT_TRUE(viewOf(region, 60, 5).empty());
  EXPECT_TRUE(viewOf(region, kMax, 2).empty());
  EXPECT_EQ(viewOf(region, 60, 4).size(), 4u);
}

TEST(KindName, NamesBothKinds) {
  EXPECT_EQ(kindName(RegionKind::kSystem), "system");
  EXPECT_EQ(kindName(RegionKind::kCuda), "cuda");
}

// ---- CUDA regions: only what a machine without a usable GPU can check --------------------

TEST(CudaRegion, RefusesAHandleThatIsNot64BytesEvenWithoutAGpu) {
  for (size_t size : {size_t{0}, size_t{63}, size_t{65}}) {
    std::string handle(size, '\x01');
    auto region = CudaRegion::open("c", handle, 0, 16);
    ASSERT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_TRUE(contains(region.status(), std::to_string(size) + " bytes"));
  }
}

TEST(CudaRegion, IsUnimplementedWithoutAUsableGpu) {
  CudaStatus cuda = probeCuda();
  if (cuda.usable) GTEST_SKIP() << "a GPU is usable here";
  auto region = CudaRegion::open("c", std::string(kCudaIpcHandleBytes, '\0'), 0, 16);
  ASSERT_EQ(region.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(region.status(), "CUDA shared memory is not available: "));
  EXPECT_TRUE(contains(region.status(), cuda.detail));
}

TEST(CudaIpc, FailsWithAReasonWithoutAUsableGpu) {
  if (probeCuda().usable) GTEST_SKIP() << "a GPU is usable here";
  std::string error;
  EXPECT_EQ(CudaDeviceBuffer::create(0, 1024, &error), nullptr);
  EXPECT_FALSE(error.empty());
  error.clear();
  uint8_t handle[kCudaIpcHandleBytes] = {};
  EXPECT_EQ(CudaIpcMemory::open(handle, 0, 16, &error), nullptr);
  EXPECT_FALSE(error.empty());
  if (!INFERGATE_HAVE_CUDA) {
    EXPECT_TRUE(contains(error, "built without CUDA support"));
  }
}

TEST(CudaIpc, DeviceBufferRoundTripsAndChecksBounds) {
  if (!probeCuda().usable) GTEST_SKIP() << "no usable GPU: " << probeCuda().detail;
  std::string error;
  auto buffer = CudaDeviceBuffer::create(0, 1000, &error);
  ASSERT_NE(buffer, nullptr) << error;
  std::vector<uint8_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = patternByte(i);
  ASSERT_TRUE(buffer->copyFromHost(0, src.data(), src.size(), &error)) << error;
  std::vector<uint8_t> dst(10);
  ASSERT_TRUE(buffer->copyToHost(990, dst.data(), 10, &error)) << error;
  for (size_t i = 0; i < dst.size(); ++i) EXPECT_EQ(dst[i], patternByte(990 + i));
  EXPECT_FALSE(buffer->copyToHost(991, dst.data(), 10, &error));
  EXPECT_FALSE(buffer->copyFromHost(kMax, src.data(), 2, &error));
}

}  // namespace
}  // namespace infergate::shm
