// GrpcLoopClient (grpc_client_native.h) against real upstreams on loopback, port 0: the
// project's gRPC frontend over the builtin demo models (GrpcTestUpstream), an HTTP/1.1
// server that does not speak HTTP/2, a listener that never accepts, a port nothing listens
// on. The client lives on a LoopThread; every wait is on a promise with a generous bound.
// Where the grpc++ client (grpc_client.h) answers the same call, the two must agree.

#include "gateway/upstream/grpc_client_native.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "codecs/grpc_byte_buffer.h"
#include "codecs/protobuf_request_encoder.h"
#include "gateway/http/body_arrival.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/upstream/grpc_test_messages.h"
#include "gateway/upstream/http_client.h"
#include "gateway/upstream/upstream_status.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using testing::freePort;
using testing::GrpcTestUpstream;
using testing::LoopThread;
using testing::serialized;
using testing::messages::addInput;
using testing::messages::bytesOf;
using testing::messages::expectSimpleAnswer;
using testing::messages::parsed;
using testing::messages::simpleRequest;
using testing::messages::sleepRequest;
using testing::messages::tcp;

constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr auto kWait = 30s;  // a bound for the slowest machine, never a synchronisation

std::string endpointName(int port) { return "127.0.0.1:" + std::to_string(port); }

struct Answer {
  codecs::Status status;
  grpc::ByteBuffer message;
  bool on_loop = false;
};

struct Pending {
  std::shared_ptr<GrpcCallHandle> handle;
  std::future<Answer> answer;
};

Answer wait(std::future<Answer>& f, std::chrono::seconds bound = kWait) {
  if (f.wait_for(bound) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within " << bound.count() << " s";
    return Answer{absl::InternalError("test: no answer"), {}, false};
  }
  return f.get();
}

// The client on its own loop thread; calls are started there, as a worker would.
class NativeGrpcClient : public ::testing::Test {
 protected:
  void SetUp() override { make({}); }
  void TearDown() override { destroy(); }

  void make(GrpcLoopClientOptions options) {
    destroy();
    if (options.upstream_name.empty()) options.upstream_name = "up";
    loop_.run([&] { client_ = std::make_unique<GrpcLoopClient>(loop_.loop(), options); });
  }
  void destroy() {
    loop_.run([&] { client_.reset(); });
  }

  Pending start(const config::ListenAddress& endpoint, const grpc::ByteBuffer& request,
                GrpcCallOptions options = {}) {
    auto promise = std::make_shared<std::promise<Answer>>();
    Pending p;
    p.answer = promise->get_future();
    http::EventLoop* loop = &loop_.loop();
    loop_.run([&] {
      p.handle = client_->unary(endpoint, kModelInfer, codecs::MovableByteBuffer(request), options,
                                [promise, loop](codecs::Status status, grpc::ByteBuffer message) {
                                  promise->set_value(
                                      Answer{std::move(status), std::move(message), loop->inLoopThread()});
                                });
    });
    return p;
  }
  Answer call(const config::ListenAddress& endpoint, const grpc::ByteBuffer& request,
              GrpcCallOptions options = {}) {
    Pending p = start(endpoint, request, std::move(options));
    return wait(p.answer);
  }

  LoopThread loop_;
  std::unique_ptr<GrpcLoopClient> client_;
};

// ---- answers --------------------------------------------------------------------------

TEST_F(NativeGrpcClient, ModelInferTravelsBothWaysAndAnswersOnTheLoop) {
  GrpcTestUpstream up;
  for (int32_t base : {0, 100, -7}) {
    Answer a = call(tcp(up.port()), serialized(simpleRequest("", base)));
    ASSERT_TRUE(a.status.ok()) << a.status;
    EXPECT_TRUE(a.on_loop);
    expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message), base);
  }
  EXPECT_EQ(up.inferences("simple"), 3u);
}

// Larger than every HTTP/2 window and frame size the upstream starts with: the request goes
// out as many DATA frames referencing the request's slices, the answer comes in as many.
// The last answer is a little over 64 MiB, as a 64 MiB tensor's is.
TEST_F(NativeGrpcClient, LargeTensorsTravelBothWaysIntact) {
  GrpcTestUpstream up;
  for (size_t floats : {size_t{1} << 16, size_t{3} << 20, (size_t{16} << 20) + 1}) {  // 256 KiB, 12 MiB, 64 MiB
    std::vector<float> values(floats);
    for (size_t i = 0; i < floats; ++i) values[i] = static_cast<float>(i % 9973) * 0.5f;
    inference::ModelInferRequest r;
    r.set_model_name("identity_fp32");
    addInput(r, "INPUT0", "FP32", {1, static_cast<int64_t>(floats)}, bytesOf(values));
    Answer a = call(tcp(up.port()), serialized(r));
    ASSERT_TRUE(a.status.ok()) << a.status;
    inference::ModelInferResponse answer = parsed<inference::ModelInferResponse>(a.message);
    ASSERT_EQ(answer.raw_output_contents_size(), 1);
    EXPECT_TRUE(answer.raw_output_contents(0) == bytesOf(values)) << floats << " floats differ";
  }  destroy();  // before the upstream: its shutdown then has no connection to wait out
}

// A client's body still arriving (http/body_arrival.h): the request's tensor references
// memory that holds a poison pattern until each piece "arrives" (is written there, then
// announced). Sent before its bytes came, the echo would carry poison; sent as they come,
// the answer is the tensor, and it cannot come before the last piece does.
struct ArrivingTensor {
  explicit ArrivingTensor(size_t floats) : values(floats), body(floats * 4 + 64, 0xEE) {
    for (size_t i = 0; i < floats; ++i) values[i] = static_cast<float>(i % 7919) * 0.25f;
    arrival = std::make_shared<http::BodyArrival>(body.data(), body.size());
  }
  // The identity model's request, its one input referencing the body after a 64-byte
  // "header", as the frontend's decode makes it.
  grpc::ByteBuffer request() const {
    codecs::InferRequest r;
    r.model_name = "identity_fp32";
    codecs::InferInput input;
    input.name = "INPUT0";
    input.datatype = codecs::DataType::kFp32;
    input.shape = codecs::Shape({1, static_cast<int64_t>(values.size())});
    input.data = codecs::Buffer::borrowed(std::string_view(
        reinterpret_cast<const char*>(body.data() + 64), values.size() * 4));
    r.inputs.push_back(std::move(input));
    codecs::StatusOr<codecs::BufferChain> message = codecs::ProtobufRequestEncoder().encode(r);
    EXPECT_TRUE(message.ok());
    return codecs::toByteBuffer(*message, {body.data(), body.size()});
  }
  // Bytes [from, to) of the body arrive. Loop thread.
  void arrive(size_t from, size_t to) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    for (size_t i = std::max<size_t>(from, 64); i < to; ++i) body[i] = bytes[i - 64];
    for (size_t i = from; i < std::min<size_t>(to, 64); ++i) body[i] = '{';
    arrival->advance(to);
  }
  std::vector<float> values;
  std::vector<uint8_t> body;
  std::shared_ptr<http::BodyArrival> arrival;
};

TEST_F(NativeGrpcClient, ABodyStillArrivingIsSentAsItComesAndNoSooner) {
  GrpcTestUpstream up;
  ArrivingTensor t(size_t{1} << 20);  // 4 MiB
  GrpcCallOptions options;
  options.arrival = t.arrival;
  loop_.run([&] { t.arrive(0, 64 + 1000); });
  Pending p = start(tcp(up.port()), t.request(), options);
  const size_t size = t.body.size();
  for (size_t at = 64 + 1000; at < size;) {
    const size_t next = std::min(size, at + 300000);
    EXPECT_NE(p.answer.wait_for(10ms), std::future_status::ready) << "answered at " << at;
    loop_.run([&] { t.arrive(at, next); });
    at = next;
  }
  Answer a = wait(p.answer);
  ASSERT_TRUE(a.status.ok()) << a.status;
  inference::ModelInferResponse answer = parsed<inference::ModelInferResponse>(a.message);
  ASSERT_EQ(answer.raw_output_contents_size(), 1);
  EXPECT_TRUE(answer.raw_output_contents(0) == bytesOf(t.values)) << "the echo differs";
  destroy();
}

// The body never comes whole (its client went away): the call is cancelled, the upstream
// keeps serving, and the connection carries the next call.
TEST_F(NativeGrpcClient, ABodyThatNeverArrivesWholeCancelsItsCall) {
  GrpcTestUpstream up;
  ArrivingTensor t(size_t{1} << 18);
  GrpcCallOptions options;
  options.arrival = t.arrival;
  loop_.run([&] { t.arrive(0, 5000); });
  Pending p = start(tcp(up.port()), t.request(), options);
  EXPECT_NE(p.answer.wait_for(50ms), std::future_status::ready);
  loop_.run([&] { t.arrival->fail(); });
  Answer a = wait(p.answer);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kCancelled) << a.status;
  Answer next = call(tcp(up.port()), serialized(simpleRequest("", 5)));
  ASSERT_TRUE(next.status.ok()) << next.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(next.message), 5);
  // Failed before the call starts: ended at once, nothing sent.
  Pending late = start(tcp(up.port()), t.request(), options);
  EXPECT_EQ(wait(late.answer).status.code(), absl::StatusCode::kCancelled);
  destroy();
}

// Several large calls at once: more than the output queue's cap waits for the socket, so
// nghttp2 is paused and resumed many times, across calls, until every byte is out.
TEST_F(NativeGrpcClient, ConcurrentLargeCallsAllComplete) {
  GrpcTestUpstream up;
  constexpr size_t kFloats = size_t{2} << 20;  // 8 MiB each
  std::vector<std::string> inputs;
  std::vector<Pending> calls;
  for (int i = 0; i < 6; ++i) {
    std::vector<float> values(kFloats, static_cast<float>(i) + 0.25f);
    inputs.push_back(bytesOf(values));
    inference::ModelInferRequest r;
    r.set_model_name("identity_fp32");
    addInput(r, "INPUT0", "FP32", {1, static_cast<int64_t>(kFloats)}, inputs.back());
    calls.push_back(start(tcp(up.port()), serialized(r)));
  }
  for (int i = 0; i < 6; ++i) {
    Answer a = wait(calls[i].answer);
    ASSERT_TRUE(a.status.ok()) << i << ": " << a.status;
    inference::ModelInferResponse answer = parsed<inference::ModelInferResponse>(a.message);
    ASSERT_EQ(answer.raw_output_contents_size(), 1);
    EXPECT_TRUE(answer.raw_output_contents(0) == inputs[i]) << "call " << i << "'s answer differs";
  }  destroy();
}

// What an AnswerProgress is told (GrpcCallOptions::answer_progress). Loop thread.
struct ProgressLog final : AnswerProgress {
  struct Tell {
    size_t have, size;
    codecs::Buffer seen;  // the bytes told, sharing the message's storage
  };
  void onProgress(const codecs::MutableBuffer& message, size_t have, size_t size) override {
    tells.push_back(Tell{have, size, message.shareWritten(0, have)});
    if (cancel != nullptr) cancel->cancel();
  }
  std::vector<Tell> tells;
  std::shared_ptr<GrpcCallHandle> cancel;  // cancelled when told, if set
};

inference::ModelInferRequest identityRequest(const std::string& tensor) {
  inference::ModelInferRequest r;
  r.set_model_name("identity_fp32");
  addInput(r, "INPUT0", "FP32", {1, static_cast<int64_t>(tensor.size() / 4)}, tensor);
  return r;
}

// A 64 MiB answer is read 4 MiB an event at most, so its progress is told while it is
// incomplete, in steps of at least 256 KiB, from the storage the whole answer then comes in.
TEST_F(NativeGrpcClient, ALargeAnswerIsToldAsItArrives) {
  GrpcTestUpstream up;
  std::vector<float> values(size_t{16} << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7717) * 0.75f;
  const std::string tensor = bytesOf(values);
  auto log = std::make_shared<ProgressLog>();
  GrpcCallOptions options;
  options.answer_progress = log;
  Answer a = call(tcp(up.port()), serialized(identityRequest(tensor)), options);
  ASSERT_TRUE(a.status.ok()) << a.status;
  std::string whole;
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(a.message.Dump(&slices).ok());
  for (const grpc::Slice& slice : slices) whole.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  ASSERT_FALSE(log->tells.empty());
  size_t last = 0;
  for (const ProgressLog::Tell& t : log->tells) {
    EXPECT_EQ(t.size, whole.size());
    EXPECT_LT(t.have, t.size);  // never the whole message: that comes with the status
    EXPECT_GE(t.have, last + kRelayStepBytes);
    last = t.have;
    EXPECT_TRUE(t.seen.view() == std::string_view(whole).substr(0, t.have)) << "the bytes told at " << t.have;
  }
  EXPECT_TRUE(parsed<inference::ModelInferResponse>(a.message).raw_output_contents(0) == tensor);
  destroy();
}

// A progress taking blocks (AnswerProgress::takesBlocks), keeping them until letGo(); the
// bytes of the blocks it was told, in order. Loop thread.
struct BlockKeeper final : AnswerProgress {
  void onProgress(const codecs::MutableBuffer&, size_t, size_t) override { ++progress_tells; }
  bool takesBlocks(size_t size) override {
    asked = size;
    return true;
  }
  void onBlock(codecs::Buffer block) override {
    largest = std::max(largest, block.size());
    text += block.view();
    if (keeping) {
      kept_bytes += block.size();
      kept.push_back(std::move(block));
    }
  }
  void letGo() {
    keeping = false;
    kept.clear();
  }
  size_t asked = 0, largest = 0, kept_bytes = 0;
  int progress_tells = 0;
  bool keeping = true;
  std::vector<codecs::Buffer> kept;
  std::string text;
};

// A 64 MiB answer to a progress that takes blocks and keeps them: the upstream may send the
// stream's window (kRelayWindowBytes) and no more until the blocks are let go of; then the
// rest comes, and the blocks together are the answer's message. The call's own answer is
// empty.
TEST_F(NativeGrpcClient, AnAnswerInBlocksIsHeldToTheWindowTheBlocksLetGo) {
  GrpcTestUpstream up;
  std::string tensor(size_t{64} << 20, '\0');
  for (size_t i = 0; i < tensor.size(); ++i) tensor[i] = static_cast<char>(i * 13 % 251);
  auto keeper = std::make_shared<BlockKeeper>();
  GrpcCallOptions options;
  options.answer_progress = keeper;
  Pending p = start(tcp(up.port()), serialized(identityRequest(tensor)), options);
  size_t kept = 0;
  for (int i = 0, steady = 0; i < 400 && steady < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    size_t now = 0;
    loop_.run([&] { now = keeper->kept_bytes; });
    steady = now == kept && now > 0 ? steady + 1 : 0;
    kept = now;
  }
  EXPECT_GT(kept, kRelayWindowBytes / 2);
  EXPECT_LE(kept, kRelayWindowBytes) << "the upstream sent past the window the blocks hold";
  EXPECT_NE(p.answer.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  loop_.run([&] { keeper->letGo(); });
  Answer a = wait(p.answer);
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.message.Length(), 0u) << "the message went to the blocks";
  loop_.run([&] {
    EXPECT_EQ(keeper->progress_tells, 0);
    EXPECT_EQ(keeper->asked, keeper->text.size());
    EXPECT_LE(keeper->largest, kRelayBlockBytes);
    inference::ModelInferResponse answer;
    ASSERT_TRUE(answer.ParseFromString(keeper->text));
    ASSERT_EQ(answer.raw_output_contents_size(), 1);
    EXPECT_TRUE(answer.raw_output_contents(0) == tensor);
  });
  destroy();
}

// Small answers, and calls without answer_progress, are never told; a callee that cancels
// the call from onProgress ends it there with CANCELLED, told once, and the connection
// serves the next call.
TEST_F(NativeGrpcClient, SmallAnswersAreNotToldAndACancelFromProgressEndsTheCall) {
  GrpcTestUpstream up;
  auto log = std::make_shared<ProgressLog>();
  GrpcCallOptions options;
  options.answer_progress = log;
  Answer small = call(tcp(up.port()), serialized(simpleRequest("", 3)), options);
  ASSERT_TRUE(small.status.ok()) << small.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(small.message), 3);
  EXPECT_TRUE(log->tells.empty());

  const std::string tensor(size_t{64} << 20, '\x11');
  auto promise = std::make_shared<std::promise<Answer>>();
  std::future<Answer> answer = promise->get_future();
  loop_.run([&] {
    log->cancel = client_->unary(tcp(up.port()), kModelInfer, serialized(identityRequest(tensor)), options,
                                 [promise](codecs::Status status, grpc::ByteBuffer message) {
                                   promise->set_value(Answer{std::move(status), std::move(message), true});
                                 });
  });
  Answer cancelled = wait(answer);
  EXPECT_EQ(cancelled.status.code(), absl::StatusCode::kCancelled) << cancelled.status;
  loop_.run([&] { EXPECT_EQ(log->tells.size(), 1u); log->cancel.reset(); });
  Answer next = call(tcp(up.port()), serialized(simpleRequest("", 4)));
  ASSERT_TRUE(next.status.ok()) << next.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(next.message), 4);
  destroy();
}

// HTTP/2 carries every call in flight on the one connection; answers find their calls.
TEST_F(NativeGrpcClient, ConcurrentCallsEachGetTheirOwnAnswer) {
  GrpcTestUpstream up;
  std::vector<Pending> calls;
  for (int32_t i = 0; i < 64; ++i) calls.push_back(start(tcp(up.port()), serialized(simpleRequest("", i * 10))));
  for (int32_t i = 0; i < 64; ++i) {
    Answer a = wait(calls[i].answer);
    ASSERT_TRUE(a.status.ok()) << i << ": " << a.status;
    expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message), i * 10);
  }
}

// The upstream's own errors come back as the grpc++ client's path makes them
// (toUpstreamStatus): the same code and text.
TEST_F(NativeGrpcClient, UpstreamErrorsMatchTheGrpcClientsWord) {
  GrpcTestUpstream up;
  config::UpstreamConfig config;
  config.name = "up";
  config.protocol = config::UpstreamConfig::Protocol::kGrpc;
  config.endpoints = {tcp(up.port())};
  GrpcUpstreamClient reference(config);
  inference::ModelInferRequest unknown = simpleRequest();
  unknown.set_model_name("no_such_model");
  inference::ModelInferRequest wrong_input = simpleRequest();
  wrong_input.mutable_inputs(1)->set_name("INPUT9");
  inference::ModelInferRequest bad_version = simpleRequest();
  bad_version.set_model_version("7");
  for (const auto* request : {&unknown, &wrong_input, &bad_version}) {
    std::promise<codecs::Status> expected;
    reference.unary(kModelInfer, serialized(*request), {},
                    [&](grpc::Status status, grpc::ByteBuffer) {
                      expected.set_value(toUpstreamStatus(status, "up", endpointName(up.port())));
                    });
    auto f = expected.get_future();
    ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
    codecs::Status want = f.get();
    ASSERT_FALSE(want.ok());
    Answer a = call(tcp(up.port()), serialized(*request));
    EXPECT_EQ(a.status.code(), want.code()) << a.status;
    EXPECT_EQ(codecs::messageOf(a.status), codecs::messageOf(want));
  }
}

// ---- metadata -------------------------------------------------------------------------

TEST_F(NativeGrpcClient, ConfiguredHeadersReachTheUpstreamAndReplaceForwardedOnes) {
  frontends::GrpcFrontendOptions options;
  options.restricted["inference"] = {"key", "v"};
  GrpcTestUpstream up("127.0.0.1:0", std::move(options));

  Answer refused = call(tcp(up.port()), serialized(simpleRequest()));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(codecs::messageOf(refused.status).ends_with("expecting header 'triton-grpc-protocol-key'"))
      << refused.status;

  GrpcLoopClientOptions keyed;
  keyed.headers.emplace_back("triton-grpc-protocol-key", "v");
  make(keyed);
  GrpcCallOptions forwarded;
  forwarded.metadata.emplace_back("triton-grpc-protocol-key", "wrong");  // replaced
  forwarded.metadata.emplace_back("x-request-tag", "kept");
  // What an HTTP client forwards that the gRPC call owns is not sent twice.
  forwarded.metadata.emplace_back("content-type", "application/json");
  forwarded.metadata.emplace_back("user-agent", "curl/7.88");
  forwarded.metadata.emplace_back("grpc-timeout", "1n");
  // Binary values go base64-encoded, whatever their bytes.
  forwarded.metadata.emplace_back("x-blob-bin", std::string("\x01\x00\n\xff", 4));
  Answer a = call(tcp(up.port()), serialized(simpleRequest()), forwarded);
  ASSERT_TRUE(a.status.ok()) << a.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message));
}

TEST_F(NativeGrpcClient, MetadataNoGrpcPeerAcceptsFailsTheCallUnsent) {
  GrpcTestUpstream up;
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"Upper-Case", "v"}, {"x-note", "caf\xc3\xa9"}, {"", "v"}, {"x-line", "a\nb"}}) {
    GrpcCallOptions options;
    options.metadata.emplace_back(key, value);
    Answer a = call(tcp(up.port()), serialized(simpleRequest()), options);
    EXPECT_EQ(a.status.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_TRUE(a.on_loop);
  }
  EXPECT_EQ(up.inferences("simple"), 0u);
  GrpcCallOptions binary;  // any bytes in a -bin value
  binary.metadata.emplace_back("x-blob-bin", std::string("\x00\xff\n", 3));
  EXPECT_TRUE(call(tcp(up.port()), serialized(simpleRequest()), binary).status.ok());
}

// ---- time -----------------------------------------------------------------------------

TEST_F(NativeGrpcClient, DeadlineEndsASlowCall) {
  GrpcTestUpstream up;
  GrpcCallOptions options;
  options.deadline = std::chrono::system_clock::now() + 200ms;
  const auto started = std::chrono::steady_clock::now();
  Answer a = call(tcp(up.port()), serialized(sleepRequest(10000)), options);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kDeadlineExceeded) << a.status;
  EXPECT_EQ(codecs::messageOf(a.status),
            "upstream 'up' (" + endpointName(up.port()) + ") timed out: Deadline Exceeded");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 9s);
  // The connection goes on serving.
  Answer next = call(tcp(up.port()), serialized(simpleRequest()));
  ASSERT_TRUE(next.status.ok()) << next.status;
}

TEST_F(NativeGrpcClient, CancelFromAnotherThreadEndsTheCallWithCancelled) {
  GrpcTestUpstream up;
  Pending p = start(tcp(up.port()), serialized(sleepRequest(10000)));
  p.handle->cancel();  // this thread is not the loop's: the cancel is posted
  Answer a = wait(p.answer, 9s);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kCancelled) << a.status;
  EXPECT_TRUE(a.on_loop);
  p.handle->cancel();  // after the end: nothing
  Answer next = call(tcp(up.port()), serialized(simpleRequest()));
  ASSERT_TRUE(next.status.ok()) << next.status;
}

// ---- connections ----------------------------------------------------------------------

TEST_F(NativeGrpcClient, NothingListeningIsUnavailableAndNotSent) {
  const int port = freePort();
  Answer a = call(tcp(port), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(wasNotSent(a.status));
  EXPECT_EQ(codecs::messageOf(a.status),
            "upstream 'up' (" + endpointName(port) + ") is unavailable: cannot connect: Connection refused");
}

// A listener that never accepts completes the TCP handshake and never speaks HTTP/2:
// connect_timeout bounds the wait for its SETTINGS.
TEST_F(NativeGrpcClient, ConnectTimeoutBoundsAPeerThatNeverSpeaks) {
  testing::IdleListener listener;
  GrpcLoopClientOptions options;
  options.connect_timeout = 200ms;
  make(options);
  Answer a = call(tcp(listener.port()), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(codecs::messageOf(a.status).ends_with("no HTTP/2 SETTINGS from the upstream within 200 ms of connecting"))
      << a.status;
}

// A peer that speaks HTTP/2 (its SETTINGS arrive) and then goes silent, as a host that
// vanished: the keepalive PING goes unanswered and the call, which has no deadline, fails.
TEST_F(NativeGrpcClient, AnUnansweredKeepalivePingFailsTheCalls) {
  testing::IdleListener listener;
  std::thread silent([fd = listener.fd()] {
    const int peer = ::accept(fd, nullptr, nullptr);
    if (peer < 0) return;
    const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};  // an empty SETTINGS frame
    EXPECT_EQ(::send(peer, settings, sizeof(settings), MSG_NOSIGNAL), 9);
    char buffer[4096];
    while (::recv(peer, buffer, sizeof(buffer), 0) > 0) {
    }
    ::close(peer);
  });
  GrpcLoopClientOptions options;
  options.keepalive_time = 100ms;
  options.keepalive_timeout = 100ms;
  make(options);
  Answer a = call(tcp(listener.port()), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable) << a.status;
  EXPECT_TRUE(codecs::messageOf(a.status).ends_with("no answer to a keepalive PING within 100 ms"))
      << a.status;
  destroy();  // closes the connection: the silent peer's read ends
  silent.join();
}

// A peer that breaks HTTP/2 (its first frame is no SETTINGS): the call fails as a broken
// protocol, and the GOAWAY naming the fault reaches the peer before the connection closes.
TEST_F(NativeGrpcClient, AProtocolErrorIsToldToThePeerBeforeTheClose) {
  testing::IdleListener listener;
  std::string received;
  std::thread peer_thread([fd = listener.fd(), &received] {
    const int peer = ::accept(fd, nullptr, nullptr);
    if (peer < 0) return;
    char buffer[4096];
    // The client's preface, SETTINGS and the call first: then the bad frame.
    while (received.size() < 24 + 9) {
      const ssize_t n = ::recv(peer, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, static_cast<size_t>(n));
    }
    const char ping[17] = {0, 0, 8, 6, 0, 0, 0, 0, 0, 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p'};
    EXPECT_EQ(::send(peer, ping, sizeof(ping), MSG_NOSIGNAL), 17);
    for (;;) {
      const ssize_t n = ::recv(peer, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, static_cast<size_t>(n));
    }
    ::close(peer);
  });
  Answer a = call(tcp(listener.port()), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kInvalidArgument) << a.status;
  EXPECT_NE(codecs::messageOf(a.status).find("broke the HTTP/2 protocol"), std::string::npos) << a.status;
  destroy();
  peer_thread.join();
  // Walk the client's frames after its 24-byte preface: the last is GOAWAY, PROTOCOL_ERROR.
  ASSERT_GT(received.size(), 24u);
  size_t at = 24;
  uint8_t last_type = 0xff;
  uint32_t last_code = 0;
  while (at + 9 <= received.size()) {
    const auto* h = reinterpret_cast<const uint8_t*>(received.data() + at);
    const size_t length = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
    if (at + 9 + length > received.size()) break;
    last_type = h[3];
    if (last_type == 7 && length >= 8) {
      last_code = (uint32_t{h[13]} << 24) | (uint32_t{h[14]} << 16) | (uint32_t{h[15]} << 8) | h[16];
    }
    at += 9 + length;
  }
  EXPECT_EQ(at, received.size());
  EXPECT_EQ(last_type, 7) << "the last frame is no GOAWAY";
  EXPECT_EQ(last_code, 1u);  // PROTOCOL_ERROR
}

// An HTTP/1.1 server answers the HTTP/2 preface with bytes that are no HTTP/2: 502.
TEST_F(NativeGrpcClient, APeerThatIsNotHttp2BreaksTheProtocol) {
  testing::HttpTestUpstream http1([](std::shared_ptr<http::HttpExchange> exchange) {
    exchange->respond(http::HttpResponse::json(200, "{}"));
  });
  auto bound = http1.listenOnLoopback();
  ASSERT_TRUE(bound.ok()) << bound.status();
  http1.start();
  Answer a = call(tcp(bound->port), serialized(simpleRequest()));
  EXPECT_FALSE(a.status.ok());
  EXPECT_EQ(a.status.code(), absl::StatusCode::kInvalidArgument) << a.status;
  EXPECT_EQ(codecs::originOf(a.status), codecs::ErrorOrigin::kUpstream);
  EXPECT_NE(codecs::messageOf(a.status).find("broke the HTTP/2 protocol"), std::string::npos) << a.status;
}

// The upstream goes away (its connection closes) and comes back on the same port: the next
// call opens a new connection, or is sent again on one when it met the dead one first.
TEST_F(NativeGrpcClient, AnUpstreamThatRestartedIsUsedAtTheFirstCall) {
  auto up = std::make_unique<GrpcTestUpstream>();
  const int port = up->port();
  ASSERT_TRUE(call(tcp(port), serialized(simpleRequest())).status.ok());
  up.reset();
  up = std::make_unique<GrpcTestUpstream>(endpointName(port));
  ASSERT_EQ(up->port(), port);
  Answer a = call(tcp(port), serialized(simpleRequest("", 5)));
  ASSERT_TRUE(a.status.ok()) << a.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message), 5);
}

// Calls to two upstreams in turn on one client: each reaches its own, over its own
// connection, counted by each upstream.
TEST_F(NativeGrpcClient, UpstreamsCalledInTurnEachGetTheirOwnCalls) {
  GrpcTestUpstream a, b;
  for (int i = 0; i < 7; ++i) {
    Answer r = call(tcp(i % 3 == 1 ? b.port() : a.port()), serialized(simpleRequest("", i)));
    ASSERT_TRUE(r.status.ok()) << i << ": " << r.status;
    expectSimpleAnswer(parsed<inference::ModelInferResponse>(r.message), i);
  }
  EXPECT_EQ(a.inferences("simple"), 5u);
  EXPECT_EQ(b.inferences("simple"), 2u);
}

TEST_F(NativeGrpcClient, UnixSocketEndpoint) {
  const std::string path =
      ::testing::TempDir() + "infergate_grpc_native_" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  {
    GrpcTestUpstream up("unix:" + path);
    config::ListenAddress endpoint;
    endpoint.kind = config::ListenAddress::Kind::kUnix;
    endpoint.path = path;
    ASSERT_TRUE(client_->serves(endpoint));
    Answer a = call(endpoint, serialized(simpleRequest()));
    ASSERT_TRUE(a.status.ok()) << a.status;
    expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message));
  }
  ::unlink(path.c_str());
}

// Without discovery's addresses a host name is grpc++'s to resolve; with them, this
// client's too.
TEST_F(NativeGrpcClient, ServesLiteralsAndUnixPathsAndHostNamesOnlyWithTheirAddresses) {
  config::ListenAddress named = tcp(80);
  named.host = "upstream.local";
  EXPECT_FALSE(client_->serves(named));
  config::ListenAddress v6 = tcp(80);
  v6.host = "::1";
  EXPECT_TRUE(client_->serves(v6));
  EXPECT_TRUE(client_->serves(tcp(80)));
  GrpcLoopClientOptions options;
  options.hosts = std::make_shared<HostAddresses>();
  make(options);
  EXPECT_TRUE(client_->serves(named));
  EXPECT_TRUE(client_->serves(v6));
}

// ---- host names ----------------------------------------------------------------------

config::ListenAddress named(std::string host, int port) {
  config::ListenAddress a = tcp(port);
  a.host = std::move(host);
  return a;
}

// A host name goes to the addresses discovery resolved it to, in turn: 127.0.0.2 refuses
// (nothing listens there), 127.0.0.1 answers, and the next connection starts there.
TEST_F(NativeGrpcClient, AHostNameIsCalledAtTheFirstOfItsAddressesThatTakesTheConnection) {
  GrpcTestUpstream up;
  auto hosts = std::make_shared<HostAddresses>();
  hosts->resolved("Upstream.Test", {"127.0.0.2", "127.0.0.1"});
  GrpcLoopClientOptions options;
  options.hosts = hosts;
  make(options);
  Answer a = call(named("upstream.test", up.port()), serialized(simpleRequest("", 5)));
  ASSERT_TRUE(a.status.ok()) << a.status;
  expectSimpleAnswer(parsed<inference::ModelInferResponse>(a.message), 5);
  EXPECT_EQ(hosts->find("upstream.test")->preferred.load(), 1u);
  EXPECT_EQ(up.inferences("simple"), 1u);

}

// A new connection starts at the address that connected last: with upstreams on both
// addresses (one port), where `preferred` points decides which one is called.
TEST_F(NativeGrpcClient, ANewConnectionToAHostNameStartsAtTheAddressThatConnectedLast) {
  GrpcTestUpstream first;
  GrpcTestUpstream second("127.0.0.2:" + std::to_string(first.port()));
  auto hosts = std::make_shared<HostAddresses>();
  hosts->resolved("upstream.test", {"127.0.0.1", "127.0.0.2"});
  GrpcLoopClientOptions options;
  options.hosts = hosts;
  for (size_t preferred : {1u, 0u, 1u}) {
    hosts->find("upstream.test")->preferred.store(preferred);
    make(options);  // no connection yet
    Answer a = call(named("upstream.test", first.port()), serialized(simpleRequest()));
    ASSERT_TRUE(a.status.ok()) << a.status;
  }
  EXPECT_EQ(first.inferences("simple"), 1u);
  EXPECT_EQ(second.inferences("simple"), 2u);
}

// Every address refused: UNAVAILABLE, never sent (the fleet may try another endpoint),
// naming the endpoint as written.
TEST_F(NativeGrpcClient, AHostNameWhoseAddressesAllRefuseIsUnavailableAndUnsent) {
  const int port = freePort();
  auto hosts = std::make_shared<HostAddresses>();
  hosts->resolved("upstream.test", {"127.0.0.2", "127.0.0.3"});
  GrpcLoopClientOptions options;
  options.hosts = hosts;
  make(options);
  Answer a = call(named("upstream.test", port), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable) << a.status;
  EXPECT_TRUE(wasNotSent(a.status));
  EXPECT_NE(a.status.message().find("upstream 'up' (upstream.test:" + std::to_string(port) + ")"),
            std::string::npos) << a.status;
  EXPECT_NE(a.status.message().find("cannot connect"), std::string::npos) << a.status;
}

// A name that did not resolve, or that discovery never looked up: UNAVAILABLE naming the
// name and why, never sent.
TEST_F(NativeGrpcClient, AHostNameWithoutAddressesIsUnavailableNamingWhy) {
  auto hosts = std::make_shared<HostAddresses>();
  hosts->failed("gone.test", absl::NotFoundError("the name resolves to nothing"));
  GrpcLoopClientOptions options;
  options.hosts = hosts;
  make(options);
  Answer a = call(named("gone.test", 8001), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable) << a.status;
  EXPECT_TRUE(wasNotSent(a.status));
  EXPECT_NE(a.status.message().find("cannot resolve 'gone.test': the name resolves to nothing"),
            std::string::npos) << a.status;
  a = call(named("never.test", 8001), serialized(simpleRequest()));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kUnavailable) << a.status;
  EXPECT_NE(a.status.message().find("cannot resolve 'never.test': it was not looked up yet"),
            std::string::npos) << a.status;
}

// Destroying the client ends its calls without calling back (shutdown, once loops stopped).
TEST_F(NativeGrpcClient, DestroyingTheClientCallsNoOneBack) {
  GrpcTestUpstream up;
  auto called = std::make_shared<std::atomic<bool>>(false);
  loop_.run([&] {
    client_->unary(tcp(up.port()), kModelInfer, serialized(sleepRequest(300)), {},
                   [called](codecs::Status, grpc::ByteBuffer) { called->store(true); });
    client_.reset();
  });
  std::this_thread::sleep_for(600ms);  // past the upstream's answer, had the call lived
  loop_.run([] {});
  EXPECT_FALSE(called->load());
}

}  // namespace
}  // namespace infergate::gateway::upstream
