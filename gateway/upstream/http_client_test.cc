// HttpUpstreamClient against real upstreams on loopback (port 0, no mocks): the project's
// own HttpServer (HttpTestUpstream, upstream_test_servers.h), a counting acceptor in front
// of HttpConnection where the number of TCP connections matters, and raw sockets where the
// upstream must misbehave on purpose.
//
// The client's loop runs on its own thread; the tests post to it and wait on futures.
// Nothing sleeps: where an order must be shown (a streamed piece before the end), the
// server's next step is triggered by what the client saw.

#include "gateway/upstream/http_client.h"
#include "gateway/upstream/upstream_status.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "config/listen_address.h"
#include "gateway/http/http_server.h"
#include "gateway/http/listen_socket.h"
#include "gateway/upstream/upstream_test_servers.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::Buffer;
using codecs::StatusOr;
using http::HttpExchange;
using http::HttpResponse;
using testing::HttpTestUpstream;
using testing::LoopThread;
using namespace std::chrono_literals;

constexpr auto kWait = std::chrono::seconds(30);

config::ListenAddress address(const std::string& text) {
  auto parsed = config::parseListenAddress(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : config::ListenAddress{};
}

std::string contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos
             ? ""
             : "\"" + haystack + "\" lacks \"" + std::string(needle) + "\"";
}

// A count that other threads raise and a test waits on.
class Counter {
 public:
  void add() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++value_;
    changed_.notify_all();
  }
  bool waitAtLeast(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kWait, [&] { return value_ >= n; });
  }
  int value() {
    std::lock_guard<std::mutex> lock(mutex_);
    return value_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int value_ = 0;
};

// An HTTP upstream that counts the TCP connections it accepts: HttpServer cannot tell a
// handler which connection a request came on, so this accepts itself and hands each
// socket to the same HttpConnection class HttpServer uses.
class CountingUpstream {
 public:
  CountingUpstream(LoopThread& thread, http::HttpHandler handler)
      : thread_(thread), handler_(std::move(handler)) {
    auto bound = http::bindListener(http::ListenSpec::tcp("127.0.0.1", 0), 1);
    EXPECT_TRUE(bound.ok()) << bound.status();
    listen_fd_ = bound->fds[0];
    endpoint_ = address(bound->address);
    thread_.run([this] {
      event_ = event_new(thread_.loop().base(), listen_fd_, EV_READ | EV_PERSIST, &onAccept, this);
      event_add(event_, nullptr);
    });
  }
  ~CountingUpstream() {
    thread_.run([this] {
      event_free(event_);
      std::vector<std::shared_ptr<http::HttpConnection>> all;
      for (auto& [ptr, c] : connections_) all.push_back(c);
      for (auto& c : all) c->close();
    });
    thread_.run([] {});  // the close callbacks' posted erases
    thread_.run([this] { connections_.clear(); });
    ::close(listen_fd_);
  }
  const config::ListenAddress& endpoint() const { return endpoint_; }
  int accepted() const { return accepted_.load(); }

 private:
  static void onAccept(evutil_socket_t fd, short, void* arg) {
    auto* self = static_cast<CountingUpstream*>(arg);
    int c;
    while ((c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
      self->accepted_.fetch_add(1);
      auto connection = std::make_shared<http::HttpConnection>(
          self->thread_.loop(), c, self->limits_, self->handler_,
          [self](http::HttpConnection* closed) {
            self->thread_.loop().post([self, closed] { self->connections_.erase(closed); });
          });
      self->connections_.emplace(connection.get(), connection);
      connection->start();
    }
  }

  LoopThread& thread_;
  http::HttpHandler handler_;
  http::HttpLimits limits_;
  int listen_fd_ = -1;
  event* event_ = nullptr;
  config::ListenAddress endpoint_;
  std::atomic<int> accepted_{0};
  std::unordered_map<http::HttpConnection*, std::shared_ptr<http::HttpConnection>> connections_;
};

// A deliberately broken upstream: a listening socket and a script run on a plain thread
// with blocking calls (each bounded by a 10 s poll).
class RawUpstream {
 public:
  explicit RawUpstream(std::function<void(RawUpstream&)> script) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    endpoint_ = address("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
    thread_ = std::thread([this, script = std::move(script)] { script(*this); });
  }
  ~RawUpstream() {
    thread_.join();
    closeListener();
  }
  const config::ListenAddress& endpoint() const { return endpoint_; }
  // From now on connecting is refused (script thread).
  void closeListener() {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }

  // A connected socket, or -1 after 10 s.
  int accept() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return -1;
    return ::accept(listen_fd_, nullptr, nullptr);
  }
  // One request (head and Content-Length body); "" when the peer closed or went quiet.
  static std::string readRequest(int fd) {
    std::string in;
    size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(fd, in)) return {};
    }
    size_t length = 0;
    if (size_t cl = in.find("Content-Length: "); cl != std::string::npos) {
      length = std::strtoul(in.c_str() + cl + 16, nullptr, 10);
    }
    while (in.size() < end + 4 + length) {
      if (!fill(fd, in)) return {};
    }
    return in;
  }
  static void write(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Waits until the peer closes (or 10 s).
  static void drain(int fd) {
    std::string ignored;
    while (fill(fd, ignored)) {
    }
  }
  // One connection: its request read, `reply` written, then (with `wait_for_close`) held
  // until the client closes it; closed. False when no client came.
  bool answerOne(std::string_view reply, bool wait_for_close = true) {
    int fd = accept();
    if (fd < 0) return false;
    readRequest(fd);
    write(fd, reply);
    if (wait_for_close) drain(fd);
    ::close(fd);
    return true;
  }

 private:
  static bool fill(int fd, std::string& in) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    return true;
  }

  int listen_fd_ = -1;
  config::ListenAddress endpoint_;
  std::thread thread_;
};

struct Seen {
  std::string method;
  std::string target;
  http::HeaderList headers;
  std::string body;
};

// Every test runs against both engines (http_client.h): the endpoints here are IP literals
// and unix paths, which kAuto gives to the native engine.
class HttpClientTest : public ::testing::TestWithParam<HttpClientEngine> {
 protected:
  void SetUp() override {
    options_.engine = GetParam();
    server_ = std::make_unique<HttpTestUpstream>(
        [this](std::shared_ptr<HttpExchange> e) { handle(std::move(e)); });
    auto bound = server_->listenOnLoopback();
    ASSERT_TRUE(bound.ok()) << bound.status();
    endpoint_ = address(bound->address);
    unix_path_ = (std::filesystem::temp_directory_path() /
                  ("infergate_http_client_" + std::to_string(::getpid()) + ".sock"))
                     .string();
    auto bound_unix = server_->listen(http::ListenSpec::unixPath(unix_path_));
    ASSERT_TRUE(bound_unix.ok()) << bound_unix.status();
    unix_endpoint_ = address(bound_unix->address);
    server_->start();
  }

  void TearDown() override {
    client_thread_.run([this] { client_.reset(); });
    server_->stop();
    std::filesystem::remove(unix_path_);
  }

  http::EventLoop& serverLoop() { return server_->loop(); }

  // The client, made on its loop on first use.
  HttpUpstreamClient& client() {
    if (!client_) client_ = std::make_unique<HttpUpstreamClient>(client_thread_.loop(), options_);
    return *client_;
  }

  // The upstream: /echo answers the body back with what it saw in headers; /hold never
  // answers (counting arrivals and cancellations); /error is a 500 with a JSON error;
  // /stream streams one event and waits for releaseStream(); /chunks streams a body whole;
  // /encoded answers bytes labelled gzip that are not gzip.
  void handle(std::shared_ptr<HttpExchange> e) {
    const http::HttpRequest& req = e->request();
    {
      std::lock_guard<std::mutex> lock(seen_mutex_);
      seen_.push_back(Seen{req.method, req.target, req.headers, std::string(req.body.view())});
    }
    std::string_view path = req.path();
    if (path == "/hold") {
      e->setCancelHandler([this] { server_cancels_.add(); });
      held_.push_back(e);
      server_holds_.add();
    } else if (path == "/error") {
      e->respond(HttpResponse::jsonError(500, "model exploded"));
    } else if (path == "/stream") {
      e->setCancelHandler([this] { server_cancels_.add(); });
      HttpResponse head;
      head.header("Content-Type", "text/event-stream; charset=utf-8");
      e->beginStream(std::move(head));
      e->sendChunk(Buffer::copyOf("data: 1\n\n"));
      held_.push_back(e);
      server_holds_.add();
    } else if (path == "/chunks") {
      e->beginStream(HttpResponse{});
      for (int i = 0; i < 40; ++i)
        e->sendChunk(Buffer::fromString(std::string(30000 + i, char('a' + i % 26))));
      e->endStream();
    } else if (path == "/encoded") {
      HttpResponse r;
      r.header("Content-Encoding", "gzip");
      r.body.append(Buffer::copyOf("definitely not gzip"));
      e->respond(std::move(r));
    } else {
      HttpResponse r;
      r.header("X-Reply", "yes");
      r.header("X-Seen-Method", req.method);
      r.header("Content-Type", "application/octet-stream");
      r.body.append(req.body);
      e->respond(std::move(r));
    }
  }

  // Ends the held /stream exchange with a second event (on the server loop).
  void releaseStream() {
    serverLoop().post([this] {
      for (auto& e : held_) {
        if (e->streaming()) {
          e->sendChunk(Buffer::copyOf("data: 2\n\n"));
          e->endStream();
        }
      }
    });
  }

  Seen lastSeen() {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    return seen_.empty() ? Seen{} : seen_.back();
  }
  size_t seenCount() {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    return seen_.size();
  }

  // Sends on the client's loop and waits for on_complete.
  StatusOr<HttpUpstreamResponse> fetch(HttpUpstreamRequest request,
                                       const config::ListenAddress* to = nullptr) {
    auto done = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
    auto answer = done->get_future();
    auto shared = std::make_shared<HttpUpstreamRequest>(std::move(request));
    const config::ListenAddress& endpoint = to ? *to : endpoint_;
    client_thread_.run([&] {
      HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [done](StatusOr<HttpUpstreamResponse> r) {
        done->set_value(std::move(r));
      };
      client().send(endpoint, std::move(*shared), std::move(callbacks));
    });
    if (answer.wait_for(kWait) != std::future_status::ready) {
      return absl::InternalError("test: no completion within 30 s");
    }
    return answer.get();
  }

  static HttpUpstreamRequest get(std::string target) {
    HttpUpstreamRequest r;
    r.method = "GET";
    r.target = std::move(target);
    return r;
  }
  static HttpUpstreamRequest post(std::string target, std::string body) {
    HttpUpstreamRequest r;
    r.target = std::move(target);
    r.body.append(Buffer::fromString(std::move(body)));
    return r;
  }

  HttpClientOptions options_{.upstream_name = "triton-a"};
  std::unique_ptr<HttpTestUpstream> server_;
  config::ListenAddress endpoint_;
  config::ListenAddress unix_endpoint_;
  std::string unix_path_;
  std::mutex seen_mutex_;
  std::vector<Seen> seen_;
  std::vector<std::shared_ptr<HttpExchange>> held_;  // server loop only
  Counter server_holds_;
  Counter server_cancels_;
  LoopThread client_thread_;
  std::unique_ptr<HttpUpstreamClient> client_;  // client loop only
};

// ---- round trips ----

TEST_P(HttpClientTest, GetRoundTripCarriesHeadersBothWays) {
  HttpUpstreamRequest request = get("/echo?x=1");
  request.headers = {{"X-Trace", "abc"},
                     {"Authorization", "Bearer t"},
                     {"X-Empty", ""},
                     // Unsendable: dropped rather than allowed to forge a second header.
                     {"X-Split", "a\r\nX-Injected: 1"},
                     {"Bad Name", "x"}};
  auto r = fetch(std::move(request));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  ASSERT_NE(r->headers.find("x-reply"), nullptr);
  EXPECT_EQ(*r->headers.find("X-Reply"), "yes");
  EXPECT_EQ(*r->headers.find("X-Seen-Method"), "GET");
  EXPECT_EQ(*r->headers.find("Content-Length"), "0");
  EXPECT_TRUE(r->body.empty());

  Seen seen = lastSeen();
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.target, "/echo?x=1");
  ASSERT_NE(seen.headers.find("X-Trace"), nullptr);
  EXPECT_EQ(*seen.headers.find("X-Trace"), "abc");
  EXPECT_EQ(*seen.headers.find("Authorization"), "Bearer t");
  ASSERT_NE(seen.headers.find("X-Empty"), nullptr);
  EXPECT_EQ(*seen.headers.find("X-Empty"), "");
  EXPECT_NE(seen.headers.find("Host"), nullptr);
  EXPECT_EQ(seen.headers.find("X-Injected"), nullptr);
  EXPECT_EQ(seen.headers.find("X-Split"), nullptr);
  // libcurl's own defaults are gone.
  EXPECT_EQ(seen.headers.find("Accept"), nullptr);
  EXPECT_EQ(seen.headers.find("User-Agent"), nullptr);
  EXPECT_EQ(seen.headers.find("Content-Type"), nullptr);
}

TEST_P(HttpClientTest, PostSendsTheBodyWithContentLengthAndNoCurlDefaults) {
  HttpUpstreamRequest request = post("/echo", "{\"inputs\":[]}");
  // Framing headers are the client's own: a forwarded Transfer-Encoding must not make the
  // body chunked, nor a stale Content-Length go out twice.
  request.headers = {{"Inference-Header-Content-Length", "13"},
                     {"Transfer-Encoding", "chunked"},
                     {"Content-Length", "999"},
                     {"Connection", "close"}};
  auto r = fetch(std::move(request));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.view(), "{\"inputs\":[]}");
  EXPECT_EQ(*r->headers.find("X-Seen-Method"), "POST");

  Seen seen = lastSeen();
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.body, "{\"inputs\":[]}");
  ASSERT_NE(seen.headers.find("Content-Length"), nullptr);
  EXPECT_EQ(*seen.headers.find("Content-Length"), "13");
  EXPECT_EQ(*seen.headers.find("Inference-Header-Content-Length"), "13");
  EXPECT_EQ(seen.headers.find("Transfer-Encoding"), nullptr);
  EXPECT_EQ(seen.headers.find("Expect"), nullptr);
  EXPECT_EQ(seen.headers.find("Connection"), nullptr);
  EXPECT_EQ(seen.headers.find("Accept"), nullptr);
  EXPECT_EQ(seen.headers.find("Content-Type"), nullptr);  // not libcurl's form-urlencoded

  HttpUpstreamRequest typed = post("/echo", "{}");
  typed.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  ASSERT_TRUE(fetch(std::move(typed)).ok());
  seen = lastSeen();
  ASSERT_NE(seen.headers.find("Content-Type"), nullptr);
  EXPECT_EQ(*seen.headers.find("Content-Type"), "application/json");
  EXPECT_EQ(*seen.headers.find("Accept"), "application/json");
}

TEST_P(HttpClientTest, EmptyPostSendsContentLengthZero) {
  auto r = fetch(post("/echo", ""));
  ASSERT_TRUE(r.ok()) << r.status();
  Seen seen = lastSeen();
  EXPECT_EQ(seen.method, "POST");
  ASSERT_NE(seen.headers.find("Content-Length"), nullptr);
  EXPECT_EQ(*seen.headers.find("Content-Length"), "0");
}

TEST_P(HttpClientTest, OtherMethodsGoOutByName) {
  HttpUpstreamRequest put = post("/echo", "abc");
  put.method = "PUT";
  auto r = fetch(std::move(put));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(lastSeen().method, "PUT");
  EXPECT_EQ(lastSeen().body, "abc");
  EXPECT_EQ(r->body.view(), "abc");

  HttpUpstreamRequest del = get("/echo");
  del.method = "DELETE";
  ASSERT_TRUE(fetch(std::move(del)).ok());
  EXPECT_EQ(lastSeen().method, "DELETE");

  // HEAD: the head only, even though the answer announces a length.
  HttpUpstreamRequest head = get("/echo");
  head.method = "HEAD";
  r = fetch(std::move(head));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(lastSeen().method, "HEAD");
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
}

TEST_P(HttpClientTest, LargeBodyFromSegmentsArrivesByteExact) {
  constexpr size_t kTotal = 64 << 20;
  // Uneven segments, as an encoder's chain would be: a JSON header then tensor blobs.
  const size_t sizes[] = {117, (16 << 20) + 3, 1, (32 << 20) - 121,
                          kTotal - 117 - (16 << 20) - 3 - 1 - (32 << 20) + 121};
  HttpUpstreamRequest request;
  request.target = "/echo";
  size_t offset = 0;
  for (size_t size : sizes) {
    codecs::MutableBuffer m = codecs::MutableBuffer::allocate(size);
    for (size_t i = 0; i < size; ++i)
      m.data()[i] = static_cast<uint8_t>((offset + i) * 131 + ((offset + i) >> 16));
    offset += size;
    request.body.append(std::move(m).freeze());
  }
  ASSERT_EQ(request.body.size(), kTotal);
  std::string expected = request.body.toString();

  auto r = fetch(std::move(request));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(r->body.size(), kTotal);
  EXPECT_TRUE(r->body.view() == expected);  // not EXPECT_EQ: a mismatch would print 64 MiB
  Seen seen = lastSeen();
  EXPECT_EQ(seen.body.size(), kTotal);
  EXPECT_TRUE(seen.body == expected);
}

TEST_P(HttpClientTest, BufferedModeAssemblesAChunkedBodyOfUnknownLength) {
  auto r = fetch(get("/chunks"));
  ASSERT_TRUE(r.ok()) << r.status();
  std::string expected;
  for (int i = 0; i < 40; ++i) expected += std::string(30000 + i, char('a' + i % 26));
  EXPECT_EQ(r->body.size(), expected.size());
  EXPECT_TRUE(r->body.view() == expected);
  EXPECT_EQ(r->headers.find("Content-Length"), nullptr);
}

TEST_P(HttpClientTest, UpstreamErrorStatusIsAResponseNotAnError) {
  auto r = fetch(post("/error", "{}"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body.view(), "{\"error\":\"model exploded\"}");
  ASSERT_NE(r->headers.find("Content-Type"), nullptr);
  EXPECT_EQ(*r->headers.find("Content-Type"), "application/json");
}

TEST_P(HttpClientTest, BodiesPassThroughWithoutDecoding) {
  HttpUpstreamRequest request = get("/encoded");
  request.headers = {{"Accept-Encoding", "gzip"}};  // the client's, forwarded
  auto r = fetch(std::move(request));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->headers.find("Content-Encoding"), "gzip");
  EXPECT_EQ(r->body.view(), "definitely not gzip");
  EXPECT_EQ(*lastSeen().headers.find("Accept-Encoding"), "gzip");
}

TEST_P(HttpClientTest, RawTargetReachesTheServerUnnormalised) {
  // Bytes >= 0x80 too: a UTF-8 model name must not arrive percent-encoded (another name).
  for (std::string target : {"/v2/models/a%2Fb/infer", "/v2/models/x/../y/./infer?q=a%20b&r=%2e%2e",
                             "/v2/models/mod\xc3\xa8le/infer", "/v2/models/\xff\x80/ready"}) {
    auto r = fetch(get(target));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(lastSeen().target, target);
  }
}

TEST_P(HttpClientTest, UnixSocketEndpoint) {
  auto r = fetch(post("/echo", "over a unix socket"), &unix_endpoint_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "over a unix socket");
  Seen seen = lastSeen();
  EXPECT_EQ(seen.target, "/echo");
  EXPECT_EQ(*seen.headers.find("Host"), "localhost");
}

TEST_P(HttpClientTest, Ipv6Endpoint) {
  HttpTestUpstream server([](std::shared_ptr<HttpExchange> e) {
    e->respond(HttpResponse::json(200, R"({"v6":true})"));
  });
  auto bound = server.listen(http::ListenSpec::tcp("::1", 0));
  if (!bound.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << bound.status();
  server.start();
  config::ListenAddress endpoint = address(bound->address);  // "[::1]:port"
  auto r = fetch(get("/v2"), &endpoint);
  client_thread_.run([this] { client_.reset(); });
  server.stop();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), R"({"v6":true})");
}

TEST_P(HttpClientTest, UnsendableTargetIsTheRequestsFault) {
  const size_t before = seenCount();
  for (std::string target : {std::string("/v2/models/a b/infer"), std::string("/echo\r\nX-Evil: 1"),
                             std::string("/v2/models/a\0b/infer", 21), std::string("/a\tb"),
                             std::string("/a\x7f"), std::string(""), std::string("echo"),
                             std::string("http://elsewhere/echo")}) {
    auto r = fetch(get(target));
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kClient);
    EXPECT_NE(std::string(r.status().message()).find("cannot be sent"), std::string::npos);
    // Control bytes are shown escaped, never raw, in the message.
    EXPECT_EQ(std::string(r.status().message()).find_first_of(std::string("\r\n\0\t", 4)),
              std::string::npos) << r.status();
  }
  EXPECT_EQ(seenCount(), before);  // none of them reached the server
  auto next = fetch(get("/echo"));
  ASSERT_TRUE(next.ok()) << next.status();
}

// ---- connections ----

HttpResponse echo(const std::shared_ptr<HttpExchange>& e) {
  HttpResponse r;
  r.body.append(e->request().body);
  return r;
}

TEST_P(HttpClientTest, SequentialRequestsReuseOneConnection) {
  LoopThread upstream_thread;
  CountingUpstream upstream(upstream_thread,
                            [](std::shared_ptr<HttpExchange> e) { e->respond(echo(e)); });
  // Each request is sent from the previous one's completion, so at most one is in flight.
  constexpr int kRequests = 100;
  std::promise<int> done;
  auto ok_count = std::make_shared<int>(0);
  std::function<void(int)> next = [&](int i) {
    if (i == kRequests) return done.set_value(*ok_count);
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [&, i, ok_count](StatusOr<HttpUpstreamResponse> r) {
      if (r.ok() && r->body.view() == "request " + std::to_string(i)) ++*ok_count;
      next(i + 1);
    };
    client().send(upstream.endpoint(), post("/echo", "request " + std::to_string(i)),
                  std::move(callbacks));
  };
  auto answer = done.get_future();
  client_thread_.run([&] { next(0); });
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(answer.get(), kRequests);
  EXPECT_EQ(upstream.accepted(), 1);
}

// Sends `count` requests at once from one loop task; returns how many came back intact.
int sendConcurrently(LoopThread& thread, std::function<HttpUpstreamClient&()> client,
                     const config::ListenAddress& endpoint, int count) {
  std::promise<void> all_done;
  auto remaining = std::make_shared<int>(count);
  auto intact = std::make_shared<int>(0);
  thread.run([&] {
    for (int i = 0; i < count; ++i) {
      HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [&, i, remaining, intact](StatusOr<HttpUpstreamResponse> r) {
        if (r.ok() && r->status == 200 && r->body.view() == "body " + std::to_string(i)) ++*intact;
        if (--*remaining == 0) all_done.set_value();
      };
      HttpUpstreamRequest request;
      request.target = "/echo";
      request.body.append(Buffer::fromString("body " + std::to_string(i)));
      client().send(endpoint, std::move(request), std::move(callbacks));
    }
  });
  if (all_done.get_future().wait_for(kWait) != std::future_status::ready) std::abort();
  return *intact;
}

TEST_P(HttpClientTest, ConcurrentRequestsAllComplete) {
  LoopThread upstream_thread;
  CountingUpstream upstream(upstream_thread,
                            [](std::shared_ptr<HttpExchange> e) { e->respond(echo(e)); });
  EXPECT_EQ(sendConcurrently(
                client_thread_, [this]() -> HttpUpstreamClient& { return client(); },
                upstream.endpoint(), 100),
            100);
  EXPECT_GE(upstream.accepted(), 1);
  EXPECT_LE(upstream.accepted(), 64);  // max_connections_per_endpoint's default
}

TEST_P(HttpClientTest, RequestsBeyondTheConnectionCapQueue) {
  options_.max_connections_per_endpoint = 2;
  LoopThread upstream_thread;
  CountingUpstream upstream(upstream_thread,
                            [](std::shared_ptr<HttpExchange> e) { e->respond(echo(e)); });
  EXPECT_EQ(sendConcurrently(
                client_thread_, [this]() -> HttpUpstreamClient& { return client(); },
                upstream.endpoint(), 30),
            30);
  EXPECT_LE(upstream.accepted(), 2);
}

TEST_P(HttpClientTest, ResendsTheBodyWhenAReusedConnectionTurnsOutDead) {
  // The upstream answers the first request, then closes the kept-alive connection on
  // reading the second without answering: libcurl retries on a fresh connection, which
  // needs the body from its start again (CURLOPT_SEEKFUNCTION).
  std::string resent;  // written by the script's thread; read once it is joined
  {
    RawUpstream upstream([&](RawUpstream& u) {
      int first = u.accept();
      if (first < 0) return;
      RawUpstream::readRequest(first);
      RawUpstream::write(first, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
      RawUpstream::readRequest(first);
      ::close(first);
      int second = u.accept();
      if (second < 0) return;
      resent = RawUpstream::readRequest(second);
      RawUpstream::write(second, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
      RawUpstream::drain(second);
      ::close(second);
    });
    ASSERT_TRUE(fetch(post("/first", "one"), &upstream.endpoint()).ok());
    HttpUpstreamRequest request;
    request.target = "/second";
    for (const char* part : {"seg-1|", "seg-2|", "seg-3"})
      request.body.append(Buffer::copyOf(part));
    auto r = fetch(std::move(request), &upstream.endpoint());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->body.view(), "b");
    client_thread_.run([this] { client_.reset(); });  // closes the connection: the script ends
  }
  EXPECT_EQ(contains(resent, "POST /second HTTP/1.1\r\n"), "");
  EXPECT_EQ(contains(resent, "\r\n\r\nseg-1|seg-2|seg-3"), "");
}

TEST_P(HttpClientTest, ARequestResentAfterAReusedConnectionDiedIsNotMarkedNotSent) {
  // The second request reaches the upstream on the kept-alive connection, which then dies
  // unanswered; libcurl's fresh connection for the resend is refused. The connect error
  // must not claim the request never got there: the upstream may be running it.
  RawUpstream upstream([](RawUpstream& u) {
    int first = u.accept();
    if (first < 0) return;
    RawUpstream::readRequest(first);
    RawUpstream::write(first, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
    RawUpstream::readRequest(first);
    u.closeListener();
    ::close(first);
  });
  ASSERT_TRUE(fetch(post("/first", "one"), &upstream.endpoint()).ok());
  auto r = fetch(post("/second", "two"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(wasNotSent(r.status())) << r.status();
}

// ---- streaming ----

TEST_P(HttpClientTest, StreamingDeliversHeadThenPiecesBeforeTheEnd) {
  // The server sends "data: 1", then waits; only once the client has seen that piece does
  // it send "data: 2" and end. A client that buffered would never see the first piece
  // alone, and the test would time out.
  std::promise<void> complete;
  std::vector<std::string> events;  // client loop only until `complete`
  std::string text;
  bool released = false;
  StatusOr<HttpUpstreamResponse> final_result = absl::UnknownError("not yet");
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.on_head = [&](int status, const http::HeaderList& headers) {
      const std::string* type = headers.find("Content-Type");
      events.push_back("head " + std::to_string(status) + " " + (type ? *type : ""));
    };
    callbacks.on_data = [&](Buffer piece) {
      events.push_back("data");
      text += piece.view();
      if (!released && text == "data: 1\n\n") {
        released = true;
        events.push_back("release");
        releaseStream();
      }
    };
    callbacks.on_complete = [&](StatusOr<HttpUpstreamResponse> r) {
      events.push_back("complete");
      final_result = std::move(r);
      complete.set_value();
    };
    client().send(endpoint_, get("/stream"), std::move(callbacks));
  });
  ASSERT_EQ(complete.get_future().wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(final_result.ok()) << final_result.status();
  EXPECT_EQ(final_result->status, 200);
  EXPECT_TRUE(final_result->body.empty());
  EXPECT_EQ(text, "data: 1\n\ndata: 2\n\n");
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.front(), "head 200 text/event-stream; charset=utf-8");
  EXPECT_EQ(events[1], "data");
  auto release = std::find(events.begin(), events.end(), "release");
  ASSERT_NE(release, events.end());
  EXPECT_NE(std::find(release, events.end(), "data"), events.end());  // pieces after the release
  EXPECT_EQ(events.back(), "complete");
}

TEST_P(HttpClientTest, StreamingResponseWithoutBodyStillGetsItsHead) {
  std::promise<void> complete;
  std::vector<std::string> events;
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.on_head = [&](int status, const http::HeaderList&) {
      events.push_back("head " + std::to_string(status));
    };
    callbacks.on_data = [&](Buffer) { events.push_back("data"); };
    callbacks.on_complete = [&](StatusOr<HttpUpstreamResponse> r) {
      events.push_back(r.ok() ? "complete " + std::to_string(r->status) : "error");
      complete.set_value();
    };
    client().send(endpoint_, get("/echo"), std::move(callbacks));
  });
  ASSERT_EQ(complete.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(events, (std::vector<std::string>{"head 200", "complete 200"}));
}

TEST_P(HttpClientTest, InterimResponsesAreSkipped) {
  RawUpstream upstream([](RawUpstream& u) {
    u.answerOne("HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
                "HTTP/1.1 201 Created\r\nX-Final: yes\r\nContent-Length: 2\r\n\r\nok");
  });
  auto r = fetch(post("/x", "body"), &upstream.endpoint());
  client_thread_.run([this] { client_.reset(); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body.view(), "ok");
  EXPECT_EQ(r->headers.find("X-Interim"), nullptr);
  ASSERT_NE(r->headers.find("X-Final"), nullptr);
  EXPECT_EQ(r->headers.size(), 2u);
}

// ---- errors ----

TEST_P(HttpClientTest, ConnectionRefusedIsUnavailable) {
  // A bound socket that does not listen: the port stays ours, and connecting is refused.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string where = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  config::ListenAddress endpoint = address(where);
  auto r = fetch(get("/v2/health/ready"), &endpoint);
  ::close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream);
  std::string message(codecs::messageOf(r.status()));
  EXPECT_EQ(contains(message, "upstream 'triton-a' (" + where + "): connection refused"), "");
  EXPECT_TRUE(wasNotSent(r.status()));  // safe to send to another endpoint
}

TEST_P(HttpClientTest, RequestTimeoutIsDeadlineExceeded) {
  HttpUpstreamRequest request = get("/hold");
  request.timeout = 200ms;
  auto r = fetch(std::move(request));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream);
  EXPECT_EQ(contains(std::string(codecs::messageOf(r.status())), "upstream 'triton-a'"), "");
  // The timed-out transfer's connection is closed, not reused for a late answer.
  EXPECT_TRUE(server_cancels_.waitAtLeast(1));
}

// A listener whose accept queue is full: Linux drops further SYNs, so a connect hangs
// until a timeout ends it.
class FullBacklog {
 public:
  FullBacklog() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listen_fd_, 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    endpoint_ = address("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
    for (int i = 0; i < 3; ++i) {  // one fills the queue; the others' SYNs are dropped
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
      fillers_.push_back(fd);
    }
  }
  ~FullBacklog() {
    for (int fd : fillers_) ::close(fd);
    ::close(listen_fd_);
  }
  const config::ListenAddress& endpoint() const { return endpoint_; }

 private:
  int listen_fd_ = -1;
  std::vector<int> fillers_;
  config::ListenAddress endpoint_;
};

TEST_P(HttpClientTest, ConnectTimeoutIsUnavailable) {
  FullBacklog upstream;
  options_.connect_timeout = 150ms;
  auto r = fetch(get("/"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(contains(std::string(codecs::messageOf(r.status())), "cannot connect within 150 ms"),
            "");

  // With a longer request timeout the connect timeout still decides.
  HttpUpstreamRequest longer = get("/");
  longer.timeout = 10s;
  r = fetch(std::move(longer), &upstream.endpoint());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();

  // With a shorter one, the request's deadline passed: DEADLINE_EXCEEDED.
  HttpUpstreamRequest shorter = get("/");
  shorter.timeout = 100ms;
  options_.connect_timeout = 10s;
  client_thread_.run([this] { client_.reset(); });
  r = fetch(std::move(shorter), &upstream.endpoint());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_P(HttpClientTest, QueuedRequestStillTimesOut) {
  // One connection allowed and held by an unanswered request: the second request waits
  // in libcurl's queue, and its own timeout must still end it.
  options_.max_connections_per_endpoint = 1;
  client_thread_.run([this] { client().send(endpoint_, get("/hold"), {}); });
  ASSERT_TRUE(server_holds_.waitAtLeast(1));
  HttpUpstreamRequest queued = get("/echo");
  queued.timeout = 200ms;
  auto r = fetch(std::move(queued));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_P(HttpClientTest, GarbageResponseIsAnUpstreamInvalidArgument) {
  RawUpstream upstream([](RawUpstream& u) {
    int fd = u.accept();
    if (fd < 0) return;
    RawUpstream::readRequest(fd);
    RawUpstream::write(fd, "NOT HTTP\r\n\r\n");
    ::close(fd);
  });
  auto r = fetch(get("/v2/health/ready"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  // libcurl reads a reply without a status line as HTTP/0.9, which it refuses
  // (CURLE_UNSUPPORTED_PROTOCOL): a broken protocol, so 502, not "unreachable".
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream);
  EXPECT_EQ(contains(std::string(codecs::messageOf(r.status())),
                     "upstream 'triton-a' (" + upstream.endpoint().text + ")"),
            "");
}

TEST_P(HttpClientTest, BytesOnAnIdleConnectionRetireIt) {
  // An answer nobody asked for arrives on the kept-alive connection while it is idle. The
  // client must close it rather than read those bytes as the answer to its next request.
  std::promise<void> first_answered, idle_closed;
  auto closed = idle_closed.get_future();
  RawUpstream upstream([&](RawUpstream& u) {
    int first = u.accept();
    if (first < 0) return;
    RawUpstream::readRequest(first);
    RawUpstream::write(first, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
    first_answered.get_future().wait();
    RawUpstream::write(first, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray");
    RawUpstream::drain(first);  // returns once the client closed it (or after 10 s)
    ::close(first);
    idle_closed.set_value();
    u.answerOne("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
  });
  auto r = fetch(get("/first"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "a");
  first_answered.set_value();
  ASSERT_EQ(closed.wait_for(kWait), std::future_status::ready);
  r = fetch(get("/second"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "b");
  client_thread_.run([this] { client_.reset(); });  // closes the connection: the script ends
}

TEST_P(HttpClientTest, BytesAfterAnAnswerRetireTheConnection) {
  // The answer comes with more bytes behind it in the same write: the answer is taken, the
  // connection is not reused (what follows would be read as the next request's answer).
  RawUpstream upstream([](RawUpstream& u) {
    int first = u.accept();
    if (first < 0) return;
    RawUpstream::readRequest(first);
    RawUpstream::write(first,
                       "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
                       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray");
    RawUpstream::drain(first);
    ::close(first);
    u.answerOne("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
  });
  auto r = fetch(get("/first"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "a");
  r = fetch(get("/second"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "b");
  client_thread_.run([this] { client_.reset(); });
}

TEST_P(HttpClientTest, ABodyThatRunsToTheEndOfTheConnectionIsWhole) {
  // Neither a length nor chunks: the body ends with the connection (RFC 9112 6.3 rule 8),
  // and the next request goes on a fresh connection.
  RawUpstream upstream([](RawUpstream& u) {
    for (const char* body : {"until the end", "again"}) {
      if (!u.answerOne(std::string("HTTP/1.1 200 OK\r\nX-Framing: none\r\n\r\n") + body,
                       /*wait_for_close=*/false)) {
        return;
      }
    }
  });
  auto r = fetch(get("/first"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "until the end");
  r = fetch(get("/second"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "again");
}

TEST_P(HttpClientTest, MalformedChunkedBodyIsAnUpstreamInvalidArgument) {
  RawUpstream upstream([](RawUpstream& u) {
    u.answerOne("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfine\r\nnot-a-size\r\n");
  });
  auto r = fetch(get("/"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream);
  EXPECT_EQ(contains(std::string(codecs::messageOf(r.status())), "malformed chunked body"), "");
  client_thread_.run([this] { client_.reset(); });  // the script's drain ends
}

TEST_P(HttpClientTest, ConnectionClosedMidBodyIsUnavailable) {
  RawUpstream upstream([](RawUpstream& u) {
    u.answerOne("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some", /*wait_for_close=*/false);
  });
  auto r = fetch(get("/"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

// ---- cancellation and teardown ----

TEST_P(HttpClientTest, CancelMidFlightGivesNoCallbackAndTheNextRequestWorks) {
  auto callbacks_run = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<HttpCallHandle> handle;
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [callbacks_run](StatusOr<HttpUpstreamResponse>) {
      callbacks_run->fetch_add(1);
    };
    handle = client().send(endpoint_, get("/hold"), std::move(callbacks));
  });
  ASSERT_TRUE(server_holds_.waitAtLeast(1));
  client_thread_.run([&] { handle->cancel(); });
  ASSERT_TRUE(server_cancels_.waitAtLeast(1));  // the connection was closed
  auto r = fetch(post("/echo", "after"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "after");
  client_thread_.run([&] { handle->cancel(); });  // again: nothing
  EXPECT_EQ(callbacks_run->load(), 0);
}

TEST_P(HttpClientTest, CancelFromInsideOnDataIsSafe) {
  std::promise<void> first_piece;
  auto completions = std::make_shared<std::atomic<int>>(0);
  auto handle = std::make_shared<std::shared_ptr<HttpCallHandle>>();
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.on_head = [](int, const http::HeaderList&) {};
    callbacks.on_data = [&, handle](Buffer) {
      (*handle)->cancel();  // re-enters the client from its own callback
      first_piece.set_value();
    };
    callbacks.on_complete = [completions](StatusOr<HttpUpstreamResponse>) {
      completions->fetch_add(1);
    };
    *handle = client().send(endpoint_, get("/stream"), std::move(callbacks));
  });
  ASSERT_EQ(first_piece.get_future().wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(server_cancels_.waitAtLeast(1));
  auto r = fetch(get("/echo"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(completions->load(), 0);
}

TEST_P(HttpClientTest, DestroyingTheClientFromItsOwnCallbackIsSafe) {
  auto held_callbacks = std::make_shared<std::atomic<int>>(0);
  std::promise<void> destroyed;
  client_thread_.run([&] {
    HttpUpstreamCallbacks held;
    held.on_complete = [held_callbacks](StatusOr<HttpUpstreamResponse>) {
      held_callbacks->fetch_add(1);
    };
    client().send(endpoint_, get("/hold"), std::move(held));
  });
  ASSERT_TRUE(server_holds_.waitAtLeast(1));
  client_thread_.run([&] {
    HttpUpstreamCallbacks quick;
    quick.on_complete = [&](StatusOr<HttpUpstreamResponse>) {
      client_.reset();  // the client is inside its delivery loop right now
      destroyed.set_value();
    };
    client().send(endpoint_, get("/echo"), std::move(quick));
  });
  ASSERT_EQ(destroyed.get_future().wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(server_cancels_.waitAtLeast(1));  // the held request's connection closed
  EXPECT_EQ(held_callbacks->load(), 0);
  ASSERT_TRUE(fetch(get("/echo")).ok());  // a new client works
}

TEST_P(HttpClientTest, DestructorWithRequestsInFlightCallsNothingAndLeaksNothing) {
  constexpr int kInFlight = 10;
  auto callbacks_run = std::make_shared<std::atomic<int>>(0);
  std::vector<std::shared_ptr<HttpCallHandle>> handles;
  client_thread_.run([&] {
    for (int i = 0; i < kInFlight; ++i) {
      HttpUpstreamCallbacks callbacks;
      // Each callback holds its own handle, as a frontend's cancel handler does: the
      // destructor must break that cycle or ASan's leak check reports it.
      auto self = std::make_shared<std::shared_ptr<HttpCallHandle>>();
      callbacks.on_complete = [callbacks_run, self](StatusOr<HttpUpstreamResponse>) {
        callbacks_run->fetch_add(1);
      };
      *self = client().send(endpoint_, post("/hold", std::string(1000, 'x')), std::move(callbacks));
      handles.push_back(*self);
    }
    // And one streaming, with a body in progress.
    HttpUpstreamCallbacks streaming;
    streaming.on_head = [callbacks_run](int, const http::HeaderList&) {
      callbacks_run->fetch_add(1);
    };
    streaming.on_data = [](Buffer) {};
    client().send(endpoint_, get("/stream"), std::move(streaming));
  });
  ASSERT_TRUE(server_holds_.waitAtLeast(kInFlight + 1));
  client_thread_.run([&] {
    client_.reset();
    for (auto& h : handles) h->cancel();  // handles outlive the client: no-ops
  });
  ASSERT_TRUE(server_cancels_.waitAtLeast(kInFlight + 1));
  // The streaming call may have delivered its head before the destructor: at most that.
  EXPECT_LE(callbacks_run->load(), 1);
}

TEST_P(HttpClientTest, AbandonAllBreaksACycleThroughTheCallbacks) {
  // A call in flight whose callbacks own the client, as a request owns the upstream set
  // that owns the client: nothing but abandonAll() (gateway shutdown) can free the two.
  auto callbacks_run = std::make_shared<std::atomic<int>>(0);
  std::weak_ptr<HttpUpstreamClient> weak;
  client_thread_.run([&] {
    auto owned = std::make_shared<HttpUpstreamClient>(client_thread_.loop(), options_);
    weak = owned;
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [callbacks_run, owned](StatusOr<HttpUpstreamResponse>) {
      callbacks_run->fetch_add(1);
    };
    owned->send(endpoint_, get("/hold"), std::move(callbacks));
  });
  ASSERT_TRUE(server_holds_.waitAtLeast(1));
  client_thread_.run([&] { EXPECT_FALSE(weak.expired()); });  // the cycle holds it
  client_thread_.run([&] {
    std::shared_ptr<HttpUpstreamClient> client = weak.lock();
    ASSERT_NE(client, nullptr);
    client->abandonAll();
  });
  EXPECT_TRUE(weak.expired());
  ASSERT_TRUE(server_cancels_.waitAtLeast(1));  // its connection was closed
  EXPECT_EQ(callbacks_run->load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, HttpClientTest,
                         ::testing::Values(HttpClientEngine::kAuto, HttpClientEngine::kLibcurl),
                         [](const ::testing::TestParamInfo<HttpClientEngine>& info) {
                           return info.param == HttpClientEngine::kAuto ? "Native" : "Libcurl";
                         });

}  // namespace
}  // namespace infergate::gateway::upstream
