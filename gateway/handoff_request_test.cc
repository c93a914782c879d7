#include "gateway/handoff_request.h"

#include <gtest/gtest.h>

#include <cstring>

#include "shm/test_shm_object.h"

namespace infergate::gateway {
namespace {

using codecs::DataType;
using shm::test_util::TestShmObject;

constexpr uint64_t kMinBytes = 1024;

config::UpstreamConfig colocatedUpstream() {
  config::UpstreamConfig u;
  u.name = "local";
  u.protocol = config::UpstreamConfig::Protocol::kGrpc;
  u.colocated = true;
  u.handoff.enabled = true;
  u.handoff.min_bytes = kMinBytes;
  u.handoff.pool_bytes = 1 << 20;
  u.handoff.key_prefix = "/infergate_test_pool_";
  return u;
}

config::ListenAddress address() {
  config::ListenAddress a;
  a.host = "127.0.0.1";
  a.port = 1;  // never dialled: the test only builds requests
  a.text = "127.0.0.1:1";
  return a;
}

codecs::InferRequest identityRequest(uint64_t bytes, uint8_t fill) {
  codecs::InferRequest r;
  r.model_name = "identity_int8";
  codecs::InferInput in;
  in.name = "INPUT0";
  in.datatype = DataType::kInt8;
  in.shape = codecs::Shape({1, static_cast<int64_t>(bytes)});
  in.data = codecs::Buffer::copyOf(std::string(bytes, static_cast<char>(fill)));
  r.inputs.push_back(in);
  codecs::RequestedOutput out;
  out.name = "OUTPUT0";
  r.outputs.push_back(out);
  return r;
}

class HandoffRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(endpoint_.handoff(), nullptr);
    ASSERT_EQ(endpoint_.handoff()->takeWork().size(), 1u);  // the pool's registration
    endpoint_.handoff()->poolRegistered(true, false, "");
    ASSERT_NE(endpoint_.handoff()->readyPool(), nullptr);
  }

  std::shared_ptr<HandoffRequest> make(codecs::InferRequest request) {
    auto r = HandoffRequest::create(registry_, std::move(request));
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  // The upstream's answer to an identity request whose output went to `ref` (no data) or
  // inline (`data`).
  static codecs::InferResponse answer(uint64_t bytes, std::string data = "") {
    codecs::InferResponse response;
    response.model_name = "identity_int8";
    codecs::InferOutput out;
    out.name = "OUTPUT0";
    out.datatype = DataType::kInt8;
    out.shape = codecs::Shape({1, static_cast<int64_t>(bytes)});
    out.data = codecs::Buffer::copyOf(data);
    response.outputs.push_back(out);
    return response;
  }

  shm::RegionRegistry registry_;
  upstream::Endpoint endpoint_{colocatedUpstream(), address(), 0};
};

TEST_F(HandoffRequestTest, BigInputGoesThroughThePoolAndSmallOneInline) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  auto big = make(identityRequest(4096, 7));
  auto attempt = big->forEndpoint(endpoint_);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  const codecs::InferInput& in = (*attempt)->inputs[0];
  ASSERT_TRUE(in.shared_memory.has_value());
  EXPECT_EQ(in.shared_memory->region, h.poolName());
  EXPECT_EQ(in.shared_memory->byte_size, 4096u);
  EXPECT_TRUE(in.data.empty());
  const uint8_t* slot = h.readyPool()->hostData() + in.shared_memory->offset;
  EXPECT_EQ(slot[0], 7);
  EXPECT_EQ(slot[4095], 7);
  // The admin API's and the metrics' view of the pool: one slot of at least the input held.
  const upstream::EndpointHandoff::Counters held = h.counters();
  EXPECT_EQ(held.pool_bytes, h.readyPool()->byteSize());
  EXPECT_EQ(held.pool_slots_in_use, 1u);
  EXPECT_GE(held.pool_bytes_in_use, 4096u);
  // The output's size is not known yet: it comes back inline, and is learned.
  EXPECT_FALSE((*attempt)->outputs[0].shared_memory.has_value());
  codecs::InferResponse response = answer(4096, std::string(4096, '\7'));
  ASSERT_TRUE(big->finish(response).ok());
  EXPECT_EQ(h.outputSize("identity_int8", "OUTPUT0"), std::optional<uint64_t>(4096));

  auto small = make(identityRequest(100, 1));
  auto small_attempt = small->forEndpoint(endpoint_);
  ASSERT_TRUE(small_attempt.ok());
  EXPECT_FALSE((*small_attempt)->inputs[0].shared_memory.has_value());
  EXPECT_EQ((*small_attempt)->inputs[0].data.size(), 100u);
  EXPECT_EQ(h.counters().pool_bytes_in, 4096u);
}

// A body read straight into a pool slot (handoffBodyPlace): its tensor goes by reference
// from where it lies, with no copy and no second slot.
TEST_F(HandoffRequestTest, InputAlreadyInThePoolGoesFromWhereItLies) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  std::shared_ptr<shm::HandoffPool> pool = h.readyPool();
  std::shared_ptr<shm::HandoffPool::Slot> body = pool->allocate(8192);
  ASSERT_NE(body, nullptr);
  std::memset(body->data(), 5, 8192);
  codecs::InferRequest request = identityRequest(4096, 0);
  request.inputs[0].data = codecs::Buffer(body, body->data() + 100, 4096);
  std::weak_ptr<shm::HandoffPool::Slot> held = body;
  body.reset();  // the request's buffer holds it now
  auto r = make(std::move(request));
  auto attempt = r->forEndpoint(endpoint_);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  const codecs::InferInput& in = (*attempt)->inputs[0];
  ASSERT_TRUE(in.shared_memory.has_value());
  EXPECT_EQ(in.shared_memory->region, h.poolName());
  EXPECT_EQ(in.shared_memory->offset, held.lock()->offset() + 100);
  EXPECT_EQ(in.shared_memory->byte_size, 4096u);
  EXPECT_TRUE(in.data.empty());
  EXPECT_EQ(pool->slotsInUse(), 1u) << "no slot of its own";
  EXPECT_EQ(h.counters().pool_bytes_in, 4096u);
  EXPECT_EQ(h.counters().pool_bytes_in_place, 4096u);
  // The slot lives as long as the request.
  r.reset();
  EXPECT_TRUE(held.expired());
  EXPECT_EQ(pool->slotsInUse(), 0u);

  // Bytes outside the pool are copied into a slot of their own.
  auto copied = make(identityRequest(4096, 6));
  ASSERT_TRUE(copied->forEndpoint(endpoint_).ok());
  EXPECT_EQ(pool->slotsInUse(), 1u);
  EXPECT_EQ(h.counters().pool_bytes_in, 8192u);
  EXPECT_EQ(h.counters().pool_bytes_in_place, 4096u);
}

TEST_F(HandoffRequestTest, LearnedOutputIsAskedIntoASlotAndReadBackAsAView) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  h.learnOutputSize("identity_int8", "OUTPUT0", 2048);
  auto request = make(identityRequest(4096, 3));
  auto attempt = request->forEndpoint(endpoint_);
  ASSERT_TRUE(attempt.ok());
  const codecs::RequestedOutput& out = (*attempt)->outputs[0];
  ASSERT_TRUE(out.shared_memory.has_value());
  EXPECT_EQ(out.shared_memory->region, h.poolName());
  // At least the biggest input: an identity answer of 4096 bytes fits.
  EXPECT_EQ(out.shared_memory->byte_size, 4096u);
  // The upstream writes its output into the slot and answers without data.
  uint8_t* slot = h.readyPool()->hostData() + out.shared_memory->offset;
  std::memset(slot, 9, 4096);
  codecs::InferResponse response = answer(4096);
  ASSERT_TRUE(request->finish(response).ok());
  ASSERT_EQ(response.outputs[0].data.size(), 4096u);
  EXPECT_EQ(response.outputs[0].data.data(), slot) << "a view of the slot, not a copy";
  EXPECT_FALSE(response.outputs[0].shared_memory.has_value());
  EXPECT_EQ(h.counters().pool_bytes_out, 4096u);
}

TEST_F(HandoffRequestTest, OutputThatOutgrewItsSlotIsRetriedInlineOnceAndLearned) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  h.learnOutputSize("identity_int8", "OUTPUT0", 4096);
  auto request = make(identityRequest(2048, 5));
  ASSERT_TRUE(request->forEndpoint(endpoint_).ok());
  codecs::Status refused = codecs::internalError(
      "shared memory size specified with the request for output 'OUTPUT0' (4096 bytes) should "
      "be at least 9000 bytes to hold the results");
  EXPECT_TRUE(request->retryInline(refused));
  EXPECT_EQ(h.outputSize("identity_int8", "OUTPUT0"), std::optional<uint64_t>(9000));
  EXPECT_EQ(h.counters().inline_retries, 1u);
  // The retry takes no reference, and counts its bytes as inline.
  auto retry = request->forEndpoint(endpoint_);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE((*retry)->inputs[0].shared_memory.has_value());
  EXPECT_FALSE((*retry)->outputs[0].shared_memory.has_value());
  EXPECT_EQ(h.counters().inline_bytes, 2048u);
  EXPECT_EQ(h.readyPool()->slotsInUse(), 0u) << "the first attempt's slots went back";
  // Only once.
  EXPECT_FALSE(request->retryInline(refused));
}

TEST_F(HandoffRequestTest, LostRegistrationIsRetriedInlineAndForgottenButNotForSequences) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  const codecs::Status lost =
      absl::NotFoundError("Unable to find shared memory region: 'infergate_pool_1_0'");
  codecs::InferRequest in_sequence = identityRequest(4096, 1);
  in_sequence.parameters.set("sequence_id", int64_t{42});
  auto sequenced = make(in_sequence);
  ASSERT_TRUE(sequenced->forEndpoint(endpoint_).ok());
  EXPECT_FALSE(sequenced->retryInline(lost)) << "a sequence's state may have moved";
  EXPECT_EQ(h.readyPool(), nullptr) << "the registration is presumed lost all the same";

  h.poolRegistered(true, false, "");
  auto plain = make(identityRequest(4096, 1));
  ASSERT_TRUE(plain->forEndpoint(endpoint_).ok());
  EXPECT_TRUE(plain->retryInline(lost));
  // Errors that are not about a reference are the upstream's answer, not retried.
  auto other = make(identityRequest(4096, 1));
  h.poolRegistered(true, false, "");
  ASSERT_TRUE(other->forEndpoint(endpoint_).ok());
  EXPECT_FALSE(other->retryInline(absl::InvalidArgumentError("unexpected shape for input")));
}

TEST_F(HandoffRequestTest, FullPoolSendsInline) {
  upstream::EndpointHandoff& h = *endpoint_.handoff();
  auto hog = h.readyPool()->allocate((1 << 20) - 1024);
  ASSERT_NE(hog, nullptr);
  auto request = make(identityRequest(4096, 2));
  auto attempt = request->forEndpoint(endpoint_);
  ASSERT_TRUE(attempt.ok());
  EXPECT_FALSE((*attempt)->inputs[0].shared_memory.has_value());
  EXPECT_EQ((*attempt)->inputs[0].data.size(), 4096u);
  EXPECT_EQ(h.counters().pool_full, 1u);
}

}  // namespace
}  // namespace infergate::gateway
