// HttpUpstreamClient over TLS (options.tls) against the project's HttpServer serving TLS
// on loopback and on a unix socket, with certificates made at test time
// (tls/testing/test_certs.h): verification by CA and name, server_name, mTLS,
// insecure_skip_verify, keep-alive reuse of TLS connections, and sessions offered again by
// new connections. The server's SSL_CTX counts the handshakes it ran and the sessions
// offered to it. Every test runs against both engines: libcurl (options.tls without a
// context) and the native one (with the tls::ClientContext UpstreamSet makes).

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "config/listen_address.h"
#include "gateway/upstream/http_client.h"
#include "gateway/upstream/upstream_status.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "tls/client_session.h"
#include "tls/server_context.h"
#include "tls/testing/test_certs.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::Buffer;
using codecs::StatusOr;
using http::HttpExchange;
using http::HttpResponse;
using testing::HttpTestUpstream;
using testing::LoopThread;
using ClientAuth = config::ServerTlsConfig::ClientAuth;

constexpr auto kWait = std::chrono::seconds(30);

std::string readAll(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return "";
  std::string bytes;
  char chunk[4096];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes.append(chunk, n);
  std::fclose(f);
  return bytes;
}

enum class Engine { kLibcurl, kNative };

class HttpClientTlsTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    // As main() does: a peer that aborts a handshake must not kill the process when the
    // upstream writes its alert.
    std::signal(SIGPIPE, SIG_IGN);
    tls::testing::LeafOptions server;
    server.common_name = "upstream.internal";
    server.dns_names = {"upstream.internal", "localhost"};
    server.ip_addresses = {"127.0.0.1"};
    pki_.issue("server", server);
    tls::testing::LeafOptions client;
    client.common_name = "gateway";
    client.dns_names = {"gateway.internal"};
    client.ip_addresses = {};
    client.client = true;
    pki_.issue("client", client);
  }

  void TearDown() override {
    client_thread_.run([this] { client_.reset(); });
    if (server_) server_->stop();
    if (!unix_path_.empty()) std::filesystem::remove(unix_path_);
  }

  // The upstream: answers with the body and the Host header it saw, or on /stream sends
  // one piece of a response it never ends; TLS with `auth`
  // toward clients (their CA: the test CA); on loopback and on a unix socket.
  void serve(ClientAuth auth = ClientAuth::kNone) {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    if (auth != ClientAuth::kNone) c.client_ca = pki_.caCert();
    c.client_auth = auth;
    auto source = tls::ServerContextSource::create(c, {"http/1.1"});
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = *source;
    server_ = std::make_unique<HttpTestUpstream>([this](std::shared_ptr<HttpExchange> e) {
      if (e->request().path() == "/stream") {
        e->beginStream(HttpResponse{});
        e->sendChunk(Buffer::copyOf("first piece"));
        held_.push_back(std::move(e));  // open until the server stops
        return;
      }
      HttpResponse r;
      const std::string_view* host = e->request().headers.find("Host");
      r.header("X-Seen-Host", std::string(host ? *host : ""));
      r.body.append(e->request().body);
      e->respond(std::move(r));
    });
    server_->setTls(source_);
    auto bound = server_->listenOnLoopback();
    ASSERT_TRUE(bound.ok()) << bound.status();
    endpoint_ = *config::parseListenAddress(bound->address);
    unix_path_ = (std::filesystem::temp_directory_path() /
                  ("infergate_http_client_tls_" + std::to_string(::getpid()) + ".sock"))
                     .string();
    auto bound_unix = server_->listen(http::ListenSpec::unixPath(unix_path_));
    ASSERT_TRUE(bound_unix.ok()) << bound_unix.status();
    unix_endpoint_ = *config::parseListenAddress(bound_unix->address);
    server_->start();
  }

  // The upstream's certificate and key as the listeners' SSL_CTX, for a scripted upstream.
  std::shared_ptr<const tls::ServerContext> serverContext(std::vector<std::string> alpn) const {
    config::ServerTlsConfig c;
    c.cert = pki_.cert("server");
    c.key = pki_.key("server");
    auto context = tls::ServerContext::create(c, std::move(alpn));
    EXPECT_TRUE(context.ok()) << context.status();
    return context.ok() ? *context : nullptr;
  }

  HttpClientTls trusting() const {
    HttpClientTls t;
    t.ca_pem = readAll(pki_.caCert());
    return t;
  }

  void useTls(HttpClientTls tls) {
    client_thread_.run([this] { client_.reset(); });
    if (GetParam() == Engine::kNative) {  // as UpstreamSet makes it from the upstream's tls
      auto settings = std::make_shared<tls::ClientTls>();
      settings->config.server_name = tls.server_name;
      settings->config.insecure_skip_verify = !tls.verify;
      settings->ca_pem = tls.ca_pem;
      settings->cert_pem = tls.cert_pem;
      settings->key_pem = tls.key_pem;
      auto context = tls::ClientContext::create(settings, {"http/1.1"});
      ASSERT_TRUE(context.ok()) << context.status();
      tls.context = *context;
    }
    options_.tls = std::move(tls);
  }

  // What each engine says of a certificate it refused.
  static std::string refusalText() {
    return GetParam() == Engine::kNative ? "the TLS handshake failed: handshake: "
                                         : "the upstream's TLS certificate was not accepted";
  }

  HttpUpstreamClient& client() {
    if (!client_) client_ = std::make_unique<HttpUpstreamClient>(client_thread_.loop(), options_);
    return *client_;
  }

  // POSTs `body` to /echo and waits for the answer.
  StatusOr<HttpUpstreamResponse> fetch(const std::string& body,
                                       const config::ListenAddress* to = nullptr) {
    auto done = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
    auto answer = done->get_future();
    const config::ListenAddress& endpoint = to ? *to : endpoint_;
    client_thread_.run([&] {
      HttpUpstreamRequest request;
      request.target = "/echo";
      request.body.append(Buffer::fromString(body));
      HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [done](StatusOr<HttpUpstreamResponse> r) { done->set_value(std::move(r)); };
      client().send(endpoint, std::move(request), std::move(callbacks));
    });
    if (answer.wait_for(kWait) != std::future_status::ready) {
      return absl::InternalError("test: no completion within 30 s");
    }
    return answer.get();
  }

  // Handshakes the upstream has run.
  long handshakes() const { return SSL_CTX_sess_accept(source_->current()->get()); }
  // From now on, counts the handshakes in which the client offered a session to resume
  // (a TLS 1.3 pre-shared key). Whether the upstream then takes it is its own business:
  // the client's part is to offer it.
  void countOffers() {
    SSL_CTX_set_client_hello_cb(source_->current()->get(), &onClientHello, &offers_);
  }
  static int onClientHello(SSL* ssl, int*, void* offers) {
    const unsigned char* psk = nullptr;
    size_t length = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_psk, &psk, &length) == 1 && length > 0) {
      ++*static_cast<std::atomic<int>*>(offers);
    }
    return SSL_CLIENT_HELLO_SUCCESS;
  }

  tls::testing::TestPki pki_;
  std::shared_ptr<tls::ServerContextSource> source_;
  std::unique_ptr<HttpTestUpstream> server_;
  config::ListenAddress endpoint_, unix_endpoint_;
  std::string unix_path_;
  HttpClientOptions options_{.upstream_name = "secure"};
  LoopThread client_thread_;
  std::unique_ptr<HttpUpstreamClient> client_;  // client loop only
  std::atomic<int> offers_{0};  // the upstream's loop writes, the test reads
  std::vector<std::shared_ptr<HttpExchange>> held_;  // the upstream's loop only
};

INSTANTIATE_TEST_SUITE_P(Engines, HttpClientTlsTest, ::testing::Values(Engine::kLibcurl, Engine::kNative),
                         [](const ::testing::TestParamInfo<Engine>& info) {
                           return info.param == Engine::kLibcurl ? "Libcurl" : "Native";
                         });

TEST_P(HttpClientTlsTest, VerifiesTheUpstreamByCaAndAddress) {
  serve();
  useTls(trusting());
  auto r = fetch("over tls");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.view(), "over tls");
  EXPECT_EQ(*r->headers.find("X-Seen-Host"), endpoint_.text);
}

TEST_P(HttpClientTlsTest, ServerNameIsSentAndVerifiedWhileTheConnectionGoesToTheEndpoint) {
  serve();
  HttpClientTls t = trusting();
  t.server_name = "upstream.internal";  // resolves nowhere: CONNECT_TO takes it there
  useTls(t);
  auto r = fetch("named");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "named");
  EXPECT_EQ(*r->headers.find("X-Seen-Host"),
            "upstream.internal:" + std::to_string(endpoint_.port));
}

TEST_P(HttpClientTlsTest, ServerNameNotInTheCertificateIsRefusedBeforeSending) {
  serve();
  HttpClientTls t = trusting();
  t.server_name = "elsewhere.internal";
  useTls(t);
  auto r = fetch("x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("upstream 'secure' (" + endpoint_.text + "): " + refusalText()),
            std::string::npos)
      << r.status();
  if (GetParam() == Engine::kNative) {
    EXPECT_NE(r.status().message().find("(hostname mismatch: the certificate is not for elsewhere.internal)"),
              std::string::npos)
        << r.status();
  }
  EXPECT_TRUE(wasNotSent(r.status()));
  EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream);
}

// An endpoint written as a host name is verified against that name (libcurl resolves it
// itself; the native engine takes the gateway's discovery's addresses): the certificate is
// for "localhost", and a name it does not hold is refused before anything is sent.
TEST_P(HttpClientTlsTest, AHostNameEndpointIsVerifiedByItsName) {
  serve();
  auto hosts = std::make_shared<HostAddresses>();
  hosts->resolved("localhost", {"127.0.0.1"});
  hosts->resolved("other.test", {"127.0.0.1"});
  options_.hosts = hosts;
  useTls(trusting());
  config::ListenAddress named = endpoint_;
  named.host = "localhost";
  named.text = "localhost:" + std::to_string(endpoint_.port);
  auto r = fetch("by name", &named);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "by name");
  EXPECT_EQ(*r->headers.find("X-Seen-Host"), named.text);
  if (GetParam() == Engine::kNative) {
    config::ListenAddress other = named;
    other.host = "other.test";
    other.text = "other.test:" + std::to_string(endpoint_.port);
    r = fetch("x", &other);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_NE(r.status().message().find("the certificate is not for other.test"), std::string::npos)
        << r.status();
    EXPECT_TRUE(wasNotSent(r.status()));
  }
}

TEST_P(HttpClientTlsTest, AnotherCaIsRefused) {
  serve();
  tls::testing::TestPki other("another CA");
  HttpClientTls t;
  t.ca_pem = readAll(other.caCert());
  useTls(t);
  auto r = fetch("x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(wasNotSent(r.status()));
}

TEST_P(HttpClientTlsTest, NoCaMeansTheSystemStoreWhichKnowsNotTheTestCa) {
  serve();
  useTls(HttpClientTls{});
  auto r = fetch("x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_P(HttpClientTlsTest, InsecureSkipVerifyAcceptsAnUnverifiableUpstream) {
  serve();
  HttpClientTls t;
  t.verify = false;
  t.server_name = "elsewhere.internal";
  useTls(t);
  auto r = fetch("unchecked");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "unchecked");
}

TEST_P(HttpClientTlsTest, RequiredClientCertificateIsPresentedWhenGiven) {
  serve(ClientAuth::kRequire);
  useTls(trusting());
  auto refused = fetch("no certificate");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  HttpClientTls t = trusting();
  t.cert_pem = readAll(pki_.cert("client"));
  t.key_pem = readAll(pki_.key("client"));
  useTls(t);
  auto r = fetch("with certificate");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "with certificate");
}

TEST_P(HttpClientTlsTest, UnixSocketEndpointSpeaksTlsToo) {
  serve();
  useTls(trusting());  // verified as "localhost"
  auto r = fetch("over a socket", &unix_endpoint_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "over a socket");
  HttpClientTls named = trusting();
  named.server_name = "upstream.internal";
  useTls(named);
  r = fetch("named socket", &unix_endpoint_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->headers.find("X-Seen-Host"), "upstream.internal");
}

TEST_P(HttpClientTlsTest, ServerNameReachesAnIpv6Endpoint) {
  serve();  // for its context; the upstream here is one of its own on ::1
  HttpTestUpstream v6([](std::shared_ptr<HttpExchange> e) {
    HttpResponse r;
    r.body.append(e->request().body);
    e->respond(std::move(r));
  });
  v6.setTls(source_);
  auto v6_bound = v6.listen(http::ListenSpec::tcp("::1", 0));
  if (!v6_bound.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << v6_bound.status();
  v6.start();
  config::ListenAddress endpoint = *config::parseListenAddress(v6_bound->address);  // [::1]:p
  HttpClientTls t = trusting();
  t.server_name = "upstream.internal";  // the certificate has no ::1
  useTls(t);
  auto r = fetch("over v6", &endpoint);
  client_thread_.run([this] { client_.reset(); });
  v6.stop();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "over v6");
}

TEST_P(HttpClientTlsTest, SequentialRequestsReuseOneTlsConnection) {
  serve();
  HttpClientTls t = trusting();
  t.server_name = "upstream.internal";
  useTls(t);
  for (int i = 0; i < 20; ++i) {
    auto r = fetch("request " + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->body.view(), "request " + std::to_string(i));
  }
  EXPECT_EQ(handshakes(), 1);
}

TEST_P(HttpClientTlsTest, ANewHandleOffersTheSessionAnotherHandleGot) {
  serve();
  countOffers();
  useTls(trusting());
  // A: a response that stays open after its first piece, so its handle stays busy. The
  // session tickets precede that piece on the connection: once it is in, they are cached.
  auto first_piece = std::make_shared<std::promise<void>>();
  client_thread_.run([&] {
    HttpUpstreamRequest request;
    request.method = "GET";
    request.target = "/stream";
    HttpUpstreamCallbacks callbacks;
    callbacks.on_head = [](int, const http::HeaderList&) {};
    callbacks.on_data = [first_piece, set = false](Buffer) mutable {
      if (!set) first_piece->set_value();
      set = true;
    };
    callbacks.on_complete = [](StatusOr<HttpUpstreamResponse>) {};
    client().send(endpoint_, std::move(request), std::move(callbacks));
  });
  ASSERT_EQ(first_piece->get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(offers_.load(), 0);
  // B, meanwhile: a new connection on a new easy handle, which has the session only
  // through the client's shared cache (TLS 1.3: OpenSSL offers a ticket once, so one
  // connection's resumption is all there is to see).
  auto r = fetch("second");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handshakes(), 2);
  EXPECT_EQ(offers_.load(), 1);
}

TEST_P(HttpClientTlsTest, LargeBodiesGoBothWaysIntact) {
  // 8 MiB each way: about 500 records, writes the socket takes in part, an answer read
  // straight into its buffer over many readable events.
  serve();
  useTls(trusting());
  std::string body(8 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 7919) >> 3);
  for (int round = 0; round < 2; ++round) {  // the second on the kept connection
    auto r = fetch(body);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->body.size(), body.size());
    EXPECT_TRUE(r->body.view() == body);
  }
  EXPECT_EQ(handshakes(), 1);
}

TEST_P(HttpClientTlsTest, ARelayTakingBlocksWaitsForItsWindowOverTlsAndLosesNoRecord) {
  // 24 MiB echoed to a relay that keeps its first window of pieces, then lets go. Reading
  // stops with records perhaps already taken by the session; once it resumes, every byte
  // comes, in order. libcurl buffers the answer whole.
  serve();
  useTls(trusting());
  const bool native = GetParam() == Engine::kNative;
  std::string body(24 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 7919) >> 3);
  auto relay = std::make_shared<testing::KeepingRelay>();
  StatusOr<HttpUpstreamResponse> result = absl::UnknownError("not yet");
  HttpUpstreamRequest request;
  request.target = "/echo";
  request.body.append(Buffer::fromString(body));
  std::future<void> answer = testing::sendRelayed(client_thread_, client(), endpoint_, std::move(request), relay, &result);
  if (native) {
    size_t held = 0;
    for (int i = 0; i < 200 && held < kRelayWindowBytes; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      client_thread_.run([&] { held = relay->held_bytes; });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // nothing more may come
    client_thread_.run([&] { held = relay->held_bytes; });
    EXPECT_EQ(held, kRelayWindowBytes);
    EXPECT_NE(answer.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
    client_thread_.run([&] { relay->letGo(); });
  }
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(result.ok()) << result.status();
  if (!native) {
    EXPECT_TRUE(result->body.view() == body);
    return;
  }
  EXPECT_TRUE(result->body.empty());
  EXPECT_EQ(relay->text.size(), body.size());
  EXPECT_TRUE(relay->text == body);
}

// What only the native engine says: its own words for handshakes that do not end well.
class HttpClientTlsNativeTest : public HttpClientTlsTest {};
INSTANTIATE_TEST_SUITE_P(Native, HttpClientTlsNativeTest, ::testing::Values(Engine::kNative),
                         [](const ::testing::TestParamInfo<Engine>&) { return "Native"; });

TEST_P(HttpClientTlsNativeTest, AHandshakeThePeerNeverAnswersIsBoundedAndNothingWasSent) {
  testing::IdleListener listener;  // takes the connection, never speaks
  options_.connect_timeout = std::chrono::milliseconds(200);
  useTls(trusting());
  config::ListenAddress endpoint = *config::parseListenAddress("127.0.0.1:" + std::to_string(listener.port()));
  auto r = fetch("x", &endpoint);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(std::string(r.status().message()).ends_with("the TLS handshake did not finish within 200 ms of connecting"))
      << r.status();
  EXPECT_TRUE(wasNotSent(r.status()));
}

TEST_P(HttpClientTlsNativeTest, APlaintextUpstreamFailsTheHandshakeAsNotSent) {
  HttpTestUpstream plain([](std::shared_ptr<HttpExchange> e) { e->respond(HttpResponse{}); });
  auto bound = plain.listenOnLoopback();
  ASSERT_TRUE(bound.ok()) << bound.status();
  plain.start();
  config::ListenAddress endpoint = *config::parseListenAddress(bound->address);
  useTls(trusting());
  auto r = fetch("x", &endpoint);
  client_thread_.run([this] { client_.reset(); });
  plain.stop();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the TLS handshake failed"), std::string::npos) << r.status();
  EXPECT_TRUE(wasNotSent(r.status()));
}

// A TLS upstream scripted step by step (blocking OpenSSL on a thread of its own): it answers
// one request on a connection, takes the next one on the same connection and closes
// without a word, then answers the client's fresh connection with bytes that are not TLS.
class ScriptedTlsUpstream {
 public:
  explicit ScriptedTlsUpstream(std::shared_ptr<const tls::ServerContext> context) : context_(std::move(context)) {
    thread_ = std::thread([this] { run(); });
  }
  ~ScriptedTlsUpstream() { thread_.join(); }
  ScriptedTlsUpstream(const ScriptedTlsUpstream&) = delete;
  ScriptedTlsUpstream& operator=(const ScriptedTlsUpstream&) = delete;

  int port() const { return listener_.port(); }
  int requestsRead() const { return requests_.load(); }
  bool scriptDone() const { return done_.load(); }

 private:
  static constexpr auto kAcceptWait = std::chrono::seconds(10);

  // Reads one request (head and Content-Length body); false at EOF or an error.
  static bool readRequest(SSL* ssl) {
    std::string in;
    char chunk[4096];
    for (;;) {
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        if (size_t at = in.find("Content-Length: "); at != std::string::npos && at < head_end) {
          length = std::stoul(in.substr(at + 16));
        }
        if (in.size() >= head_end + 4 + length) return true;
      }
      const int n = SSL_read(ssl, chunk, sizeof(chunk));
      if (n <= 0) return false;
      in.append(chunk, static_cast<size_t>(n));
    }
  }
  void run() {
    const int first = listener_.accept(kAcceptWait);
    if (first < 0) return;
    SSL* ssl = SSL_new(context_->get());
    SSL_set_fd(ssl, first);
    if (SSL_accept(ssl) == 1 && readRequest(ssl)) {
      ++requests_;
      static constexpr char kAnswer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
      SSL_write(ssl, kAnswer, sizeof(kAnswer) - 1);
      if (readRequest(ssl)) ++requests_;  // taken on the kept-alive connection, never answered
    }
    SSL_free(ssl);
    ::shutdown(first, SHUT_RDWR);
    ::close(first);
    const int second = listener_.accept(kAcceptWait);  // the client's resend
    if (second >= 0) {
      // Its ClientHello is read first, so that the close is a FIN behind the answer, never
      // a reset that could overtake it.
      pollfd p{second, POLLIN, 0};
      char hello[16384];
      if (::poll(&p, 1, 10'000) == 1) (void)!::recv(second, hello, sizeof(hello), 0);
      static constexpr char kNotTls[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)!::write(second, kNotTls, sizeof(kNotTls) - 1);
      ::shutdown(second, SHUT_RDWR);
      ::close(second);
      done_.store(true);
    }
  }

  testing::IdleListener listener_;
  std::shared_ptr<const tls::ServerContext> context_;
  std::atomic<int> requests_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// A kept-alive connection the upstream closes after taking the request: the request goes
// again on a fresh connection, whose handshake then fails. That failure is not "never
// sent": the first connection carried the request, so the fleet must not hand it to
// another endpoint (an inference is not idempotent).
TEST_P(HttpClientTlsNativeTest, AResendWhoseHandshakeFailsWasSent) {
  ScriptedTlsUpstream upstream(serverContext({"http/1.1"}));
  useTls(trusting());
  config::ListenAddress endpoint = *config::parseListenAddress("127.0.0.1:" + std::to_string(upstream.port()));
  auto first = fetch("one", &endpoint);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->body.view(), "ok");
  auto second = fetch("two", &endpoint);
  client_thread_.run([this] { client_.reset(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find("the TLS handshake failed"), std::string::npos) << second.status();
  EXPECT_FALSE(wasNotSent(second.status())) << second.status();
  EXPECT_EQ(upstream.requestsRead(), 2);  // the second one reached the upstream once
  EXPECT_TRUE(upstream.scriptDone());     // and the client came back for the resend
}

}  // namespace
}  // namespace infergate::gateway::upstream
