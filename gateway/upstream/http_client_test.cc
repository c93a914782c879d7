// HttpUpstreamClient against real upstreams on loopback (port 0, no mocks): the project's
// own HttpServer (HttpTestUpstream, upstream_test_servers.h), a counting acceptor in front
// of HttpConnection where the number of TCP connections matters, and raw sockets where the
// upstream must misbehave on purpose.
//
// The client's loop runs on its own thread; the tests post to it and wait on futures.
// Nothing sleeps: where an order must be shown (a streamed piece before the end), the
// server's next step is triggered by what the client saw.

#include <arpa/inet.h>

#include <cstring>

#include "gateway/upstream/http_client_test_fixture.h"
#include "codecs/buffer_pool.h"
#include "gateway/http/body_arrival.h"
#include "gateway/upstream/http_client_common.h"

namespace infergate::gateway::upstream::testing {
namespace {

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
// A body still arriving (http/body_arrival.h): the native engine sends each byte once it
// is in. The body holds poison until each piece "arrives", so a byte sent early would come
// back as poison in the echo; and the answer cannot come before the last piece. libcurl
// cannot send so, and says it (its callers wait for the whole body).
TEST_P(HttpClientTest, ABodyStillArrivingIsSentAsItComes) {
  bool as_arrives = false;
  client_thread_.run([&] { as_arrives = client().sendsAsArrives(endpoint_); });
  if (GetParam() == HttpClientEngine::kLibcurl) {
    EXPECT_FALSE(as_arrives);
    return;
  }
  ASSERT_TRUE(as_arrives);
  constexpr size_t kSize = (3 << 20) + 11;
  std::string want(kSize, '\0');
  for (size_t i = 0; i < kSize; ++i) want[i] = static_cast<char>(i * 131 + (i >> 13));
  auto storage = std::make_shared<std::string>(kSize, '\xEE');
  auto arrival = std::make_shared<http::BodyArrival>(reinterpret_cast<const uint8_t*>(storage->data()), kSize);
  auto arrive = [&](size_t from, size_t to) {  // client loop
    std::memcpy(storage->data() + from, want.data() + from, to - from);
    arrival->advance(to);
  };
  HttpUpstreamRequest request;
  request.target = "/echo";
  request.body.append(Buffer(storage, reinterpret_cast<const uint8_t*>(storage->data()), kSize));
  request.arrival = arrival;
  auto done = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
  auto answer = done->get_future();
  client_thread_.run([&] {
    arrive(0, 1000);
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [done](StatusOr<HttpUpstreamResponse> r) { done->set_value(std::move(r)); };
    client().send(endpoint_, std::move(request), std::move(callbacks));
  });
  for (size_t at = 1000; at < kSize;) {
    const size_t next = std::min(kSize, at + 400000);
    EXPECT_NE(answer.wait_for(10ms), std::future_status::ready) << "answered at " << at;
    client_thread_.run([&] { arrive(at, next); });
    at = next;
  }
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  StatusOr<HttpUpstreamResponse> r = answer.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.view() == want) << "the echo differs";
}

// The body never comes whole (its client went away): the call ends cancelled, its
// half-written connection is not reused, and the next request is answered.
TEST_P(HttpClientTest, ABodyThatNeverArrivesWholeEndsItsCallCancelled) {
  bool as_arrives = false;
  client_thread_.run([&] { as_arrives = client().sendsAsArrives(endpoint_); });
  if (GetParam() == HttpClientEngine::kLibcurl) {  // never given a body still arriving
    EXPECT_FALSE(as_arrives);
    return;
  }
  auto storage = std::make_shared<std::string>(size_t{1} << 20, 'x');
  auto arrival = std::make_shared<http::BodyArrival>(reinterpret_cast<const uint8_t*>(storage->data()),
                                                     storage->size());
  HttpUpstreamRequest request;
  request.target = "/echo";
  request.body.append(Buffer(storage, reinterpret_cast<const uint8_t*>(storage->data()), storage->size()));
  request.arrival = arrival;
  auto done = std::make_shared<std::promise<StatusOr<HttpUpstreamResponse>>>();
  auto answer = done->get_future();
  client_thread_.run([&] {
    arrival->advance(5000);
    HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [done](StatusOr<HttpUpstreamResponse> r) { done->set_value(std::move(r)); };
    client().send(endpoint_, std::move(request), std::move(callbacks));
  });
  EXPECT_NE(answer.wait_for(50ms), std::future_status::ready);
  client_thread_.run([&] { arrival->fail(); });
  ASSERT_EQ(answer.wait_for(kWait), std::future_status::ready);
  StatusOr<HttpUpstreamResponse> r = answer.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  auto next = fetch(post("/echo", "after"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->body.view(), "after");
}

// A large answer lands in a block of codecs::BufferPool, which takes it back when the
// answer is dropped and gives it to the next large answer: already mapped, so no page is
// faulted in again (a fresh allocation per answer cost ~1,000 faults per 4 MiB).
TEST_P(HttpClientTest, LargeAnswersLandInAReusedPoolBlock) {
  constexpr size_t kSize = (3 << 20) + 5;
  codecs::BufferPool& pool = codecs::BufferPool::shared();
  const std::string body(kSize, 'x');
  const uint8_t* block = nullptr;
  size_t cached = 0;
  {
    auto first = fetch(post("/echo", body));
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_EQ(first->body.size(), kSize);
    block = first->body.data();
    cached = pool.cachedBytes();
  }  // the answer, and with it the block, dropped
  EXPECT_EQ(pool.cachedBytes(), cached + codecs::BufferPool::classOf(kSize));

  auto second = fetch(post("/echo", body));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->body.data(), block);
  EXPECT_TRUE(second->body.view() == body);
  EXPECT_EQ(pool.cachedBytes(), cached);
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

// Two endpoints asked in turn on one loop: each request reaches its own (the native engine
// remembers the last endpoint's connections; a stale memory would send to the other).
TEST_P(HttpClientTest, EndpointsAskedInTurnEachGetTheirOwn) {
  HttpTestUpstream other([](std::shared_ptr<HttpExchange> e) {
    e->respond(HttpResponse::json(200, R"({"who":"other"})"));
  });
  auto bound = other.listenOnLoopback();
  ASSERT_TRUE(bound.ok()) << bound.status();
  other.start();
  const config::ListenAddress other_endpoint = address(bound->address);
  for (int i = 0; i < 6; ++i) {
    const bool to_other = i % 3 == 1;
    const config::ListenAddress* to = to_other ? &other_endpoint : i % 3 == 2 ? &unix_endpoint_ : nullptr;
    auto r = fetch(post("/echo", "turn " + std::to_string(i)), to);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    EXPECT_EQ(r->body.view(), to_other ? R"({"who":"other"})" : "turn " + std::to_string(i)) << i;
  }
  client_thread_.run([this] { client_.reset(); });
  other.stop();
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
      const std::string_view* type = headers.find("Content-Type");
      events.push_back("head " + std::to_string(status) + " " + std::string(type ? *type : ""));
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

// Whether the native engines take an endpoint: a quick reading of plain dotted quads, and
// inet_pton for everything else. Both must agree with inet_pton on every host.
TEST(LiteralEndpointTest, AgreesWithInetPton) {
  for (const char* host : {"127.0.0.1", "0.0.0.0", "255.255.255.255", "10.1.20.255", "1.2.3",
                           "1.2.3.4.", "1.2.3.4.5", "256.1.1.1", "1.2.3.1000", "01.2.3.4",
                           "1.2.3.04", "1..3.4", ".1.2.3", "1.2.3.4a", "a.b.c.d", "", "::1",
                           "fe80::1", "::ffff:127.0.0.1", "localhost", "upstream.internal",
                           "1.2.3.-4", "1.2.3. 4"}) {
    config::ListenAddress a;
    a.kind = config::ListenAddress::Kind::kTcp;
    a.host = host;
    a.port = 8000;
    in6_addr any;
    const bool literal = inet_pton(AF_INET, host, &any) == 1 || inet_pton(AF_INET6, host, &any) == 1;
    EXPECT_EQ(http_client_detail::isLiteralEndpoint(a), literal) << "'" << host << "'";
  }
  config::ListenAddress unix_socket;
  unix_socket.kind = config::ListenAddress::Kind::kUnix;
  unix_socket.path = "/tmp/u.sock";
  EXPECT_TRUE(http_client_detail::isLiteralEndpoint(unix_socket));
  config::ListenAddress dns;
  dns.kind = config::ListenAddress::Kind::kDns;
  dns.host = "127.0.0.1";
  EXPECT_FALSE(http_client_detail::isLiteralEndpoint(dns));
}

// A value goes upstream unless it holds CR, LF or NUL: read eight bytes at a time, so every
// byte value at every position of values around a word's length must be judged as one byte
// at a time would.
TEST(HeaderCheckTest, ValueCheckAgreesWithTheByteRuleEverywhere) {
  for (size_t size = 1; size <= 19; ++size) {
    for (size_t at = 0; at < size; ++at) {
      std::string value(size, 'v');
      for (int c = 0; c < 256; ++c) {
        value[at] = static_cast<char>(c);
        const bool expected = c != '\r' && c != '\n' && c != 0;
        ASSERT_EQ(http_client_detail::validHeaderValue(value), expected)
            << "size " << size << " at " << at << " byte " << c;
      }
    }
  }
  EXPECT_TRUE(http_client_detail::validHeaderValue(""));
}

TEST(HeaderCheckTest, TargetCheckAgreesWithTheByteRuleEverywhere) {
  for (size_t size = 2; size <= 19; ++size) {
    for (size_t at = 1; at < size; ++at) {
      std::string target(size, 'a');
      target[0] = '/';
      for (int c = 0; c < 256; ++c) {
        target[at] = static_cast<char>(c);
        const bool expected = c > 0x20 && c != 0x7f;
        ASSERT_EQ(http_client_detail::sendableTarget(target), expected)
            << "size " << size << " at " << at << " byte " << c;
      }
    }
  }
  EXPECT_FALSE(http_client_detail::sendableTarget(""));
  EXPECT_FALSE(http_client_detail::sendableTarget("v2/models"));
  EXPECT_TRUE(http_client_detail::sendableTarget("/"));
}

TEST(HeaderCheckTest, ClientOwnedHeadersInAnyCaseAndNothingElse) {
  for (const char* name : {"Content-Length", "TRANSFER-ENCODING", "connection", "Keep-Alive",
                           "Proxy-Connection", "Upgrade", "TE", "Trailer", "expect"}) {
    EXPECT_TRUE(http_client_detail::isClientOwnedHeader(name)) << name;
  }
  for (const char* name : {"Content-Type", "Content-Lengths", "tf", "Trailers", "Expects", "Host",
                           "Authorization", "x-connection", "upgradE-", "", "Transfer-Encodinh"}) {
    EXPECT_FALSE(http_client_detail::isClientOwnedHeader(name)) << name;
  }
}

// ---- host names ----

config::ListenAddress named(std::string host, int port) {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kTcp;
  a.host = std::move(host);
  a.port = port;
  return a;
}

// "localhost:PORT" reaches the upstream through either engine (libcurl resolves it; the
// native engine takes discovery's addresses), and the Host header is the endpoint as
// written, as Triton's clients send it.
TEST_P(HttpClientTest, AHostNameEndpointIsReachedAndIsTheHostHeader) {
  auto hosts = std::make_shared<HostAddresses>();
  hosts->resolved("localhost", {"127.0.0.1"});
  options_.hosts = hosts;
  const config::ListenAddress endpoint = named("localhost", endpoint_.port);
  client_thread_.run([&] {
    EXPECT_EQ(client().sendsAsArrives(endpoint), GetParam() == HttpClientEngine::kAuto);
  });
  auto r = fetch(post("/echo", "by name"), &endpoint);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "by name");
  const Seen seen = lastSeen();
  ASSERT_NE(seen.headers.find("Host"), nullptr);
  EXPECT_EQ(*seen.headers.find("Host"), "localhost:" + std::to_string(endpoint_.port));
}

// The native engine with discovery's addresses (libcurl never reads them).
class NativeHostNameTest : public HttpClientTest {
 protected:
  std::shared_ptr<HostAddresses> hosts_ = std::make_shared<HostAddresses>();
  void SetUp() override {
    HttpClientTest::SetUp();
    options_.hosts = hosts_;
  }
};

// 127.0.0.2 refuses (nothing listens there), 127.0.0.1 answers; the next connection
// starts at the address that connected.
TEST_P(NativeHostNameTest, AHostNameIsReachedAtTheFirstOfItsAddressesThatTakesTheConnection) {
  hosts_->resolved("upstream.test", {"127.0.0.2", "127.0.0.1"});
  const config::ListenAddress endpoint = named("upstream.test", endpoint_.port);
  auto r = fetch(post("/echo", "second address"), &endpoint);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.view(), "second address");
  EXPECT_EQ(hosts_->find("upstream.test")->preferred.load(), 1u);
  EXPECT_EQ(*lastSeen().headers.find("Host"), "upstream.test:" + std::to_string(endpoint_.port));
}

TEST_P(NativeHostNameTest, AHostNameWhoseAddressesAllRefuseIsUnavailableAndUnsent) {
  hosts_->resolved("upstream.test", {"127.0.0.2", "127.0.0.3"});
  const config::ListenAddress endpoint = named("upstream.test", endpoint_.port);
  auto r = fetch(post("/echo", "x"), &endpoint);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(wasNotSent(r.status()));
  EXPECT_NE(r.status().message().find("upstream 'triton-a' (upstream.test:"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("connection refused"), std::string::npos) << r.status();
  EXPECT_EQ(seenCount(), 0u);
}

TEST_P(NativeHostNameTest, AHostNameWithoutAddressesIsUnavailableNamingWhy) {
  hosts_->failed("gone.test", absl::NotFoundError("the name resolves to nothing"));
  const config::ListenAddress gone = named("gone.test", endpoint_.port);
  auto r = fetch(get("/echo"), &gone);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(wasNotSent(r.status()));
  EXPECT_NE(r.status().message().find("cannot resolve 'gone.test': the name resolves to nothing"),
            std::string::npos) << r.status();
  // A failure after a success keeps the addresses that worked.
  hosts_->resolved("upstream.test", {"127.0.0.1"});
  hosts_->failed("upstream.test", absl::UnavailableError("resolver down"));
  const config::ListenAddress endpoint = named("upstream.test", endpoint_.port);
  r = fetch(get("/echo"), &endpoint);
  EXPECT_TRUE(r.ok()) << r.status();
}

INSTANTIATE_TEST_SUITE_P(Native, NativeHostNameTest, ::testing::Values(HttpClientEngine::kAuto),
                         [](const ::testing::TestParamInfo<HttpClientEngine>&) { return "Native"; });

INSTANTIATE_TEST_SUITE_P(Engines, HttpClientTest,
                         ::testing::Values(HttpClientEngine::kAuto, HttpClientEngine::kLibcurl),
                         [](const ::testing::TestParamInfo<HttpClientEngine>& info) {
                           return info.param == HttpClientEngine::kAuto ? "Native" : "Libcurl";
                         });

}  // namespace
}  // namespace infergate::gateway::upstream::testing
