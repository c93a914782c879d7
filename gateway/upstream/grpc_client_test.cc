// GrpcUpstreamClient against real upstreams: the project's own gRPC server (GrpcFrontend
// over the builtin demo models: GrpcTestUpstream, upstream_test_servers.h) on loopback,
// port 0, or on a unix socket. No mocks; every wait is on a promise with a generous bound,
// never a sleep.

#include "gateway/upstream/grpc_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <map>
#include <numeric>
#include <thread>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/upstream/grpc_test_messages.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using testing::freePort;
using testing::GrpcTestUpstream;
using testing::serialized;
using testing::messages::addInput;
using testing::messages::bytesOf;
using testing::messages::expectSimpleAnswer;
using testing::messages::parsed;
using testing::messages::simpleRequest;
using testing::messages::repeatRequest;
using testing::messages::sleepRequest;
using testing::messages::tcp;
using testing::messages::outputBytes;
using testing::messages::valuesOf;

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kStreamInfer[] = "/inference.GRPCInferenceService/ModelStreamInfer";
constexpr char kServerLive[] = "/inference.GRPCInferenceService/ServerLive";
constexpr char kModelMetadata[] = "/inference.GRPCInferenceService/ModelMetadata";
constexpr auto kWait = 30s;  // a bound for the slowest machine, never a synchronisation


config::UpstreamConfig upstreamAt(std::vector<config::ListenAddress> endpoints) {
  config::UpstreamConfig c;
  c.name = "up";
  c.protocol = config::UpstreamConfig::Protocol::kGrpc;
  c.endpoints = std::move(endpoints);
  c.channels = 2;
  return c;
}

// ---- calls --------------------------------------------------------------------------

struct Answer {
  grpc::Status status;
  grpc::ByteBuffer message;
  std::thread::id thread;
};

// A unary call whose answer comes back through a future.
struct Pending {
  std::shared_ptr<GrpcCallHandle> handle;
  std::future<Answer> answer;
};

Pending start(GrpcUpstreamClient& client, const char* method, const grpc::ByteBuffer& request,
              GrpcCallOptions options = {}) {
  auto promise = std::make_shared<std::promise<Answer>>();
  Pending p;
  p.answer = promise->get_future();
  p.handle = client.unary(method, request, std::move(options),
                          [promise](grpc::Status status, grpc::ByteBuffer message) {
                            promise->set_value(Answer{std::move(status), std::move(message),
                                                      std::this_thread::get_id()});
                          });
  return p;
}

Answer wait(std::future<Answer>& f) {
  if (f.wait_for(kWait) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within " << kWait.count() << " s";
    return Answer{grpc::Status(grpc::StatusCode::INTERNAL, "test: no answer"), {}, {}};
  }
  return f.get();
}

Answer call(GrpcUpstreamClient& client, const char* method, const grpc::ByteBuffer& request,
            GrpcCallOptions options = {}) {
  Pending p = start(client, method, request, std::move(options));
  return wait(p.answer);
}

// A stream's messages and end, collected.
class StreamRecorder {
 public:
  GrpcStreamCallbacks callbacks() {
    GrpcStreamCallbacks c;
    c.on_message = [this](grpc::ByteBuffer message) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(parsed<inference::ModelStreamInferResponse>(message));
    };
    c.on_done = [this](grpc::Status status) { done_.set_value(std::move(status)); };
    return c;
  }
  grpc::Status status() {
    auto f = done_.get_future();
    if (f.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "the stream did not end within " << kWait.count() << " s";
      return grpc::Status(grpc::StatusCode::INTERNAL, "test: no end");
    }
    return f.get();
  }
  std::vector<inference::ModelStreamInferResponse> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::vector<inference::ModelStreamInferResponse> messages_;
  std::promise<grpc::Status> done_;
};

// ---- tests ----------------------------------------------------------------------------

TEST(GrpcUpstreamClient, ModelInferPassesTheSerializedMessageBothWays) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  EXPECT_EQ(client.name(), "up");
  Answer a = call(client, kModelInfer, serialized(simpleRequest("req-1", 100)));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_NE(a.thread, std::this_thread::get_id());  // on grpc's thread
  auto response = parsed<inference::ModelInferResponse>(a.message);
  EXPECT_EQ(response.model_name(), "simple");
  EXPECT_EQ(response.id(), "req-1");
  expectSimpleAnswer(response, 100);
}

TEST(GrpcUpstreamClient, TypedRpcsTravelAsSerializedMessages) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  // ServerLiveRequest serializes to zero bytes: an empty message is still sent.
  Answer live = call(client, kServerLive, serialized(inference::ServerLiveRequest()));
  ASSERT_TRUE(live.status.ok()) << live.status.error_message();
  EXPECT_TRUE(parsed<inference::ServerLiveResponse>(live.message).live());
  Answer uninitialised = call(client, kServerLive, grpc::ByteBuffer());
  ASSERT_TRUE(uninitialised.status.ok()) << uninitialised.status.error_message();

  inference::ModelMetadataRequest request;
  request.set_name("simple");
  Answer meta = call(client, kModelMetadata, serialized(request));
  ASSERT_TRUE(meta.status.ok()) << meta.status.error_message();
  auto metadata = parsed<inference::ModelMetadataResponse>(meta.message);
  EXPECT_EQ(metadata.name(), "simple");
  ASSERT_EQ(metadata.inputs_size(), 2);
  EXPECT_EQ(metadata.inputs(0).name(), "INPUT0");
  EXPECT_EQ(metadata.inputs(0).datatype(), "INT32");
  ASSERT_EQ(metadata.outputs_size(), 2);
}

// The upstream's status reaches the caller exactly as a direct client sees it.
TEST(GrpcUpstreamClient, UpstreamErrorsPassThroughWithTheirCodeAndText) {
  GrpcTestUpstream up;
  inference::ModelInferRequest unknown = simpleRequest();
  unknown.set_model_name("no_such_model");
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(up.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  inference::ModelInferResponse ignored;
  grpc::Status direct = stub->ModelInfer(&ctx, unknown, &ignored);
  ASSERT_EQ(direct.error_code(), grpc::StatusCode::NOT_FOUND);

  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  Answer a = call(client, kModelInfer, serialized(unknown));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(a.status.error_message(), direct.error_message());
  codecs::Status mapped = toUpstreamStatus(a.status, "up");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(mapped), direct.error_message());
  EXPECT_EQ(codecs::originOf(mapped), codecs::ErrorOrigin::kClient);  // a 404, not a 502
}

TEST(GrpcUpstreamClient, ToUpstreamStatusNamesTheUpstreamForTransportFailures) {
  EXPECT_TRUE(toUpstreamStatus(grpc::Status::OK, "up").ok());
  codecs::Status down =
      toUpstreamStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect"), "up");
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(codecs::messageOf(down), "upstream 'up' is unavailable: failed to connect");
  EXPECT_EQ(codecs::originOf(down), codecs::ErrorOrigin::kUpstream);
  codecs::Status late = toUpstreamStatus(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "up");
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(codecs::messageOf(late), "upstream 'up' timed out: Deadline Exceeded");
  EXPECT_EQ(codecs::originOf(late), codecs::ErrorOrigin::kUpstream);
  // An upstream that shuts down cancels what it has not answered (found by bench/soak).
  codecs::Status cancelled =
      toUpstreamStatus(grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled"), "up");
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(codecs::messageOf(cancelled), "upstream 'up' cancelled the call: Cancelled");
  EXPECT_EQ(codecs::originOf(cancelled), codecs::ErrorOrigin::kUpstream);
  codecs::Status invalid =
      toUpstreamStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad shape"), "up");
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(invalid), "bad shape");
  // The client's own refusal already names the upstream.
  codecs::Status closed = toUpstreamStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "upstream 'up' is shut down"), "up");
  EXPECT_EQ(codecs::messageOf(closed), "upstream 'up' is shut down");
}

// grpc's own words for a broken call are the upstream's fault, named; an upstream's own
// INTERNAL / UNKNOWN answer passes on as it came (found by tests/e2e/test_upstream_faults).
TEST(GrpcUpstreamClient, ToUpstreamStatusNamesTheUpstreamForBrokenCalls) {
  codecs::Status reset = toUpstreamStatus(
      grpc::Status(grpc::StatusCode::INTERNAL, "Received RST_STREAM with error code 2"), "up", "h:1");
  EXPECT_EQ(reset.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(codecs::messageOf(reset),
            "upstream 'up' (h:1) reset the call: Received RST_STREAM with error code 2");
  EXPECT_EQ(codecs::originOf(reset), codecs::ErrorOrigin::kUpstream);
  for (const char* text : {"Stream removed", "Received http2 header with status: 404"}) {
    codecs::Status broken = toUpstreamStatus(grpc::Status(grpc::StatusCode::UNKNOWN, text), "up", "");
    EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(codecs::messageOf(broken), std::string("upstream 'up' broke the gRPC protocol: ") + text);
    EXPECT_EQ(codecs::originOf(broken), codecs::ErrorOrigin::kUpstream);
  }
  codecs::Status own =
      toUpstreamStatus(grpc::Status(grpc::StatusCode::INTERNAL, "onnx runtime error 6"), "up", "");
  EXPECT_EQ(own.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(codecs::messageOf(own), "onnx runtime error 6");
  EXPECT_NE(codecs::originOf(own), codecs::ErrorOrigin::kUpstream);
}

TEST(GrpcUpstreamClient, DeadlineEndsASlowCall) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  GrpcCallOptions options;
  options.deadline = std::chrono::system_clock::now() + 200ms;
  Answer a = call(client, kModelInfer, serialized(sleepRequest(20000)), std::move(options));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  codecs::Status mapped = toUpstreamStatus(a.status, "up");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(codecs::messageOf(mapped).starts_with("upstream 'up' timed out"))
      << codecs::messageOf(mapped);
}

TEST(GrpcUpstreamClient, CancelEndsAnInFlightUnaryCall) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  Pending p = start(client, kModelInfer, serialized(sleepRequest(20000)));
  p.handle->cancel();
  Answer a = wait(p.answer);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::CANCELLED);
  p.handle->cancel();  // after the end: nothing
  // The upstream and the client serve on.
  EXPECT_TRUE(call(client, kModelInfer, serialized(simpleRequest())).status.ok());
}

TEST(GrpcUpstreamClient, CancelFromAnotherThreadWhileTheCallerDroppedTheHandle) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  Pending p = start(client, kModelInfer, serialized(sleepRequest(20000)));
  std::thread canceller([handle = std::move(p.handle)] { handle->cancel(); });
  canceller.join();
  EXPECT_EQ(wait(p.answer).status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST(GrpcUpstreamClient, StreamCarriesRequestsAndDecoupledAnswersUntilWritesDone) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  StreamRecorder recorder;
  auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
  stream->write(serialized(simpleRequest("s1", 10)));
  stream->write(serialized(repeatRequest({4, 5, 6})));
  stream->write(serialized(simpleRequest("s2", 20)));
  stream->writesDone();
  stream->write(serialized(simpleRequest("after")));  // after the half-close: dropped
  ASSERT_TRUE(recorder.status().ok());

  std::vector<int32_t> repeated;
  int finals = 0;
  std::map<std::string, inference::ModelInferResponse> simple;
  for (const auto& m : recorder.messages()) {
    EXPECT_EQ(m.error_message(), "");
    const auto& r = m.infer_response();
    if (r.model_name() == "simple") {
      simple[r.id()] = r;
    } else {
      EXPECT_EQ(r.model_name(), "repeat_int32");
      EXPECT_EQ(r.id(), "rep");
      if (const std::string* out = outputBytes(r, "OUT")) {
        repeated.push_back(valuesOf<int32_t>(*out).at(0));
      } else {
        ++finals;  // the empty final response
      }
    }
  }
  EXPECT_EQ(repeated, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(finals, 1);
  ASSERT_EQ(simple.size(), 2u);
  expectSimpleAnswer(simple["s1"], 10);
  expectSimpleAnswer(simple["s2"], 20);
}

// Writes are sent one at a time in the order queued: the upstream answers non-decoupled
// requests in request order, so the ids come back in the order written.
TEST(GrpcUpstreamClient, StreamKeepsTheOrderOfQueuedWrites) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  StreamRecorder recorder;
  auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
  constexpr int kRequests = 100;
  for (int i = 0; i < kRequests; ++i) {
    stream->write(serialized(simpleRequest(std::to_string(i), i)));
  }
  stream->writesDone();
  ASSERT_TRUE(recorder.status().ok());
  auto messages = recorder.messages();
  ASSERT_EQ(messages.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(messages[i].infer_response().id(), std::to_string(i));
    expectSimpleAnswer(messages[i].infer_response(), i);
  }
}

TEST(GrpcUpstreamClient, CancelEndsAStream) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  StreamRecorder recorder;
  auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
  stream->write(serialized(sleepRequest(20000)));
  stream->cancel();
  stream->write(serialized(simpleRequest()));  // after the cancel: harmless
  EXPECT_EQ(recorder.status().error_code(), grpc::StatusCode::CANCELLED);
  stream->cancel();
  stream->writesDone();
}

// The server ends the stream first (triton_grpc_error: the first error ends it) while the
// client has not half-closed: the end still reaches on_done.
TEST(GrpcUpstreamClient, StreamEndedByTheUpstreamReportsItsStatus) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  StreamRecorder recorder;
  GrpcCallOptions options;
  options.metadata.emplace_back("triton_grpc_error", "true");
  auto stream = client.stream(kStreamInfer, std::move(options), recorder.callbacks());
  inference::ModelInferRequest unknown = simpleRequest();
  unknown.set_model_name("no_such_model");
  stream->write(serialized(unknown));
  grpc::Status status = recorder.status();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  stream->write(serialized(simpleRequest()));  // after the end: dropped
}

TEST(GrpcUpstreamClient, NothingListeningIsUnavailable) {
  GrpcUpstreamClient client(upstreamAt({tcp(freePort())}));
  Answer a = call(client, kModelInfer, serialized(simpleRequest()));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  codecs::Status mapped = toUpstreamStatus(a.status, "up");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(codecs::messageOf(mapped).starts_with("upstream 'up' is unavailable: "))
      << codecs::messageOf(mapped);

  StreamRecorder recorder;
  auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
  stream->write(serialized(simpleRequest()));
  EXPECT_EQ(recorder.status().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// An upstream that comes up where nothing listened is used again without restarting the
// client. One channel, so that the call after the failure meets the channel's backoff:
// each retry fails at once until the next connect attempt succeeds.
TEST(GrpcUpstreamClient, UpstreamThatComesBackIsUsedAgain) {
  const int port = freePort();
  config::UpstreamConfig config = upstreamAt({tcp(port)});
  config.channels = 1;
  GrpcUpstreamClient client(config);
  ASSERT_EQ(call(client, kModelInfer, serialized(simpleRequest())).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  GrpcTestUpstream up("127.0.0.1:" + std::to_string(port));
  ASSERT_EQ(up.port(), port);
  const auto give_up = std::chrono::steady_clock::now() + kWait;
  Answer a;
  do {
    a = call(client, kModelInfer, serialized(simpleRequest()));
  } while (a.status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           std::chrono::steady_clock::now() < give_up);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message));
}

// A peer that takes the TCP connection but never speaks HTTP/2 (a listener that never
// accepts): connect_timeout_ms bounds the attempt, and the call without a deadline fails
// with UNAVAILABLE instead of waiting for grpc's own 20 s minimum.
TEST(GrpcUpstreamClient, ConnectTimeoutBoundsAnUnansweredConnect) {
  testing::IdleListener listener;
  config::UpstreamConfig config = upstreamAt({tcp(listener.port())});
  config.connect_timeout_ms = 200;
  GrpcUpstreamClient client(config);
  Pending p = start(client, kModelInfer, serialized(simpleRequest()));
  ASSERT_EQ(p.answer.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(p.answer.get().status.error_code(), grpc::StatusCode::UNAVAILABLE);
  client.shutdown();
}

TEST(GrpcUpstreamClient, UnixSocketEndpoint) {
  const std::string path =
      ::testing::TempDir() + "infergate_grpc_client_" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  {
    GrpcTestUpstream up("unix:" + path);
    config::ListenAddress endpoint;
    endpoint.kind = config::ListenAddress::Kind::kUnix;
    endpoint.path = path;
    GrpcUpstreamClient client(upstreamAt({endpoint}));
    Answer a = call(client, kModelInfer, serialized(simpleRequest()));
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message));
  }
  ::unlink(path.c_str());
}

TEST(GrpcUpstreamClient, ConfiguredHeadersReachTheUpstreamAndReplaceForwardedOnes) {
  frontends::GrpcFrontendOptions options;
  options.restricted["inference"] = {"key", "v"};
  GrpcTestUpstream up("127.0.0.1:0", std::move(options));

  GrpcUpstreamClient bare(upstreamAt({tcp(up.port())}));
  Answer refused = call(bare, kModelInfer, serialized(simpleRequest()));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.status.error_message(),
            "This protocol is restricted, expecting header 'triton-grpc-protocol-key'");

  config::UpstreamConfig keyed = upstreamAt({tcp(up.port())});
  keyed.headers.push_back(config::HeaderValue{"triton-grpc-protocol-key", "v", {}});
  GrpcUpstreamClient client(keyed);
  GrpcCallOptions forwarded;
  forwarded.metadata.emplace_back("triton-grpc-protocol-key", "wrong");  // replaced
  forwarded.metadata.emplace_back("x-request-tag", "kept");
  Answer a = call(client, kModelInfer, serialized(simpleRequest()), std::move(forwarded));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message));

  StreamRecorder recorder;
  auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
  stream->write(serialized(simpleRequest("keyed")));
  stream->writesDone();
  ASSERT_TRUE(recorder.status().ok());
  ASSERT_EQ(recorder.messages().size(), 1u);
  EXPECT_EQ(recorder.messages()[0].infer_response().id(), "keyed");
}

// grpc aborts the process on metadata it cannot send; the client refuses the call instead.
TEST(GrpcUpstreamClient, MetadataGrpcCannotCarryFailsTheCall) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"Upper-Case", "v"}, {"x-note", "caf\xc3\xa9"}, {"", "v"}, {"x-line", "a\nb"}}) {
    GrpcCallOptions options;
    options.metadata.emplace_back(key, value);
    Answer a = call(client, kModelInfer, serialized(simpleRequest()), std::move(options));
    EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_NE(a.thread, std::this_thread::get_id());
  }
  GrpcCallOptions binary;  // any bytes in a -bin value
  binary.metadata.emplace_back("x-blob-bin", std::string("\x00\xff\n", 3));
  EXPECT_TRUE(
      call(client, kModelInfer, serialized(simpleRequest()), std::move(binary)).status.ok());
}

TEST(GrpcUpstreamClient, RoundRobinSpreadsCallsOverEndpoints) {
  GrpcTestUpstream a, b;
  GrpcUpstreamClient client(upstreamAt({tcp(a.port()), tcp(b.port())}));  // 2 x 2 channels
  constexpr int kCalls = 12;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(call(client, kModelInfer, serialized(simpleRequest())).status.ok());
  }
  EXPECT_EQ(a.inferences("simple"), kCalls / 2u);
  EXPECT_EQ(b.inferences("simple"), kCalls / 2u);
}

TEST(GrpcUpstreamClient, ShutdownCancelsCallsInFlightAndRefusesLaterOnes) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  std::vector<Pending> pending;
  for (int i = 0; i < 10; ++i) {
    pending.push_back(start(client, kModelInfer, serialized(sleepRequest(20000))));
  }
  StreamRecorder in_flight;
  auto stream = client.stream(kStreamInfer, {}, in_flight.callbacks());
  stream->write(serialized(sleepRequest(20000)));

  client.shutdown();  // returns once every callback has run
  for (Pending& p : pending) {
    ASSERT_EQ(p.answer.wait_for(0s), std::future_status::ready);
    const grpc::Status status = p.answer.get().status;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  }
  EXPECT_EQ(in_flight.status().error_code(), grpc::StatusCode::CANCELLED);

  // Later calls fail with UNAVAILABLE, through the callback on grpc's thread.
  Answer later = call(client, kModelInfer, serialized(simpleRequest()));
  EXPECT_EQ(later.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(later.status.error_message(), "upstream 'up' is shut down");
  EXPECT_NE(later.thread, std::this_thread::get_id());
  StreamRecorder refused;
  auto late_stream = client.stream(kStreamInfer, {}, refused.callbacks());
  late_stream->write(serialized(simpleRequest()));
  late_stream->writesDone();
  EXPECT_EQ(refused.status().error_code(), grpc::StatusCode::UNAVAILABLE);
  client.shutdown();  // again: nothing in flight, returns
}

// The handles own nothing of grpc's: they outlive the client and do nothing then.
TEST(GrpcUpstreamClient, DestructorWaitsForCallsInFlightAndHandlesOutliveIt) {
  GrpcTestUpstream up;
  std::vector<Pending> pending;
  StreamRecorder recorder;
  std::shared_ptr<GrpcStream> stream;
  {
    GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
    for (int i = 0; i < 5; ++i) {
      pending.push_back(start(client, kModelInfer, serialized(sleepRequest(20000))));
    }
    stream = client.stream(kStreamInfer, {}, recorder.callbacks());
    stream->write(serialized(sleepRequest(20000)));
  }
  for (Pending& p : pending) {
    ASSERT_EQ(p.answer.wait_for(0s), std::future_status::ready);
    const grpc::Status status = p.answer.get().status;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
    p.handle->cancel();
  }
  EXPECT_EQ(recorder.status().error_code(), grpc::StatusCode::CANCELLED);
  stream->write(serialized(simpleRequest()));
  stream->writesDone();
  stream->cancel();
}

// Each round ends with no channel or server left in the process. grpc 1.51 then stops its
// callback threads from ~Channel; a client that let its last channel go on one of those
// threads (the call's context holds a reference) crashed here.
TEST(GrpcUpstreamClient, ClientsAndUpstreamsComeAndGo) {
  for (int round = 0; round < 20; ++round) {
    GrpcTestUpstream up;
    GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
    Pending unary = start(client, kModelInfer, serialized(simpleRequest()));
    StreamRecorder recorder;
    auto stream = client.stream(kStreamInfer, {}, recorder.callbacks());
    stream->write(serialized(simpleRequest("r", round)));
    stream->writesDone();
    ASSERT_TRUE(wait(unary.answer).status.ok());
    ASSERT_TRUE(recorder.status().ok());
    ASSERT_EQ(recorder.messages().size(), 1u);
  }
}

TEST(GrpcUpstreamClient, ManyConcurrentCallsFromSeveralThreadsAllComplete) {
  GrpcTestUpstream up;
  GrpcUpstreamClient client(upstreamAt({tcp(up.port())}));
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::vector<Pending>> pending(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int base = t * kPerThread + i;
        pending[t].push_back(
            start(client, kModelInfer, serialized(simpleRequest(std::to_string(base), base))));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      Answer a = wait(pending[t][i].answer);
      ASSERT_TRUE(a.status.ok()) << a.status.error_message();
      auto response = parsed<inference::ModelInferResponse>(a.message);
      const int base = t * kPerThread + i;
      EXPECT_EQ(response.id(), std::to_string(base));
      expectSimpleAnswer(response, base);
    }
  }
}

}  // namespace
}  // namespace infergate::gateway::upstream
