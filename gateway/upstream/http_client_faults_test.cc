// HttpUpstreamClient when things go wrong: refused and slow connections, deadlines,
// upstreams that answer garbage, too much, too little or nothing (raw sockets), and
// cancellation and teardown at every moment. Both engines, as in http_client_test.cc.

#include <sys/un.h>

#include "gateway/upstream/http_client_test_fixture.h"

namespace infergate::gateway::upstream::testing {
namespace {

// The fixture under a name of its own: a gtest suite belongs to one file.
class HttpClientFaultTest : public HttpClientTest {};

// ---- errors ----

TEST_P(HttpClientFaultTest, ConnectionRefusedIsUnavailable) {
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

TEST_P(HttpClientFaultTest, RequestTimeoutIsDeadlineExceeded) {
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

TEST_P(HttpClientFaultTest, ConnectTimeoutIsUnavailable) {
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

TEST_P(HttpClientFaultTest, QueuedRequestStillTimesOut) {
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

// What a client made of an answer, to compare two readings of the same bytes: the status,
// each header and the body, or the error's code (its text names the endpoint's port).
std::string outcomeOf(const StatusOr<HttpUpstreamResponse>& r) {
  if (!r.ok()) return "error " + std::string(absl::StatusCodeToString(r.status().code()));
  std::string out = std::to_string(r->status);
  for (const auto& [name, value] : r->headers) out.append("|").append(name).append("=").append(value);
  return out + "|" + std::string(r->body.view());
}

// The native client reads the head of an answer that comes whole in one read itself and
// leaves anything else to http_parser; an answer cut after its first bytes always goes to
// http_parser. Every shape, the common and the odd, must read the same both ways.
TEST_P(HttpClientFaultTest, AnAnswerReadsTheSameWholeOrCutAfterItsFirstBytes) {
  const std::vector<std::string> answers = {
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
      "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
      "HTTP/1.1 404 Not Found\r\nX-A:  spaced value \t\r\nContent-Length: 2\r\n\r\nno",
      "HTTP/1.1 503 Busy\r\nRetry-After: 3\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
      "HTTP/1.1 200 OK\r\nConnection: keep-alive, x\r\nContent-Length: 2\r\n\r\nok",
      std::string("HTTP/1.1 200 OK\r\nX-A: a\x01") + "b\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
      "HTTP/1.1 200 OK\r\nX-A : v\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 999 Odd\r\nContent-Length: 1\r\n\r\n9",
      "HTTP/1.1 200 OK\r\n\r\nuntil the end",
      "HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx",
      // http_parser takes every name starting with transfer-encoding for it.
      "HTTP/1.1 200 OK\r\nTransfer-EncodingX: chunked\r\nContent-Length: 2\r\n\r\nok",
  };
  std::vector<std::string> whole;
  for (const std::string& answer : answers) {
    std::string outcomes[2];
    for (int cut = 0; cut < 2; ++cut) {
      RawUpstream upstream([&answer, cut](RawUpstream& u) {
        int fd = u.accept();
        if (fd < 0) return;
        RawUpstream::readRequest(fd);
        if (cut == 1) {
          RawUpstream::write(fd, answer.substr(0, 5));
          std::this_thread::sleep_for(30ms);  // the client reads the first bytes alone
          RawUpstream::write(fd, answer.substr(5));
        } else {
          RawUpstream::write(fd, answer);
        }
        std::this_thread::sleep_for(50ms);
        ::close(fd);  // ends a body that runs to the end of the connection
      });
      outcomes[cut] = outcomeOf(fetch(get("/shape"), &upstream.endpoint()));
    }
    EXPECT_EQ(outcomes[0], outcomes[1]) << answer;
    whole.push_back(outcomes[0]);
  }
  // What the common shapes read as.
  EXPECT_EQ(whole[0], "200|Content-Type=text/plain|Content-Length=5|hello");
  EXPECT_EQ(whole[3], "404|X-A=spaced value|Content-Length=2|no");
}

TEST_P(HttpClientFaultTest, GarbageResponseIsAnUpstreamInvalidArgument) {
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

TEST_P(HttpClientFaultTest, AStatusCodeThatIsNotThreeDigitsIsAnUpstreamInvalidArgument) {
  // http_parser takes "2" for a status; read as an interim answer it once let a streamed
  // body start before any head (found by the http_client fuzzer).
  for (std::string answer : {"HTTP/1.1 2\r\n\r\ny", "HTTP/1.1 99 Low\r\nContent-Length: 1\r\n\r\ny"}) {
    RawUpstream upstream([&answer](RawUpstream& u) { u.answerOne(answer, /*wait_for_close=*/false); });
    auto r = fetch(get("/v2/health/ready"), &upstream.endpoint());
    ASSERT_FALSE(r.ok()) << answer;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(codecs::originOf(r.status()), codecs::ErrorOrigin::kUpstream) << answer;
  }
}

TEST_P(HttpClientFaultTest, AnInterimAnswerHasNoBodyWhateverItsHeadersSay) {
  // A 1xx ends with its head (RFC 9110 15.2): its Content-Length announces nothing, and the
  // bytes after it are the final answer (found by the http_client fuzzer).
  RawUpstream upstream([](RawUpstream& u) {
    u.answerOne("HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\n"
                "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine");
  });
  auto r = fetch(get("/v2/health/ready"), &upstream.endpoint());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.view(), "fine");
  client_thread_.run([this] { client_.reset(); });  // the script's drain ends
}

TEST_P(HttpClientFaultTest, BytesOnAnIdleConnectionRetireIt) {
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

TEST_P(HttpClientFaultTest, BytesAfterAnAnswerRetireTheConnection) {
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

TEST_P(HttpClientFaultTest, BytesAfterASizedBodyReadStraightInRetireTheConnection) {
  // A body bigger than one read is received straight into its buffer, exactly to its end:
  // bytes the upstream sent after it stay in the socket. A request sent from the answer's
  // own callback, before the loop could look at the idle connection, must not get them as
  // its answer: it goes on a fresh connection.
  const std::string big(300000, 'x');
  RawUpstream upstream([&big](RawUpstream& u) {
    int first = u.accept();
    if (first < 0) return;
    RawUpstream::readRequest(first);
    RawUpstream::write(first, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(big.size()) +
                                  "\r\n\r\n" + big + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray");
    RawUpstream::drain(first);
    ::close(first);
    u.answerOne("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
  });
  auto second = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
  auto first_size = std::make_shared<std::promise<size_t>>();
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [this, &upstream, second, first_size](StatusOr<HttpUpstreamResponse> r) {
      first_size->set_value(r.ok() ? r->body.size() : 0);
      HttpUpstreamCallbacks next;
      next.on_complete = [second](StatusOr<HttpUpstreamResponse> r2) { second->set_value(std::move(r2)); };
      client().send(upstream.endpoint(), get("/second"), std::move(next));
    };
    client().send(upstream.endpoint(), get("/first"), std::move(callbacks));
  });
  auto size = first_size->get_future();
  ASSERT_EQ(size.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(size.get(), big.size());
  auto answer = second->get_future();
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  auto r = answer.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "b");
  client_thread_.run([this] { client_.reset(); });
}

TEST_P(HttpClientFaultTest, NoBodyFollowsA204OrA304WhateverItsContentLengthSays) {
  // RFC 9110 15.3.5, 15.4.5: a 304 may carry the representation's Content-Length; no body
  // follows either, and the connection stays usable.
  for (std::string status : {"204 No Content", "304 Not Modified"}) {
    RawUpstream upstream([&status](RawUpstream& u) {
      int fd = u.accept();
      if (fd < 0) return;
      RawUpstream::readRequest(fd);
      RawUpstream::write(fd, "HTTP/1.1 " + status + "\r\nContent-Length: 1234\r\n\r\n");
      RawUpstream::readRequest(fd);  // the next request, on the same connection
      RawUpstream::write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
      RawUpstream::drain(fd);
      ::close(fd);
    });
    HttpUpstreamRequest request = get("/v2/models/m/ready");
    request.timeout = std::chrono::milliseconds(10000);
    auto r = fetch(std::move(request), &upstream.endpoint());
    ASSERT_TRUE(r.ok()) << status << ": " << r.status();
    EXPECT_EQ(r->status, std::stoi(status));
    EXPECT_TRUE(r->body.empty());
    r = fetch(get("/after"), &upstream.endpoint());
    ASSERT_TRUE(r.ok()) << status << ": " << r.status();
    EXPECT_EQ(r->body.view(), "ok");
    client_thread_.run([this] { client_.reset(); });
  }
}

TEST_P(HttpClientFaultTest, ABodyThatRunsToTheEndOfTheConnectionIsWhole) {
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

TEST_P(HttpClientFaultTest, MalformedChunkedBodyIsAnUpstreamInvalidArgument) {
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

TEST_P(HttpClientFaultTest, ConnectionClosedMidBodyIsUnavailable) {
  RawUpstream upstream([](RawUpstream& u) {
    u.answerOne("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some", /*wait_for_close=*/false);
  });
  auto r = fetch(get("/"), &upstream.endpoint());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_P(HttpClientFaultTest, AReusedConnectionFoundDeadAndAResendRefusedAtOnceFailTheCall) {
  // All inside one task on the client's loop, before it can notice: the unix upstream goes
  // away (its connection closed, its socket file gone) and a request goes out on the kept-
  // alive connection. The send fails at once and so does the resend's connect: the call
  // ends UNAVAILABLE (found in review: the native engine freed the endpoint's pool under
  // the send that was still using it).
  const std::string path = "/tmp/infergate-client-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof(a.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  const config::ListenAddress endpoint = address("unix:" + path);
  int served = -1;
  std::thread server([&] {
    served = ::accept(listener, nullptr, nullptr);
    if (served < 0) return;
    RawUpstream::readRequest(served);
    RawUpstream::write(served, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
  });
  auto r = fetch(get("/first"), &endpoint);
  server.join();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(served, 0);

  auto second = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
  client_thread_.run([&] {
    ::close(served);
    ::close(listener);
    ::unlink(path.c_str());
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [second](StatusOr<HttpUpstreamResponse> r2) { second->set_value(std::move(r2)); };
    client().send(endpoint, get("/second"), std::move(callbacks));
  });
  auto answer = second->get_future();
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  r = answer.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  // The dead connection took no byte and nothing else was reached: safe to send elsewhere.
  EXPECT_TRUE(wasNotSent(r.status())) << r.status();
  ASSERT_TRUE(fetch(get("/v2/health/ready")).ok());  // the client still works
}

// ---- cancellation and teardown ----

TEST_P(HttpClientFaultTest, CancelMidFlightGivesNoCallbackAndTheNextRequestWorks) {
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

TEST_P(HttpClientFaultTest, CancelFromInsideOnDataIsSafe) {
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

TEST_P(HttpClientFaultTest, DestroyingTheClientFromItsOwnCallbackIsSafe) {
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

TEST_P(HttpClientFaultTest, DestructorWithRequestsInFlightCallsNothingAndLeaksNothing) {
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

TEST_P(HttpClientFaultTest, AbandonAllBreaksACycleThroughTheCallbacks) {
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

INSTANTIATE_TEST_SUITE_P(Engines, HttpClientFaultTest,
                         ::testing::Values(HttpClientEngine::kAuto, HttpClientEngine::kLibcurl),
                         [](const ::testing::TestParamInfo<HttpClientEngine>& info) {
                           return info.param == HttpClientEngine::kAuto ? "Native" : "Libcurl";
                         });

}  // namespace
}  // namespace infergate::gateway::upstream::testing
