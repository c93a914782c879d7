// What only the gRPC frontend's native server does (grpc_native_server.h), on real
// sockets: its limits, clients that do not speak HTTP/2, a client that goes away, and
// shutdown. grpc_frontend_test.cc runs every RPC against both engines.

#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "codecs/buffer_pool.h"
#include "gateway/frontends/grpc_frontend_test_fixture.h"
#include "gateway/frontends/grpc_native_server_internal.h"

namespace infergate::gateway::frontends {
namespace {

using namespace testing_grpc;  // NOLINT(google-build-using-namespace)

class NativeServerTest : public GrpcFrontendTest {};

// True once `done()` holds, within 5 s.
template <typename Done>
bool within5s(Done done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(10ms);
  return done();
}

// A client on a raw socket, for what grpc's own clients never send: one call on stream 1,
// and the fields of the final header block that answers it.
class RawCall {
 public:
  // `receive_buffer`: as connectTo's.
  explicit RawCall(int port, int receive_buffer = 0) : fd_(connectTo(port, receive_buffer)) {
    nghttp2_hd_deflate_new(&deflater_, 4096);
    nghttp2_hd_inflate_new(&inflater_);
  }
  ~RawCall() {
    nghttp2_hd_deflate_del(deflater_);
    nghttp2_hd_inflate_del(inflater_);
    if (fd_ >= 0) ::close(fd_);
  }

  // The preface, SETTINGS, then HEADERS for `path` with `extra` fields, then `body` as DATA
  // (END_STREAM when `end`).
  void send(const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra,
            const std::string& body, bool end = true, const std::string& before = "") {
    std::string wire = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(NGHTTP2_SETTINGS, 0, 0, "") + before +
                       frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, headerBlock(path, extra));
    // DATA frames of HTTP/2's default largest size.
    constexpr size_t kFrame = 16384;
    for (size_t at = 0; at == 0 || at < body.size(); at += kFrame) {
      const bool last = at + kFrame >= body.size();
      wire += frame(NGHTTP2_DATA, end && last ? NGHTTP2_FLAG_END_STREAM : 0, 1, body.substr(at, kFrame));
    }
    ASSERT_EQ(::send(fd_, wire.data(), wire.size(), MSG_NOSIGNAL), static_cast<ssize_t>(wire.size()));
  }

  // After send(): HEADERS for `path` on stream `id`, no message yet (a call the server waits
  // on), or any other frames as they are.
  void open(int32_t id, const std::string& path) {
    sendRaw(frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, headerBlock(path, {})));
  }
  void sendRaw(const std::string& wire) {
    ASSERT_EQ(::send(fd_, wire.data(), wire.size(), MSG_NOSIGNAL), static_cast<ssize_t>(wire.size()));
  }
  static std::string reset(int32_t stream) { return frame(NGHTTP2_RST_STREAM, 0, stream, be32(NGHTTP2_CANCEL)); }

  // Frames for `before` that open the windows of what the server sends to HTTP/2's largest
  // (SETTINGS_INITIAL_WINDOW_SIZE, and the connection's WINDOW_UPDATE): only the sockets
  // then hold a large reply back.
  static std::string widestWindows() {
    constexpr uint32_t kLargest = 0x7fffffff;
    return frame(NGHTTP2_SETTINGS, 0, 0, std::string{0, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE} + be32(kLargest)) +
           windowUpdate(0, kLargest - 65535);
  }
  // A WINDOW_UPDATE of `bytes` for `stream` (0: the connection).
  static std::string windowUpdate(int32_t stream, uint32_t bytes) {
    return frame(NGHTTP2_WINDOW_UPDATE, 0, stream, be32(bytes));
  }

  // From now on every read that passes another `every` bytes received is followed by a
  // pause of `pause` (a client that reads slowly).
  void pauseEvery(size_t every, std::chrono::milliseconds pause) {
    pause_every_ = every;
    pause_ = pause;
  }
  // Bytes received so far.
  size_t received() const { return received_bytes_; }
  // From now on final() gives stream 1 back its window only once `step` bytes of its DATA
  // arrived, `pause` later (the stream's window is otherwise never given back).
  void paceWindow(size_t step, std::chrono::milliseconds pause) {
    window_step_ = step;
    window_pause_ = pause;
  }

  // The names of the fields received so far that were sent "never indexed".
  const std::set<std::string>& neverIndexed() const { return never_indexed_; }
  // The value of `name` in any header block received so far ("" when none had it).
  std::string received(const std::string& name) const {
    auto it = received_.find(name);
    return it == received_.end() ? "" : it->second;
  }

  // The error code of an RST_STREAM for stream 1 that arrives within 5 s, reading (and
  // dropping) every other frame meanwhile; -1 when none came.
  int64_t resetCode() {
    int64_t code = -1;
    readFrames([&code](uint8_t type, uint8_t, int32_t stream, const std::string& payload) {
      if (type != NGHTTP2_RST_STREAM || stream != 1 || payload.size() != 4) return false;
      code = (int64_t{uint8_t(payload[0])} << 24) | (int64_t{uint8_t(payload[1])} << 16) |
             (int64_t{uint8_t(payload[2])} << 8) | uint8_t(payload[3]);
      return true;
    });
    return code;
  }

  // The error code of a GOAWAY that arrives within 5 s, reading (and dropping) every other
  // frame meanwhile; -1 when none came.
  int64_t goawayCode() {
    int64_t code = -1;
    readFrames([&code](uint8_t type, uint8_t, int32_t, const std::string& payload) {
      if (type != NGHTTP2_GOAWAY || payload.size() < 8) return false;
      code = (int64_t{uint8_t(payload[4])} << 24) | (int64_t{uint8_t(payload[5])} << 16) |
             (int64_t{uint8_t(payload[6])} << 8) | uint8_t(payload[7]);
      return true;
    });
    return code;
  }

  // The fields of stream 1's header block that ends it; empty when none came within 5 s.
  std::map<std::string, std::string> final() {
    std::map<std::string, std::string> last;
    readFrames([this, &last](uint8_t type, uint8_t flags, int32_t, const std::string& payload) {
      if (type != NGHTTP2_HEADERS) return false;
      std::map<std::string, std::string> fields = inflate(payload);
      if ((flags & NGHTTP2_FLAG_END_STREAM) == 0) return false;
      last = std::move(fields);
      return true;
    });
    return last;
  }

 public:
  static std::string frame(uint8_t type, uint8_t flags, int32_t stream, const std::string& payload) {
    std::string f = {char(payload.size() >> 16), char(payload.size() >> 8), char(payload.size()), char(type),
                     char(flags), char(stream >> 24), char(stream >> 16), char(stream >> 8), char(stream)};
    return f + payload;
  }

 private:
  static std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

  // A request's header block for `path` with `extra` fields, in this connection's HPACK state.
  std::string headerBlock(const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "x"},
        {"content-type", "application/grpc"}, {"te", "trailers"}};
    fields.insert(fields.end(), extra.begin(), extra.end());
    std::vector<nghttp2_nv> nva;
    for (auto& [k, v] : fields) {
      nva.push_back({reinterpret_cast<uint8_t*>(k.data()), reinterpret_cast<uint8_t*>(v.data()), k.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    std::string block(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()), '\0');
    const ssize_t n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<uint8_t*>(block.data()), block.size(),
                                           nva.data(), nva.size());
    EXPECT_GT(n, 0);
    block.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
    return block;
  }

  // Reads for at most 5 s, as the client set up (pauseEvery, paceWindow), handing each
  // whole frame to `visit(type, flags, stream, payload)` until it returns true (then true)
  // or the server closes the connection (false).
  template <typename Visit>
  bool readFrames(Visit visit) {
    std::string in;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      in.append(buffer, static_cast<size_t>(n));
      received_bytes_ += static_cast<size_t>(n);
      if (pause_every_ > 0 &&
          received_bytes_ / pause_every_ != (received_bytes_ - static_cast<size_t>(n)) / pause_every_) {
        std::this_thread::sleep_for(pause_);
      }
      while (in.size() >= 9) {
        const size_t length = (size_t{uint8_t(in[0])} << 16) | (size_t{uint8_t(in[1])} << 8) | uint8_t(in[2]);
        if (in.size() < 9 + length) break;
        const uint8_t type = in[3], flags = in[4];
        const int32_t stream = (int32_t{uint8_t(in[5]) & 0x7f} << 24) | (int32_t{uint8_t(in[6])} << 16) |
                               (int32_t{uint8_t(in[7])} << 8) | uint8_t(in[8]);
        const std::string payload = in.substr(9, length);
        in.erase(0, 9 + length);
        if (type == NGHTTP2_DATA && window_step_ > 0 && (data_unacknowledged_ += length) >= window_step_) {
          // A client that gives stream 1 its window back slowly, a step at a time.
          std::this_thread::sleep_for(window_pause_);
          const std::string update = windowUpdate(1, static_cast<uint32_t>(data_unacknowledged_));
          data_unacknowledged_ = 0;
          EXPECT_EQ(::send(fd_, update.data(), update.size(), MSG_NOSIGNAL), static_cast<ssize_t>(update.size()));
        }
        if (visit(type, flags, stream, payload)) return true;
      }
    }
    return false;
  }

  std::map<std::string, std::string> inflate(const std::string& block) {
    std::map<std::string, std::string> fields;
    const auto* in = reinterpret_cast<const uint8_t*>(block.data());
    size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t used = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, left, 1);
      if (used < 0) break;
      in += used;
      left -= static_cast<size_t>(used);
      if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
        std::string name(reinterpret_cast<char*>(nv.name), nv.namelen);
        fields[name] = std::string(reinterpret_cast<char*>(nv.value), nv.valuelen);
        if ((nv.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0) never_indexed_.insert(name);
        received_[name] = fields[name];
      }
      if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
        nghttp2_hd_inflate_end_headers(inflater_);
        break;
      }
      if (used == 0 && left == 0) break;
    }
    return fields;
  }

  int fd_;
  size_t received_bytes_ = 0;
  size_t window_step_ = 0, data_unacknowledged_ = 0;
  std::chrono::milliseconds window_pause_{0};
  size_t pause_every_ = 0;
  std::chrono::milliseconds pause_{0};
  std::set<std::string> never_indexed_;
  std::map<std::string, std::string> received_;  // every header block's fields so far
  nghttp2_hd_deflater* deflater_ = nullptr;
  nghttp2_hd_inflater* inflater_ = nullptr;
};

// `request` as one gRPC message: the uncompressed flag, the length, the bytes.
std::string grpcFramed(const ModelInferRequest& request) {
  const std::string message = request.SerializeAsString();
  const size_t n = message.size();
  return std::string{0, char(n >> 24), char(n >> 16), char(n >> 8), char(n)} + message;
}

// HTTP/2 carries metadata grpc cannot (grpc++ aborts the process on relaying it): refused
// with a status naming the key, on ModelInfer and on a relayed RPC alike.
TEST_P(NativeServerTest, MetadataGrpcCannotCarryIsRefusedNamingIt) {
  const std::string empty_message(5, '\0');
  for (const auto& [path, key, value] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/inference.GRPCInferenceService/ServerLive", "x-a", "caf\xc3\xa9"},
           {"/grpc.health.v1.Health/Check", "x!y", "v"},
           {"/inference.GRPCInferenceService/ModelInfer", "x-a", "a\tb"}}) {
    RawCall call(frontend_->port());
    call.send(path, {{key, value}}, empty_message);
    std::map<std::string, std::string> fields = call.final();
    EXPECT_EQ(fields["grpc-status"], "3") << path << " " << key;
    EXPECT_NE(fields["grpc-message"].find("'" + key + "'"), std::string::npos) << fields["grpc-message"];
  }
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest("after"), &response).ok());
}

// A call's request id is new on every call: sent never indexed, it stays out of the HPACK
// table, where it would only push out the fields that repeat.
TEST_P(NativeServerTest, TheRequestIdIsSentNeverIndexed) {
  const std::string framed = grpcFramed(simpleRequest("ids"));
  RawCall call(frontend_->port());
  call.send("/inference.GRPCInferenceService/ModelInfer", {{"x-request-id", "client-chosen-1"}}, framed);
  std::map<std::string, std::string> fields = call.final();
  ASSERT_EQ(fields["grpc-status"], "0") << fields["grpc-message"];
  EXPECT_EQ(call.received("x-request-id"), "client-chosen-1");
  EXPECT_EQ(call.neverIndexed().count("x-request-id"), 1u);
  EXPECT_EQ(call.neverIndexed().count("content-type"), 0u);
  EXPECT_EQ(call.neverIndexed().count("grpc-status"), 0u);
}

// grpc's clients reset a stream they never opened (a call cancelled before its HEADERS went
// out); RFC 9113 makes that a connection error, which would end every call on it. The
// server lets it pass, as grpc's own servers do.
TEST_P(NativeServerTest, AResetOfAStreamNeverOpenedLeavesTheConnectionServing) {
  const std::string framed = grpcFramed(simpleRequest("kept"));
  RawCall call(frontend_->port());
  call.send("/inference.GRPCInferenceService/ModelInfer", {}, framed, true,
            RawCall::frame(NGHTTP2_RST_STREAM, 0, 7, std::string("\0\0\0\x08", 4)));
  std::map<std::string, std::string> fields = call.final();
  EXPECT_EQ(fields["grpc-status"], "0") << fields["grpc-message"];
}

TEST_P(NativeServerTest, AClientResettingStreamsPastItsLimitIsCutOffAndCounted) {
  // limits.grpc_reset_burst 3, grpc_resets_per_second 1: four calls reset at once are one
  // too many (the defaults, 1000 and 33, would let them pass).
  stopServer();
  GrpcFrontendOptions options;
  options.reset_burst = 3;
  options.resets_per_second = 1;
  startServer(1, options);
  const std::string method = "/inference.GRPCInferenceService/ModelInfer";
  RawCall call(frontend_->port());
  call.send(method, {}, "", /*end=*/false);
  for (const int32_t id : {3, 5, 7}) call.open(id, method);
  call.sendRaw(RawCall::reset(1) + RawCall::reset(3) + RawCall::reset(5));
  call.sendRaw(RawCall::reset(7));
  const http::ConnectionCaps& caps = *frontend_->connections();
  EXPECT_EQ(call.goawayCode(), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_TRUE(within5s([&] { return caps.resetFloods() == 1; }));
  EXPECT_TRUE(within5s([&] { return caps.open() == 0; }));
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest("after"), &response).ok());
  EXPECT_EQ(caps.resetFloods(), 1u);
}

TEST_P(NativeServerTest, AMessagePastTheLimitIsResourceExhaustedAndTheChannelGoesOn) {
  stopServer();
  GrpcFrontendOptions options;
  options.max_receive_message_bytes = 4096;
  startServer(2, options);
  ModelInferRequest big = simpleRequest("big");
  big.set_raw_input_contents(0, std::string(8192, '\0'));
  ModelInferResponse response;
  ::grpc::Status s = infer(big, &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("4096"), std::string::npos) << s.error_message();
  ASSERT_TRUE(infer(simpleRequest("small"), &response).ok());
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[5], 6);
}

TEST_P(NativeServerTest, MetadataPastTheLimitIsRefused) {
  stopServer();
  GrpcFrontendOptions options;
  options.max_metadata_bytes = 2048;
  startServer(2, options);
  ::grpc::ClientContext ctx;
  ctx.AddMetadata("x-large", std::string(4096, 'a'));
  ModelInferResponse response;
  ::grpc::Status s = stub_->ModelInfer(&ctx, simpleRequest(), &response);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ASSERT_TRUE(infer(simpleRequest("after"), &response).ok());
}

// Past the 64 KiB that HPACK decoders usually allow one field (nghttp2 ended the connection
// there): the whole block is still read, so the call alone is refused and the channel
// serves on. (server_connection_test checks that the connection itself goes on.)
TEST_P(NativeServerTest, AMetadataValuePastHpacksUsualLimitIsRefusedAndTheConnectionServesOn) {
  ::grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  auto channel = ::grpc::CreateCustomChannel(address_, ::grpc::InsecureChannelCredentials(), args);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  ::grpc::ClientContext ctx;
  ctx.AddMetadata("x-big", std::string(70000, 'v'));
  ModelInferResponse response;
  ::grpc::Status s = stub->ModelInfer(&ctx, simpleRequest(), &response);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("metadata"), std::string::npos) << s.error_message();
  // The connection's HPACK table stayed in step: the next call's block decodes.
  ::grpc::ClientContext after;
  ASSERT_TRUE(stub->ModelInfer(&after, simpleRequest("after"), &response).ok());
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
}

TEST_P(NativeServerTest, AClientThatDoesNotSpeakHttp2IsClosedAndServingGoesOn) {
  const int fd = connectTo(frontend_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  EXPECT_TRUE(closedByPeerWithin(fd, 5s));
  ::close(fd);
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

TEST_P(NativeServerTest, AConnectionSilentPastTheHandshakeTimeoutIsClosed) {
  stopServer();
  GrpcFrontendOptions options;
  options.handshake_timeout_ms = 100;
  startServer(1, options);
  const int fd = connectTo(frontend_->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(closedByPeerWithin(fd, 5s));
  ::close(fd);
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

TEST_P(NativeServerTest, AClientGoneMidCallCancelsItAndTheServerKeepsServing) {
  stopServer();
  startServer(1, {});
  for (int i = 0; i < 3; ++i) {
    // Its own channel, dropped with the call open: the connection closes under the call.
    ::grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    auto channel = ::grpc::CreateCustomChannel(address_, ::grpc::InsecureChannelCredentials(), args);
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    ::grpc::ClientContext ctx;
    ModelInferResponse response;
    std::promise<::grpc::Status> done;
    const ModelInferRequest request = sleepRequest(200, "gone");
    stub->async()->ModelInfer(&ctx, &request, &response,
                              [&](::grpc::Status s) { done.set_value(s); });
    std::this_thread::sleep_for(30ms);
    ctx.TryCancel();
    EXPECT_EQ(done.get_future().get().error_code(), ::grpc::StatusCode::CANCELLED);
  }
  ModelInferResponse response;
  ASSERT_TRUE(infer(sleepRequest(250), &response).ok());  // ends after the abandoned ones' timers
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[0], 250);
}

TEST_P(NativeServerTest, ShutdownLetsACallInFlightFinishWithinTheGrace) {
  ::grpc::ClientContext ctx;
  ModelInferResponse response;
  std::promise<::grpc::Status> done;
  ModelInferRequest request = sleepRequest(200, "late");
  stub_->async()->ModelInfer(&ctx, &request, &response, [&](::grpc::Status s) { done.set_value(s); });
  std::this_thread::sleep_for(50ms);
  frontend_->shutdown(5s);
  ::grpc::Status s = done.get_future().get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[0], 200);
  // Nothing listens any more.
  EXPECT_LT(connectTo(frontend_->port()), 0);
}

TEST_P(NativeServerTest, ManyCallsOnOneConnectionInterleave) {
  constexpr int kCalls = 64;
  std::vector<std::unique_ptr<::grpc::ClientContext>> contexts;
  std::vector<ModelInferResponse> responses(kCalls);
  std::vector<ModelInferRequest> requests;
  std::vector<std::promise<::grpc::Status>> done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    requests.push_back(i % 2 == 0 ? sleepRequest(20 + i, std::to_string(i)) : simpleRequest(std::to_string(i)));
    contexts.push_back(std::make_unique<::grpc::ClientContext>());
  }
  for (int i = 0; i < kCalls; ++i) {
    stub_->async()->ModelInfer(contexts[i].get(), &requests[i], &responses[i],
                               [&done, i](::grpc::Status s) { done[i].set_value(s); });
  }
  for (int i = 0; i < kCalls; ++i) {
    ::grpc::Status s = done[i].get_future().get();
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
    EXPECT_EQ(responses[i].id(), std::to_string(i));
    if (i % 2 == 0) {
      EXPECT_EQ(valuesOf<int32_t>(*outputBytes(responses[i], "OUTPUT0"))[0], 20 + i);
    }
  }
}

// A free block of `size`'s class from the shared pool, waiting up to 5 s for one to come
// back (a call's blocks are released on the server's loop, after its answer may have gone).
codecs::MutableBuffer freeBlockWithin5s(size_t size) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    codecs::MutableBuffer block = codecs::BufferPool::shared().takeFree(size);
    if (block.size() != 0 || std::chrono::steady_clock::now() > until) return block;
    std::this_thread::sleep_for(10ms);
  }
}

// A ModelInfer message past the 64 MiB chunk size lands in one block of its size from the
// first call (it may be handed over early, as one span), never in chunks; the answer
// carries the tensor back intact.
TEST_P(NativeServerTest, AModelInferMessagePastTheChunkSizeLandsInOneBlockOfItsSize) {
  using grpc_detail::native_server::kMaxReservedMessageBytes;
  constexpr int64_t kElements = (int64_t{64} << 20) / 4 + 1024;  // 64 MiB + 4 KiB of FP32
  std::vector<float> values(kElements);
  for (int64_t i = 0; i < kElements; ++i) values[i] = static_cast<float>(i % 65521) - 7.25f;
  const ModelInferRequest request = identityRequest(values);
  const size_t message_size = request.ByteSizeLong();
  ASSERT_GT(message_size, kMaxReservedMessageBytes);
  ASSERT_NE(codecs::BufferPool::classOf(message_size), codecs::BufferPool::classOf(kMaxReservedMessageBytes));
  // Free blocks of the chunk size, held: a chunk the call took would then be a fresh block,
  // free in the pool once the call is over.
  std::vector<codecs::MutableBuffer> held;
  for (codecs::MutableBuffer b = codecs::BufferPool::shared().takeFree(kMaxReservedMessageBytes); b.size() != 0;
       b = codecs::BufferPool::shared().takeFree(kMaxReservedMessageBytes)) {
    held.push_back(std::move(b));
  }

  ModelInferResponse response;
  ::grpc::Status s = infer(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_TRUE(response.raw_output_contents(0) == request.raw_input_contents(0));

  // The message's block comes back once the call is done (with any chunk it had).
  ASSERT_EQ(freeBlockWithin5s(message_size).size(), message_size);
  EXPECT_EQ(codecs::BufferPool::shared().takeFree(kMaxReservedMessageBytes).size(), 0u)
      << "the message was reserved in chunks of 64 MiB";
}

TEST_P(NativeServerTest, AStreamFloodingRequestsIsHeldBackByItsWindow) {
  // grpc++ takes one request at a time and each sleeps 3 s: what the client writes past
  // the relay's backlog and the stream's window waits in the client, not in the gateway.
  stopServer();
  GrpcFrontendOptions options;
  options.max_stream_requests_in_flight = 1;
  startServer(2, options);
  // 256 KiB each: 50 MiB in all.
  const int taken = floodStream(*stub_, 200, 1500ms, [](int i) { return paddedSleepRequest(i, 256 * 1024); });
  // The relay's backlog (8 MiB) and the stream's window (8 MiB), plus what the sockets and
  // grpc's client buffer: about 80 messages. Without the window held back, all of them.
  EXPECT_GT(taken, 8) << taken;
  EXPECT_LT(taken, 140) << taken;
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

TEST_P(NativeServerTest, RepliesAClientLeavesUnreadPauseTheRelayAndArriveWholeLater) {
  // 24 replies of 1 MiB on one stream that the client reads only after a pause: the relay
  // stops reading grpc++'s replies past its backlog (4 MiB), then reads on as the client
  // takes them; every reply arrives, whole and in order.
  constexpr int kRequests = 24;
  constexpr int64_t kElements = 256 * 1024;
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  std::vector<ModelInferRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(identityRequest(std::vector<float>(kElements, static_cast<float>(i) + 0.5f), std::to_string(i)));
    ASSERT_TRUE(stream->Write(requests.back()));
  }
  ASSERT_TRUE(stream->WritesDone());
  std::this_thread::sleep_for(1s);
  ModelStreamInferResponse r;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(stream->Read(&r)) << i;
    ASSERT_TRUE(r.error_message().empty()) << r.error_message();
    EXPECT_EQ(r.infer_response().id(), std::to_string(i));
    ASSERT_EQ(r.infer_response().raw_output_contents_size(), 1);
    EXPECT_TRUE(r.infer_response().raw_output_contents(0) == requests[i].raw_input_contents(0)) << i;
  }
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

// A client that asks for a large reply and then reads none of it: past the send timeout
// its connection is closed (it would take no GOAWAY either), counted, and the server
// serves on.
TEST_P(NativeServerTest, AClientThatTakesNoneOfItsReplyForTheSendTimeoutIsDisconnected) {
  stopServer();
  GrpcFrontendOptions options;
  options.send_timeout_ms = 200;
  startServer(1, options);
  constexpr int64_t kElements = 2 << 20;  // an 8 MiB reply: past the sockets' buffers
  RawCall call(frontend_->port(), 16 * 1024);
  call.send("/inference.GRPCInferenceService/ModelInfer", {},
            grpcFramed(identityRequest(std::vector<float>(kElements, 1.5f))), true, RawCall::widestWindows());
  const http::ConnectionCaps& caps = *frontend_->connections();
  ASSERT_TRUE(within5s([&] { return caps.sendTimeouts() == 1; }));
  EXPECT_TRUE(call.final().empty());  // no trailers: closed mid-reply
  EXPECT_LT(call.received(), size_t{kElements} * 4);
  EXPECT_TRUE(within5s([&] { return caps.open() == 0; }));
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
}

// The send timeout counts from the last write the socket took: a client that pauses often,
// and reads enough between pauses for the server's writes to go on (the kernel wakes a
// writer once a third of its send buffer, at most 4 MiB here, is free), gets its whole
// reply though its pauses add up to far past the timeout.
TEST_P(NativeServerTest, AClientThatReadsSlowlyButReadsGetsItsWholeReply) {
  stopServer();
  GrpcFrontendOptions options;
  options.send_timeout_ms = 1000;
  startServer(1, options);
  constexpr int64_t kElements = 3 << 20;  // a 12 MiB reply
  RawCall call(frontend_->port(), 64 * 1024);
  call.pauseEvery(512 * 1024, 100ms);  // 24 pauses, 2.4 s
  call.send("/inference.GRPCInferenceService/ModelInfer", {},
            grpcFramed(identityRequest(std::vector<float>(kElements, 1.5f))), true, RawCall::widestWindows());
  const std::map<std::string, std::string> trailers = call.final();
  EXPECT_EQ(trailers.count("grpc-status") ? trailers.at("grpc-status") : "none", "0");
  EXPECT_GT(call.received(), size_t{kElements} * 4);
  EXPECT_EQ(frontend_->connections()->sendTimeouts(), 0u);
}

// A client that reads its socket and opens the connection's window wide, but never gives a
// stream's reply more window than HTTP/2's first 64 KiB: past the send timeout (checked
// every send timeout) the stream is reset, CANCEL, its call cancelled and counted, and the
// connection stays open.
TEST_P(NativeServerTest, AStreamWhoseReplyGetsNoWindowIsResetAndTheConnectionServesOn) {
  stopServer();
  GrpcFrontendOptions options;
  options.send_timeout_ms = 200;
  startServer(1, options);
  RawCall call(frontend_->port());
  const std::string connection_window = RawCall::windowUpdate(0, 1 << 20);
  call.send("/inference.GRPCInferenceService/ModelInfer", {},
            grpcFramed(identityRequest(std::vector<float>(256 * 1024, 1.5f))),  // a 1 MiB reply
            true, connection_window);
  EXPECT_EQ(call.resetCode(), NGHTTP2_CANCEL);
  const http::ConnectionCaps& caps = *frontend_->connections();
  EXPECT_EQ(caps.sendTimeouts(), 1u);
  EXPECT_EQ(caps.open(), 1u);  // the raw connection, still open (the stub has not connected yet)
  ModelInferResponse response;
  EXPECT_TRUE(infer(simpleRequest(), &response).ok());
  EXPECT_EQ(caps.open(), 2u);
}

// The stream check counts progress, not time: a client that gives a stream its window back
// 64 KiB at a time, 100 ms apart, gets its whole 1 MiB reply though the reply takes longer
// than the send timeout (1 s; checked every second, each check sees bytes sent).
TEST_P(NativeServerTest, AStreamWhoseWindowComesBackSlowlyGetsItsWholeReply) {
  stopServer();
  GrpcFrontendOptions options;
  options.send_timeout_ms = 1000;
  startServer(1, options);
  constexpr int64_t kElements = 256 * 1024;
  RawCall call(frontend_->port());
  call.paceWindow(65535, 100ms);  // 17 steps: about 1.7 s
  const std::string connection_window = RawCall::windowUpdate(0, 1 << 20);
  call.send("/inference.GRPCInferenceService/ModelInfer", {},
            grpcFramed(identityRequest(std::vector<float>(kElements, 1.5f))), true, connection_window);
  const auto started = std::chrono::steady_clock::now();
  const std::map<std::string, std::string> trailers = call.final();
  EXPECT_EQ(trailers.count("grpc-status") ? trailers.at("grpc-status") : "none", "0");
  EXPECT_GT(call.received(), size_t{kElements} * 4);
  EXPECT_GT(std::chrono::steady_clock::now() - started, 900ms);  // the pacing held the reply back
  EXPECT_EQ(frontend_->connections()->sendTimeouts(), 0u);
}

TEST_P(NativeServerTest, ConnectionsPastTheCapsAreClosedAtAcceptAndCounted) {
  for (bool per_client : {false, true}) {
    SCOPED_TRACE(per_client ? "max_connections_per_client" : "max_connections");
    stopServer();
    GrpcFrontendOptions options;
    (per_client ? options.max_connections_per_client : options.max_connections) = 2;
    startServer(1, options);
    const http::ConnectionCaps& caps = *frontend_->connections();
    std::vector<int> open;
    for (int i = 0; i < 2; ++i) open.push_back(connectTo(frontend_->port()));
    ASSERT_TRUE(within5s([&] { return caps.open() == 2; }));
    const int over = connectTo(frontend_->port());
    ASSERT_GE(over, 0);
    EXPECT_TRUE(closedByPeerWithin(over, 5s));
    ::close(over);
    EXPECT_EQ(per_client ? caps.refusedOverClient() : caps.refusedOverTotal(), 1u);
    EXPECT_EQ(per_client ? caps.refusedOverTotal() : caps.refusedOverClient(), 0u);
    // Closing one makes room again: the stub's own connection is served.
    ::close(open.back());
    open.pop_back();
    ASSERT_TRUE(within5s([&] { return caps.open() == 1; }));
    ModelInferResponse response;
    EXPECT_TRUE(infer(simpleRequest(), &response).ok());
    EXPECT_EQ(caps.open(), 2u);
    for (int fd : open) ::close(fd);
  }
}

INSTANTIATE_TEST_SUITE_P(Native, NativeServerTest, ::testing::Values(GrpcServerEngine::kNative), engineName);

}  // namespace
}  // namespace infergate::gateway::frontends
