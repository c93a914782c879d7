#include "tls/server_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <absl/strings/match.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "tls/server_context.h"
#include "tls/testing/test_certs.h"

namespace infergate::tls {
namespace {

using ClientAuth = config::ServerTlsConfig::ClientAuth;
using testing::LeafOptions;
using testing::TestPki;

config::ServerTlsConfig serverConfig(const TestPki& pki) {
  config::ServerTlsConfig c;
  c.cert = pki.cert("server");
  c.key = pki.key("server");
  return c;
}

// A client SSL on one end of a socketpair, the ServerSession on the other, both
// non-blocking, pumped by hand in this one thread.
class Pair {
 public:
  struct ClientOptions {
    std::string ca;                      // verify the server against it ("" = no verify)
    std::string cert, key;               // client certificate
    std::vector<std::string> alpn;       // offered
    int max_version = 0;                 // e.g. TLS1_2_VERSION
  };

  Pair(std::shared_ptr<const ServerContext> context, const ClientOptions& options) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int small = 16 * 1024;  // small socket buffers: writes must come back EAGAIN
    for (int fd : fds) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    }
    client_fd_ = fds[0];
    server_fd_ = fds[1];
    server_ = std::make_unique<ServerSession>(std::move(context), server_fd_);
    ctx_ = testing::newClientContext(options.ca, options.cert, options.key);
    if (options.max_version) SSL_CTX_set_max_proto_version(ctx_, options.max_version);
    if (!options.alpn.empty()) {
      std::string wire;
      for (const auto& p : options.alpn) wire += static_cast<char>(p.size()) + p;
      SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned>(wire.size()));
    }
    client_ = SSL_new(ctx_);
    SSL_set_fd(client_, client_fd_);
    SSL_set_tlsext_host_name(client_, "localhost");
    SSL_set1_host(client_, "localhost");
    SSL_set_connect_state(client_);
  }
  ~Pair() {
    SSL_free(client_);
    SSL_CTX_free(ctx_);
    server_.reset();
    if (client_fd_ >= 0) close(client_fd_);
    close(server_fd_);
  }

  ServerSession& server() { return *server_; }

  // Sends `data` from the client and reads it at the server, pumping both sides; returns
  // what the server read, or nullopt when the server's read failed (error() says why).
  std::optional<std::string> clientToServer(const std::string& data) {
    size_t sent = 0;
    std::string got;
    for (int round = 0; round < 10000 && got.size() < data.size(); ++round) {
      if (sent < data.size()) {
        size_t n = 0;
        if (SSL_write_ex(client_, data.data() + sent, data.size() - sent, &n) == 1) sent += n;
        ERR_clear_error();
      }
      char buf[4096];
      ssize_t r = server_->read(buf, sizeof(buf));
      if (r > 0) got.append(buf, static_cast<size_t>(r));
      if (r == 0) return std::nullopt;
      if (r < 0 && errno != EAGAIN) return std::nullopt;
      if (r < 0 && server_->wantsWritable()) continue;
    }
    return got;
  }

  // Writes `segments` with the server's writev (retried from where it stopped, as the
  // HTTP connection does) while the client reads; returns what the client read.
  std::string serverToClient(const std::vector<std::string>& segments) {
    std::string expected;
    for (const auto& s : segments) expected += s;
    size_t index = 0, offset = 0;
    std::string got;
    for (int round = 0; round < 100000 && got.size() < expected.size(); ++round) {
      if (index < segments.size() || server_->hasBufferedOutput()) {
        std::vector<iovec> iov;
        for (size_t i = index; i < segments.size(); ++i) {
          size_t skip = i == index ? offset : 0;
          iov.push_back({const_cast<char*>(segments[i].data() + skip), segments[i].size() - skip});
        }
        ssize_t n = server_->writev(iov.data(), static_cast<int>(iov.size()));
        if (n < 0) {
          EXPECT_EQ(errno, EAGAIN) << server_->error();
        }
        for (size_t left = n > 0 ? static_cast<size_t>(n) : 0; left > 0;) {
          size_t room = segments[index].size() - offset;
          if (left >= room) {
            left -= room;
            ++index;
            offset = 0;
          } else {
            offset += left;
            left = 0;
          }
        }
        // Empty segments are skipped by the session.
        while (index < segments.size() && segments[index].size() == offset) {
          ++index;
          offset = 0;
        }
      }
      char buf[8192];
      size_t n = 0;
      if (SSL_read_ex(client_, buf, sizeof(buf), &n) == 1) got.append(buf, n);
      ERR_clear_error();
    }
    return got;
  }

  // The client's end closed (as a client that went away).
  void closeClient() {
    ::close(client_fd_);
    client_fd_ = -1;
  }

  std::string clientAlpn() const {
    const unsigned char* data = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(client_, &data, &len);
    return std::string(reinterpret_cast<const char*>(data), len);
  }

 private:
  int client_fd_ = -1, server_fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* client_ = nullptr;
  std::unique_ptr<ServerSession> server_;
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.issue("server", LeafOptions{});
    LeafOptions client;
    client.common_name = "model-client";
    client.client = true;
    client.dns_names = {"client.example"};
    client.ip_addresses = {};
    client.uris = {"spiffe://example.org/ns/a/sa/client"};
    pki_.issue("client", client);
  }

  std::shared_ptr<const ServerContext> context(const config::ServerTlsConfig& c) {
    auto made = ServerContext::create(c, {"http/1.1"});
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : nullptr;
  }

  TestPki pki_;
};

TEST_F(TlsTest, DataCrossesBothWaysAndALargeWriteGoesOutPiecewise) {
  Pair pair(context(serverConfig(pki_)), {pki_.caCert(), "", "", {"h2", "http/1.1"}, 0});
  EXPECT_EQ(pair.clientToServer("GET /v2 HTTP/1.1\r\n\r\n"), "GET /v2 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(pair.server().handshakeDone());
  EXPECT_EQ(pair.server().alpn(), "http/1.1");
  EXPECT_EQ(pair.clientAlpn(), "http/1.1");
  EXPECT_EQ(pair.server().protocol(), "TLSv1.3");
  EXPECT_EQ(pair.server().peer(), nullptr);  // no client certificate asked for
  // A head, a small body piece, a 1 MiB body piece, an empty one, a tail: far more than
  // the socket buffers hold, so writes stop and resume.
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::vector<std::string> segments = {"HTTP/1.1 200 OK\r\n\r\n", "{\"a\":", big, "", "}"};
  std::string got = pair.serverToClient(segments);
  EXPECT_EQ(got.size(), 1 + big.size() + 5 + 19);
  EXPECT_EQ(got, segments[0] + segments[1] + big + segments[4]);
  EXPECT_FALSE(pair.server().hasBufferedOutput());
}

TEST_F(TlsTest, WritesToAClientThatWentAwayFailInsteadOfReportingNothingWritten) {
  // OpenSSL writes with write(): a closed peer raises SIGPIPE, which the gateway ignores.
  ::signal(SIGPIPE, SIG_IGN);
  Pair pair(context(serverConfig(pki_)), {pki_.caCert(), "", "", {}, 0});
  ASSERT_EQ(pair.clientToServer("hello"), "hello");
  pair.closeClient();
  // Small segments (gathered into one staged record) and a large one, again and again:
  // every call must end, and the first that sees the closed peer fails; none answers 0.
  const std::string small(1000, 's'), large(256 * 1024, 'L');
  std::vector<iovec> iov;
  for (int i = 0; i < 40; ++i) iov.push_back({const_cast<char*>(small.data()), small.size()});
  iov.push_back({const_cast<char*>(large.data()), large.size()});
  bool failed = false;
  for (int call = 0; call < 100 && !failed; ++call) {
    const ssize_t n = pair.server().writev(iov.data(), static_cast<int>(iov.size()));
    ASSERT_NE(n, 0) << "call " << call;
    if (n < 0) {
      failed = errno != EAGAIN;
      EXPECT_TRUE(failed || pair.server().hasBufferedOutput() || call < 99) << pair.server().error();
    }
  }
  EXPECT_TRUE(failed) << "the writes never failed";
  EXPECT_NE(pair.server().error().find("write"), std::string::npos) << pair.server().error();
}

TEST_F(TlsTest, RequiredClientCertificateIsVerifiedAndNamed) {
  config::ServerTlsConfig c = serverConfig(pki_);
  c.client_ca = pki_.caCert();
  c.client_auth = ClientAuth::kRequire;
  auto ctx = context(c);
  {
    Pair pair(ctx, {pki_.caCert(), pki_.cert("client"), pki_.key("client"), {}, 0});
    ASSERT_EQ(pair.clientToServer("hello"), "hello") << pair.server().error();
    const PeerIdentity* peer = pair.server().peer();
    ASSERT_NE(peer, nullptr);
    EXPECT_EQ(peer->common_name, "model-client");
    EXPECT_EQ(peer->subject, "CN=model-client,O=infergate tests");
    EXPECT_EQ(peer->dns_names, std::vector<std::string>{"client.example"});
    EXPECT_EQ(peer->uris, std::vector<std::string>{"spiffe://example.org/ns/a/sa/client"});
  }
  {  // none sent
    Pair pair(ctx, {pki_.caCert(), "", "", {}, 0});
    EXPECT_EQ(pair.clientToServer("hello"), std::nullopt);
    EXPECT_NE(pair.server().error().find("handshake"), std::string::npos) << pair.server().error();
    EXPECT_NE(pair.server().error().find("certificate"), std::string::npos) << pair.server().error();
  }
  {  // signed by another CA
    TestPki other("another CA");
    LeafOptions o;
    o.client = true;
    other.issue("client", o);
    Pair pair(ctx, {pki_.caCert(), other.cert("client"), other.key("client"), {}, 0});
    EXPECT_EQ(pair.clientToServer("hello"), std::nullopt);
    EXPECT_NE(pair.server().error().find("certificate verify failed"), std::string::npos)
        << pair.server().error();
  }
  {  // expired
    LeafOptions o;
    o.client = true;
    o.not_before = std::chrono::seconds(-3 * 86400);
    o.not_after = std::chrono::seconds(-86400);
    pki_.issue("expired", o);
    Pair pair(ctx, {pki_.caCert(), pki_.cert("expired"), pki_.key("expired"), {}, 0});
    EXPECT_EQ(pair.clientToServer("hello"), std::nullopt);
    EXPECT_NE(pair.server().error().find("certificate verify failed"), std::string::npos)
        << pair.server().error();
  }
}

TEST_F(TlsTest, OptionalClientCertificateMayBeLeftOut) {
  config::ServerTlsConfig c = serverConfig(pki_);
  c.client_ca = pki_.caCert();
  c.client_auth = ClientAuth::kOptional;
  auto ctx = context(c);
  Pair without(ctx, {pki_.caCert(), "", "", {}, 0});
  EXPECT_EQ(without.clientToServer("x"), "x") << without.server().error();
  EXPECT_EQ(without.server().peer(), nullptr);
  Pair with(ctx, {pki_.caCert(), pki_.cert("client"), pki_.key("client"), {}, 0});
  EXPECT_EQ(with.clientToServer("x"), "x") << with.server().error();
  ASSERT_NE(with.server().peer(), nullptr);
  EXPECT_EQ(with.server().peer()->common_name, "model-client");
}

TEST_F(TlsTest, MinimumVersionRefusesOlderClients) {
  config::ServerTlsConfig c = serverConfig(pki_);
  c.min_version = config::TlsVersion::k13;
  Pair old(context(c), {pki_.caCert(), "", "", {}, TLS1_2_VERSION});
  EXPECT_EQ(old.clientToServer("x"), std::nullopt);
  EXPECT_NE(old.server().error().find("unsupported protocol"), std::string::npos)
      << old.server().error();
  Pair tls12(context(serverConfig(pki_)), {pki_.caCert(), "", "", {}, TLS1_2_VERSION});
  EXPECT_EQ(tls12.clientToServer("x"), "x");
  EXPECT_EQ(tls12.server().protocol(), "TLSv1.2");
}

TEST_F(TlsTest, ContextErrorsNameTheKeyAndTheFile) {
  config::ServerTlsConfig c = serverConfig(pki_);
  c.cert = pki_.dir() + "/missing.pem";
  auto made = ServerContext::create(c, {});
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(made.status().message(), "tls.cert: " + c.cert + ": "))
      << made.status();

  c = serverConfig(pki_);
  c.key = pki_.key("client");  // another certificate's key
  made = ServerContext::create(c, {});
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("the key does not belong to the certificate"),
            std::string::npos)
      << made.status();

  c = serverConfig(pki_);
  c.ciphers = "NOT-A-CIPHER";
  made = ServerContext::create(c, {});
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(absl::StartsWith(made.status().message(), "tls.ciphers: \"NOT-A-CIPHER\": "))
      << made.status();

  c = serverConfig(pki_);
  c.groups = "P-999";
  EXPECT_FALSE(ServerContext::create(c, {}).ok());

  c = serverConfig(pki_);
  c.client_ca = pki_.key("server");  // a key, not a CA certificate
  c.client_auth = ClientAuth::kRequire;
  made = ServerContext::create(c, {});
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(absl::StartsWith(made.status().message(), "tls.client_ca: ")) << made.status();
}

TEST_F(TlsTest, SourceSwapsOnChangedFilesAndKeepsServingThroughABadOne) {
  auto source = ServerContextSource::create(serverConfig(pki_), {"http/1.1"});
  ASSERT_TRUE(source.ok()) << source.status();
  auto first = (*source)->current();
  bool changed = true;
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ((*source)->current(), first);

  // A new certificate for the same name: picked up.
  LeafOptions renewed;
  renewed.common_name = "renewed";
  pki_.issue("server", renewed);
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_TRUE(changed);
  auto second = (*source)->current();
  EXPECT_NE(second, first);
  EXPECT_GT(second->notAfter(), time(nullptr));

  // A broken certificate: reported once, the last good context keeps serving.
  { std::ofstream(pki_.cert("server")) << "not a certificate\n"; }
  codecs::Status bad = (*source)->reloadIfChanged(&changed);
  EXPECT_TRUE(changed);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ((*source)->current(), second);
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_FALSE(changed);  // the same broken files are not tried again
  Pair pair((*source)->current(), {pki_.caCert(), "", "", {}, 0});
  EXPECT_EQ(pair.clientToServer("still"), "still");
}

}  // namespace
}  // namespace infergate::tls
