// GrpcUpstreamClient over TLS (config.tls) against the project's gRPC frontend serving TLS
// on loopback, with certificates made at test time (tls/testing/test_certs.h). The
// handshake's outcome is what is checked: verified by CA and name, server_name, mTLS,
// insecure_skip_verify, and a client whose files no longer load.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <future>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"
#include "tls/grpc_credentials.h"
#include "tls/testing/test_certs.h"

namespace infergate::gateway::upstream {
namespace {

using testing::GrpcTestUpstream;
using ClientAuth = config::ServerTlsConfig::ClientAuth;

constexpr char kServerReady[] = "/inference.GRPCInferenceService/ServerReady";
constexpr auto kWait = std::chrono::seconds(30);

class GrpcClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
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

  // ServerReady through a client built from `c`.
  static grpc::Status ready(const config::UpstreamConfig& c) {
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

TEST_F(GrpcClientTlsTest, VerifiesTheUpstreamByCaAndAddress) {
  serve();
  grpc::Status status = ready(upstreamWith(trusting()));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcClientTlsTest, ServerNameIsVerifiedInsteadOfTheAddress) {
  serve();
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "upstream.internal";
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcClientTlsTest, ServerNameNotInTheCertificateFailsTheConnection) {
  serve();
  config::UpstreamTlsConfig t = trusting();
  t.server_name = "elsewhere.internal";
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(GrpcClientTlsTest, AnotherCaFailsTheConnection) {
  serve();
  tls::testing::TestPki other("another CA");
  config::UpstreamTlsConfig t;
  t.ca = other.caCert();
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(GrpcClientTlsTest, InsecureSkipVerifyAcceptsAnUnverifiableUpstream) {
  serve();
  config::UpstreamTlsConfig t;  // no CA that knows the upstream's, no name checked
  t.insecure_skip_verify = true;
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcClientTlsTest, RequiredClientCertificateIsPresentedWhenGiven) {
  serve(ClientAuth::kRequire);
  EXPECT_EQ(ready(upstreamWith(trusting())).error_code(), grpc::StatusCode::UNAVAILABLE);
  config::UpstreamTlsConfig t = trusting();
  t.cert = pki_.cert("client");
  t.key = pki_.key("client");
  grpc::Status status = ready(upstreamWith(t));
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Insecure toward the upstream still presents the certificate.
  t.ca.clear();
  t.insecure_skip_verify = true;
  status = ready(upstreamWith(t));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcClientTlsTest, UnixSocketEndpointSpeaksTlsVerifiedAsServerName) {
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
  grpc::Status status = ready(c);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Without it the name checked is "localhost", which the certificate does not hold.
  c.tls->server_name.clear();
  EXPECT_EQ(ready(c).error_code(), grpc::StatusCode::UNAVAILABLE);
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

}  // namespace
}  // namespace infergate::gateway::upstream
