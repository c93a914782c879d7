// The calls over a fleet (fleet_call.h): retries of refused attempts against real
// upstreams on loopback (port 0), the project's gRPC frontend and HTTP server
// (upstream_test_servers.h), each next to a port nothing listens on; and how answers map
// to passive-health outcomes.
//
// No mocks and no sleeps as synchronisation: answers come through futures bounded by
// kWait.

#include "gateway/upstream/fleet_call.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/http/http_server.h"
#include "gateway/upstream/fleet.h"
#include "gateway/upstream/fleet_test_util.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using Policy = config::LoadBalancingConfig::Policy;
using testing::freePort;
using testing::GrpcTestUpstream;
using testing::HttpTestUpstream;
using testing::kWait;
using testing::LoopThread;
using testing::serialized;
using testing::tcp;
using testing::threeEndpoints;
using testing::contains;

constexpr char kServerLive[] = "/inference.GRPCInferenceService/ServerLive";

// =========================================================================================
// Retries over real upstreams
// =========================================================================================

struct UnaryResult {
  codecs::Status status;
  grpc::ByteBuffer answer;
};

UnaryResult callServerLive(const std::shared_ptr<UpstreamFleet>& fleet) {
  auto promise = std::make_shared<std::promise<UnaryResult>>();
  auto future = promise->get_future();
  fleetUnary(fleet, kServerLive, serialized(inference::ServerLiveRequest()), {}, PickContext{},
             [promise](codecs::Status status, grpc::ByteBuffer answer) {
               promise->set_value(UnaryResult{std::move(status), std::move(answer)});
             });
  if (future.wait_for(kWait) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within 30 s";
    return UnaryResult{absl::InternalError("test: no answer"), {}};
  }
  return future.get();
}

config::UpstreamConfig grpcPair(int refused_port, int good_port, uint32_t max_retries) {
  config::UpstreamConfig config;
  config.name = "up";
  config.protocol = config::UpstreamConfig::Protocol::kGrpc;
  config.endpoints = {tcp(refused_port), tcp(good_port)};
  config.channels = 1;
  config.load_balancing.policy = Policy::kRoundRobin;
  config.retry.max_retries = max_retries;
  return config;
}

TEST(FleetUnary, RefusedAttemptsAreRetriedOnTheOtherEndpoint) {
  GrpcTestUpstream up;
  const int refused = freePort();
  auto fleet = UpstreamFleet::create(grpcPair(refused, up.port(), 2), nullptr);
  std::shared_ptr<Endpoint> bad = fleet->findEndpoint(tcp(refused).text);
  std::shared_ptr<Endpoint> good = fleet->findEndpoint(tcp(up.port()).text);
  ASSERT_NE(bad, nullptr);
  ASSERT_NE(good, nullptr);
  ASSERT_NE(bad->grpc(), nullptr);
  for (int i = 0; i < 20; ++i) {
    UnaryResult r = callServerLive(fleet);
    ASSERT_TRUE(r.status.ok()) << "call " << i << ": " << r.status;
    inference::ServerLiveResponse live;
    auto flat = codecs::fromByteBuffer(r.answer);
    ASSERT_TRUE(flat.ok()) << flat.status();
    ASSERT_TRUE(live.ParseFromArray(flat->data(), static_cast<int>(flat->size())));
    EXPECT_TRUE(live.live());
  }
  EXPECT_GE(bad->counters().failures, 1u);
  EXPECT_EQ(bad->counters().failures, bad->counters().requests);
  EXPECT_EQ(good->counters().requests, 20u);
  EXPECT_EQ(good->counters().failures, 0u);
  EXPECT_GE(fleet->counters().retries, bad->counters().failures);
  EXPECT_EQ(fleet->counters().retries_refused, 0u);
  EXPECT_EQ(fleet->counters().in_flight, 0u);
  fleet.reset();
  Housekeeper::instance().drain();  // the endpoints' gRPC clients go on its thread
}

TEST(FleetUnary, WithoutRetriesRefusedAttemptsFailMarkedNotSent) {
  GrpcTestUpstream up;
  const int refused = freePort();
  config::UpstreamConfig config = grpcPair(refused, up.port(), 0);
  config.outlier.consecutive_failures = 0;  // the refused endpoint keeps its turns
  auto fleet = UpstreamFleet::create(config, nullptr);
  int failed = 0;
  for (int i = 0; i < 10; ++i) {
    UnaryResult r = callServerLive(fleet);
    if (r.status.ok()) continue;
    ++failed;
    EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
    EXPECT_TRUE(wasNotSent(r.status)) << r.status;
    EXPECT_EQ(contains(codecs::messageOf(r.status), tcp(refused).text), "");
    EXPECT_EQ(codecs::originOf(r.status), codecs::ErrorOrigin::kUpstream);
  }
  EXPECT_EQ(failed, 5);  // round robin: every other call on the refused endpoint
  EXPECT_EQ(fleet->counters().retries, 0u);
  EXPECT_EQ(fleet->findEndpoint(tcp(refused).text)->counters().failures, 5u);
  fleet.reset();
  Housekeeper::instance().drain();
}

// An answer ended OK that its caller cannot read (answer_ok false) counts against its
// endpoint before passive health hears of the attempt, as a broken frame would; it is
// delivered all the same. One the caller reads counts as the success it is.
TEST(FleetUnary, AnAnswerItsCallerCannotReadCountsAsAFailureOfItsEndpoint) {
  GrpcTestUpstream up;
  config::UpstreamConfig config = grpcPair(freePort(), up.port(), 0);
  config.endpoints = {tcp(up.port())};
  config.outlier.consecutive_failures = 0;  // counted, never ejected
  auto fleet = UpstreamFleet::create(config, nullptr);
  std::shared_ptr<Endpoint> endpoint = fleet->findEndpoint(tcp(up.port()).text);
  ASSERT_NE(endpoint, nullptr);
  for (const bool readable : {true, false, false, true}) {
    auto promise = std::make_shared<std::promise<UnaryResult>>();
    auto future = promise->get_future();
    GrpcCallOptions options;
    auto asked = std::make_shared<int>(0);
    options.answer_ok = [readable, asked](const codecs::MovableByteBuffer& answer) {
      ++*asked;
      return readable && answer.valid();
    };
    fleetUnary(fleet, kServerLive, serialized(inference::ServerLiveRequest()), std::move(options), PickContext{},
               [promise](codecs::Status status, grpc::ByteBuffer answer) {
                 promise->set_value(UnaryResult{std::move(status), std::move(answer)});
               });
    ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
    UnaryResult r = future.get();
    EXPECT_TRUE(r.status.ok()) << r.status;
    EXPECT_TRUE(r.answer.Valid()) << "the answer is delivered whatever its check said";
    EXPECT_EQ(*asked, 1);
  }
  EXPECT_EQ(endpoint->counters().requests, 4u);
  EXPECT_EQ(endpoint->counters().failures, 2u);
  fleet.reset();
  Housekeeper::instance().drain();
}

TEST(FleetUnary, GrpcNotSentRecognisesARefusedConnection) {
  config::UpstreamConfig config = grpcPair(freePort(), 1, 0);
  config.endpoints.resize(1);
  auto done = std::make_shared<std::promise<grpc::Status>>();
  auto future = done->get_future();
  GrpcUpstreamClient client(config);
  client.unary(kServerLive, serialized(inference::ServerLiveRequest()), {},
               [done](grpc::Status status, grpc::ByteBuffer) { done->set_value(std::move(status)); });
  ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
  grpc::Status status = future.get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(grpcNotSent(status)) << status.error_message();

  EXPECT_FALSE(grpcNotSent(grpc::Status::OK));
  EXPECT_FALSE(grpcNotSent(grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed")));
  EXPECT_FALSE(grpcNotSent(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                        "failed to connect to all addresses")));
  EXPECT_TRUE(grpcNotSent(grpc::Status(grpc::StatusCode::UNAVAILABLE, "upstream 'up' is shut down")));
}

TEST(FleetOutcomes, AnswersMapToPassiveHealthOutcomes) {
  EXPECT_EQ(outcomeOfGrpc(0), Outcome::kSuccess);
  EXPECT_EQ(outcomeOfGrpc(static_cast<int>(grpc::StatusCode::NOT_FOUND)), Outcome::kSuccess);
  EXPECT_EQ(outcomeOfGrpc(static_cast<int>(grpc::StatusCode::UNAVAILABLE)), Outcome::kFailure);
  EXPECT_EQ(outcomeOfGrpc(static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED)), Outcome::kNeutral);
  EXPECT_EQ(outcomeOfGrpc(static_cast<int>(grpc::StatusCode::CANCELLED)), Outcome::kNeutral);
  EXPECT_EQ(outcomeOfHttpStatus(200), Outcome::kSuccess);
  EXPECT_EQ(outcomeOfHttpStatus(404), Outcome::kSuccess);
  EXPECT_EQ(outcomeOfHttpStatus(503), Outcome::kFailure);
  EXPECT_EQ(outcomeOfError(absl::UnavailableError("x")), Outcome::kFailure);
  EXPECT_EQ(outcomeOfError(codecs::withOrigin(absl::InvalidArgumentError("garbage"),
                                              codecs::ErrorOrigin::kUpstream)),
            Outcome::kFailure);
  EXPECT_EQ(outcomeOfError(absl::DeadlineExceededError("late")), Outcome::kNeutral);
  EXPECT_EQ(outcomeOfError(absl::CancelledError("gone")), Outcome::kNeutral);
}

// The answer check is asked of each 200, before the lease ends: one its caller cannot
// read counts against the endpoint (as the gRPC calls' answer_ok does), and the answer is
// delivered all the same. Other statuses are passive health's by their code alone.
TEST(FleetHttp, A200ItsCallerCannotReadCountsAsAFailureOfItsEndpoint) {
  HttpTestUpstream server([](std::shared_ptr<http::HttpExchange> e) {
    http::HttpResponse r;
    if (e->request().target != "/ok") r.status = 404;
    r.body.append(codecs::Buffer::copyOf("hello"));
    e->respond(std::move(r));
  });
  auto bound = server.listenOnLoopback();
  ASSERT_TRUE(bound.ok()) << bound.status();
  server.start();
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.endpoints = {tcp(bound->port)};
  config.outlier.consecutive_failures = 0;  // counted, never ejected
  auto fleet = UpstreamFleet::create(config, nullptr);
  std::shared_ptr<Endpoint> endpoint = fleet->findEndpoint(tcp(bound->port).text);
  ASSERT_NE(endpoint, nullptr);

  LoopThread client_thread;
  std::shared_ptr<HttpUpstreamClient> client;
  client_thread.run([&] {
    client = std::make_shared<HttpUpstreamClient>(client_thread.loop(), HttpClientOptions{.upstream_name = "up"});
  });
  struct Case {
    const char* target;
    bool readable;
    int status;
    uint64_t failures;  // the endpoint's, once the answer is in
  };
  const Case cases[] = {{"/ok", true, 200, 0}, {"/ok", false, 200, 1}, {"/missing", false, 404, 1},
                        {"/ok", false, 200, 2}, {"/ok", true, 200, 2}};
  int asked = 0;
  for (const Case& c : cases) {
    auto promise = std::make_shared<std::promise<codecs::StatusOr<HttpUpstreamResponse>>>();
    auto future = promise->get_future();
    client_thread.run([&] {
      HttpUpstreamRequest request;
      request.method = "GET";
      request.target = c.target;
      HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [promise](codecs::StatusOr<HttpUpstreamResponse> r) {
        promise->set_value(std::move(r));
      };
      HttpAnswerCheck answer_ok = [&asked, readable = c.readable](const HttpUpstreamResponse& r) {
        ++asked;
        return readable && r.body.view() == "hello";
      };
      fleetHttp(fleet, client, client_thread.loop(), std::move(request), PickContext{}, std::move(callbacks),
                std::move(answer_ok));
    });
    ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
    codecs::StatusOr<HttpUpstreamResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << c.target << ": " << r.status();
    EXPECT_EQ(r->status, c.status) << c.target;
    EXPECT_EQ(r->body.view(), "hello") << "the answer is delivered whatever its check said";
    EXPECT_EQ(endpoint->counters().failures, c.failures) << "counted before the answer is handed on";
  }
  EXPECT_EQ(asked, 4) << "asked of each 200 once, never of the 404";
  EXPECT_EQ(endpoint->counters().requests, 5u);
  EXPECT_EQ(fleet->counters().in_flight, 0u);

  client_thread.run([&] { client.reset(); });
  server.stop();
}

TEST(FleetHttp, RefusedAttemptsAreRetriedOnTheOtherEndpoint) {
  HttpTestUpstream server([](std::shared_ptr<http::HttpExchange> e) {
    http::HttpResponse r;
    r.body.append(codecs::Buffer::copyOf("hello"));
    e->respond(std::move(r));
  });
  auto bound = server.listenOnLoopback();
  ASSERT_TRUE(bound.ok()) << bound.status();
  server.start();

  const int refused = freePort();
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.endpoints = {tcp(refused), tcp(bound->port)};
  config.retry.max_retries = 2;
  auto fleet = UpstreamFleet::create(config, nullptr);

  LoopThread client_thread;
  std::shared_ptr<HttpUpstreamClient> client;
  client_thread.run([&] {
    client = std::make_shared<HttpUpstreamClient>(client_thread.loop(),
                                                  HttpClientOptions{.upstream_name = "up"});
  });
  for (int i = 0; i < 10; ++i) {
    auto promise = std::make_shared<std::promise<codecs::StatusOr<HttpUpstreamResponse>>>();
    auto future = promise->get_future();
    client_thread.run([&] {
      HttpUpstreamRequest request;
      request.method = "GET";
      request.target = "/v2/health/ready";
      HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [promise](codecs::StatusOr<HttpUpstreamResponse> r) {
        promise->set_value(std::move(r));
      };
      fleetHttp(fleet, client, client_thread.loop(), std::move(request), PickContext{},
                std::move(callbacks));
    });
    ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
    codecs::StatusOr<HttpUpstreamResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.view(), "hello");
  }
  std::shared_ptr<Endpoint> bad = fleet->findEndpoint(tcp(refused).text);
  std::shared_ptr<Endpoint> good = fleet->findEndpoint(tcp(bound->port).text);
  EXPECT_GE(bad->counters().failures, 1u);
  EXPECT_EQ(good->counters().requests, 10u);
  EXPECT_GE(fleet->counters().retries, 1u);
  EXPECT_EQ(fleet->counters().in_flight, 0u);

  client_thread.run([&] { client.reset(); });
  server.stop();
}

}  // namespace
}  // namespace infergate::gateway::upstream
