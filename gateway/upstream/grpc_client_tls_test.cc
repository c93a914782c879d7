// The two gRPC upstream clients over TLS (config.tls), grpc++'s (GrpcUpstreamClient) and
// the loop's own (GrpcLoopClient with a tls::ClientContext), against the project's gRPC
// frontend serving TLS on loopback (and a scripted nghttp2 upstream where the test must see
// a call's :authority) (grpc++'s server, an implementation of TLS and HTTP/2
// not the gateway's; the native server for large messages both ways), with certificates
// made at test time (tls/testing/test_certs.h). The handshake's outcome is what is
// checked, the same for both clients: verified by CA and name, server_name, mTLS,
// insecure_skip_verify, unix sockets; then what only one of them does (a client whose
// files no longer load; the native client's failed and unanswered handshakes, which reach
// no upstream, an upstream gone mid-call, a plaintext upstream). Session resumption is
// tls/client_session_test.cc's.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <unistd.h>

#include <csignal>
#include <cstring>

#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/http/loop_thread_testing.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/grpc_client_native.h"
#include "gateway/upstream/grpc_test_messages.h"
#include "gateway/upstream/upstream_status.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"
#include "tls/client_session.h"
#include "tls/grpc_credentials.h"
#include "tls/server_context.h"
#include "tls/testing/test_certs.h"

namespace infergate::gateway::upstream {
namespace {

using testing::GrpcTestUpstream;
using ClientAuth = config::ServerTlsConfig::ClientAuth;

constexpr char kServerReady[] = "/inference.GRPCInferenceService/ServerReady";
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr auto kWait = std::chrono::seconds(30);

enum class Engine { kGrpcpp, kNative };

// The native client's answer as grpc++'s would be: the codes are the same numbers.
grpc::Status asGrpc(const codecs::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(codecs::messageOf(status)));
}

// A GrpcLoopClient built from an upstream's config, as UpstreamSet builds it, on its own
// loop thread.
class NativeTlsClient {
 public:
  explicit NativeTlsClient(const config::UpstreamConfig& c,
                           std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(5000)) {
    auto loaded = tls::loadClientTls(c.name, *c.tls);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return;
    auto context = tls::ClientContext::create(*loaded, {"h2"});
    EXPECT_TRUE(context.ok()) << context.status();
    if (!context.ok()) return;
    context_ = *context;
    GrpcLoopClientOptions options;
    options.upstream_name = c.name;
    options.tls = context_;
    options.connect_timeout = connect_timeout;
    loop_.run([&] { client_ = std::make_unique<GrpcLoopClient>(loop_.loop(), options); });
  }
  ~NativeTlsClient() {
    loop_.run([&] { client_.reset(); });
  }

  struct Answer {
    grpc::Status status;
    grpc::ByteBuffer message;
    bool not_sent = false;  // markNotSent: the fleet may send it to another endpoint
  };
  // One call of `method` to `endpoint`; `started` runs on the test's thread once it is.
  Answer call(const config::ListenAddress& endpoint, std::string_view method, const grpc::ByteBuffer& request,
              const std::function<void()>& started = {}) {
    if (client_ == nullptr) return {grpc::Status(grpc::StatusCode::INTERNAL, "test: no client"), {}};
    auto promise = std::make_shared<std::promise<Answer>>();
    auto answer = promise->get_future();
    GrpcCallOptions options;
    options.deadline = std::chrono::system_clock::now() + kWait;
    loop_.run([&] {
      client_->unary(endpoint, method, codecs::MovableByteBuffer(request), options,
                     [promise](codecs::Status status, codecs::MovableByteBuffer message) {
                       promise->set_value(Answer{asGrpc(status), std::move(message), wasNotSent(status)});
                     });
    });
    if (started) started();
    if (answer.wait_for(kWait) != std::future_status::ready) {
      return {grpc::Status(grpc::StatusCode::INTERNAL, "test: no answer within 30 s"), {}};
    }
    return answer.get();
  }

 private:
  http::LoopThread loop_;
  std::shared_ptr<const tls::ClientContext> context_;
  std::unique_ptr<GrpcLoopClient> client_;
};

class GrpcClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As main() does: OpenSSL writes to the socket with write(), which raises SIGPIPE when
    // the upstream has closed (one that refused the client's certificate).
    ::signal(SIGPIPE, SIG_IGN);
    tls::testing::LeafOptions server;
    server.common_name = "upstream.internal";
    server.dns_names = {"upstream.internal"};
    server.ip_addresses = {"127.0.0.1"};
    pki_.issue("server", server);
    tls::testing::LeafOptions client;
    client.common_name = "gateway";
    client.dns_names = {"gateway.internal"};
    client.ip_addresses = {};
    client.client = true;
    pki_.issue("client", client);
  }

  // The upstream's TLS settings: the test server certificate, `auth` toward clients
  // (their CA: the test CA).
  config::ServerTlsConfig serverTls(ClientAuth auth = ClientAuth::kNone) const {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    if (auth != ClientAuth::kNone) c.client_ca = pki_.caCert();
    c.client_auth = auth;
    return c;
  }

  // The upstream, serving TLS with `auth` toward clients, on `address`.
  void serve(ClientAuth auth = ClientAuth::kNone, const std::string& address = "127.0.0.1:0") {
    auto credentials = tls::serverCredentials(serverTls(auth));
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    frontends::GrpcFrontendOptions options;
    options.credentials = *credentials;
    upstream_ = std::make_unique<GrpcTestUpstream>(address, std::move(options));
    if (address.starts_with("unix:")) return;
    ASSERT_GT(upstream_->port(), 0);
  }

  config::UpstreamConfig upstreamWith(config::UpstreamTlsConfig tls) const {
    return upstreamAt(upstream_->port(), std::move(tls));
  }
  // The same toward another upstream on 127.0.0.1:`port`.
  static config::UpstreamConfig upstreamAt(int port, config::UpstreamTlsConfig tls) {
    config::UpstreamConfig c;
    c.name = "up";
    c.protocol = config::UpstreamConfig::Protocol::kGrpc;
    config::ListenAddress a;
    a.kind = config::ListenAddress::Kind::kTcp;
    a.host = "127.0.0.1";
    a.port = static_cast<uint16_t>(port);
    c.endpoints = {a};
    c.channels = 1;
    c.tls = std::move(tls);
    return c;
  }

  config::UpstreamTlsConfig trusting() const {
    config::UpstreamTlsConfig t;
    t.ca = pki_.caCert();
    return t;
  }

  // ServerReady through a client built from `c`: grpc++'s, or the native one.
  static grpc::Status ready(const config::UpstreamConfig& c, Engine engine = Engine::kGrpcpp) {
    if (engine == Engine::kNative) {
      NativeTlsClient client(c);
      return client.call(c.endpoints[0], kServerReady, testing::serialized(inference::ServerReadyRequest())).status;
    }
    GrpcUpstreamClient client(c);
    auto promise = std::make_shared<std::promise<grpc::Status>>();
    auto answer = promise->get_future();
    GrpcCallOptions options;
    options.deadline = std::chrono::system_clock::now() + kWait;
    client.unary(kServerReady, testing::serialized(inference::ServerReadyRequest()), options,
                 [promise](grpc::Status status, grpc::ByteBuffer) { promise->set_value(status); });
    if (answer.wait_for(kWait) != std::future_status::ready) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "test: no answer within 30 s");
    }
    return answer.get();
  }

  tls::testing::TestPki pki_;
  std::unique_ptr<GrpcTestUpstream> upstream_;
};

class GrpcClientTlsEngines : public GrpcClientTlsTest, public ::testing::WithParamInterface<Engine> {};

INSTANTIATE_TEST_SUITE_P(Clients, GrpcClientTlsEngines, ::testing::Values(Engine::kGrpcpp, Engine::kNative),
                         [](const ::testing::TestParamInfo<Engine>& info) {
                           return info.param == Engine::kGrpcpp ? "Grpcpp" : "Native";
                         });

TEST_P(GrpcClientTlsEngines, VerifiesTheUpstreamByCaAndAddress) {
  serve();
  grpc::Status status = ready(upstreamWith(trusting()), GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, ServerNameIsVerifiedInsteadOfTheAddress) {
  serve();
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "upstream.internal";
  grpc::Status status = ready(upstreamWith(t), GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, ServerNameNotInTheCertificateFailsTheConnection) {
  serve();
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "elsewhere.internal";
  grpc::Status status = ready(upstreamWith(t), GetParam());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, AnotherCaFailsTheConnection) {
  serve();
  tls::testing::TestPki other("another CA");
  config::UpstreamTlsConfig t;
  t.ca = other.caCert();
  grpc::Status status = ready(upstreamWith(t), GetParam());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, InsecureSkipVerifyAcceptsAnUnverifiableUpstream) {
  serve();
  config::UpstreamTlsConfig t;  // no CA that knows the upstream's, no name checked
  t.insecure_skip_verify = true;
  grpc::Status status = ready(upstreamWith(t), GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, RequiredClientCertificateIsPresentedWhenGiven) {
  serve(ClientAuth::kRequire);
  EXPECT_EQ(ready(upstreamWith(trusting()), GetParam()).error_code(), grpc::StatusCode::UNAVAILABLE);
  config::UpstreamTlsConfig t = trusting();
  t.cert = pki_.cert("client");
  t.key = pki_.key("client");
  grpc::Status status = ready(upstreamWith(t), GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Insecure toward the upstream still presents the certificate.
  t.ca.clear();
  t.insecure_skip_verify = true;
  status = ready(upstreamWith(t), GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_P(GrpcClientTlsEngines, UnixSocketEndpointSpeaksTlsVerifiedAsServerName) {
  const std::string path = ::testing::TempDir() + "infergate_grpc_client_tls_" +
                           std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  serve(ClientAuth::kNone, "unix:" + path);
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "upstream.internal";
  config::UpstreamConfig c;
  c.name = "up";
  c.protocol = config::UpstreamConfig::Protocol::kGrpc;
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kUnix;
  a.path = path;
  c.endpoints = {a};
  c.tls = t;
  grpc::Status status = ready(c, GetParam());
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Without it the name checked is "localhost", which the certificate does not hold.
  c.tls->server_name.clear();
  EXPECT_EQ(ready(c, GetParam()).error_code(), grpc::StatusCode::UNAVAILABLE);
  upstream_.reset();
  ::unlink(path.c_str());
}

// A TLS gRPC upstream of nghttp2 and blocking OpenSSL on a thread of its own (the
// listeners' tls::ServerContext, ALPN h2): it answers each call with an empty message and
// status 0, and records its :authority, which the project's servers do not show.
class AuthorityRecordingUpstream {
 public:
  explicit AuthorityRecordingUpstream(std::shared_ptr<const tls::ServerContext> context)
      : context_(std::move(context)) {
    thread_ = std::thread([this] { run(); });
  }
  ~AuthorityRecordingUpstream() {
    stop_.store(true);
    thread_.join();
  }
  AuthorityRecordingUpstream(const AuthorityRecordingUpstream&) = delete;
  AuthorityRecordingUpstream& operator=(const AuthorityRecordingUpstream&) = delete;

  int port() const { return listener_.port(); }
  std::vector<std::string> authorities() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorities_;
  }

 private:
  struct Session {
    AuthorityRecordingUpstream* self;
    SSL* ssl;
    nghttp2_session* h2 = nullptr;
  };

  static ssize_t onSend(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
    const int n = SSL_write(static_cast<Session*>(user)->ssl, data, static_cast<int>(length));
    return n > 0 ? n : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  static int onHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    if (std::string_view(reinterpret_cast<const char*>(name), namelen) == ":authority") {
      auto* self = static_cast<Session*>(user)->self;
      std::lock_guard<std::mutex> lock(self->mu_);
      self->authorities_.emplace_back(reinterpret_cast<const char*>(value), valuelen);
    }
    return 0;
  }
  static ssize_t onReadAnswer(nghttp2_session* h2, int32_t stream_id, uint8_t* buf, size_t length,
                                    uint32_t* flags, nghttp2_data_source*, void*) {
    static constexpr uint8_t kEmptyMessage[5] = {0, 0, 0, 0, 0};  // uncompressed, length 0
    if (length < sizeof(kEmptyMessage)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    std::memcpy(buf, kEmptyMessage, sizeof(kEmptyMessage));
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    static const nghttp2_nv kTrailers[] = {
        {const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>("grpc-status")),
         const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>("0")), 11, 1, NGHTTP2_NV_FLAG_NONE}};
    nghttp2_submit_trailer(h2, stream_id, kTrailers, 1);
    return sizeof(kEmptyMessage);
  }
  static int onFrameRecv(nghttp2_session* h2, const nghttp2_frame* frame, void*) {
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      static const nghttp2_nv kHead[] = {
          {const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(":status")),
           const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>("200")), 7, 3, NGHTTP2_NV_FLAG_NONE},
          {const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>("content-type")),
           const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>("application/grpc")), 12, 16, NGHTTP2_NV_FLAG_NONE}};
      nghttp2_data_provider body{};
      body.read_callback = &onReadAnswer;
      nghttp2_submit_response(h2, frame->hd.stream_id, kHead, 2, &body);
    }
    return 0;
  }

  void run() {
    while (!stop_.load()) {
      const int fd = listener_.accept(std::chrono::milliseconds(100));
      if (fd < 0) continue;
      serve(fd);
      ::close(fd);
    }
  }
  // One connection, until the client closes it or the upstream stops.
  void serve(int fd) {
    Session s{this, SSL_new(context_->get())};
    SSL_set_fd(s.ssl, fd);
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_send_callback(callbacks, &onSend);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &onHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &onFrameRecv);
    if (SSL_accept(s.ssl) == 1 && nghttp2_session_server_new(&s.h2, callbacks, &s) == 0) {
      nghttp2_submit_settings(s.h2, NGHTTP2_FLAG_NONE, nullptr, 0);
      pollfd in{fd, POLLIN, 0};
      uint8_t buffer[16384];
      while (!stop_.load() && nghttp2_session_send(s.h2) == 0) {
        if (SSL_pending(s.ssl) == 0 && ::poll(&in, 1, 100) != 1) continue;
        const int n = SSL_read(s.ssl, buffer, sizeof(buffer));
        if (n <= 0 || nghttp2_session_mem_recv(s.h2, buffer, static_cast<size_t>(n)) < 0) break;
      }
      nghttp2_session_del(s.h2);
    }
    nghttp2_session_callbacks_del(callbacks);
    SSL_free(s.ssl);
  }

  testing::IdleListener listener_;
  std::shared_ptr<const tls::ServerContext> context_;
  mutable std::mutex mu_;
  std::vector<std::string> authorities_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// As grpc's target name override: a call to an upstream with `server_name` carries that
// name as its :authority (a proxy in front of the upstream may route by it); without one,
// the endpoint's host and port.
TEST_P(GrpcClientTlsEngines, ServerNameIsTheCallsAuthority) {
  auto context = tls::ServerContext::create(serverTls(), {"h2"});
  ASSERT_TRUE(context.ok()) << context.status();
  AuthorityRecordingUpstream upstream(*context);
  config::UpstreamConfig c = upstreamAt(upstream.port(), trusting());
  c.tls->server_name = "upstream.internal";
  grpc::Status named = ready(c, GetParam());
  EXPECT_TRUE(named.ok()) << named.error_message();
  c.tls->server_name.clear();
  grpc::Status plain = ready(c, GetParam());
  EXPECT_TRUE(plain.ok()) << plain.error_message();
  const std::vector<std::string> seen = upstream.authorities();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "upstream.internal");
  EXPECT_EQ(seen[1], "127.0.0.1:" + std::to_string(upstream.port()));
}

TEST_F(GrpcClientTlsTest, FilesThatNoLongerLoadRefuseEveryCallRatherThanGoPlaintext) {
  serve();
  config::UpstreamTlsConfig t;
  t.ca = pki_.dir() + "/gone.pem";
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("upstream 'up': TLS is not set up: upstreams[up].tls.ca: " +
                                        t.ca),
            std::string::npos)
      << status.error_message();
}

// ---- the native client alone ------------------------------------------------------------

TEST_F(GrpcClientTlsTest, NativeSaysWhyTheHandshakeFailed) {
  serve();
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "elsewhere.internal";
  const config::UpstreamConfig c = upstreamWith(t);
  NativeTlsClient client(c);
  const auto a = client.call(c.endpoints[0], kServerReady, testing::serialized(inference::ServerReadyRequest()));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(a.status.error_message().find("is unavailable: the TLS handshake failed: handshake: "),
            std::string::npos)
      << a.status.error_message();
  EXPECT_NE(a.status.error_message().find(
                "certificate verify failed (hostname mismatch: the certificate is not for elsewhere.internal)"),
            std::string::npos)
      << a.status.error_message();
  // The request went no further than the session: another endpoint may take it.
  EXPECT_TRUE(a.not_sent);
}

TEST_F(GrpcClientTlsTest, NativeCarriesSixteenMebibytesEachWayToTheNativeServer) {
  // The gateway's own server at the other end: about a thousand records each way, reads
  // that stop with whole records left in the session, writes the socket takes in part.
  auto source = tls::ServerContextSource::create(serverTls(), {"h2"});
  ASSERT_TRUE(source.ok()) << source.status();
  frontends::GrpcFrontendOptions options;
  options.tls = *source;
  upstream_ = std::make_unique<GrpcTestUpstream>("127.0.0.1:0", std::move(options));
  ASSERT_GT(upstream_->port(), 0);
  const config::UpstreamConfig c = upstreamWith(trusting());
  NativeTlsClient client(c);
  std::vector<float> values(4 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000003) * 0.25f;
  const inference::ModelInferRequest request = testing::messages::identityRequest(values);
  for (int round = 0; round < 2; ++round) {  // the second on the same connection
    const auto a = client.call(c.endpoints[0], kModelInfer, testing::serialized(request));
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    const auto response = testing::messages::parsed<inference::ModelInferResponse>(a.message);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_TRUE(response.raw_output_contents(0) == request.raw_input_contents(0));
  }
}

TEST_F(GrpcClientTlsTest, NativeBoundsAHandshakeThePeerNeverAnswers) {
  testing::IdleListener listener;  // takes the connection, never speaks
  config::UpstreamConfig c;
  c.name = "up";
  c.endpoints = {testing::messages::tcp(listener.port())};
  c.tls = trusting();
  NativeTlsClient client(c, std::chrono::milliseconds(200));
  const auto a = client.call(c.endpoints[0], kServerReady, testing::serialized(inference::ServerReadyRequest()));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(a.status.error_message().ends_with("the TLS handshake did not finish within 200 ms of connecting"))
      << a.status.error_message();
  EXPECT_TRUE(a.not_sent);
}

TEST_F(GrpcClientTlsTest, NativeNeverFallsBackToPlaintextWithAPlaintextUpstream) {
  upstream_ = std::make_unique<GrpcTestUpstream>();  // h2c only
  const config::UpstreamConfig c = upstreamWith(trusting());
  NativeTlsClient client(c);
  const auto a = client.call(c.endpoints[0], kModelInfer, testing::serialized(testing::messages::simpleRequest()));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(a.status.error_message().find("the TLS handshake failed"), std::string::npos) << a.status.error_message();
  EXPECT_TRUE(a.not_sent);
  EXPECT_EQ(upstream_->inferences("simple"), 0u);  // nothing went through in plaintext
}

TEST_F(GrpcClientTlsTest, NativeTellsAnUpstreamGoneMidCallFromAFailedHandshake) {
  serve();
  const config::UpstreamConfig c = upstreamWith(trusting());
  NativeTlsClient client(c);
  ASSERT_TRUE(client.call(c.endpoints[0], kServerReady, testing::serialized(inference::ServerReadyRequest()))
                  .status.ok());
  // On the established connection: a call the upstream takes, then the upstream goes.
  const auto a = client.call(c.endpoints[0], kModelInfer, testing::serialized(testing::messages::sleepRequest(3000)),
                             [&] {
                               std::this_thread::sleep_for(std::chrono::milliseconds(300));
                               upstream_.reset();
                             });
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE) << a.status.error_message();
  EXPECT_EQ(a.status.error_message().find("handshake"), std::string::npos) << a.status.error_message();
  EXPECT_FALSE(a.not_sent);  // the upstream had it
}

}  // namespace
}  // namespace infergate::gateway::upstream
