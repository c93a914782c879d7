// The HTTP/1.1 connection layer over TLS: the same framing through tls::ServerSession.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gateway/http/http_server.h"
#include "tls/testing/test_certs.h"

namespace infergate::gateway::http {
namespace {

using tls::testing::LeafOptions;
using tls::testing::TestPki;

// A blocking TLS client on a loopback socket.
class TlsClient {
 public:
  TlsClient(uint16_t port, const std::string& ca, const std::string& cert = "",
            const std::string& key = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return;
    ctx_ = tls::testing::newClientContext(ca, cert, key);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "localhost");
    connected_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~TlsClient() {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
    ::close(fd_);
  }

  bool connected() const { return connected_; }
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      size_t n = 0;
      if (SSL_write_ex(ssl_, bytes.data(), bytes.size(), &n) != 1) return false;
      bytes.remove_prefix(n);
    }
    return true;
  }

  // One response with a Content-Length body; status 0 when the connection ended first.
  std::pair<int, std::string> read() {
    size_t end;
    while ((end = buffered_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return {0, ""};
    }
    std::string head = buffered_.substr(0, end + 4);
    buffered_.erase(0, end + 4);
    size_t cl = head.find("Content-Length: ");
    size_t length = cl == std::string::npos ? 0 : std::strtoul(head.c_str() + cl + 16, nullptr, 10);
    while (buffered_.size() < length) {
      if (!fill()) return {0, ""};
    }
    std::string body = buffered_.substr(0, length);
    buffered_.erase(0, length);
    return {std::atoi(head.c_str() + 9), body};
  }

 private:
  bool fill() {
    char buf[65536];
    size_t n = 0;
    if (SSL_read_ex(ssl_, buf, sizeof(buf), &n) != 1) {
      ERR_clear_error();
      return false;
    }
    buffered_.append(buf, n);
    return true;
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool connected_ = false;
  std::string buffered_;
};

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.issue("server", LeafOptions{});
    LeafOptions client;
    client.client = true;
    client.common_name = "client-a";
    pki_.issue("client", client);
  }

  void startServer(config::ServerTlsConfig tls, HttpLimits limits = {}) {
    auto source = tls::ServerContextSource::create(tls, {"http/1.1"});
    ASSERT_TRUE(source.ok()) << source.status();
    server_ = std::make_unique<HttpServer>(pool_, limits, 1000, [this](std::shared_ptr<HttpExchange> e) {
      HttpResponse r;
      r.header("X-Target", e->request().target);
      tls::ServerSession* session = e->tlsSession();
      const tls::PeerIdentity* peer = session ? session->peer() : nullptr;
      r.header("X-Peer", peer ? peer->common_name : "-");
      r.body.append(e->request().body);
      e->respond(std::move(r));
    });
    server_->setTls(*source);
    auto bound = server_->listen(ListenSpec::tcp("127.0.0.1", 0));
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = bound->port;
    pool_.start();
    server_->start();
  }

  config::ServerTlsConfig plainTls() const {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    return c;
  }

  void TearDown() override {
    if (server_) server_->shutdown(std::chrono::milliseconds(200));
    pool_.stop();
  }

  TestPki pki_;
  WorkerPool pool_{2};
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(HttpTlsTest, KeepAliveRequestsWithSmallAndLargeBodies) {
  startServer(plainTls());
  TlsClient c(port_, pki_.caCert());
  ASSERT_TRUE(c.connected());
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  for (const std::string& body : {std::string("hello"), big, std::string("x")}) {
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body));
    auto [status, got] = c.read();
    EXPECT_EQ(status, 200);
    EXPECT_EQ(got.size(), body.size());
    EXPECT_TRUE(got == body);
  }
}

TEST_F(HttpTlsTest, PipelinedRequestsBeyondTheReadAheadAreAllAnswered) {
  // Reading pauses at 4 pipelined requests while the rest sit decrypted inside the TLS
  // session, where no socket event will announce them.
  HttpLimits limits;
  limits.max_pipelined = 4;
  startServer(plainTls(), limits);
  TlsClient c(port_, pki_.caCert());
  ASSERT_TRUE(c.connected());
  std::string burst;
  for (int i = 0; i < 200; ++i) burst += "GET /r" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(c.send(burst));
  for (int i = 0; i < 200; ++i) {
    auto [status, body] = c.read();
    ASSERT_EQ(status, 200) << "response " << i;
  }
}

TEST_F(HttpTlsTest, PlaintextIsToldAndFailedHandshakesDroppedAndServingGoesOn) {
  startServer(plainTls());
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    std::string plain = "GET / HTTP/1.1\r\n\r\n";
    ASSERT_EQ(::send(fd, plain.data(), plain.size(), MSG_NOSIGNAL), static_cast<ssize_t>(plain.size()));
    char buf[256];
    timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    std::string answer;
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
    // Told in plain HTTP what went wrong, then closed, not left hanging until the timeout.
    EXPECT_EQ(n, 0) << std::strerror(errno);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << answer;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    EXPECT_NE(answer.find("use https://"), std::string::npos) << answer;
    ::close(fd);
  }
  {
    TestPki stranger("stranger CA");
    TlsClient c(port_, stranger.caCert());  // does not trust the server
    EXPECT_FALSE(c.connected());
  }
  TlsClient c(port_, pki_.caCert());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("GET /after HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(c.read().first, 200);
  EXPECT_EQ(server_->connectionCount(), 1u);
}

TEST_F(HttpTlsTest, RequiredClientCertificateNamesThePeer) {
  config::ServerTlsConfig c = plainTls();
  c.client_ca = pki_.caCert();
  c.client_auth = config::ServerTlsConfig::ClientAuth::kRequire;
  startServer(c);
  TlsClient with(port_, pki_.caCert(), pki_.cert("client"), pki_.key("client"));
  ASSERT_TRUE(with.connected());
  ASSERT_TRUE(with.send("GET /who HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"));
  auto [status, body] = with.read();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "hi");
  // TLS 1.3: the client learns of the refusal on its first read.
  TlsClient without(port_, pki_.caCert());
  if (without.connected()) {
    without.send("GET /who HTTP/1.1\r\n\r\n");
    EXPECT_EQ(without.read().first, 0);
  }
}

}  // namespace
}  // namespace infergate::gateway::http
