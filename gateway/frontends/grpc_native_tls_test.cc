// The native server over TLS (GrpcFrontendOptions::tls), on real sockets with certificates
// made at test time: calls served on the loop and calls relayed to grpc++ both carried
// through the TLS session, including a message of many records; the client certificate
// naming the principal of both kinds of call, and never taken from metadata; a plaintext
// client and a silent one closed while serving goes on; a context swapped in serving the
// connections from then on.

#include <unistd.h>

#include <csignal>

#include <fstream>
#include <sstream>

#include "codecs/text.h"
#include "config/config_loader.h"
#include "gateway/frontends/grpc_frontend_test_fixture.h"
#include "gateway/security.h"
#include "tls/server_context.h"
#include "tls/testing/test_certs.h"

namespace infergate::gateway::frontends {
namespace {

using namespace testing_grpc;  // NOLINT(google-build-using-namespace)
using ClientAuth = config::ServerTlsConfig::ClientAuth;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class NativeTlsTest : public GrpcFrontendTest {
 protected:
  void SetUp() override {
    // As main() does: OpenSSL writes to the socket with write(), which raises SIGPIPE when
    // the client has gone.
    ::signal(SIGPIPE, SIG_IGN);
    pki_.issue("server", tls::testing::LeafOptions{});  // localhost, 127.0.0.1, ::1
    pki_.issue("ops", clientLeaf("ops-console"));
    pki_.issue("other", clientLeaf("someone-else"));
    serveTls({});
  }

  static tls::testing::LeafOptions clientLeaf(const std::string& name) {
    tls::testing::LeafOptions leaf;
    leaf.common_name = name;
    leaf.dns_names = {};
    leaf.ip_addresses = {};
    leaf.client = true;
    return leaf;
  }

  config::ServerTlsConfig serverTls(const tls::testing::TestPki& pki) const {
    config::ServerTlsConfig c;
    c.cert = pki.cert("server");
    c.key = pki.key("server");
    c.client_ca = pki_.caCert();  // client certificates: always the first CA's
    c.client_auth = ClientAuth::kOptional;
    return c;
  }

  void serveTls(GrpcFrontendOptions options) {
    auto source = tls::ServerContextSource::create(serverTls(pki_), {"h2"});
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = *source;
    options.tls = source_;
    startServer(2, std::move(options));
    channel_ = secureChannel();
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  // A channel of its own (its own connection) trusting `ca`, presenting `client` ("": none).
  std::shared_ptr<::grpc::Channel> secureChannel(const std::string& client = "", std::string ca = "") const {
    ::grpc::SslCredentialsOptions o;
    o.pem_root_certs = readFile(ca.empty() ? pki_.caCert() : ca);
    if (!client.empty()) {
      o.pem_private_key = readFile(pki_.key(client));
      o.pem_cert_chain = readFile(pki_.cert(client));
    }
    ::grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    args.SetMaxReceiveMessageSize(INT_MAX);
    args.SetMaxSendMessageSize(INT_MAX);
    return ::grpc::CreateCustomChannel(address_, ::grpc::SslCredentials(o), args);
  }

  using Metadata = std::vector<std::pair<std::string, std::string>>;

  // A call's context: a 20 s deadline and `metadata`.
  static void prepare(::grpc::ClientContext& ctx, const Metadata& metadata) {
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  }

  static ::grpc::Status inferOn(const std::shared_ptr<::grpc::Channel>& channel, const Metadata& metadata = {}) {
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    ::grpc::ClientContext ctx;
    prepare(ctx, metadata);
    ModelInferResponse response;
    ::grpc::Status s = stub->ModelInfer(&ctx, simpleRequest("tls"), &response);
    if (s.ok() && valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[3] != 4) {
      return ::grpc::Status(::grpc::StatusCode::INTERNAL, "test: a wrong sum");
    }
    return s;
  }

  static ::grpc::Status indexOn(const std::shared_ptr<::grpc::Channel>& channel, const Metadata& metadata = {}) {
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    ::grpc::ClientContext ctx;
    prepare(ctx, metadata);
    inference::RepositoryIndexResponse index;
    ::grpc::Status s = stub->RepositoryIndex(&ctx, {}, &index);
    if (s.ok() && index.models_size() == 0) return ::grpc::Status(::grpc::StatusCode::INTERNAL, "test: no models");
    return s;
  }

  tls::testing::TestPki pki_;
  std::shared_ptr<tls::ServerContextSource> source_;
};

TEST_P(NativeTlsTest, ServesCallsOnTheLoopAndRelayedCallsOverTls) {
  // Relayed to grpc++ in process.
  {
    ::grpc::ClientContext ctx;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &ready).ok());
    EXPECT_TRUE(ready.ready());
  }
  // Served on the loop, twice on the one connection.
  ModelInferResponse response;
  ASSERT_TRUE(infer(simpleRequest("a"), &response).ok());
  EXPECT_EQ(valuesOf<int32_t>(*outputBytes(response, "OUTPUT0"))[3], 4);
  ASSERT_TRUE(infer(simpleRequest("b"), &response).ok());
  EXPECT_EQ(response.id(), "b");
  // A stream, relayed.
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(repeatRequest({10, 20}, /*empty_final=*/false)));
  ModelStreamInferResponse r;
  for (int32_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(valuesOf<int32_t>(*outputBytes(r.infer_response(), "OUT")), std::vector<int32_t>{10 * i});
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(NativeTlsTest, SixteenMebibytesEachWayGoThroughTheSession) {
  // About a thousand records each way: reads that stop with plaintext left in the session,
  // and writes the socket takes in part.
  constexpr int64_t kElements = 4 << 20;
  std::vector<float> values(kElements);
  for (int64_t i = 0; i < kElements; ++i) values[i] = static_cast<float>(i % 1000003) * 0.25f;
  const ModelInferRequest request = identityRequest(values);
  for (int round = 0; round < 2; ++round) {
    ModelInferResponse response;
    ::grpc::Status s = infer(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_TRUE(response.raw_output_contents(0) == request.raw_input_contents(0));
  }
}

TEST_P(NativeTlsTest, TheClientCertificateNamesThePrincipalOfServedAndRelayedCalls) {
  stopServer();
  const std::string yaml = codecs::strCat(R"(listeners:
  grpc:
    address: "127.0.0.1:0"
    tls: { cert: ")", pki_.cert("server"), R"(", key: ")", pki_.key("server"), R"(", client_ca: ")",
                                          pki_.caCert(), R"(", client_auth: optional }
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
auth:
  principals:
    - { name: ops, client_cert: { common_name: ops-console } }
  api_groups:
    inference: [ops]
    model-repository: [ops]
)");
  auto config = config::parseConfig(yaml, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto security = Security::create(*config);
  ASSERT_TRUE(security.ok()) << security.status();
  GrpcFrontendOptions options;
  options.security = *security;
  serveTls(options);

  const auto ops = secureChannel("ops");
  EXPECT_TRUE(inferOn(ops).ok());  // served on the loop
  { ::grpc::Status s = indexOn(ops); EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message(); }  // relayed
  for (const std::string client : {"", "other"}) {
    const auto channel = secureChannel(client);
    EXPECT_EQ(inferOn(channel).error_code(), ::grpc::StatusCode::UNAUTHENTICATED) << client;
    EXPECT_EQ(indexOn(channel).error_code(), ::grpc::StatusCode::UNAUTHENTICATED) << client;
  }
  // The certificate a relayed call carries to grpc++ is the handshake's, never the client's
  // own metadata of that name.
  const Metadata forged = {
      {"infergate-peer-certificate-bin", readFile(pki_.cert("ops"))}};
  const auto anonymous = secureChannel();
  EXPECT_EQ(inferOn(anonymous, forged).error_code(), ::grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(indexOn(anonymous, forged).error_code(), ::grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(indexOn(ops).ok());
}

TEST_P(NativeTlsTest, PlaintextClientsAreClosedAndServingGoesOn) {
  // gRPC's own plaintext client fails its call.
  auto plain = ::grpc::CreateChannel(address_, ::grpc::InsecureChannelCredentials());
  EXPECT_EQ(inferOn(plain).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  // HTTP/2's preface in the clear is no ClientHello: the connection is closed.
  const int fd = connectTo(frontend_->port());
  ASSERT_GE(fd, 0);
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  ASSERT_EQ(::send(fd, preface.data(), preface.size(), MSG_NOSIGNAL), static_cast<ssize_t>(preface.size()));
  EXPECT_TRUE(closedByPeerWithin(fd, 5s));
  ::close(fd);
  EXPECT_TRUE(inferOn(secureChannel()).ok());
}

TEST_P(NativeTlsTest, AConnectionSilentInTheHandshakeIsClosed) {
  stopServer();
  GrpcFrontendOptions options;
  options.handshake_timeout_ms = 100;
  serveTls(options);
  const int fd = connectTo(frontend_->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(closedByPeerWithin(fd, 5s));
  ::close(fd);
  EXPECT_TRUE(inferOn(secureChannel()).ok());
}

TEST_P(NativeTlsTest, AContextSwappedInServesTheConnectionsFromThenOn) {
  const auto before = secureChannel();
  ASSERT_TRUE(inferOn(before).ok());
  // A certificate from another CA: a client trusting only that CA fails until the swap.
  tls::testing::TestPki next("the next CA");
  next.issue("server", tls::testing::LeafOptions{});
  const auto trusting_next = secureChannel("", next.caCert());
  EXPECT_EQ(inferOn(trusting_next).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  auto context = tls::ServerContext::create(serverTls(next), source_->alpn());
  ASSERT_TRUE(context.ok()) << context.status();
  source_->install(*context);
  EXPECT_TRUE(inferOn(secureChannel("", next.caCert())).ok());
  // The connection made before the swap keeps the context it was accepted with.
  EXPECT_TRUE(inferOn(before).ok());
}

INSTANTIATE_TEST_SUITE_P(Native, NativeTlsTest, ::testing::Values(GrpcServerEngine::kNative), engineName);

}  // namespace
}  // namespace infergate::gateway::frontends
