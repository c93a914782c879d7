// ClientSession (client_session.h) against the listeners' ServerSession over a socketpair,
// both non-blocking and pumped by hand in this one thread, with certificates made at test
// time: what the client verifies (the CA, a host name or an IP address, nothing with
// insecure_skip_verify), the reason it gives when a check fails, ALPN, mTLS, and that a
// second connection to the same endpoint resumes the first one's session.

#include "tls/client_session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <fstream>
#include <sstream>
#include <string>

#include "tls/server_session.h"
#include "tls/testing/test_certs.h"

namespace infergate::tls {
namespace {

using ClientAuth = config::ServerTlsConfig::ClientAuth;
using testing::LeafOptions;
using testing::TestPki;

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

config::ListenAddress tcpEndpoint(const std::string& host) {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kTcp;
  a.host = host;
  a.port = 8001;
  return a;
}

// One connection: the ClientSession on one end of a socketpair, a ServerSession on the
// other.
class Connection {
 public:
  // `tcp`: a loopback TCP connection instead of a socketpair (a reset exists only there).
  Connection(std::shared_ptr<const ClientContext> client, std::shared_ptr<const ServerContext> server,
             const config::ListenAddress& endpoint, bool tcp = false) {
    int fds[2];
    if (tcp) {
      tcpPair(fds);
    } else {
      EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    }
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    client_fd_ = fds[0];
    server_fd_ = fds[1];
    client_ = std::make_unique<ClientSession>(std::move(client), client_fd_, endpoint);
    server_ = std::make_unique<ServerSession>(std::move(server), server_fd_);
  }
  ~Connection() {
    client_.reset();
    server_.reset();
    close(client_fd_);
    if (server_fd_ >= 0) close(server_fd_);
  }

  ClientSession& client() { return *client_; }
  ServerSession& server() { return *server_; }

  // The server's end goes: with a reset (SO_LINGER 0), or a bare close (no close_notify).
  void dropServer(bool reset) {
    if (reset) {
      linger l{1, 0};
      setsockopt(server_fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    server_.reset();
    close(server_fd_);
    server_fd_ = -1;
  }
  // What the client's next read answers once the peer is gone (EAGAIN waited out).
  ssize_t readAfterPeerWent() {
    char buffer[256];
    for (int i = 0; i < 1000; ++i) {
      const ssize_t n = client_->read(buffer, sizeof(buffer));
      if (n >= 0 || errno != EAGAIN) return n;
      usleep(1000);
    }
    return -2;
  }

  // The client writes `request`, the server answers `answer`, each read at the other end
  // (the handshake runs inside). False when either end failed (their error() says why).
  bool exchange(const std::string& request, const std::string& answer) {
    std::string at_server, at_client;
    if (!transfer(*client_, request, at_server) || !transfer(*server_, answer, at_client)) return false;
    EXPECT_EQ(at_server, request);
    EXPECT_EQ(at_client, answer);
    return at_server == request && at_client == answer;
  }

 private:
  // `from` writes `data` until the other end has read all of it into `got`; both ends read
  // every round (the handshake's messages, tickets) and write what they staged.
  bool transfer(Session& from, const std::string& data, std::string& got) {
    Session& to = &from == client_.get() ? static_cast<Session&>(*server_) : *client_;
    size_t sent = 0;
    char buffer[65536];
    for (int round = 0; round < 2000 && got.size() < data.size(); ++round) {
      if (round > 0) usleep(100);  // over TCP, bytes take a moment to cross
      iovec iov{const_cast<char*>(data.data()) + sent, data.size() - sent};
      ssize_t n = from.writev(&iov, sent < data.size() ? 1 : 0);
      if (n < 0 && errno != EAGAIN) return false;
      if (n > 0) sent += static_cast<size_t>(n);
      for (Session* s : {&to, &from}) {
        n = s->read(buffer, sizeof(buffer));
        if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
        if (n > 0 && s == &to) got.append(buffer, static_cast<size_t>(n));
        if (n > 0 && s == &from) return false;  // nothing is sent that way now
        if (s->hasBufferedOutput() && s->writev(nullptr, 0) < 0 && errno != EAGAIN) return false;
      }
    }
    return got.size() == data.size();
  }

  static void tcpPair(int fds[2]) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(fds[0], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    fds[1] = accept(listener, nullptr, nullptr);
    close(listener);
  }

  int client_fd_ = -1, server_fd_ = -1;
  std::unique_ptr<ClientSession> client_;
  std::unique_ptr<ServerSession> server_;
};

class ClientSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);  // as main(): OpenSSL's write() to a peer that closed
    LeafOptions server;
    server.common_name = "upstream.internal";
    server.dns_names = {"upstream.internal"};
    server.ip_addresses = {"127.0.0.1"};
    pki_.issue("server", server);
    LeafOptions client;
    client.common_name = "gateway";
    client.dns_names = {"gateway.internal"};
    client.ip_addresses = {};
    client.client = true;
    pki_.issue("client", client);
  }

  std::shared_ptr<const ServerContext> serverContext(ClientAuth auth = ClientAuth::kNone) {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    if (auth != ClientAuth::kNone) c.client_ca = pki_.caCert();
    c.client_auth = auth;
    auto context = ServerContext::create(c, {"h2"});
    EXPECT_TRUE(context.ok()) << context.status();
    return context.ok() ? *context : nullptr;
  }

  // The client's settings: trusting the test CA unless `trusted` is false.
  std::shared_ptr<ClientTls> clientTls(bool trusted = true) {
    auto tls = std::make_shared<ClientTls>();
    if (trusted) {
      tls->config.ca = pki_.caCert();
      tls->ca_pem = fileBytes(pki_.caCert());
    }
    return tls;
  }

  std::shared_ptr<const ClientContext> clientContext(std::shared_ptr<const ClientTls> tls) {
    auto context = ClientContext::create(std::move(tls), {"h2"});
    EXPECT_TRUE(context.ok()) << context.status();
    return context.ok() ? *context : nullptr;
  }

  TestPki pki_;
};

TEST_F(ClientSessionTest, VerifiesAnIpEndpointAgreesOnH2AndResumesTheNextConnection) {
  auto client = clientContext(clientTls());
  auto server = serverContext();
  {
    Connection first(client, server, tcpEndpoint("127.0.0.1"));
    ASSERT_TRUE(first.exchange("ping", "pong")) << first.client().error() << " / " << first.server().error();
    EXPECT_EQ(first.client().alpn(), "h2");
    EXPECT_FALSE(first.client().resumed());
  }
  Connection second(client, server, tcpEndpoint("127.0.0.1"));
  ASSERT_TRUE(second.exchange("ping", "pong")) << second.client().error();
  EXPECT_TRUE(second.client().resumed());
  // Another endpoint has no session to resume: a full handshake.
  config::ListenAddress elsewhere = tcpEndpoint("127.0.0.1");
  elsewhere.port = 8002;
  Connection third(client, server, elsewhere);
  ASSERT_TRUE(third.exchange("ping", "pong")) << third.client().error();
  EXPECT_FALSE(third.client().resumed());
}

TEST_F(ClientSessionTest, ServerNameIsSentAndVerifiedInsteadOfTheAddress) {
  auto tls = clientTls();
  tls->config.server_name = "upstream.internal";
  Connection c(clientContext(tls), serverContext(), tcpEndpoint("10.0.0.9"));
  EXPECT_TRUE(c.exchange("ping", "pong")) << c.client().error();
  EXPECT_EQ(c.server().serverName(), "upstream.internal");
}

TEST_F(ClientSessionTest, AHostNameIsSentAsSniAndAnIpAddressIsNot) {
  auto tls = clientTls();
  tls->config.insecure_skip_verify = true;  // the names are the point here, not the checks
  Connection named(clientContext(tls), serverContext(), tcpEndpoint("upstream.internal"));
  ASSERT_TRUE(named.exchange("ping", "pong")) << named.client().error();
  EXPECT_EQ(named.server().serverName(), "upstream.internal");
  Connection addressed(clientContext(tls), serverContext(), tcpEndpoint("127.0.0.1"));
  ASSERT_TRUE(addressed.exchange("ping", "pong")) << addressed.client().error();
  EXPECT_EQ(addressed.server().serverName(), "");
}

TEST_F(ClientSessionTest, ANameTheCertificateDoesNotHoldFailsTheHandshakeSayingSo) {
  auto tls = clientTls();
  tls->config.server_name = "elsewhere.internal";
  Connection c(clientContext(tls), serverContext(), tcpEndpoint("127.0.0.1"));
  EXPECT_FALSE(c.exchange("ping", "pong"));
  EXPECT_FALSE(c.client().handshakeDone());
  EXPECT_NE(c.client().error().find("certificate verify failed (hostname mismatch: the certificate is not for elsewhere.internal)"), std::string::npos)
      << c.client().error();
}

TEST_F(ClientSessionTest, AnIpAddressTheCertificateDoesNotHoldFailsTheHandshake) {
  Connection c(clientContext(clientTls()), serverContext(), tcpEndpoint("127.0.0.2"));
  EXPECT_FALSE(c.exchange("ping", "pong"));
  EXPECT_NE(c.client().error().find("(IP address mismatch: the certificate is not for 127.0.0.2)"), std::string::npos) << c.client().error();
}

TEST_F(ClientSessionTest, AnotherCaFailsAndInsecureSkipVerifyAcceptsAnyCertificate) {
  TestPki other("another CA");
  auto tls = std::make_shared<ClientTls>();
  tls->config.ca = other.caCert();
  tls->ca_pem = fileBytes(other.caCert());
  Connection refused(clientContext(tls), serverContext(), tcpEndpoint("127.0.0.1"));
  EXPECT_FALSE(refused.exchange("ping", "pong"));
  EXPECT_NE(refused.client().error().find("certificate verify failed"), std::string::npos)
      << refused.client().error();

  auto insecure = clientTls(false);
  insecure->config.insecure_skip_verify = true;
  Connection accepted(clientContext(insecure), serverContext(), tcpEndpoint("192.0.2.1"));
  EXPECT_TRUE(accepted.exchange("ping", "pong")) << accepted.client().error();
}

TEST_F(ClientSessionTest, ClientCertificateIsPresentedToAServerThatRequiresOne) {
  auto without = clientTls();
  Connection refused(clientContext(without), serverContext(ClientAuth::kRequire), tcpEndpoint("127.0.0.1"));
  EXPECT_FALSE(refused.exchange("ping", "pong"));
  EXPECT_NE(refused.server().error().find("peer did not return a certificate"), std::string::npos)
      << refused.server().error();

  auto with = clientTls();
  with->config.cert = pki_.cert("client");
  with->config.key = pki_.key("client");
  with->cert_pem = fileBytes(pki_.cert("client"));
  with->key_pem = fileBytes(pki_.key("client"));
  Connection accepted(clientContext(with), serverContext(ClientAuth::kRequire), tcpEndpoint("127.0.0.1"));
  ASSERT_TRUE(accepted.exchange("ping", "pong")) << accepted.client().error() << " / " << accepted.server().error();
  ASSERT_NE(accepted.server().peer(), nullptr);
}

TEST_F(ClientSessionTest, APeerThatClosesEndsTheStreamAndOneThatResetsIsAnError) {
  // An HTTP body that runs to the connection's close is whole only if the close was one:
  // a bare close (no close_notify, as many servers end) reads as the end, a reset does not.
  auto client = clientContext(clientTls());
  Connection closed(client, serverContext(), tcpEndpoint("127.0.0.1"), /*tcp=*/true);
  ASSERT_TRUE(closed.exchange("ping", "pong")) << closed.client().error();
  closed.dropServer(/*reset=*/false);
  EXPECT_EQ(closed.readAfterPeerWent(), 0) << closed.client().error();

  Connection reset(client, serverContext(), tcpEndpoint("127.0.0.1"), /*tcp=*/true);
  ASSERT_TRUE(reset.exchange("ping", "pong")) << reset.client().error();
  reset.dropServer(/*reset=*/true);
  EXPECT_EQ(reset.readAfterPeerWent(), -1);
  EXPECT_NE(reset.client().error().find("Connection reset by peer"), std::string::npos) << reset.client().error();
}

TEST_F(ClientSessionTest, AKeyThatIsNotTheCertificatesIsRefusedWhenTheContextIsMade) {
  auto tls = clientTls();
  tls->cert_pem = fileBytes(pki_.cert("client"));
  tls->key_pem = fileBytes(pki_.key("server"));
  auto context = ClientContext::create(tls, {"h2"});
  ASSERT_FALSE(context.ok());
  EXPECT_NE(std::string(context.status().message()).find("upstream TLS: the client key"), std::string::npos)
      << context.status();
}

}  // namespace
}  // namespace infergate::tls
