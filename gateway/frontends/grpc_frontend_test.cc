// The gRPC frontend against a real channel and the generated stub: every RPC, the raw
// infer paths, streaming, compression, deadlines and cancellation.

#include "gateway/frontends/grpc_frontend.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "codecs/status.h"
#include "gateway/frontends/grpc_frontend_test_fixture.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

namespace infergate::gateway::frontends {
namespace {

using namespace testing_grpc;  // NOLINT(google-build-using-namespace)


TEST_P(GrpcFrontendTest, BindsAnEphemeralPortAndReportsIt) {
  EXPECT_GT(frontend_->port(), 0);
  EXPECT_EQ(address_, "127.0.0.1:" + std::to_string(frontend_->port()));
  EXPECT_EQ(frontend_->start("127.0.0.1:0").status().code(), absl::StatusCode::kFailedPrecondition);
  GrpcFrontend second(router_, settings_, ServerInfo{}, health_, *pool_, {});
  EXPECT_EQ(second.start(address_).status().code(), absl::StatusCode::kUnavailable);
}

TEST_P(GrpcFrontendTest, ServerLiveReadyAndMetadata) {
  ::grpc::ClientContext c1, c2, c3;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse meta;
  ASSERT_TRUE(stub_->ServerMetadata(&c3, {}, &meta).ok());
  EXPECT_EQ(meta.name(), "infergate");
  EXPECT_EQ(meta.version(), INFERGATE_VERSION_STRING);
  EXPECT_EQ(meta.extensions_size(), static_cast<int>(ServerInfo{}.extensions.size()));

  health_->ready = false;
  ::grpc::ClientContext c4;
  ASSERT_TRUE(stub_->ServerReady(&c4, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
}

TEST_P(GrpcFrontendTest, HealthCheckFollowsReadinessAndWatchIsUnimplemented) {
  auto health = ::grpc::health::v1::Health::NewStub(channel_);
  ::grpc::health::v1::HealthCheckResponse response;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(health->Check(&ctx, {}, &response).ok());
    EXPECT_EQ(response.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
  }
  health_->ready = false;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(health->Check(&ctx, {}, &response).ok());
    EXPECT_EQ(response.status(), ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  ::grpc::ClientContext ctx;
  auto watch = health->Watch(&ctx, {});
  EXPECT_FALSE(watch->Read(&response));
  EXPECT_EQ(watch->Finish().error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
}

TEST_P(GrpcFrontendTest, ModelReadyAnswersPerModel) {
  inference::ModelReadyRequest request;
  inference::ModelReadyResponse response;
  request.set_name("simple");
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ModelReady(&ctx, request, &response).ok());
    EXPECT_TRUE(response.ready());
  }
  request.set_name("nope");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->ModelReady(&ctx, request, &response).error_code(),
              ::grpc::StatusCode::NOT_FOUND);
  }
  ASSERT_TRUE(repository_->unload("simple").ok());
  request.set_name("simple");
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ModelReady(&ctx, request, &response).ok());
    EXPECT_FALSE(response.ready());
  }
}

TEST_P(GrpcFrontendTest, ModelMetadataConfigAndStatistics) {
  inference::ModelMetadataRequest mreq;
  mreq.set_name("simple");
  inference::ModelMetadataResponse meta;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ModelMetadata(&ctx, mreq, &meta).ok());
  }
  EXPECT_EQ(meta.name(), "simple");
  ASSERT_EQ(meta.inputs_size(), 2);
  EXPECT_EQ(meta.inputs(0).datatype(), "INT32");
  ASSERT_EQ(meta.inputs(0).shape_size(), 2);
  EXPECT_EQ(meta.inputs(0).shape(0), -1);
  EXPECT_EQ(meta.inputs(0).shape(1), 16);
  mreq.set_name("nope");
  {
    ::grpc::ClientContext ctx;
    ::grpc::Status s = stub_->ModelMetadata(&ctx, mreq, &meta);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "Request for unknown model: 'nope' is not found");
  }

  inference::ModelConfigRequest creq;
  creq.set_name("simple");
  inference::ModelConfigResponse config;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ModelConfig(&ctx, creq, &config).ok());
  }
  EXPECT_EQ(config.config().name(), "simple");
  EXPECT_EQ(config.config().max_batch_size(), 8);

  ModelInferResponse out;
  ASSERT_TRUE(infer(simpleRequest(), &out).ok());
  inference::ModelStatisticsRequest sreq;
  sreq.set_name("simple");
  inference::ModelStatisticsResponse stats;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ModelStatistics(&ctx, sreq, &stats).ok());
  }
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 1u);
  sreq.set_name("nope");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->ModelStatistics(&ctx, sreq, &stats).error_code(),
              ::grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_P(GrpcFrontendTest, RepositoryIndexLoadAndUnload) {
  inference::RepositoryIndexResponse index;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, {}, &index).ok());
  }
  EXPECT_GT(index.models_size(), 5);
  {
    ::grpc::ClientContext ctx;
    inference::RepositoryIndexRequest named;
    named.set_repository_name("models");
    ::grpc::Status s = stub_->RepositoryIndex(&ctx, named, &index);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_EQ(s.error_message(), "'repository_name' specification is not supported");
  }

  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("simple");
  (*unload.mutable_parameters())["unload_dependents"].set_bool_param(false);
  inference::RepositoryModelUnloadResponse unloaded;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->RepositoryModelUnload(&ctx, unload, &unloaded).ok());
  }
  ModelInferResponse out;
  EXPECT_FALSE(infer(simpleRequest(), &out).ok());
  {
    ::grpc::ClientContext ctx;
    inference::RepositoryIndexRequest ready_only;
    ready_only.set_ready(true);
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, ready_only, &index).ok());
    for (const auto& m : index.models()) EXPECT_NE(m.name(), "simple");
  }
  (*unload.mutable_parameters())["unload_dependents"].set_string_param("yes");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->RepositoryModelUnload(&ctx, unload, &unloaded).error_code(),
              ::grpc::StatusCode::INVALID_ARGUMENT);
  }

  inference::RepositoryModelLoadRequest load;
  load.set_model_name("simple");
  inference::RepositoryModelLoadResponse loaded;
  (*load.mutable_parameters())["config"].set_int64_param(1);
  {
    ::grpc::ClientContext ctx;
    ::grpc::Status s = stub_->RepositoryModelLoad(&ctx, load, &loaded);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(),
              "invalid value type for load parameter 'config', expected string_param.");
  }
  load.mutable_parameters()->clear();
  (*load.mutable_parameters())["colour"].set_string_param("blue");
  {
    ::grpc::ClientContext ctx;
    ::grpc::Status s = stub_->RepositoryModelLoad(&ctx, load, &loaded);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "unrecognized load parameter 'colour'.");
  }
  load.mutable_parameters()->clear();
  (*load.mutable_parameters())["file:1/model.onnx"].set_string_param("x");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->RepositoryModelLoad(&ctx, load, &loaded).error_code(),
              ::grpc::StatusCode::INVALID_ARGUMENT);
  }
  load.mutable_parameters()->clear();
  (*load.mutable_parameters())["config"].set_string_param(R"({"name":"simple"})");
  {
    ::grpc::ClientContext ctx;
    ::grpc::Status s = stub_->RepositoryModelLoad(&ctx, load, &loaded);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_TRUE(infer(simpleRequest(), &out).ok());
}

TEST_P(GrpcFrontendTest, ClientSharedMemoryIsDisabled) {
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusResponse status;
    ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, {}, &status).ok());
    EXPECT_TRUE(status.regions().empty());
  }
  {
    ::grpc::ClientContext ctx;
    inference::CudaSharedMemoryStatusResponse status;
    ASSERT_TRUE(stub_->CudaSharedMemoryStatus(&ctx, {}, &status).ok());
    EXPECT_TRUE(status.regions().empty());
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusRequest named;
    named.set_name("r0");
    inference::SystemSharedMemoryStatusResponse status;
    ::grpc::Status s = stub_->SystemSharedMemoryStatus(&ctx, named, &status);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "Unable to find system shared memory region: 'r0'");
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest reg;
    reg.set_name("r0");
    reg.set_key("/infergate_r0");
    reg.set_byte_size(64);
    inference::SystemSharedMemoryRegisterResponse out;
    ::grpc::Status s = stub_->SystemSharedMemoryRegister(&ctx, reg, &out);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(s.error_message().find("gateway's configuration"), std::string::npos);
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterResponse out;
    EXPECT_EQ(stub_->SystemSharedMemoryUnregister(&ctx, {}, &out).error_code(),
              ::grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    ::grpc::ClientContext ctx;
    inference::CudaSharedMemoryRegisterResponse out;
    EXPECT_EQ(stub_->CudaSharedMemoryRegister(&ctx, {}, &out).error_code(),
              ::grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    ::grpc::ClientContext ctx;
    inference::CudaSharedMemoryUnregisterResponse out;
    EXPECT_EQ(stub_->CudaSharedMemoryUnregister(&ctx, {}, &out).error_code(),
              ::grpc::StatusCode::UNIMPLEMENTED);
  }
  // An inference naming a region is refused clearly.
  ModelInferRequest request;
  request.set_model_name("identity_fp32");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(4);
  (*in->mutable_parameters())["shared_memory_region"].set_string_param("r0");
  (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  ModelInferResponse response;
  ::grpc::Status s = infer(request, &response);
  // Disabled, like registration: UNIMPLEMENTED, saying which key enables it.
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("shared-memory region 'r0'"), std::string::npos);
  EXPECT_NE(s.error_message().find("shm.enabled"), std::string::npos);
}

TEST_P(GrpcFrontendTest, ModelInferAddsAndSubtracts) {
  ModelInferResponse response;
  ::grpc::Status s = infer(simpleRequest("req-1"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_name(), "simple");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "req-1");
  EXPECT_TRUE(response.parameters().empty());  // no triton_final_response on unary
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  auto sum = valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"));
  auto diff = valuesOf<int32_t>(*outputBytes(response, "OUTPUT1"));
  ASSERT_EQ(sum.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(sum[i], i + 1);
    EXPECT_EQ(diff[i], i - 1);
  }
}

TEST_P(GrpcFrontendTest, ModelInferErrors) {
  ModelInferResponse response;
  ModelInferRequest unknown = simpleRequest();
  unknown.set_model_name("nope");
  ::grpc::Status s = infer(unknown, &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Request for unknown model: 'nope' is not found");

  ModelInferRequest bad_shape = simpleRequest();
  bad_shape.mutable_inputs(0)->set_shape(1, 15);
  bad_shape.set_raw_input_contents(0, std::string(60, '\0'));
  s = infer(bad_shape, &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("unexpected shape for input 'INPUT0'"), std::string::npos);

  s = infer(repeatRequest({1, 2}, false), &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(s.error_message(),
            "ModelInfer RPC doesn't support models with decoupled transaction policy");

  ModelInferRequest malformed = simpleRequest();
  malformed.mutable_inputs(0)->set_datatype("FLOAT32");
  s = infer(malformed, &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_P(GrpcFrontendTest, UndecodableMessagesAreInvalidArgument) {
  ::grpc::GenericStub generic(channel_);
  ::grpc::Slice junk(std::string("\xff\xff\xff\xff", 4));
  ::grpc::ByteBuffer request(&junk, 1), response;
  ::grpc::ClientContext ctx;
  std::promise<::grpc::Status> done;
  generic.UnaryCall(&ctx, "/inference.GRPCInferenceService/ModelInfer", ::grpc::StubOptions(),
                    &request, &response, [&](::grpc::Status s) { done.set_value(s); });
  EXPECT_EQ(done.get_future().get().error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);

  // Well-formed protobuf that the decoder refuses: on a stream, in-band with its id.
  ModelInferRequest mixed = simpleRequest("mixed");
  mixed.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  ::grpc::ClientContext sctx;
  auto stream = stub_->ModelStreamInfer(&sctx);
  ASSERT_TRUE(stream->Write(mixed));
  ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.error_message().empty());
  EXPECT_EQ(r.infer_response().id(), "mixed");
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GrpcFrontendTest, ServesManyConcurrentCallsAndStreams) {
  constexpr int kThreads = 4, kCalls = 10;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        ModelInferResponse response;
        ::grpc::ClientContext ctx;
        std::string id = std::to_string(t) + "-" + std::to_string(i);
        if (stub_->ModelInfer(&ctx, simpleRequest(id), &response).ok() && response.id() == id) {
          ++good;
        }
      }
      ::grpc::ClientContext ctx;
      auto stream = stub_->ModelStreamInfer(&ctx);
      for (int i = 0; i < kCalls; ++i) {
        stream->Write(i % 2 == 0 ? simpleRequest(std::to_string(i))
                                 : repeatRequest({i, i}, /*empty_final=*/false));
      }
      stream->WritesDone();
      ModelStreamInferResponse r;
      int responses = 0;
      while (stream->Read(&r)) responses += r.error_message().empty() ? 1 : 0;
      if (stream->Finish().ok() && responses == kCalls / 2 + kCalls) ++good;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), kThreads * (kCalls + 1));
}

TEST_P(GrpcFrontendTest, IdentityRoundTripsFourMebibytes) {
  constexpr int64_t kElements = 1 << 20;  // 4 MiB of FP32
  std::vector<float> values(kElements);
  for (int64_t i = 0; i < kElements; ++i) values[i] = static_cast<float>(i) * 0.5f;
  const ModelInferRequest request = identityRequest(values);
  ModelInferResponse response;
  ::grpc::Status s = infer(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0), request.raw_input_contents(0));
}

TEST_P(GrpcFrontendTest, AcceptsCompressedCalls) {
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    ::grpc::ClientContext ctx;
    ctx.set_compression_algorithm(algorithm);
    ModelInferResponse response;
    ::grpc::Status s = stub_->ModelInfer(&ctx, simpleRequest("z"), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[3], 4);
  }
}

TEST_P(GrpcFrontendTest, StreamRepeatsWithIndicesAndAFinalFlag) {
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(repeatRequest({10, 20, 30}, /*empty_final=*/true)));
  ModelStreamInferResponse r;
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_TRUE(r.error_message().empty()) << r.error_message();
    const ModelInferResponse& ir = r.infer_response();
    EXPECT_EQ(ir.id(), "rep");
    EXPECT_EQ(valuesOf<uint32_t>(*outputBytes(ir, "IDX")), std::vector<uint32_t>{i});
    EXPECT_EQ(valuesOf<int32_t>(*outputBytes(ir, "OUT")),
              std::vector<int32_t>{static_cast<int32_t>(10 * (i + 1))});
    ASSERT_EQ(ir.parameters().count("triton_final_response"), 1u);
    EXPECT_FALSE(finalFlag(ir));
  }
  ASSERT_TRUE(stream->Read(&r));  // the empty final response asked for
  EXPECT_EQ(r.infer_response().outputs_size(), 0);
  EXPECT_TRUE(finalFlag(r.infer_response()));
  // Without the flag: N responses, completion sends nothing.
  ASSERT_TRUE(stream->Write(repeatRequest({7, 8}, /*empty_final=*/false)));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_FALSE(finalFlag(r.infer_response()));
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&r));
  ::grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_P(GrpcFrontendTest, StreamReportsErrorsInBandAndCarriesOn) {
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ModelInferRequest unknown = simpleRequest("bad");
  unknown.set_model_name("nope");
  ASSERT_TRUE(stream->Write(unknown));
  ASSERT_TRUE(stream->Write(simpleRequest("good")));
  ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.error_message(), "Request for unknown model: 'nope' is not found");
  EXPECT_EQ(r.infer_response().id(), "bad");
  EXPECT_TRUE(r.infer_response().parameters().empty());  // raised before the model
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(r.error_message().empty());
  EXPECT_EQ(r.infer_response().id(), "good");
  EXPECT_TRUE(finalFlag(r.infer_response()));
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(r.infer_response(), "OUTPUT1"))[0], -1);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GrpcFrontendTest, StreamAnswersNonDecoupledRequestsInRequestOrder) {
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(sleepRequest(80, "slow")));
  ASSERT_TRUE(stream->Write(simpleRequest("fast")));
  ASSERT_TRUE(stream->WritesDone());
  ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "slow");
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "fast");
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GrpcFrontendTest, StreamPausesReadingAtItsInFlightCap) {
  stopServer();
  GrpcFrontendOptions options;
  options.max_stream_requests_in_flight = 1;
  startServer(2, options);
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(stream->Write(sleepRequest(5, std::to_string(i))));
  ASSERT_TRUE(stream->WritesDone());
  ModelStreamInferResponse r;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(r.infer_response().id(), std::to_string(i));
  }
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GrpcFrontendTest, AStreamsRequestsInFlightAreBoundedInBytes) {
  // 200 requests of 1 MiB that each sleep 10 s: far under the count cap (1,024), but once
  // 64 MiB are in flight the stream reads no more, and the client's writes wait in its own
  // transport. Without the bound all 200 (200 MiB) are taken and held. The flood settles
  // (or 9 s pass) before the first sleep ends, so no request has left meanwhile: a slow
  // machine (grpc++ under ASan pushes 1 MiB writes slowly) waits longer, not counts fewer.
  const int taken =
      floodStream(*stub_, 200, 9s, [](int i) { return paddedSleepRequest(i, 1024 * 1024, 10000); });
  // 64 in flight, plus what the windows and sockets between hold.
  EXPECT_GT(taken, 32);
  EXPECT_LT(taken, 150) << taken;
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

TEST_P(GrpcFrontendTest, AStreamWhoseAnswersAreNotReadStopsTakingRequests) {
  // 64 requests of 1 MiB, each answered with 1 MiB, from a client that never reads: once
  // about 4 MiB of answers wait, the stream reads no more requests, and the client's
  // writes wait in its own transport. Without that, all 64 run and their answers pile up.
  const ModelInferRequest request = identityRequest(std::vector<float>(256 * 1024, 1.5f));
  const int taken = floodStream(*stub_, 64, 1500ms, [&](int) { return request; });
  // Counted once the stream is cancelled: it read no request after that.
  auto stats = repository_->statisticsProto("identity_fp32", "");
  ASSERT_TRUE(stats.ok()) << stats.status();
  const uint64_t ran = stats->model_stats_size() > 0 ? stats->model_stats(0).inference_count() : 0;
  EXPECT_GT(ran, 0u);
  EXPECT_LT(ran, 48u) << taken << " written";
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

TEST_P(GrpcFrontendTest, StreamWithTritonGrpcErrorEndsOnTheFirstError) {
  ::grpc::ClientContext ctx;
  ctx.AddMetadata("triton_grpc_error", "true");
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(simpleRequest("ok")));
  ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "ok");
  ModelInferRequest bad = simpleRequest("bad");
  bad.mutable_inputs(0)->set_shape(1, 15);
  bad.set_raw_input_contents(0, std::string(60, '\0'));
  stream->Write(bad);
  EXPECT_FALSE(stream->Read(&r));
  ::grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("unexpected shape"), std::string::npos);
}

TEST_P(GrpcFrontendTest, TraceAndLogSettingsRoundTrip) {
  inference::TraceSettingRequest set;
  (*set.mutable_settings())["trace_level"].add_value("TIMESTAMPS");
  (*set.mutable_settings())["trace_rate"].add_value("10");
  inference::TraceSettingResponse trace;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->TraceSetting(&ctx, set, &trace).ok());
  }
  EXPECT_EQ(trace.settings().at("trace_level").value(0), "TIMESTAMPS");
  EXPECT_EQ(trace.settings().at("trace_rate").value(0), "10");
  inference::TraceSettingRequest model;
  model.set_model_name("simple");
  (*model.mutable_settings())["trace_count"].add_value("3");
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->TraceSetting(&ctx, model, &trace).ok());
  }
  EXPECT_EQ(trace.settings().at("trace_count").value(0), "3");
  EXPECT_EQ(trace.settings().at("trace_rate").value(0), "10");
  EXPECT_EQ(settings_->traceJson("").value().find(R"("trace_count":"-1")") != std::string::npos,
            true);
  model.set_model_name("nope");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->TraceSetting(&ctx, model, &trace).error_code(), ::grpc::StatusCode::NOT_FOUND);
  }
  inference::TraceSettingRequest file;
  (*file.mutable_settings())["trace_file"].add_value("/tmp/t");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->TraceSetting(&ctx, file, &trace).error_code(),
              ::grpc::StatusCode::UNIMPLEMENTED);
  }

  inference::LogSettingsRequest log;
  (*log.mutable_settings())["log_verbose_level"].set_uint32_param(1);
  inference::LogSettingsResponse logged;
  {
    ::grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->LogSettings(&ctx, log, &logged).ok());
  }
  EXPECT_EQ(logged.settings().at("log_verbose_level").uint32_param(), 1u);
  EXPECT_TRUE(logged.settings().at("log_info").bool_param());
  (*log.mutable_settings())["log_format"].set_string_param("json");
  {
    ::grpc::ClientContext ctx;
    EXPECT_EQ(stub_->LogSettings(&ctx, log, &logged).error_code(),
              ::grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_P(GrpcFrontendTest, RestrictedProtocolsNeedTheirHeader) {
  stopServer();
  GrpcFrontendOptions options;
  options.restricted["inference"] = {"infer-key", "secret"};
  startServer(1, options);
  ModelInferResponse response;
  {
    ::grpc::ClientContext ctx;
    ::grpc::Status s = stub_->ModelInfer(&ctx, simpleRequest(), &response);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(),
              "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'");
  }
  {
    ::grpc::ClientContext ctx;
    auto stream = stub_->ModelStreamInfer(&ctx);
    ModelStreamInferResponse r;
    EXPECT_FALSE(stream->Read(&r));
    EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::UNAVAILABLE);
  }
  {
    ::grpc::ClientContext ctx;
    ctx.AddMetadata("triton-grpc-protocol-infer-key", "secret");
    EXPECT_TRUE(stub_->ModelInfer(&ctx, simpleRequest(), &response).ok());
  }
  ::grpc::ClientContext ctx;  // other categories stay open
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
}

TEST_P(GrpcFrontendTest, ServesOnAUnixSocket) {
  stopServer();
  std::string path =
      ::testing::TempDir() + "infergate_grpc_" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  startServer(1, {}, "unix:" + path);
  EXPECT_EQ(address_, "unix:" + path);
  EXPECT_EQ(frontend_->port(), 0);
  ::grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
  stopServer();
  ::unlink(path.c_str());
}

// One loop, so that the follow-up sleep ends after the abandoned one: the cancelled
// runner's timer has then fired and nothing is pending when the pool stops.
TEST_P(GrpcFrontendTest, DeadlinesAndCancellationStopTheCall) {
  stopServer();
  startServer(1, {});
  {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 50ms);
    ModelInferResponse response;
    EXPECT_EQ(stub_->ModelInfer(&ctx, sleepRequest(300), &response).error_code(),
              ::grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  {
    ::grpc::ClientContext ctx;
    auto stream = stub_->ModelStreamInfer(&ctx);
    ASSERT_TRUE(stream->Write(sleepRequest(300, "s")));
    ctx.TryCancel();
    ModelStreamInferResponse r;
    EXPECT_FALSE(stream->Read(&r));
    EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  }
  ModelInferResponse response;
  ASSERT_TRUE(infer(sleepRequest(300), &response).ok());
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[0], 300);
}

INSTANTIATE_TEST_SUITE_P(Engines, GrpcFrontendTest,
                         ::testing::Values(GrpcServerEngine::kNative, GrpcServerEngine::kGrpcpp), engineName);

}  // namespace
}  // namespace infergate::gateway::frontends
