#include "gateway/shm_binding.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "shm/region_registry.h"
#include "shm/test_shm_object.h"

namespace infergate::gateway {
namespace {

using codecs::DataType;
using shm::test_util::TestShmObject;

shm::RegistryPolicy enabledPolicy() {
  shm::RegistryPolicy p;
  p.enabled = true;
  p.allowed_key_prefixes = {"/infergate_test_"};
  return p;
}

// A region of 256 bytes named "r" over an object of 4096 bytes at object offset 100.
class ShmBindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    object_.fillPattern();
    ASSERT_TRUE(registry_.registerSystem("r", object_.key(), 100, 256).ok());
  }

  codecs::InferInput fp32Input(std::string name, int64_t n, uint64_t offset, uint64_t size) {
    codecs::InferInput in;
    in.name = std::move(name);
    in.datatype = DataType::kFp32;
    in.shape = codecs::Shape({n});
    in.shared_memory = codecs::SharedMemoryRef{"r", offset, size};
    return in;
  }

  TestShmObject object_{4096};
  shm::RegionRegistry registry_{enabledPolicy()};
};

TEST_F(ShmBindingTest, InputBecomesAViewOfTheRegionAtItsOffset) {
  codecs::InferRequest request;
  request.inputs.push_back(fp32Input("IN", 4, 8, 16));
  auto binding = ShmBinding::bind(registry_, request);
  ASSERT_TRUE(binding.ok()) << binding.status();
  const codecs::InferInput& in = request.inputs[0];
  EXPECT_FALSE(in.shared_memory.has_value());
  ASSERT_EQ(in.data.size(), 16u);
  std::vector<uint8_t> object = object_.contents();
  EXPECT_EQ(std::memcmp(in.data.data(), object.data() + 100 + 8, 16), 0);
  EXPECT_FALSE(binding->hasOutputs());
}

TEST_F(ShmBindingTest, InputStaysReadableAfterItsRegionIsUnregistered) {
  codecs::InferRequest request;
  request.inputs.push_back(fp32Input("IN", 2, 0, 8));
  ASSERT_TRUE(ShmBinding::bind(registry_, request).ok());
  ASSERT_TRUE(registry_.unregister(shm::RegionKind::kSystem, "r").ok());
  EXPECT_FALSE(registry_.find("r").ok());
  std::vector<uint8_t> object = object_.contents();
  EXPECT_EQ(std::memcmp(request.inputs[0].data.data(), object.data() + 100, 8), 0);
}

TEST_F(ShmBindingTest, BadReferencesAreRefusedNamingTheProblem) {
  struct Case {
    codecs::SharedMemoryRef ref;
    int64_t elements;
    absl::StatusCode code;
    std::string words;
  };
  const Case cases[] = {
      {{"missing", 0, 8}, 2, absl::StatusCode::kNotFound, "Unable to find shared memory region: 'missing'"},
      {{"r", 256, 8}, 2, absl::StatusCode::kInvalidArgument, "Invalid offset"},
      {{"r", 252, 8}, 2, absl::StatusCode::kInvalidArgument, "Invalid offset + byte size"},
      {{"r", 8, UINT64_MAX - 4}, 2, absl::StatusCode::kInvalidArgument, "needs 8 bytes"},
      {{"r", 0, 12}, 2, absl::StatusCode::kInvalidArgument, "needs 8 bytes, but 12 bytes"},
  };
  for (const Case& c : cases) {
    codecs::InferRequest request;
    codecs::InferInput in = fp32Input("IN", c.elements, c.ref.offset, c.ref.byte_size);
    in.shared_memory->region = c.ref.region;
    request.inputs.push_back(in);
    auto binding = ShmBinding::bind(registry_, request);
    ASSERT_FALSE(binding.ok()) << c.words;
    EXPECT_EQ(binding.status().code(), c.code) << binding.status();
    EXPECT_NE(binding.status().message().find(c.words), absl::string_view::npos) << binding.status();
  }
}

TEST_F(ShmBindingTest, OverflowingReferenceIsRefusedForBytesTensors) {
  codecs::InferRequest request;
  codecs::InferInput in;
  in.name = "S";
  in.datatype = DataType::kBytes;
  in.shape = codecs::Shape({1});
  in.shared_memory = codecs::SharedMemoryRef{"r", 16, UINT64_MAX - 8};
  request.inputs.push_back(in);
  auto binding = ShmBinding::bind(registry_, request);
  ASSERT_FALSE(binding.ok());
  EXPECT_EQ(binding.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(binding.status().message().find("Invalid offset + byte size"), absl::string_view::npos);
}

TEST_F(ShmBindingTest, BytesInputIsCheckedAgainstItsShape) {
  // Two elements "ab", "c" written at region offset 32: lengths are little-endian u32.
  std::vector<uint8_t> object = object_.contents();
  const uint8_t elements[] = {2, 0, 0, 0, 'a', 'b', 1, 0, 0, 0, 'c'};
  std::memcpy(object.data() + 100 + 32, elements, sizeof(elements));
  object_.store(object);
  for (int64_t n : {2, 3}) {
    codecs::InferRequest request;
    codecs::InferInput in;
    in.name = "S";
    in.datatype = DataType::kBytes;
    in.shape = codecs::Shape({n});
    in.shared_memory = codecs::SharedMemoryRef{"r", 32, sizeof(elements)};
    request.inputs.push_back(in);
    auto binding = ShmBinding::bind(registry_, request);
    EXPECT_EQ(binding.ok(), n == 2) << n << ": " << binding.status();
  }
}

TEST_F(ShmBindingTest, ObjectShrunkAfterRegistrationIsRefusedNotTouched) {
  // The owner truncates its object below the registered range: touching the mapping would
  // fault (SIGBUS); the request is refused instead, and the gateway keeps serving.
  int fd = ::shm_open(object_.key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 200), 0);  // the region is [100, 356)
  ::close(fd);
  codecs::InferRequest request;
  request.inputs.push_back(fp32Input("IN", 2, 0, 8));
  auto binding = ShmBinding::bind(registry_, request);
  ASSERT_FALSE(binding.ok());
  EXPECT_EQ(binding.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(binding.status().message().find("shrank to 200 bytes"), absl::string_view::npos)
      << binding.status();
}

TEST_F(ShmBindingTest, OutputIsWrittenIntoItsRegionAndLeavesNoData) {
  codecs::InferRequest request;
  codecs::RequestedOutput out;
  out.name = "OUT";
  out.shared_memory = codecs::SharedMemoryRef{"r", 40, 16};
  request.outputs.push_back(out);
  auto binding = ShmBinding::bind(registry_, request);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_TRUE(binding->hasOutputs());
  EXPECT_FALSE(request.outputs[0].shared_memory.has_value()) << "the upstream must send the bytes";

  codecs::InferResponse response;
  codecs::InferOutput produced;
  produced.name = "OUT";
  produced.datatype = DataType::kInt32;
  produced.shape = codecs::Shape({3});
  produced.data = codecs::Buffer::copyOf(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12));
  response.outputs.push_back(produced);
  ASSERT_TRUE(binding->deliver(response).ok());
  EXPECT_TRUE(response.outputs[0].data.empty());
  EXPECT_EQ(response.outputs[0].shared_memory, (codecs::SharedMemoryRef{"r", 40, 16}));
  std::vector<uint8_t> object = object_.contents();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(object[100 + 40 + i], i + 1) << i;
  EXPECT_EQ(object[100 + 40 + 12], shm::test_util::patternByte(100 + 40 + 12)) << "written past the output";
}

TEST_F(ShmBindingTest, OutputBiggerThanItsSpaceIsInternalWithTritonsWords) {
  codecs::InferRequest request;
  codecs::RequestedOutput out;
  out.name = "OUT";
  out.shared_memory = codecs::SharedMemoryRef{"r", 0, 4};
  request.outputs.push_back(out);
  auto binding = ShmBinding::bind(registry_, request);
  ASSERT_TRUE(binding.ok());
  codecs::InferResponse response;
  codecs::InferOutput produced;
  produced.name = "OUT";
  produced.datatype = DataType::kInt32;
  produced.shape = codecs::Shape({2});
  produced.data = codecs::Buffer::copyOf(std::string(8, 'x'));
  response.outputs.push_back(produced);
  codecs::Status delivered = binding->deliver(response);
  EXPECT_EQ(delivered.code(), absl::StatusCode::kInternal);
  EXPECT_NE(delivered.message().find("should be at least 8 bytes"), absl::string_view::npos) << delivered;
  EXPECT_EQ(object_.contents()[100], shm::test_util::patternByte(100)) << "nothing written";
}

TEST_F(ShmBindingTest, DisabledRefusesAnyReferenceSayingHowToEnable) {
  shm::RegionRegistry off;  // default policy: disabled
  codecs::InferRequest request;
  request.inputs.push_back(fp32Input("IN", 2, 0, 8));
  auto binding = ShmBinding::bind(off, request);
  ASSERT_FALSE(binding.ok());
  EXPECT_NE(binding.status().message().find("shm.enabled"), absl::string_view::npos);
  EXPECT_TRUE(request.inputs[0].shared_memory.has_value());
}

TEST_F(ShmBindingTest, RequestWithoutReferencesIsLeftAlone) {
  codecs::InferRequest request;
  codecs::InferInput in;
  in.name = "IN";
  in.datatype = DataType::kInt8;
  in.shape = codecs::Shape({1});
  in.data = codecs::Buffer::copyOf("z");
  request.inputs.push_back(in);
  codecs::InferRequest before = request;
  shm::RegionRegistry off;
  ASSERT_TRUE(ShmBinding::bind(off, request).ok());
  EXPECT_EQ(request, before);
}

TEST(ShmChangeAllowed, DisabledThenListenerThenAllowed) {
  shm::RegionRegistry registry;
  EXPECT_EQ(shmChangeAllowed(registry, true, "HTTP").code(), absl::StatusCode::kUnimplemented);
  registry.setPolicy(enabledPolicy());
  codecs::Status denied = shmChangeAllowed(registry, false, "gRPC");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("gRPC listener"), absl::string_view::npos);
  EXPECT_TRUE(shmChangeAllowed(registry, true, "HTTP").ok());
}

}  // namespace
}  // namespace infergate::gateway
