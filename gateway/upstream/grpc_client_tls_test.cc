// The two gRPC upstream clients over TLS (config.tls), grpc++'s (GrpcUpstreamClient) and
// the loop's own (GrpcLoopClient with a tls::ClientContext), against the project's gRPC
// frontend serving TLS on loopback (grpc++'s server, an implementation of TLS and HTTP/2
// not the gateway's; the native server for large messages both ways), with certificates
// made at test time (tls/testing/test_certs.h). The handshake's outcome is what is
// checked, the same for both clients: verified by CA and name, server_name, mTLS,
// insecure_skip_verify, unix sockets; then what only one of them does (a client whose
// files no longer load; the native client's failed and unanswered handshakes, which reach
// no upstream, an upstream gone mid-call, a plaintext upstream). Session resumption is
// tls/client_session_test.cc's.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>

#include <functional>
#include <future>
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
      client_->unary(endpoint, method, request, options,
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

  // The upstream, serving TLS with `auth` toward clients (their CA: the test CA), on
  // `address`.
  void serve(ClientAuth auth = ClientAuth::kNone, const std::string& address = "127.0.0.1:0") {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    if (auth != ClientAuth::kNone) c.client_ca = pki_.caCert();
    c.client_auth = auth;
    auto credentials = tls::serverCredentials(c);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    frontends::GrpcFrontendOptions options;
    options.credentials = *credentials;
    upstream_ = std::make_unique<GrpcTestUpstream>(address, std::move(options));
    if (address.starts_with("unix:")) return;
    ASSERT_GT(upstream_->port(), 0);
  }

  config::UpstreamConfig upstreamWith(config::UpstreamTlsConfig tls) const {
    config::UpstreamConfig c;
    c.name = "up";
    c.protocol = config::UpstreamConfig::Protocol::kGrpc;
    config::ListenAddress a;
    a.kind = config::ListenAddress::Kind::kTcp;
    a.host = "127.0.0.1";
    a.port = static_cast<uint16_t>(upstream_->port());
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
  config::ServerTlsConfig server;
  server.cert = pki_.cert("server");
  server.key = pki_.key("server");
  auto source = tls::ServerContextSource::create(server, {"h2"});
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
