// ModelStreamInfer toward a gRPC upstream (the gateway's streams then travel on legs, one
// upstream stream per endpoint): what a stream holds when the client writes faster than
// the upstream takes, or reads slower than the upstream answers. Both server engines,
// against a real upstream gateway on loopback.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "codecs/status.h"
#include "config/config_loader.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/frontends/grpc_frontend_test_fixture.h"
#include "gateway/upstream/fleet.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::frontends {
namespace {

using namespace testing_grpc;  // NOLINT(google-build-using-namespace)

// The gateway in front of a gRPC upstream of the test's (every model routed to it), in
// place of the fixture's: a stream's requests then travel on legs. The engine is the
// test's.
class GrpcFrontendLegTest : public GrpcFrontendTest {
 protected:
  void frontGrpcUpstream(const upstream::testing::GrpcTestUpstream& up) {
    stopServer();
    pool_ = std::make_unique<http::WorkerPool>(2);
    pool_->start();
    auto config = config::parseConfig(codecs::strCat(R"(listeners: { grpc: { address: "127.0.0.1:0" } }
upstreams: [{ name: up, protocol: grpc, endpoints: ["127.0.0.1:)", up.port(), R"("] }]
routes: [{ match: { model: "*" }, upstream: up }]
)"),
                                      "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    auto router = Router::create(*config, *pool_);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    repository_ = builtin::ModelRepository::createDemo();
    settings_ = std::make_shared<SettingsStore>(repositoryModelCheck(repository_));
    health_ = std::make_shared<ServerHealth>();
    GrpcFrontendOptions options;
    options.engine = GetParam();
    frontend_ = std::make_unique<GrpcFrontend>(router_, settings_, ServerInfo{}, health_, *pool_, options);
    auto bound = frontend_->start("127.0.0.1:0");
    ASSERT_TRUE(bound.ok()) << bound.status();
    channel_ = ::grpc::CreateChannel(*bound, ::grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  // A test that stopped early (a failed ASSERT) stops here, before the fixture's own
  // stopServer() takes the loops away under the upstream clients.
  void TearDown() override {
    if (router_ != nullptr && frontend_ != nullptr) stopFrontingGrpcUpstream();
    GrpcFrontendTest::TearDown();
  }

  // As the gateway stops: the upstream clients let go of the loops before they go.
  void stopFrontingGrpcUpstream() {
    stub_.reset();
    channel_.reset();
    frontend_->shutdown(100ms);
    frontend_.reset();
    router_->shutdown();
    pool_->stop();
    router_->abandonHttp();
    router_.reset();
    upstream::Housekeeper::instance().drain();
  }
};
INSTANTIATE_TEST_SUITE_P(Engines, GrpcFrontendLegTest,
                         ::testing::Values(GrpcServerEngine::kNative, GrpcServerEngine::kGrpcpp), engineName);

TEST_P(GrpcFrontendLegTest, AStreamFloodingAnUpstreamLegStopsAtTheLegsBacklog) {
  // The stream's requests go on a stream to a gRPC upstream that takes one at a time and
  // sleeps 3 s on each: once 4 MiB wait for that upstream, the gateway reads no more of the
  // client's requests, and the client's writes wait in its own transport. Without that,
  // the gateway reads all 200 (50 MiB) and queues them toward the upstream.
  GrpcFrontendOptions upstream_options;
  upstream_options.max_stream_requests_in_flight = 1;
  upstream::testing::GrpcTestUpstream up("127.0.0.1:0", upstream_options);
  frontGrpcUpstream(up);
  const int taken = floodStream(*stub_, 200, 1500ms, [](int i) { return paddedSleepRequest(i, 256 * 1024); });
  EXPECT_GT(taken, 2);
  EXPECT_LT(taken, 160) << taken;
  stopFrontingGrpcUpstream();
}

TEST_P(GrpcFrontendLegTest, ALegsAnswersWaitUpstreamWhileTheClientDoesNotRead) {
  // On a stream to a gRPC upstream, a request that sleeps 1 s, then 40 requests of 1 MiB
  // each answered with 1 MiB, from a client that reads nothing at first. The gateway takes
  // them all (nothing is answered yet); the upstream answers in order, so the 40 MiB come
  // at once after the sleep. The gateway stops reading the leg once 4 MiB of answers wait
  // for the client; the rest wait in the transport and the upstream. Without that, it reads
  // all 40 MiB and holds them. Then the client reads: every answer arrives, in order.
  upstream::testing::GrpcTestUpstream up;
  frontGrpcUpstream(up);
  constexpr int kRequests = 40;
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  std::thread writer([&] {
    if (!stream->Write(sleepRequest(1000, "slow"))) return;
    std::vector<float> values(256 * 1024);
    for (int i = 0; i < kRequests; ++i) {
      std::fill(values.begin(), values.end(), static_cast<float>(i));
      if (!stream->Write(identityRequest(values, std::to_string(i)))) return;
    }
    stream->WritesDone();
  });
  uint64_t most = 0;
  for (auto until = std::chrono::steady_clock::now() + 2500ms; std::chrono::steady_clock::now() < until;) {
    most = std::max(most, frontend_->streamAnswerBytes());
    if (most > (8u << 20)) break;
    std::this_thread::sleep_for(10ms);
  }
  // With the pause 4-5 MiB were seen (4 MiB, plus the message that crossed it), without it
  // 14.5-17 MiB.
  EXPECT_GT(most, 1u << 20);  // answers did wait for the client
  EXPECT_LT(most, 8u << 20) << most;
  ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "slow");
  int read = 0;
  while (read < kRequests && stream->Read(&r)) {
    EXPECT_EQ(r.infer_response().id(), std::to_string(read));
    ASSERT_EQ(r.infer_response().raw_output_contents_size(), 1);
    EXPECT_EQ(valuesOf<float>(r.infer_response().raw_output_contents(0))[0], static_cast<float>(read));
    ++read;
  }
  writer.join();
  EXPECT_EQ(read, kRequests);
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(frontend_->streamAnswerBytes(), 0u);
  stopFrontingGrpcUpstream();
}

TEST_P(GrpcFrontendLegTest, AClientThatCancelsWhileItsLegsArePausedEndsEverything) {
  // As above, but the client cancels while the legs are paused: the leg's owed read must
  // run (else its call never ends and the upstream client's shutdown waits for ever), and
  // the answers held for the client are let go.
  upstream::testing::GrpcTestUpstream up;
  frontGrpcUpstream(up);
  auto ctx = std::make_unique<::grpc::ClientContext>();
  auto stream = stub_->ModelStreamInfer(ctx.get());
  ASSERT_TRUE(stream->Write(sleepRequest(500, "slow")));
  std::vector<float> values(256 * 1024, 2.5f);
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(stream->Write(identityRequest(values, std::to_string(i))));
  bool held = false;
  for (auto until = std::chrono::steady_clock::now() + 10s; !held && std::chrono::steady_clock::now() < until;) {
    // The legs stop at 4 MiB counting what is still on its way to the loop, and stay stopped
    // while 2 MiB wait for the client. The bytes held here vary (what the client's transport
    // took is no longer counted): waiting for 3 MiB of them failed 1 run in 6-10, with the
    // legs paused at 2 MiB held. So the pause itself is waited for.
    held = frontend_->pausedStreams() == 1 && frontend_->streamAnswerBytes() >= (2u << 20);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(held) << frontend_->pausedStreams() << " paused, " << frontend_->streamAnswerBytes();
  ctx->TryCancel();
  ModelStreamInferResponse r;
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  bool released = false;
  for (auto until = std::chrono::steady_clock::now() + 10s; !released && std::chrono::steady_clock::now() < until;) {
    released = frontend_->streamAnswerBytes() == 0 && frontend_->pausedStreams() == 0;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(released) << frontend_->streamAnswerBytes() << " bytes, " << frontend_->pausedStreams() << " paused";
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
  stopFrontingGrpcUpstream();  // returns only once every leg call has ended
}

}  // namespace
}  // namespace infergate::gateway::frontends
