#include "gateway/upstream/endpoint_handoff.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "shm/cuda_ipc.h"
#include "shm/region.h"
#include "shm/test_shm_object.h"

namespace infergate::gateway::upstream {
namespace {

using shm::test_util::TestShmObject;
using Kind = EndpointHandoff::Work::Kind;

constexpr uint64_t kPoolBytes = 1 << 20;
constexpr char kPoolPrefix[] = "/infergate_test_pool_";

config::UpstreamConfig colocatedUpstream(uint64_t pool_bytes = kPoolBytes, bool passthrough = true) {
  config::UpstreamConfig u;
  u.name = "u";
  u.protocol = config::UpstreamConfig::Protocol::kGrpc;
  u.colocated = true;
  u.handoff.enabled = true;
  u.handoff.passthrough = passthrough;
  u.handoff.min_bytes = 65536;
  u.handoff.pool_bytes = pool_bytes;
  u.handoff.kind = config::HandoffConfig::Kind::kSystem;
  u.handoff.key_prefix = kPoolPrefix;
  return u;
}

// The name `h` gives a client region at the upstream: unique per process, endpoint and
// registration.
std::string upstreamRegionName(const EndpointHandoff& h, uint64_t serial) {
  return "infergate_r" + shm::HandoffPool::processTag() + "_" + std::to_string(h.number()) + "_" +
         std::to_string(serial);
}

bool objectExists(const std::string& key) {
  struct stat st;
  return ::stat(("/dev/shm" + key).c_str(), &st) == 0;
}

std::shared_ptr<const shm::Region> openRegion(const TestShmObject& object, uint64_t offset,
                                              uint64_t size, std::string name = "client") {
  auto region = shm::SystemRegion::open(std::move(name), object.key(), offset, size);
  EXPECT_TRUE(region.ok()) << region.status();
  return region.ok() ? std::shared_ptr<const shm::Region>(*region) : nullptr;
}

TEST(EndpointHandoffTest, PoolIsCreatedUnderItsPrefixAndUnlinkedWithTheEndpoint) {
  std::string key;
  {
    EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
    EXPECT_EQ(h.upstreamName(), "u");
    EXPECT_EQ(h.endpointKey(), "127.0.0.1:9001");
    const std::string own = "infergate_pool_" + shm::HandoffPool::processTag() + "_";
    EXPECT_EQ(h.poolName().rfind(own, 0), 0u) << h.poolName();
    std::vector<EndpointHandoff::Work> work = h.takeWork();
    ASSERT_EQ(work.size(), 1u);
    key = work[0].key;
    EXPECT_EQ(key.rfind(std::string(kPoolPrefix) + shm::HandoffPool::processTag() + "_", 0), 0u) << key;
    EXPECT_TRUE(objectExists(key)) << key;
  }
  EXPECT_FALSE(objectExists(key)) << key;
}

TEST(EndpointHandoffTest, PoolRegistrationIsTakenOnceThenReady) {
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  EXPECT_EQ(h.readyPool(), nullptr);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  const EndpointHandoff::Work& w = work[0];
  EXPECT_EQ(w.kind, Kind::kRegisterPool);
  EXPECT_EQ(w.name, h.poolName());
  EXPECT_EQ(w.region_kind, shm::RegionKind::kSystem);
  EXPECT_EQ(w.offset, 0u);
  EXPECT_EQ(w.byte_size, kPoolBytes);
  EXPECT_TRUE(w.cuda_handle.empty());
  // In flight: not handed out again, and not ready yet.
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_EQ(h.readyPool(), nullptr);
  EXPECT_FALSE(h.counters().pool_ready);

  h.poolRegistered(true, false, "");
  std::shared_ptr<shm::HandoffPool> pool = h.readyPool();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->key(), w.key);
  EXPECT_EQ(pool->byteSize(), kPoolBytes);
  EXPECT_TRUE(h.takeWork().empty());
  EndpointHandoff::Counters c = h.counters();
  EXPECT_TRUE(c.pool_ready);
  EXPECT_FALSE(c.refused);
  EXPECT_EQ(c.pool_registrations, 1u);
  EXPECT_EQ(c.refusals, 0u);
  EXPECT_FALSE(h.refused());
}

TEST(EndpointHandoffTest, EndpointDownForgetsThePoolAndRegistersItAgain) {
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.poolRegistered(true, false, "");
  ASSERT_NE(h.readyPool(), nullptr);

  h.endpointDown();
  EXPECT_EQ(h.readyPool(), nullptr);
  EXPECT_FALSE(h.counters().pool_ready);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kRegisterPool);
  EXPECT_EQ(work[0].name, h.poolName());
  EXPECT_TRUE(h.takeWork().empty());
  h.poolRegistered(true, false, "");
  EXPECT_NE(h.readyPool(), nullptr);
  EXPECT_EQ(h.counters().pool_registrations, 2u);

  // lostRegistrations (a request's reference refused) does the same.
  h.lostRegistrations();
  EXPECT_EQ(h.readyPool(), nullptr);
  ASSERT_EQ(h.takeWork().size(), 1u);

  // endpointDown while the registration is in flight leaves it in flight (its answer
  // decides); a second takeWork does not duplicate it.
  h.endpointDown();
  EXPECT_TRUE(h.takeWork().empty());
  h.poolRegistered(true, false, "");
  EXPECT_NE(h.readyPool(), nullptr);
}

TEST(EndpointHandoffTest, FailedPoolRegistrationIsRetried) {
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.poolRegistered(false, false, "connection refused");
  EXPECT_EQ(h.readyPool(), nullptr);
  EXPECT_FALSE(h.refused());
  EndpointHandoff::Counters c = h.counters();
  EXPECT_EQ(c.refusals, 1u);
  EXPECT_EQ(c.pool_registrations, 0u);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kRegisterPool);
  h.poolRegistered(true, false, "");
  EXPECT_NE(h.readyPool(), nullptr);
}

TEST(EndpointHandoffTest, RefusedUpstreamGetsNothingMore) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.poolRegistered(false, /*refused=*/true, "client shared memory is disabled");
  EXPECT_TRUE(h.refused());
  EXPECT_EQ(h.readyPool(), nullptr);
  EXPECT_TRUE(h.takeWork().empty());
  EndpointHandoff::Counters c = h.counters();
  EXPECT_TRUE(c.refused);
  EXPECT_FALSE(c.pool_ready);
  EXPECT_EQ(c.refusals, 1u);
  // Client regions are not passed through either, and nothing is queued for them.
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());
  // Not even after the endpoint comes back.
  h.endpointDown();
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_EQ(h.readyPool(), nullptr);
}

TEST(EndpointHandoffTest, RegionRefusalAlsoRefusesTheEndpoint) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  h.regionRegistered(region->serial(), false, /*refused=*/true, "UNIMPLEMENTED");
  EXPECT_TRUE(h.refused());
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, NoPoolWhenPoolBytesIsZero) {
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  EXPECT_TRUE(h.poolName().empty());
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_EQ(h.readyPool(), nullptr);
  EXPECT_FALSE(h.counters().pool_ready);
}

TEST(EndpointHandoffTest, ClientRegionIsRegisteredThenPassedThrough) {
  TestShmObject object(3 * 4096);
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);  // the pool
  h.poolRegistered(true, false, "");

  std::shared_ptr<const shm::Region> region = openRegion(object, 100, 8000);
  ASSERT_NE(region, nullptr);
  const std::string name = upstreamRegionName(h, region->serial());
  // Not known upstream yet: inline this time, the registration queued once.
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  const EndpointHandoff::Work& w = work[0];
  EXPECT_EQ(w.kind, Kind::kRegisterRegion);
  EXPECT_EQ(w.name, name);
  EXPECT_EQ(w.region_kind, shm::RegionKind::kSystem);
  EXPECT_EQ(w.key, object.key());
  EXPECT_EQ(w.offset, 100u);
  EXPECT_EQ(w.byte_size, 8000u);
  EXPECT_EQ(w.serial, region->serial());
  // In flight: still inline, not handed out again.
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());

  h.regionRegistered(region->serial(), true, false, "");
  EXPECT_EQ(h.passthroughName(region), std::optional<std::string>(name));
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_EQ(h.counters().region_registrations, 1u);

  // The region's last reference dropped (unregistered at the gateway, no request holds
  // it): its copy at the upstream is unregistered, once.
  const uint64_t serial = region->serial();
  region.reset();
  work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kUnregisterRegion);
  EXPECT_EQ(work[0].name, name);
  EXPECT_EQ(work[0].serial, serial);
  EXPECT_TRUE(h.takeWork().empty());
  h.regionUnregistered(serial);
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, CudaRegionIsRegisteredByItsHandleThenPassedThrough) {
  // A client's CUDA region goes to the upstream as the client's own IPC handle and device:
  // the upstream opens the same allocation. (Made without opening the handle: no GPU here;
  // tests/e2e/test_cuda_shm.py runs the whole path on one.)
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::string handle(shm::kCudaIpcHandleBytes, '\0');
  for (size_t i = 0; i < handle.size(); ++i) handle[i] = static_cast<char>(i * 3 + 1);
  std::shared_ptr<const shm::Region> region =
      std::make_shared<shm::CudaRegion>("gpu", 1 << 20, handle, /*device_id=*/1, nullptr);
  const std::string name = upstreamRegionName(h, region->serial());
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kRegisterRegion);
  EXPECT_EQ(work[0].name, name);
  EXPECT_EQ(work[0].region_kind, shm::RegionKind::kCuda);
  EXPECT_EQ(work[0].cuda_handle, handle);
  EXPECT_EQ(work[0].device, 1);
  EXPECT_EQ(work[0].byte_size, 1u << 20);
  EXPECT_TRUE(work[0].key.empty());

  h.regionRegistered(region->serial(), true, false, "", shm::RegionKind::kCuda);
  EXPECT_EQ(h.passthroughName(region), std::optional<std::string>(name));

  // Gone at the gateway: unregistered at the upstream through the CUDA API.
  const uint64_t serial = region->serial();
  region.reset();
  work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kUnregisterRegion);
  EXPECT_EQ(work[0].region_kind, shm::RegionKind::kCuda);
  EXPECT_EQ(work[0].name, name);
  EXPECT_EQ(work[0].serial, serial);
}

TEST(EndpointHandoffTest, ACudaRegistrationThatEndsAfterTheRegionIsUnregisteredThroughTheCudaApi) {
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  auto region = std::make_shared<shm::CudaRegion>("gpu", 4096,
                                                  std::string(shm::kCudaIpcHandleBytes, '\x07'),
                                                  /*device_id=*/0, nullptr);
  const uint64_t serial = region->serial();
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);  // the registration, in flight
  h.clientUnregistered(*region);        // the client let go meanwhile
  region.reset();
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kUnregisterRegion);
  EXPECT_EQ(work[0].region_kind, shm::RegionKind::kCuda);
  EXPECT_EQ(work[0].serial, serial);
}

TEST(EndpointHandoffTest, ACudaRegionRefusedAsUnimplementedFailsAloneNotTheEndpoint) {
  // An upstream without a GPU answers CUDA registrations UNIMPLEMENTED: that region goes
  // inline for good, while the pool and system regions still go by reference.
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);  // the pool
  h.poolRegistered(true, false, "");
  auto cuda = std::make_shared<shm::CudaRegion>("gpu", 4096, std::string(shm::kCudaIpcHandleBytes, '\x02'),
                                                /*device_id=*/0, nullptr);
  EXPECT_EQ(h.passthroughName(cuda), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.regionRegistered(cuda->serial(), false, /*refused=*/true, "CUDA shared memory is not available",
                     shm::RegionKind::kCuda);
  EXPECT_FALSE(h.refused());
  EXPECT_NE(h.readyPool(), nullptr);
  EXPECT_EQ(h.passthroughName(cuda), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());  // not asked again

  std::shared_ptr<const shm::Region> system = openRegion(object, 0, 4096);
  ASSERT_NE(system, nullptr);
  EXPECT_EQ(h.passthroughName(system), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.regionRegistered(system->serial(), true, false, "");
  EXPECT_EQ(h.passthroughName(system), std::optional<std::string>(upstreamRegionName(h, system->serial())));
}

TEST(EndpointHandoffTest, ACudaRegionWithoutOpenMemoryRefusesReadsAndWrites) {
  shm::CudaRegion region("gpu", 64, std::string(shm::kCudaIpcHandleBytes, '\x01'), 0, nullptr);
  uint8_t bytes[8] = {};
  EXPECT_EQ(region.read(0, bytes).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(region.write(0, bytes).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(region.read(60, bytes).code(), absl::StatusCode::kInvalidArgument);  // range first
}

TEST(EndpointHandoffTest, RegionsGetNamesOfTheirOwnSerials) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  // The same client name registered twice over the same bytes: two registrations, two
  // upstream names (a reused name never aliases an old registration).
  std::shared_ptr<const shm::Region> a = openRegion(object, 0, 4096, "same");
  std::shared_ptr<const shm::Region> b = openRegion(object, 0, 4096, "same");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(a->serial(), b->serial());
  EXPECT_EQ(h.passthroughName(a), std::nullopt);
  EXPECT_EQ(h.passthroughName(b), std::nullopt);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 2u);
  std::vector<std::string> names = {work[0].name, work[1].name};
  std::sort(names.begin(), names.end());
  std::vector<std::string> want = {upstreamRegionName(h, a->serial()), upstreamRegionName(h, b->serial())};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want);
  h.regionRegistered(a->serial(), true, false, "");
  h.regionRegistered(b->serial(), true, false, "");
  EXPECT_EQ(h.passthroughName(a), upstreamRegionName(h, a->serial()));
  EXPECT_EQ(h.passthroughName(b), upstreamRegionName(h, b->serial()));
  EXPECT_EQ(h.counters().region_registrations, 2u);
}

TEST(EndpointHandoffTest, ClientUnregisteredQueuesTheUnregistration) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.poolRegistered(true, false, "");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  const std::string name = upstreamRegionName(h, region->serial());
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.regionRegistered(region->serial(), true, false, "");
  ASSERT_EQ(h.passthroughName(region), name);

  // Still held (a request in flight), but unregistered by the client.
  h.clientUnregistered(*region);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kUnregisterRegion);
  EXPECT_EQ(work[0].name, name);
  EXPECT_EQ(work[0].serial, region->serial());
  EXPECT_TRUE(h.takeWork().empty());
  // Dropping it afterwards queues nothing more.
  region.reset();
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, ClientUnregisteredOfAnUnknownRegionQueuesNothing) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  h.clientUnregistered(*region);
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, RegionDroppedWhileItsRegistrationIsInFlight) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  const uint64_t serial = region->serial();
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  region.reset();
  EXPECT_TRUE(h.takeWork().empty());  // forgotten; the answer is still to come
  // It was registered after all: taken back at the upstream.
  h.regionRegistered(serial, true, false, "");
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kUnregisterRegion);
  EXPECT_EQ(work[0].name, upstreamRegionName(h, serial));
  EXPECT_EQ(work[0].serial, serial);
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, RegionTheUpstreamCannotOpenStaysInline) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.regionRegistered(region->serial(), false, false, "Unable to open shared memory region");
  EXPECT_FALSE(h.refused());
  EXPECT_EQ(h.counters().refusals, 1u);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  // Never registered: nothing to take back when it goes.
  region.reset();
  EXPECT_TRUE(h.takeWork().empty());
}

TEST(EndpointHandoffTest, EndpointDownRegistersPassedThroughRegionsAgain) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  std::shared_ptr<const shm::Region> region = openRegion(object, 4096, 4096);
  ASSERT_NE(region, nullptr);
  const std::string name = upstreamRegionName(h, region->serial());
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  ASSERT_EQ(h.takeWork().size(), 1u);
  h.regionRegistered(region->serial(), true, false, "");
  ASSERT_EQ(h.passthroughName(region), name);

  h.endpointDown();
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  std::vector<EndpointHandoff::Work> work = h.takeWork();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, Kind::kRegisterRegion);
  EXPECT_EQ(work[0].name, name);
  EXPECT_EQ(work[0].offset, 4096u);
  h.regionRegistered(region->serial(), true, false, "");
  EXPECT_EQ(h.passthroughName(region), name);
  EXPECT_EQ(h.counters().region_registrations, 2u);
}

TEST(EndpointHandoffTest, PassthroughOffNeverRegistersRegions) {
  TestShmObject object(8192);
  EndpointHandoff h(colocatedUpstream(kPoolBytes, /*passthrough=*/false), "127.0.0.1:9001");
  ASSERT_EQ(h.takeWork().size(), 1u);  // the pool still is
  h.poolRegistered(true, false, "");
  std::shared_ptr<const shm::Region> region = openRegion(object, 0, 4096);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(h.passthroughName(region), std::nullopt);
  EXPECT_TRUE(h.takeWork().empty());
  EXPECT_NE(h.readyPool(), nullptr);
}

TEST(EndpointHandoffTest, LearnsOutputSizesAndNames) {
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  EXPECT_EQ(h.outputSize("m", "OUT"), std::nullopt);
  EXPECT_TRUE(h.outputsOf("m").empty());
  h.learnOutputSize("m", "OUT", 262144);
  EXPECT_EQ(h.outputSize("m", "OUT"), std::optional<uint64_t>(262144));
  EXPECT_EQ(h.outputSize("m", "OTHER"), std::nullopt);
  EXPECT_EQ(h.outputSize("n", "OUT"), std::nullopt);
  // The latest size wins, bigger or smaller.
  h.learnOutputSize("m", "OUT", 524288);
  EXPECT_EQ(h.outputSize("m", "OUT"), std::optional<uint64_t>(524288));
  h.learnOutputSize("m", "OUT", 16);
  EXPECT_EQ(h.outputSize("m", "OUT"), std::optional<uint64_t>(16));
  h.learnOutputSize("m", "OTHER", 0);
  EXPECT_EQ(h.outputSize("m", "OTHER"), std::optional<uint64_t>(0));

  h.learnOutputsOf("m", {"OUTPUT0", "OUTPUT1"});
  EXPECT_EQ(h.outputsOf("m"), (std::vector<std::string>{"OUTPUT0", "OUTPUT1"}));
  EXPECT_TRUE(h.outputsOf("n").empty());
  h.learnOutputsOf("m", {"OUTPUT1"});
  EXPECT_EQ(h.outputsOf("m"), (std::vector<std::string>{"OUTPUT1"}));
}

TEST(EndpointHandoffTest, CountersAddUp) {
  EndpointHandoff h(colocatedUpstream(/*pool_bytes=*/0), "127.0.0.1:9001");
  h.countPoolIn(10);
  h.countPoolIn(5);
  h.countPoolOut(7);
  h.countPassthrough(3);
  h.countInline(2);
  h.countPoolFull();
  h.countPoolFull();
  h.countInlineRetry();
  EndpointHandoff::Counters c = h.counters();
  EXPECT_EQ(c.pool_bytes_in, 15u);
  EXPECT_EQ(c.pool_bytes_out, 7u);
  EXPECT_EQ(c.passthrough_bytes, 3u);
  EXPECT_EQ(c.inline_bytes, 2u);
  EXPECT_EQ(c.pool_full, 2u);
  EXPECT_EQ(c.inline_retries, 1u);
}

}  // namespace
}  // namespace infergate::gateway::upstream
