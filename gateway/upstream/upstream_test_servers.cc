// The gRPC side of upstream_test_servers.h.

#include "gateway/upstream/upstream_test_servers.h"

#include <grpcpp/grpcpp.h>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/frontends/grpc_frontend.h"

namespace infergate::gateway::upstream::testing {

using namespace std::chrono_literals;

GrpcTestUpstream::GrpcTestUpstream() : GrpcTestUpstream("127.0.0.1:0") {}

GrpcTestUpstream::GrpcTestUpstream(std::string address)
    : GrpcTestUpstream(std::move(address), frontends::GrpcFrontendOptions{}) {}

GrpcTestUpstream::GrpcTestUpstream(std::string address, frontends::GrpcFrontendOptions options)
    : pool_(1), repository_(builtin::ModelRepository::createDemo({})) {
  pool_.start();
  auto health = std::make_shared<ServerHealth>();
  health->ready = true;
  frontend_ = std::make_unique<frontends::GrpcFrontend>(
      Router::builtinOnly(repository_, pool_),
      std::make_shared<SettingsStore>(repositoryModelCheck(repository_)), ServerInfo{}, health,
      pool_, std::move(options));
  auto bound = frontend_->start(std::move(address));
  EXPECT_TRUE(bound.ok()) << bound.status();
  if (bound.ok()) address_ = *bound;
}

GrpcTestUpstream::~GrpcTestUpstream() {
  frontend_->shutdown(0ms);
  pool_.stop();
}

int GrpcTestUpstream::port() const { return frontend_->port(); }

uint64_t GrpcTestUpstream::inferences(const std::string& model) const {
  auto stats = repository_->statisticsProto(model, "");
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() && stats->model_stats_size() > 0 ? stats->model_stats(0).inference_count()
                                                     : 0;
}

grpc::ByteBuffer serialized(const google::protobuf::MessageLite& message) {
  return codecs::toByteBuffer(
      codecs::BufferChain(codecs::Buffer::fromString(message.SerializeAsString())));
}

}  // namespace infergate::gateway::upstream::testing
