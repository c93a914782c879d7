#pragma once

// What the HttpUpstreamClient tests share (http_client_test.cc: round trips, connections,
// streaming; http_client_faults_test.cc: errors, misbehaving upstreams, cancellation):
// the fixture, parameterised by the engine, and the upstreams it talks to. Test-only.

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

namespace infergate::gateway::upstream::testing {


using codecs::Buffer;
using codecs::StatusOr;
using http::HttpExchange;
using http::HttpResponse;
using namespace std::chrono_literals;

inline constexpr auto kWait = std::chrono::seconds(30);

inline config::ListenAddress address(const std::string& text) {
  auto parsed = config::parseListenAddress(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : config::ListenAddress{};
}

inline std::string contains(const std::string& haystack, std::string_view needle) {
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

}  // namespace infergate::gateway::upstream::testing
