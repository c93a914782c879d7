// The registry's rules against real POSIX shm objects: policy, key allowlist, names shared
// by both kinds, limits, status, unregister (one, all, unknown) and the lazy unregister of
// a region a request still holds.

#include "shm/region_registry.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "shm/cuda_ipc.h"
#include "shm/cuda_probe.h"
#include "shm/test_shm_object.h"

namespace infergate::shm {
namespace {

using test_util::contains;
using test_util::patternByte;
using test_util::TestShmObject;

const std::string kHandle(kCudaIpcHandleBytes, '\x05');

RegistryPolicy enabledPolicy() {
  RegistryPolicy policy;
  policy.enabled = true;
  policy.allowed_key_prefixes = {"/infergate_test_"};
  return policy;
}

std::vector<std::string> namesOf(const std::vector<RegionStatus>& rows) {
  std::vector<std::string> names;
  for (const RegionStatus& row : rows) names.push_back(row.name);
  return names;
}

// ---- checkSystemKey alone -----------------------------------------------------------------

TEST(CheckSystemKey, AcceptsKeysUnderAnAllowedPrefixWhateverTheLeadingSlashes) {
  const std::vector<std::string> allowed = {"/infergate_", "other_"};
  EXPECT_TRUE(checkSystemKey("/infergate_x", allowed).ok());
  EXPECT_TRUE(checkSystemKey("infergate_x", allowed).ok());
  EXPECT_TRUE(checkSystemKey("///infergate_x", allowed).ok());
  EXPECT_TRUE(checkSystemKey("/other_x", allowed).ok());
  EXPECT_TRUE(checkSystemKey("/infergate_", allowed).ok());
}

TEST(CheckSystemKey, RefusesKeysOutsideTheAllowlistNamingThePrefixes) {
  codecs::Status status = checkSystemKey("/x", {"/infergate_", "/other_"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(status, "key '/x' is outside the allowed prefixes [/infergate_, /other_] "
                               "(shm.allowed_key_prefixes)"));
  EXPECT_EQ(checkSystemKey("/infergate", {"/infergate_"}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkSystemKey("/x_infergate_", {"/infergate_"}).code(),
            absl::StatusCode::kInvalidArgument);
  // An empty allowlist allows no key at all.
  EXPECT_TRUE(contains(checkSystemKey("/infergate_x", {}), "allowed prefixes []"));
}

TEST(CheckSystemKey, RefusesEmptyAndOnlySlashKeys) {
  for (const char* key : {"", "/", "////"}) {
    codecs::Status status = checkSystemKey(key, {"/"});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_TRUE(contains(checkSystemKey("///", {"/"}), "only slashes"));
}

TEST(CheckSystemKey, RefusesASlashAfterTheLeadingOnes) {
  const std::vector<std::string> allowed = {"/infergate_"};
  for (const char* key : {"/infergate_a/b", "/infergate_dir/", "//infergate_a//b"}) {
    codecs::Status status = checkSystemKey(key, allowed);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_TRUE(contains(status, "'/'")) << key;
  }
}

TEST(CheckSystemKey, RefusesTritonsPythonBackendPrefixWhateverTheList) {
  const std::vector<std::string> allow_all_triton = {"/triton_", "triton_python_backend_shm_"};
  for (const char* key :
       {"/triton_python_backend_shm_region_1", "triton_python_backend_shm_region_x",
        "///triton_python_backend_shm_region", "/triton_python_backend_shm_regionZ"}) {
    codecs::Status status = checkSystemKey(key, allow_all_triton);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_TRUE(contains(status, "triton_python_backend_shm_region")) << key;
  }
  EXPECT_TRUE(checkSystemKey("/triton_other", allow_all_triton).ok());
}

TEST(CheckSystemKey, RefusesTheGatewaysOwnPoolsEvenUnderAnAllowedPrefix) {
  const std::vector<std::string> allowed = {"/infergate_"};
  const std::vector<std::string> reserved = {"/infergate_pool_", "/custom_pool_"};
  for (const char* key : {"/infergate_pool_123_0", "infergate_pool_9", "//custom_pool_1"}) {
    codecs::Status status = checkSystemKey(key, {"/infergate_", "/custom_"}, reserved);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_TRUE(contains(status, "handoff pools")) << key << ": " << status;
  }
  EXPECT_TRUE(checkSystemKey("/infergate_input", allowed, reserved).ok());
  EXPECT_TRUE(checkSystemKey("/infergate_pool_1", allowed).ok()) << "reserved only when listed";
}

// ---- policy ---------------------------------------------------------------------------------

TEST(RegionRegistry, RefusesEverythingButStatusWhenDisabled) {
  TestShmObject object(64);
  RegionRegistry registry;  // the default policy is disabled
  codecs::Status status = registry.registerSystem("a", object.key(), 0, 64);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(status, "Client shared memory is disabled"));
  EXPECT_TRUE(contains(status, "shm.enabled: true"));
  EXPECT_EQ(registry.registerCuda("c", kHandle, 0, 64).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(registry.unregister(RegionKind::kSystem, "a").code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(registry.unregisterAll(RegionKind::kCuda).code(), absl::StatusCode::kUnimplemented);
  auto rows = registry.status(RegionKind::kSystem, std::nullopt);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(rows->empty());
  EXPECT_EQ(registry.size(), 0u);
}

TEST(RegionRegistry, KeepsRegionsWhenAReloadDisablesRegistration) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 64).ok());
  registry.setPolicy(RegistryPolicy{});
  EXPECT_FALSE(registry.policy().enabled);
  EXPECT_TRUE(registry.find("a").ok());
  EXPECT_EQ(registry.registerSystem("b", object.key(), 0, 64).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(RegionRegistry, RegistersAnAllowedObjectAndReportsIt) {
  TestShmObject object(4096);
  object.fillPattern();
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("input0", object.key(), 100, 200).ok());
  EXPECT_EQ(registry.size(), 1u);
  auto rows = registry.status(RegionKind::kSystem, "input0");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "input0");
  EXPECT_EQ((*rows)[0].kind, RegionKind::kSystem);
  EXPECT_EQ((*rows)[0].key, object.key());
  EXPECT_EQ((*rows)[0].offset, 100u);
  EXPECT_EQ((*rows)[0].byte_size, 200u);

  auto region = registry.find("input0");
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->hostData()[0], patternByte(100));
}

TEST(RegionRegistry, RefusesKeysAgainstThePolicyBeforeOpeningAnything) {
  TestShmObject outside(64, "/elsewhere_test_");
  TestShmObject triton(64, "/triton_python_backend_shm_region_test_");
  RegistryPolicy policy = enabledPolicy();
  policy.allowed_key_prefixes.push_back("/triton_");
  RegionRegistry registry(policy);

  codecs::Status status = registry.registerSystem("a", outside.key(), 0, 64);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(status, "(shm.allowed_key_prefixes)"));
  EXPECT_EQ(registry.registerSystem("b", triton.key(), 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerSystem("c", "/", 0, 64).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerSystem("d", "/infergate_test_a/b", 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.size(), 0u);
}

TEST(RegionRegistry, RefusesMissingTooSmallAndEmptyRegions) {
  TestShmObject object(100);
  RegionRegistry registry(enabledPolicy());
  EXPECT_EQ(registry.registerSystem("a", test_util::uniqueKey(), 0, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerSystem("a", object.key(), 50, 51).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerSystem("a", object.key(), std::numeric_limits<uint64_t>::max(), 2)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerSystem("a", object.key(), 0, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_TRUE(registry.registerSystem("a", object.key(), 50, 50).ok());  // the name is free
}

TEST(RegionRegistry, RefusesAnEmptyName) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  EXPECT_EQ(registry.registerSystem("", object.key(), 0, 64).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.registerCuda("", kHandle, 0, 64).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegionRegistry, RefusesADuplicateNameOfEitherKind) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 64).ok());
  codecs::Status again = registry.registerSystem("a", object.key(), 0, 32);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(again, "shared memory region 'a' already in manager"));
  // One name space: a CUDA registration of the same name is refused before any GPU check.
  EXPECT_EQ(registry.registerCuda("a", kHandle, 0, 64).code(), absl::StatusCode::kAlreadyExists);
  auto rows = registry.status(RegionKind::kSystem, "a");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].byte_size, 64u);  // the first registration stands
}

TEST(RegionRegistry, RefusesPastMaxRegions) {
  TestShmObject object(64);
  RegistryPolicy policy = enabledPolicy();
  policy.max_regions = 2;
  RegionRegistry registry(policy);
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 8).ok());
  ASSERT_TRUE(registry.registerSystem("b", object.key(), 8, 8).ok());
  codecs::Status third = registry.registerSystem("c", object.key(), 16, 8);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(contains(third, "shm.max_regions"));
  ASSERT_TRUE(registry.unregister(RegionKind::kSystem, "a").ok());
  EXPECT_TRUE(registry.registerSystem("c", object.key(), 16, 8).ok());
  EXPECT_EQ(registry.size(), 2u);
}

TEST(RegionRegistry, StatusListsOneKindSortedByName) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  for (const char* name : {"charlie", "alpha", "bravo"}) {
    ASSERT_TRUE(registry.registerSystem(name, object.key(), 0, 8).ok()) << name;
  }
  auto rows = registry.status(RegionKind::kSystem, std::nullopt);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(namesOf(*rows), (std::vector<std::string>{"alpha", "bravo", "charlie"}));
  auto cuda_rows = registry.status(RegionKind::kCuda, std::nullopt);
  ASSERT_TRUE(cuda_rows.ok());
  EXPECT_TRUE(cuda_rows->empty());
}

TEST(RegionRegistry, StatusOfAnUnknownNameOrOtherKindIsNotFound) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 8).ok());
  auto unknown = registry.status(RegionKind::kSystem, "zz");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(unknown.status()),
            "Unable to find system shared memory region: 'zz'");
  auto other_kind = registry.status(RegionKind::kCuda, "a");
  EXPECT_EQ(other_kind.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(other_kind.status()),
            "Unable to find cuda shared memory region: 'a'");
}

TEST(RegionRegistry, FindOfAnUnknownNameIsNotFound) {
  RegionRegistry registry(enabledPolicy());
  auto region = registry.find("nope");
  EXPECT_EQ(region.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(region.status()), "Unable to find shared memory region: 'nope'");
}

TEST(RegionRegistry, UnregisterOfAnUnknownNameOrOtherKindSucceedsAndKeepsTheRegion) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 8).ok());
  EXPECT_TRUE(registry.unregister(RegionKind::kSystem, "unknown").ok());
  EXPECT_TRUE(registry.unregister(RegionKind::kCuda, "a").ok());
  EXPECT_TRUE(registry.find("a").ok());
  EXPECT_TRUE(registry.unregister(RegionKind::kSystem, "a").ok());
  EXPECT_EQ(registry.find("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.unregister(RegionKind::kSystem, "a").ok());  // twice is fine
}

TEST(RegionRegistry, UnregisterAllOfOneKindLeavesTheOther) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  std::vector<std::string> told;
  registry.setOnUnregister(
      [&](const std::shared_ptr<const Region>& region) { told.push_back(region->name()); });
  for (const char* name : {"b", "a", "c"}) {
    ASSERT_TRUE(registry.registerSystem(name, object.key(), 0, 8).ok());
  }
  EXPECT_TRUE(registry.unregisterAll(RegionKind::kCuda).ok());
  EXPECT_EQ(registry.size(), 3u);
  EXPECT_TRUE(told.empty());

  EXPECT_TRUE(registry.unregisterAll(RegionKind::kSystem).ok());
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(told, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(RegionRegistry, OnUnregisterRunsOutsideTheLock) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 0, 8).ok());
  ASSERT_TRUE(registry.registerSystem("b", object.key(), 0, 8).ok());
  std::vector<size_t> sizes;
  // Calling back into the registry would deadlock if the callback ran under its mutex.
  registry.setOnUnregister([&](const std::shared_ptr<const Region>& region) {
    sizes.push_back(registry.size());
    EXPECT_EQ(registry.find(region->name()).status().code(), absl::StatusCode::kNotFound);
  });
  ASSERT_TRUE(registry.unregister(RegionKind::kSystem, "a").ok());
  EXPECT_EQ(sizes, (std::vector<size_t>{1}));
}

TEST(RegionRegistry, AHeldRegionStaysMappedAfterUnregister) {
  TestShmObject object(256);
  object.fillPattern();
  RegionRegistry registry(enabledPolicy());
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 16, 128).ok());
  auto found = registry.find("a");
  ASSERT_TRUE(found.ok());
  const uint64_t serial = (*found)->serial();
  ASSERT_TRUE(checkReference(**found, 8, 32).ok());
  codecs::Buffer view = viewOf(*found, 8, 32);
  found = absl::NotFoundError("dropped");  // only the view holds the region now

  ASSERT_TRUE(registry.unregister(RegionKind::kSystem, "a").ok());
  ASSERT_EQ(view.size(), 32u);
  for (size_t i = 0; i < view.size(); ++i) EXPECT_EQ(view.data()[i], patternByte(24 + i));

  // The name is free again, and the new registration is told apart from the old one.
  ASSERT_TRUE(registry.registerSystem("a", object.key(), 16, 128).ok());
  auto again = registry.find("a");
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->serial(), serial);
}

TEST(RegionRegistry, CudaRegistrationFollowsPolicyHandleSizeThenGpu) {
  RegistryPolicy no_cuda = enabledPolicy();
  no_cuda.cuda = false;
  RegionRegistry refusing(no_cuda);
  codecs::Status off = refusing.registerCuda("c", kHandle, 0, 64);
  EXPECT_EQ(off.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(off, "shm.cuda"));

  RegionRegistry registry(enabledPolicy());
  codecs::Status short_handle = registry.registerCuda("c", kHandle.substr(1), 0, 64);
  EXPECT_EQ(short_handle.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(short_handle, "63 bytes"));

  CudaStatus cuda = probeCuda();
  if (cuda.usable) GTEST_SKIP() << "a GPU is usable here: the handle would be opened";
  codecs::Status no_gpu = registry.registerCuda("c", kHandle, 0, 64);
  EXPECT_EQ(no_gpu.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(no_gpu, "CUDA shared memory is not available"));
  EXPECT_EQ(registry.size(), 0u);
}

TEST(RegionRegistry, ConcurrentRegistrationsOfOneNameAdmitExactlyOne) {
  TestShmObject object(64);
  RegionRegistry registry(enabledPolicy());
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = "n" + std::to_string(round);
    std::vector<std::thread> threads;
    std::vector<absl::StatusCode> codes(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        codes[t] = registry.registerSystem(name, object.key(), 0, 8).code();
      });
    }
    for (std::thread& thread : threads) thread.join();
    int ok = 0;
    for (absl::StatusCode code : codes) {
      if (code == absl::StatusCode::kOk) {
        ++ok;
      } else {
        EXPECT_EQ(code, absl::StatusCode::kAlreadyExists);
      }
    }
    EXPECT_EQ(ok, 1) << name;
  }
  EXPECT_EQ(registry.size(), static_cast<size_t>(kRounds));
}

}  // namespace
}  // namespace infergate::shm
