// The connection's two request readers: the quick reader takes the common shape whole in
// one read, http_parser everything else. A request must be read the same by either, so
// each case here is served twice on a socket pair, written whole (the quick reader's
// chance) and byte by byte (a head cut by every read: http_parser's), and the bytes the
// connection writes back must be equal.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "gateway/http/event_loop.h"
#include "gateway/http/http_connection.h"
#include "gateway/http/request_text_testing.h"
#include "gateway/http/quick_head.h"

namespace infergate::gateway::http {
namespace {

struct Served {
  std::string written;        // what the connection wrote back
  uint64_t quick = 0;         // requests the quick reader read
};

// One connection on a socket pair, driven on this thread: `pieces` are written one after
// the other, the loop run until quiet after each. Every request is answered with its
// description, except targets starting /later, answered once all pieces are in.
class Harness {
 public:
  explicit Harness(HttpLimits limits = {}) : limits_(limits) { ::signal(SIGPIPE, SIG_IGN); }

  Served serve(const std::vector<std::string>& pieces) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    client_ = fds[0];
    later_.clear();
    HttpHandler handler = [this](std::shared_ptr<HttpExchange> exchange) {
      if (exchange->request().target.starts_with("/later")) {
        later_.push_back(exchange);
      } else {
        answer(*exchange);
      }
    };
    auto connection = std::make_shared<HttpConnection>(loop_, fds[1], limits_, handler,
                                                       [](HttpConnection*) {});
    connection->start();
    Served served;
    for (const std::string& piece : pieces) {
      std::string_view rest = piece;
      while (!rest.empty()) {
        ssize_t n = ::send(client_, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        settle(served.written);
        if (n <= 0) break;  // the connection stopped reading
        rest.remove_prefix(static_cast<size_t>(n));
      }
    }
    for (auto& exchange : later_) answer(*exchange);
    later_.clear();
    settle(served.written);
    served.quick = connection->quickRequests();
    connection->close();
    ::close(client_);
    return served;
  }

  Served whole(const std::string& stream) { return serve({stream}); }
  Served byteByByte(const std::string& stream) {
    std::vector<std::string> bytes;
    for (char c : stream) bytes.emplace_back(1, c);
    return serve(bytes);
  }

 private:
  static void answer(HttpExchange& exchange) {
    HttpResponse response;
    response.body.append(codecs::Buffer::fromString(requestText(exchange.request())));
    exchange.respond(std::move(response));
  }

  void settle(std::string& out) {
    for (int quiet = 0; quiet < 3;) {
      event_base_loop(loop_.base(), EVLOOP_NONBLOCK);
      char buffer[65536];
      ssize_t n = ::recv(client_, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) {
        out.append(buffer, static_cast<size_t>(n));
        quiet = 0;
      } else {
        ++quiet;
      }
    }
  }

  HttpLimits limits_;
  EventLoop loop_;
  int client_ = -1;
  std::vector<std::shared_ptr<HttpExchange>> later_;
};

const std::string kInfer =
    "POST /v2/models/identity_fp32/infer?x=1 HTTP/1.1\r\n"
    "Host: 127.0.0.1:8000\r\n"
    "Content-Type:application/octet-stream  \r\n"
    "Inference-Header-Content-Length: 2\r\n"
    "Content-Length: 6\r\n"
    "\r\n"
    "{}abcd";

TEST(HttpConnectionReaders, ReadTheCommonShapeQuicklyAndAsHttpParserDoes) {
  Harness h;
  Served whole = h.whole(kInfer + kInfer + "GET /v2/health/ready HTTP/1.1\r\n\r\n");
  EXPECT_EQ(whole.quick, 3u);
  EXPECT_NE(whole.written.find("POST /v2/models/identity_fp32/infer?x=1 1.1\n"
                               "Host: 127.0.0.1:8000\n"
                               "Content-Type: application/octet-stream\n"
                               "Inference-Header-Content-Length: 2\n"
                               "Content-Length: 6\n\n{}abcd"),
            std::string::npos)
      << whole.written;
  Served cut = h.byteByByte(kInfer + kInfer + "GET /v2/health/ready HTTP/1.1\r\n\r\n");
  EXPECT_EQ(cut.quick, 0u);  // no head is ever whole in one read
  EXPECT_EQ(whole.written, cut.written);
}

TEST(HttpConnectionReaders, ReadABodyThatFollowsItsHeadInLaterReads) {
  Harness h;
  const std::string head =
      "POST /big HTTP/1.1\r\nContent-Length: 100000\r\n\r\n";
  std::string body(100000, 'b');
  for (size_t i = 0; i < body.size(); i += 997) body[i] = static_cast<char>('a' + i % 26);
  // The head with a few body bytes, then the rest in pieces large enough to go straight
  // into the body's storage, then a second request.
  Served served = h.serve({head + body.substr(0, 10), body.substr(10, 40000),
                           body.substr(40010) + "GET /next HTTP/1.1\r\n\r\n"});
  EXPECT_EQ(served.quick, 2u);
  EXPECT_NE(served.written.find("POST /big 1.1\nContent-Length: 100000\n\n" + body),
            std::string::npos);
  EXPECT_NE(served.written.find("GET /next 1.1\n"), std::string::npos);
  EXPECT_EQ(served.written, h.byteByByte(head + body + "GET /next HTTP/1.1\r\n\r\n").written);
}

// Each shape the quick reader declines is read by http_parser, which serves it or refuses
// it as it always did; whole or cut, the answer is the same.
TEST(HttpConnectionReaders, LeaveEveryUncommonShapeToHttpParser) {
  HttpLimits limits;
  limits.max_header_count = 4;
  limits.max_header_bytes = 400;
  limits.max_body_bytes = 1000;
  Harness h(limits);
  const std::string cases[] = {
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n\r\n",
      "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
      "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
      "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
      "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
      "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n{}",
      "POST / HTTP/1.1\r\nContent-Length: 2 2\r\n\r\n{}",
      "POST / HTTP/1.1\r\nContent-Length : 2\r\n\r\n{}",
      "POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n{}",
      // http_parser reads any name that starts with transfer-encoding as Transfer-Encoding
      // (and refuses the request); found by the fuzzer, read as a plain field before.
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-EncodingA: chunked\r\n\r\n0\r\n",
      "GET / HTTP/1.1\r\nTransfer-Encodings: x\r\n\r\n",
      "GET / HTTP/1.1\nHost: a\n\n",
      "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\nX-A: \x01\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
      "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n",
      "GET /" + std::string(500, 'p') + " HTTP/1.1\r\n\r\n",
      "GET /a#b HTTP/1.1\r\n\r\n",
      "GET /a\"b HTTP/1.1\r\n\r\n",
      "GET http://host/a HTTP/1.1\r\n\r\n",
      "GET  /a HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.0\r\n\r\n",
      "GET / HTTP/2.0\r\n\r\n",
      "HEAD / HTTP/1.1\r\n\r\n",
      "PUT / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
      "\r\nGET / HTTP/1.1\r\n\r\n",
  };
  for (const std::string& request : cases) {
    // Each twice, then a common request: what follows an uncommon one is still read.
    const std::string stream = request + request + "GET /after HTTP/1.1\r\n\r\n";
    Served whole = h.whole(stream);
    Served cut = h.byteByByte(stream);
    EXPECT_EQ(whole.written, cut.written) << request;
    EXPECT_TRUE(whole.written.starts_with("HTTP/1.1 ")) << request;
    // At most the trailing common request is read quickly (when the connection is still
    // reading by then).
    EXPECT_LE(whole.quick, 1u) << request;
  }
}

// Once http_parser read a request that ends the connection, it reads nothing after it;
// neither may the quick reader, even when the answer comes later.
TEST(HttpConnectionReaders, ReadNothingQuicklyAfterARequestThatEndsTheConnection) {
  Harness h;
  Served served = h.serve({"GET /later HTTP/1.1\r\nConnection: close\r\n\r\n",
                           "GET /next HTTP/1.1\r\n\r\n"});
  EXPECT_EQ(served.quick, 0u);
  EXPECT_NE(served.written.find("GET /later 1.1\n"), std::string::npos);
  EXPECT_EQ(served.written.find("GET /next"), std::string::npos) << served.written;
}

TEST(QuickHeadReader, SplitsFieldLinesAndDeclinesWhatBreaksItsRules) {
  using Field = QuickHeadReader::Field;
  const std::string head = "Name:  value with  spaces \t\r\nEmpty:\r\n\r\nafter";
  QuickHeadReader in(head.data(), head.size());
  std::string_view name, value;
  ASSERT_EQ(in.nextField(name, value), Field::kField);
  EXPECT_EQ(name, "Name");
  EXPECT_EQ(value, "value with  spaces");
  ASSERT_EQ(in.nextField(name, value), Field::kField);
  EXPECT_EQ(name, "Empty");
  EXPECT_EQ(value, "");
  ASSERT_EQ(in.nextField(name, value), Field::kEnd);
  EXPECT_EQ(in.consumed(), head.size() - 5);

  for (std::string bad : {"A: 1\n\r\n", "A: 1\r\n", " A: 1\r\n\r\n", "A : 1\r\n\r\n",
                          "A: 1\r2\r\n\r\n", "A\r\n\r\n", ": 1\r\n\r\n", "A(: 1\r\n\r\n"}) {
    QuickHeadReader r(bad.data(), bad.size());
    Field field;
    while ((field = r.nextField(name, value)) == Field::kField) {
    }
    EXPECT_EQ(field, Field::kDecline) << bad;
  }
}

TEST(QuickHeadReader, TakesOnlyPlainContentLengths) {
  EXPECT_EQ(quickContentLength("0"), 0u);
  EXPECT_EQ(quickContentLength("007"), 7u);
  EXPECT_EQ(quickContentLength("123456789012345678"), 123456789012345678u);
  for (std::string_view bad : {"", "+1", "-1", "1 2", "1,1", "0x10", "1234567890123456789"}) {
    EXPECT_FALSE(quickContentLength(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace infergate::gateway::http
