// A request handed to its handler while its body still arrives (body_arrival.h): the
// BodyArrival itself, and the connection that hands the request over early and tells the
// arrival of each read, of the end, and of a client that goes away.

#include "gateway/http/body_arrival.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "gateway/http/event_loop.h"
#include "gateway/http/http_connection.h"

namespace infergate::gateway::http {
namespace {

TEST(BodyArrival, SaysWhatOfARangeHasArrived) {
  std::vector<uint8_t> body(100);
  uint8_t outside[4] = {};
  BodyArrival a(body.data(), body.size());
  EXPECT_EQ(a.arrivedOf(body.data(), 10), 0u);
  EXPECT_EQ(a.arrivedOf(outside, 4), 4u);  // not the body's: all there
  a.advance(30);
  EXPECT_EQ(a.arrivedOf(body.data(), 10), 10u);
  EXPECT_EQ(a.arrivedOf(body.data() + 25, 10), 5u);
  EXPECT_EQ(a.arrivedOf(body.data() + 30, 10), 0u);
  EXPECT_EQ(a.arrivedOf(body.data() + 99, 1), 0u);
  a.advance(20);  // never backwards
  EXPECT_EQ(a.received(), 30u);
  a.advance(500);  // never past the end
  EXPECT_EQ(a.received(), 100u);
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.arrivedOf(body.data() + 90, 10), 10u);
}

TEST(BodyArrival, TellsWatchersOfEachChangeUntilTheyLeave) {
  std::vector<uint8_t> body(100);
  BodyArrival a(body.data(), body.size());
  std::vector<std::string> seen;
  uint64_t second = 0;
  const uint64_t first = a.watch([&] {
    seen.push_back("first " + std::to_string(a.received()));
    if (a.received() >= 50) a.unwatch(second);  // leaves before its turn in this round
  });
  second = a.watch([&] { seen.push_back("second " + std::to_string(a.received())); });
  a.advance(10);
  a.advance(50);
  a.unwatch(first);
  a.advance(60);
  EXPECT_EQ(seen, std::vector<std::string>({"first 10", "second 10", "first 50"}));
}

TEST(BodyArrival, SettlesOnceWholeOrFailed) {
  std::vector<uint8_t> body(10);
  BodyArrival whole(body.data(), body.size());
  std::vector<int> outcomes;
  whole.whenSettled([&](bool complete) { outcomes.push_back(complete ? 1 : 0); });
  whole.advance(5);
  EXPECT_TRUE(outcomes.empty());
  whole.advance(10);
  whole.fail();  // too late: it is whole
  EXPECT_FALSE(whole.failed());
  whole.whenSettled([&](bool complete) { outcomes.push_back(complete ? 11 : 10); });  // at once
  EXPECT_EQ(outcomes, std::vector<int>({1, 11}));

  BodyArrival broken(body.data(), body.size());
  outcomes.clear();
  broken.whenSettled([&](bool complete) { outcomes.push_back(complete ? 1 : 0); });
  broken.advance(3);
  broken.fail();
  broken.advance(10);  // nothing after the failure
  EXPECT_EQ(broken.received(), 3u);
  EXPECT_TRUE(broken.settled());
  EXPECT_EQ(outcomes, std::vector<int>({0}));
}

// ---- the connection ----

// A socket pair with one connection on it, driven on this thread. The gate asks for
// requests to /early once `early` body bytes are in; the handler keeps each exchange, and
// notes what had arrived when it got it and on each change after.
class EarlyHarness {
 public:
  explicit EarlyHarness(uint64_t early, HttpLimits limits = {}) : limits_(limits) {
    ::signal(SIGPIPE, SIG_IGN);
    gate_ = [early](HttpRequest& request, tls::ServerSession*) -> std::optional<HttpResponse> {
      if (request.target.starts_with("/early")) request.early_dispatch_bytes = early;
      return std::nullopt;
    };
    handler_ = [this](std::shared_ptr<HttpExchange> exchange) {
      exchanges.push_back(exchange);
      const HttpRequest& r = exchange->request();
      Got got;
      got.target = r.target;
      got.body_size = r.body.size();
      got.at_handover = r.arrival ? r.arrival->received() : r.body.size();
      got.early = !r.bodyWhole();
      gots.push_back(got);
      if (r.arrival && !r.arrival->complete()) {
        const size_t i = gots.size() - 1;
        BodyArrival* arrival = r.arrival.get();  // the watcher lives in it
        arrival->watch([this, i, arrival] {
          gots[i].progress.push_back(arrival->received());
          gots[i].failed = arrival->failed();
        });
      }
      if (r.target.ends_with("/answer-now")) answer(*exchange);
      if (r.target.ends_with("/answer-on-failure")) {  // as a call waiting for the body does
        r.arrival->whenSettled([exchange](bool whole) {
          if (!whole) exchange->respond(HttpResponse::jsonError(503, "cancelled"));
        });
      }
    };
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    client_ = fds[0];
    connection_ = std::make_shared<HttpConnection>(loop_, fds[1], limits_, handler_,
                                                   [this](HttpConnection*) { closed = true; },
                                                   nullptr, std::string(), nullptr, &gate_);
    connection_->start();
  }
  ~EarlyHarness() {
    connection_->close();
    if (client_ >= 0) ::close(client_);
  }

  struct Got {
    std::string target;
    size_t body_size = 0;
    uint64_t at_handover = 0;
    bool early = false;
    bool failed = false;
    std::vector<uint64_t> progress;
  };

  void send(const std::string& bytes) {
    std::string_view rest = bytes;
    while (!rest.empty()) {
      ssize_t n = ::send(client_, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      settle();
      if (n <= 0) continue;
      rest.remove_prefix(static_cast<size_t>(n));
    }
    settle();
  }
  void closeClient() {
    ::close(client_);
    client_ = -1;
    settle();
  }
  // Runs the loop until it has nothing more to do, collecting what the connection wrote.
  void settle() {
    for (int quiet = 0; quiet < 3;) {
      event_base_loop(loop_.base(), EVLOOP_NONBLOCK);
      char buffer[65536];
      ssize_t n = client_ >= 0 ? ::recv(client_, buffer, sizeof(buffer), MSG_DONTWAIT) : 0;
      if (n > 0) {
        written.append(buffer, static_cast<size_t>(n));
        quiet = 0;
      } else {
        ++quiet;
      }
    }
  }
  static void answer(HttpExchange& exchange) {
    HttpResponse response;
    response.body.append(codecs::Buffer::fromString(exchange.request().target));
    exchange.respond(std::move(response));
  }

  std::vector<std::shared_ptr<HttpExchange>> exchanges;
  std::vector<Got> gots;
  std::string written;
  bool closed = false;

 private:
  HttpLimits limits_;
  HeadersGate gate_;
  HttpHandler handler_;
  EventLoop loop_;
  int client_ = -1;
  std::shared_ptr<HttpConnection> connection_;
};

std::string bodyOf(size_t n) {
  std::string body(n, 'b');
  for (size_t i = 0; i < n; i += 97) body[i] = static_cast<char>('a' + i % 26);
  return body;
}

// Whether the quick reader or http_parser read the head (a head cut in two goes to
// http_parser), the request goes over once the asked bytes are in, the body is its whole
// length from then on, and its progress is told (in steps, and at the end); the next
// request on the connection is read and answered as usual.
TEST(HttpConnectionEarly, HandsTheRequestOverOnceTheAskedBytesAreInAndTellsItsProgress) {
  for (bool cut_head : {false, true}) {
    SCOPED_TRACE(cut_head ? "http_parser" : "quick reader");
    EarlyHarness h(/*early=*/100);
    const std::string body = bodyOf(1000000);
    const std::string head = "POST /early HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n";
    if (cut_head) {
      h.send(head.substr(0, 20));
      h.send(head.substr(20) + body.substr(0, 50));
    } else {
      h.send(head + body.substr(0, 50));
    }
    EXPECT_TRUE(h.gots.empty());  // 50 of the 100 asked
    h.send(body.substr(50, 100000));
    ASSERT_EQ(h.gots.size(), 1u);
    EXPECT_TRUE(h.gots[0].early);
    EXPECT_EQ(h.gots[0].body_size, 1000000u);
    EXPECT_GE(h.gots[0].at_handover, 100u);
    EXPECT_LE(h.gots[0].at_handover, 100050u);
    h.send(body.substr(100050));
    const HttpRequest& r = h.exchanges[0]->request();
    EXPECT_TRUE(r.bodyWhole());
    ASSERT_FALSE(h.gots[0].progress.empty());
    EXPECT_EQ(h.gots[0].progress.back(), 1000000u);
    // Told in steps of 256 KiB at least, then at the end.
    uint64_t told = h.gots[0].at_handover;
    for (size_t i = 0; i + 1 < h.gots[0].progress.size(); ++i) {
      EXPECT_GE(h.gots[0].progress[i] - told, 256u * 1024);
      told = h.gots[0].progress[i];
    }
    EXPECT_FALSE(h.gots[0].failed);
    EXPECT_EQ(std::string(r.body.view()), body);
    EXPECT_TRUE(h.written.empty());  // not answered yet: nothing written

    h.send("GET /next/answer-now HTTP/1.1\r\n\r\n");
    ASSERT_EQ(h.gots.size(), 2u);
    EXPECT_FALSE(h.gots[1].early);
    EXPECT_TRUE(h.written.empty());  // waits for the first answer, in order
    EarlyHarness::answer(*h.exchanges[0]);
    h.settle();
    const size_t first = h.written.find("/early");
    const size_t second = h.written.find("/next/answer-now");
    EXPECT_NE(first, std::string::npos);
    EXPECT_NE(second, std::string::npos);
    EXPECT_LT(first, second);
    EXPECT_FALSE(h.closed);
  }
}

// A body that arrives whole with its head, or one smaller than the asked bytes, is handed
// over whole, as any other.
TEST(HttpConnectionEarly, HandsOverWholeWhatArrivesWholeOrIsTooSmall) {
  EarlyHarness h(/*early=*/100);
  h.send("POST /early/answer-now HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + bodyOf(1000));
  h.send("POST /early/answer-now HTTP/1.1\r\nContent-Length: 80\r\n\r\n" + bodyOf(40));
  h.send(bodyOf(40));
  ASSERT_EQ(h.gots.size(), 2u);
  EXPECT_FALSE(h.gots[0].early);
  EXPECT_FALSE(h.gots[1].early);
  EXPECT_EQ(h.gots[1].at_handover, 80u);
  EXPECT_NE(h.written.find("/early/answer-now"), std::string::npos);
}

// The handler may answer before the body is in (an upstream's error, say): the answer is
// written, the rest of the body is still read as this request's, and the connection goes
// on with the next request.
TEST(HttpConnectionEarly, AnAnswerBeforeTheBodyEndsKeepsTheConnectionFramed) {
  EarlyHarness h(/*early=*/10);
  const std::string body = bodyOf(200000);
  h.send("POST /early/answer-now HTTP/1.1\r\nContent-Length: 200000\r\n\r\n" + body.substr(0, 1000));
  ASSERT_EQ(h.gots.size(), 1u);
  EXPECT_TRUE(h.gots[0].early);
  EXPECT_TRUE(h.written.starts_with("HTTP/1.1 200 OK")) << h.written;
  // Answer bytes in the body would be read as a request if the framing were lost.
  std::string rest = body.substr(1000);
  const std::string smuggled = "GET /smuggled/answer-now HTTP/1.1\r\n\r\n";
  rest.replace(0, smuggled.size(), smuggled);
  h.send(rest);
  h.send("GET /next/answer-now HTTP/1.1\r\n\r\n");
  ASSERT_EQ(h.gots.size(), 2u);
  EXPECT_EQ(h.gots[1].target, "/next/answer-now");
  EXPECT_EQ(h.written.find("/smuggled"), std::string::npos);
  EXPECT_FALSE(h.closed);
}

// A client that goes away mid-body: the arrival fails (what sends it stops) and the
// exchange is cancelled.
TEST(HttpConnectionEarly, AClientThatGoesAwayMidBodyFailsTheArrival) {
  EarlyHarness h(/*early=*/10);
  h.send("POST /early HTTP/1.1\r\nContent-Length: 200000\r\n\r\n" + bodyOf(5000));
  ASSERT_EQ(h.gots.size(), 1u);
  bool settled_whole = true;
  h.exchanges[0]->request().arrival->whenSettled([&](bool whole) { settled_whole = whole; });
  h.closeClient();
  EXPECT_TRUE(h.closed);
  EXPECT_TRUE(h.gots[0].failed);
  EXPECT_FALSE(settled_whole);
  EXPECT_TRUE(h.exchanges[0]->cancelled());
}

// A body that stops arriving: the body timeout answers 408 for the request and the
// arrival fails, after the 408 is queued (what waits for the body and answers when it
// fails finds the request answered); one the handler answered already gets no second
// answer: the connection closes after the first.
TEST(HttpConnectionEarly, ABodyThatTimesOutFailsTheArrivalAndIsAnswered408) {
  HttpLimits limits;
  limits.body_timeout = std::chrono::milliseconds(50);
  for (std::string target : {"/early", "/early/answer-on-failure", "/early/answer-now"}) {
    SCOPED_TRACE(target);
    const bool answered = target.ends_with("/answer-now");
    EarlyHarness h(/*early=*/10, limits);
    h.send("POST " + target + " HTTP/1.1\r\nContent-Length: 200000\r\n\r\n" + bodyOf(5000));
    ASSERT_EQ(h.gots.size(), 1u);
    for (int i = 0; i < 100 && !h.closed; ++i) {
      ::usleep(5000);
      h.settle();
    }
    EXPECT_TRUE(h.gots[0].failed);
    EXPECT_TRUE(h.closed);
    EXPECT_EQ(h.written.find("HTTP/1.1 408") != std::string::npos, !answered) << h.written;
    EXPECT_EQ(h.written.find("HTTP/1.1 200 OK") == 0, answered) << h.written;
    EXPECT_EQ(h.written.find("503"), std::string::npos) << h.written;
  }
}

}  // namespace
}  // namespace infergate::gateway::http
