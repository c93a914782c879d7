#pragma once

// The gRPC frontend tests' fixture (grpc_frontend_test.cc, grpc_native_server_test.cc):
// a GrpcFrontend serving the builtin demo models on a WorkerPool, with a channel and the
// generated stub, once per server engine (the test's parameter). The requests are the
// gRPC tests' own (upstream/grpc_test_messages.h).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
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
using upstream::testing::messages::identityRequest;
using upstream::testing::messages::outputBytes;
using upstream::testing::messages::repeatRequest;
using upstream::testing::messages::simpleRequest;
using upstream::testing::messages::sleepRequest;
using upstream::testing::messages::valuesOf;

// A plain TCP connection to the frontend's port on 127.0.0.1; -1 when refused.
// `receive_buffer` > 0: the socket's receive buffer in bytes, set before it connects (a
// client whose kernel takes little of what the server sends).
inline int connectTo(int port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes (true) or `wait` passes (false).
inline bool closedByPeerWithin(int fd, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) return true;
  }
  return false;
}

// The flooding tests' message: a 3 s sleep whose id pads it to about `bytes` (a letter
// that changes with `i`).
inline ModelInferRequest paddedSleepRequest(int i, size_t bytes, int sleep_ms = 3000) {
  return sleepRequest(sleep_ms, std::string(bytes, static_cast<char>('a' + i % 26)));
}

// Opens a ModelStreamInfer stream on `stub` and writes `count` requests made by
// `make(i)` from a thread; once the writes stop being taken for a while (flow control holds
// them back), or `wait` passed at most, cancels it. Returns how many writes the stream had
// taken by then, after checking that it ended CANCELLED. Settling rather than a fixed time:
// a slow (sanitized, loaded) machine takes longer to fill the windows, not fewer.
template <typename Make>
int floodStream(inference::GRPCInferenceService::Stub& stub, int count, std::chrono::milliseconds wait,
                Make make) {
  ::grpc::ClientContext ctx;
  auto stream = stub.ModelStreamInfer(&ctx);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < count; ++i) {
      if (!stream->Write(make(i))) return;
      written.fetch_add(1);
    }
  });
  constexpr auto kSettled = std::chrono::milliseconds(1000);
  const auto until = std::chrono::steady_clock::now() + wait;
  int seen = -1;
  auto changed = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now_written = written.load();
    if (now_written != seen) {
      seen = now_written;
      changed = std::chrono::steady_clock::now();
    } else if (seen > 0 && std::chrono::steady_clock::now() - changed >= kSettled) {
      break;
    }
  }
  const int taken = written.load();
  ctx.TryCancel();
  writer.join();
  ModelStreamInferResponse r;
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  return taken;
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
