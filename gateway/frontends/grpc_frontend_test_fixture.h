#pragma once

// The gRPC frontend tests' fixture (grpc_frontend_test.cc, grpc_native_server_test.cc):
// a GrpcFrontend serving the builtin demo models on a WorkerPool, with a channel and the
// generated stub, once per server engine (the test's parameter); and request builders.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gateway/frontends/grpc_frontend.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::frontends::testing_grpc {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

template <typename T>
std::string bytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> valuesOf(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline void addInput(ModelInferRequest& r, const std::string& name, const std::string& datatype,
              std::vector<int64_t> shape, std::string bytes) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(std::move(bytes));
}

inline ModelInferRequest simpleRequest(const std::string& id = "") {
  ModelInferRequest r;
  r.set_model_name("simple");
  r.set_id(id);
  std::vector<int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), 0);
  addInput(r, "INPUT0", "INT32", {1, 16}, bytesOf(a));
  addInput(r, "INPUT1", "INT32", {1, 16}, bytesOf(b));
  return r;
}

inline ModelInferRequest sleepRequest(int32_t ms, const std::string& id = "") {
  ModelInferRequest r;
  r.set_model_name("sleep");
  r.set_id(id);
  addInput(r, "INPUT0", "INT32", {1}, bytesOf(std::vector<int32_t>{ms}));
  return r;
}

inline ModelInferRequest repeatRequest(std::vector<int32_t> values, bool empty_final) {
  ModelInferRequest r;
  r.set_model_name("repeat_int32");
  r.set_id("rep");
  const int64_t n = static_cast<int64_t>(values.size());
  addInput(r, "IN", "INT32", {n}, bytesOf(values));
  addInput(r, "DELAY", "UINT32", {n}, bytesOf(std::vector<uint32_t>(values.size(), 0)));
  addInput(r, "WAIT", "UINT32", {1}, bytesOf(std::vector<uint32_t>{0}));
  if (empty_final)
    (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  return r;
}

inline const std::string* outputBytes(const ModelInferResponse& r, const std::string& name) {
  for (int i = 0; i < r.outputs_size(); ++i) {
    if (r.outputs(i).name() == name && i < r.raw_output_contents_size()) {
      return &r.raw_output_contents(i);
    }
  }
  return nullptr;
}

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
