#pragma once

// The gRPC frontend tests' fixture (grpc_frontend_test.cc, grpc_native_server_test.cc):
// a GrpcFrontend serving the builtin demo models on a WorkerPool, with a channel and the
// generated stub, once per server engine (the test's parameter). The requests are the
// gRPC tests' own (upstream/grpc_test_messages.h).

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gateway/frontends/grpc_frontend.h"
#include "gateway/upstream/grpc_test_messages.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::frontends::testing_grpc {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

using upstream::testing::messages::addInput;
using upstream::testing::messages::bytesOf;
using upstream::testing::messages::outputBytes;
using upstream::testing::messages::repeatRequest;
using upstream::testing::messages::simpleRequest;
using upstream::testing::messages::sleepRequest;
using upstream::testing::messages::valuesOf;

inline bool finalFlag(const ModelInferResponse& r) {
  auto it = r.parameters().find("triton_final_response");
  return it != r.parameters().end() && it->second.bool_param();
}

class GrpcFrontendTest : public ::testing::TestWithParam<GrpcServerEngine> {
 protected:
  void SetUp() override { startServer(2, {}); }

  void startServer(size_t loops, GrpcFrontendOptions options, std::string address = "127.0.0.1:0") {
    options.engine = GetParam();
    pool_ = std::make_unique<http::WorkerPool>(loops);
    pool_->start();
    repository_ = builtin::ModelRepository::createDemo();
    settings_ = std::make_shared<SettingsStore>(repositoryModelCheck(repository_));
    health_ = std::make_shared<ServerHealth>();
    health_->ready = true;
    router_ = Router::builtinOnly(repository_, *pool_);
    frontend_ = std::make_unique<GrpcFrontend>(router_, settings_, ServerInfo{}, health_,
                                               *pool_, std::move(options));
    auto bound = frontend_->start(address);
    ASSERT_TRUE(bound.ok()) << bound.status();
    address_ = *bound;
    ::grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT_MAX);
    args.SetMaxSendMessageSize(INT_MAX);
    channel_ = ::grpc::CreateCustomChannel(address_, ::grpc::InsecureChannelCredentials(), args);
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  void stopServer() {
    stub_.reset();
    channel_.reset();
    if (frontend_) frontend_->shutdown(100ms);
    frontend_.reset();
    if (pool_) pool_->stop();
    pool_.reset();
  }

  void TearDown() override { stopServer(); }

  ::grpc::Status infer(const ModelInferRequest& request, ModelInferResponse* response) {
    ::grpc::ClientContext ctx;
    return stub_->ModelInfer(&ctx, request, response);
  }

  std::unique_ptr<http::WorkerPool> pool_;
  std::shared_ptr<builtin::ModelRepository> repository_;
  std::shared_ptr<Router> router_;
  std::shared_ptr<SettingsStore> settings_;
  std::shared_ptr<ServerHealth> health_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::string address_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

inline std::string engineName(const ::testing::TestParamInfo<GrpcServerEngine>& info) {
  return info.param == GrpcServerEngine::kNative ? "Native" : "Grpcpp";
}

}  // namespace infergate::gateway::frontends::testing_grpc
