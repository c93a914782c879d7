// GrpcUpstreamClient against the project's own gRPC server (GrpcFrontend serving the
// builtin models) on loopback: real channels, real HTTP/2, port 0.

#include "gateway/upstream/grpc_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <future>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/frontends/grpc_frontend.h"
#include "grpc_service.pb.h"

namespace infergate::gateway::upstream {
namespace {

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kStreamInfer[] = "/inference.GRPCInferenceService/ModelStreamInfer";
constexpr auto kWait = std::chrono::seconds(30);

grpc::ByteBuffer bytesOf(const google::protobuf::MessageLite& m) {
  return codecs::toByteBuffer(codecs::BufferChain(codecs::Buffer::fromString(m.SerializeAsString())));
}

template <typename T>
T parse(const grpc::ByteBuffer& b) {
  T out;
  auto flat = codecs::fromByteBuffer(b);
  EXPECT_TRUE(flat.ok());
  EXPECT_TRUE(out.ParseFromArray(flat->data(), static_cast<int>(flat->size())));
  return out;
}

inference::ModelInferRequest int32Request(std::string model, std::string input,
                                          std::vector<int32_t> values) {
  inference::ModelInferRequest r;
  r.set_model_name(std::move(model));
  auto* in = r.add_inputs();
  in->set_name(std::move(input));
  in->set_datatype("INT32");
  in->add_shape(static_cast<int64_t>(values.size()));
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  return r;
}

inference::ModelInferRequest simpleRequest() {
  inference::ModelInferRequest r;
  r.set_model_name("simple");
  std::vector<int32_t> a(16), b(16, 1);
  for (int i = 0; i < 16; ++i) a[i] = i;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(16);
  }
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(a.data()), 64));
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(b.data()), 64));
  return r;
}

struct Answer {
  grpc::Status status;
  grpc::ByteBuffer message;
};

// One upstream server: the gRPC frontend over the builtin demo models.
class Upstream {
 public:
  explicit Upstream(frontends::GrpcFrontendOptions options = {}, std::string address = "127.0.0.1:0")
      : pool_(1) {
    pool_.start();
    router_ = Router::builtinOnly(builtin::ModelRepository::createDemo(), pool_);
    auto health = std::make_shared<ServerHealth>();
    health->ready = true;
    frontend_ = std::make_unique<frontends::GrpcFrontend>(
        router_, std::make_shared<SettingsStore>([](std::string_view) { return absl::OkStatus(); }),
        ServerInfo{}, health, pool_, std::move(options));
    auto bound = frontend_->start(std::move(address));
    EXPECT_TRUE(bound.ok()) << bound.status();
    address_ = bound.ok() ? *bound : "";
  }
  ~Upstream() {
    frontend_->shutdown(std::chrono::milliseconds(0));
    pool_.stop();
  }
  int port() const { return frontend_->port(); }
  const std::string& address() const { return address_; }

 private:
  http::WorkerPool pool_;
  std::shared_ptr<Router> router_;
  std::unique_ptr<frontends::GrpcFrontend> frontend_;
  std::string address_;
};

config::UpstreamConfig upstreamAt(std::vector<config::ListenAddress> endpoints) {
  config::UpstreamConfig c;
  c.name = "up";
  c.protocol = config::UpstreamConfig::Protocol::kGrpc;
  c.endpoints = std::move(endpoints);
  c.channels = 2;
  return c;
}

config::ListenAddress tcp(int port) {
  config::ListenAddress a;
  a.host = "127.0.0.1";
  a.port = static_cast<uint16_t>(port);
  return a;
}

Answer call(GrpcUpstreamClient& client, const char* method, const grpc::ByteBuffer& request,
            GrpcCallOptions options = {}) {
  std::promise<Answer> done;
  client.unary(method, request, std::move(options), [&](grpc::Status s, grpc::ByteBuffer b) {
    done.set_value(Answer{std::move(s), std::move(b)});
  });
  auto f = done.get_future();
  EXPECT_EQ(f.wait_for(kWait), std::future_status::ready);
  return f.get();
}

TEST(GrpcUpstreamClient, ModelInferPassesRawBytesBothWays) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  Answer a = call(client, kModelInfer, bytesOf(simpleRequest()));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  auto response = parse<inference::ModelInferResponse>(a.message);
  EXPECT_EQ(response.model_name(), "simple");
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  const auto* sum = reinterpret_cast<const int32_t*>(response.raw_output_contents(0).data());
  EXPECT_EQ(sum[5], 6);
}

TEST(GrpcUpstreamClient, TypedRpcsTravelAsSerializedMessages) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  inference::ModelMetadataRequest request;
  request.set_name("identity_fp32");
  Answer a = call(client, "/inference.GRPCInferenceService/ModelMetadata", bytesOf(request));
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(parse<inference::ModelMetadataResponse>(a.message).inputs(0).datatype(), "FP32");
}

TEST(GrpcUpstreamClient, UpstreamErrorsPassThroughWithTheirCodeAndText) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  Answer a = call(client, kModelInfer, bytesOf(int32Request("nope", "INPUT0", {1})));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::NOT_FOUND);
  codecs::Status mapped = toUpstreamStatus(a.status, "up");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(mapped), "Request for unknown model: 'nope' is not found");
}

TEST(GrpcUpstreamClient, DeadlineAndCancelEndTheCall) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  GrpcCallOptions options;
  options.deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(200);
  Answer late = call(client, kModelInfer, bytesOf(int32Request("sleep", "INPUT0", {5000})), options);
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(toUpstreamStatus(late.status, "up").code(), absl::StatusCode::kDeadlineExceeded);

  std::promise<grpc::Status> done;
  auto handle = client.unary(kModelInfer, bytesOf(int32Request("sleep", "INPUT0", {5000})), {},
                             [&](grpc::Status s, grpc::ByteBuffer) { done.set_value(s); });
  handle->cancel();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(f.get().error_code(), grpc::StatusCode::CANCELLED);
  handle->cancel();  // after the end: nothing
}

TEST(GrpcUpstreamClient, NothingListeningIsUnavailableNamingTheUpstream) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);  // the port is now free: nothing listens
  GrpcUpstreamClient client(upstreamAt({tcp(port)}));
  Answer a = call(client, kModelInfer, bytesOf(simpleRequest()));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  codecs::Status mapped = toUpstreamStatus(a.status, "up");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(codecs::messageOf(mapped).find("upstream 'up' is unavailable"), std::string_view::npos);
}

TEST(GrpcUpstreamClient, ConfiguredHeadersReachTheUpstream) {
  frontends::GrpcFrontendOptions options;
  options.restricted["inference"] = {"key", "secret"};
  Upstream up(std::move(options));
  config::UpstreamConfig without = upstreamAt({tcp(up.port())});
  GrpcUpstreamClient plain(without);
  EXPECT_EQ(call(plain, kModelInfer, bytesOf(simpleRequest())).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  config::UpstreamConfig with = without;
  with.headers.push_back(config::HeaderValue{"triton-grpc-protocol-key", "secret", {}});
  GrpcUpstreamClient keyed(with);
  // The configured value replaces a forwarded one of the same key.
  GrpcCallOptions forwarded;
  forwarded.metadata.emplace_back("triton-grpc-protocol-key", "wrong");
  EXPECT_TRUE(call(keyed, kModelInfer, bytesOf(simpleRequest()), forwarded).status.ok());
}

TEST(GrpcUpstreamClient, UnixSocketEndpoint) {
  std::string path = "/tmp/infergate-grpc-client-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  Upstream up({}, "unix:" + path);
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kUnix;
  a.path = path;
  GrpcUpstreamClient client(upstreamAt({a}));
  EXPECT_TRUE(call(client, kModelInfer, bytesOf(simpleRequest())).status.ok());
  ::unlink(path.c_str());
}

TEST(GrpcUpstreamClient, StreamRelaysEveryAnswerAndEndsAfterWritesDone) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  std::mutex mu;
  std::vector<inference::ModelStreamInferResponse> answers;
  std::promise<grpc::Status> done;
  GrpcStreamCallbacks callbacks;
  callbacks.on_message = [&](grpc::ByteBuffer m) {
    std::lock_guard<std::mutex> lock(mu);
    answers.push_back(parse<inference::ModelStreamInferResponse>(m));
  };
  callbacks.on_done = [&](grpc::Status s) { done.set_value(s); };
  auto stream = client.stream(kStreamInfer, {}, std::move(callbacks));
  stream->write(bytesOf(simpleRequest()));
  // Decoupled: one answer per element of IN, then (with the empty final flag) nothing more.
  inference::ModelInferRequest repeat = int32Request("repeat_int32", "IN", {4, 5, 6});
  auto* delay = repeat.add_inputs();
  delay->set_name("DELAY");
  delay->set_datatype("UINT32");
  delay->add_shape(3);
  repeat.add_raw_input_contents(std::string(12, '\0'));
  auto* wait = repeat.add_inputs();
  wait->set_name("WAIT");
  wait->set_datatype("UINT32");
  wait->add_shape(1);
  repeat.add_raw_input_contents(std::string(4, '\0'));
  stream->write(bytesOf(repeat));
  stream->writesDone();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(answers.size(), 4u);
  int repeats = 0;
  for (const auto& a : answers) {
    EXPECT_EQ(a.error_message(), "");
    repeats += a.infer_response().model_name() == "repeat_int32" ? 1 : 0;
  }
  EXPECT_EQ(repeats, 3);
}

TEST(GrpcUpstreamClient, ShutdownCancelsCallsInFlightAndRefusesNewOnes) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  std::vector<std::future<grpc::Status>> pending;
  std::vector<std::promise<grpc::Status>> promises(20);
  for (auto& p : promises) {
    pending.push_back(p.get_future());
    client.unary(kModelInfer, bytesOf(int32Request("sleep", "INPUT0", {10000})), {},
                 [&p](grpc::Status s, grpc::ByteBuffer) { p.set_value(s); });
  }
  client.shutdown();  // returns once every callback ran
  for (auto& f : pending) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    EXPECT_EQ(f.get().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(call(client, kModelInfer, bytesOf(simpleRequest())).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(GrpcUpstreamClient, ManyConcurrentCallsAllComplete) {
  Upstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  constexpr int kCalls = 200;
  std::atomic<int> ok{0}, finished{0};
  std::promise<void> all;
  grpc::ByteBuffer request = bytesOf(simpleRequest());
  for (int i = 0; i < kCalls; ++i) {
    client.unary(kModelInfer, request, {}, [&](grpc::Status s, grpc::ByteBuffer) {
      if (s.ok()) ++ok;
      if (++finished == kCalls) all.set_value();
    });
  }
  ASSERT_EQ(all.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(ok.load(), kCalls);
}

}  // namespace
}  // namespace infergate::gateway::upstream
