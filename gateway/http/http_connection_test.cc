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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codecs/text.h"
#include "gateway/http/event_loop.h"
#include "gateway/http/http_connection.h"
#include "gateway/http/request_text_testing.h"
#include "gateway/http/quick_head.h"

namespace infergate::gateway::http {
namespace {

struct Served {
  std::string written;        // what the connection wrote back
  uint64_t quick = 0;         // requests the quick reader read
  std::vector<bool> placed;   // per request: its body was read where the gate placed it
};

// One connection on a socket pair, driven on this thread: `pieces` are written one after
// the other, the loop run until quiet after each. Every request is answered with its
// description, except targets starting /later, answered once all pieces are in.
class Harness {
 public:
  explicit Harness(HttpLimits limits = {}) : limits_(limits) { ::signal(SIGPIPE, SIG_IGN); }
  // The headers gate of the next connections.
  void setGate(HeadersGate gate) { gate_ = std::move(gate); }
  // Memory the gate gave a request's body (BodyPlace), to tell where each body was read.
  void notePlace(const uint8_t* data, size_t capacity) { places_.emplace_back(data, capacity); }
  // Runs at the end of serve(), while the connection is still open (or closed itself).
  void beforeClose(std::function<void()> f) { before_close_ = std::move(f); }

  Served serve(const std::vector<std::string>& pieces) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    client_ = fds[0];
    later_.clear();
    Served served;
    HttpHandler handler = [this, &served](std::shared_ptr<HttpExchange> exchange) {
      const uint8_t* body = exchange->request().body.data();
      bool placed = false;
      for (const auto& [data, capacity] : places_) placed |= body >= data && body < data + capacity;
      served.placed.push_back(placed);
      if (exchange->request().target.starts_with("/later")) {
        later_.push_back(exchange);
      } else {
        answer(*exchange);
      }
    };
    auto connection = std::make_shared<HttpConnection>(loop_, fds[1], limits_, handler,
                                                       [](HttpConnection*) {}, nullptr,
                                                       std::string(), nullptr, &gate_);
    connection->start();
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
    if (before_close_) before_close_();
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
  HeadersGate gate_;
  std::function<void()> before_close_;
  std::vector<std::pair<const uint8_t*, size_t>> places_;
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

// A gate that places the body of every request to /place in memory of its own, of
// `spare` bytes beyond the body's Content-Length (kRequestBodyPadding needed), and
// records the lengths it saw and the places it gave.
struct PlacingGate {
  size_t spare = kRequestBodyPadding;
  std::vector<std::optional<uint64_t>> lengths;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> memory;

  void install(Harness& h) {
    h.setGate([this, &h](HttpRequest& request, tls::ServerSession*) -> std::optional<HttpResponse> {
      lengths.push_back(request.content_length);
      if (request.target.starts_with("/place")) {
        const size_t n = static_cast<size_t>(request.content_length.value_or(0)) + spare;
        auto bytes = std::make_shared<std::vector<uint8_t>>(n + 1, 0xee);
        memory.push_back(bytes);
        h.notePlace(bytes->data(), n);
        request.body_place = BodyPlace{bytes, bytes->data(), n};
      }
      if (request.target.ends_with("/refuse")) return HttpResponse::jsonError(403, "refused");
      return std::nullopt;
    });
  }
};

std::string bodyOf(size_t n) {
  std::string body(n, 'b');
  for (size_t i = 0; i < n; i += 331) body[i] = static_cast<char>('a' + i % 26);
  return body;
}

TEST(HttpConnectionBodyPlace, ReadsTheBodyWhereTheGatePlacedItAndTheNextOnesInItsOwn) {
  Harness h;
  PlacingGate gate;
  gate.install(h);
  const std::string big = bodyOf(100000), small = bodyOf(300);
  const std::string stream =
      "POST /place HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + big +
      "POST /own HTTP/1.1\r\nContent-Length: 300\r\n\r\n" + small +
      "POST /place HTTP/1.1\r\nContent-Length: 300\r\n\r\n" + small +
      "POST /own HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + big;
  // Whole (the quick reader; the big bodies straight from the socket), in pieces that cut
  // bodies, and byte by byte (http_parser).
  Served whole = h.whole(stream);
  Served pieces = h.serve({stream.substr(0, 70), stream.substr(70, 50000), stream.substr(50070)});
  Served cut = h.byteByByte(stream);
  for (const Served* served : {&whole, &pieces, &cut}) {
    EXPECT_EQ(served->placed, std::vector<bool>({true, false, true, false}));
    EXPECT_EQ(served->written, whole.written);
  }
  EXPECT_NE(whole.written.find("POST /place 1.1\nContent-Length: 100000\n\n" + big), std::string::npos);
  EXPECT_NE(whole.written.find("POST /own 1.1\nContent-Length: 100000\n\n" + big), std::string::npos);
  // The gate saw each declared length before the body; the first place holds the body.
  ASSERT_EQ(gate.lengths.size(), 12u);
  EXPECT_EQ(gate.lengths[0], std::optional<uint64_t>(100000));
  EXPECT_EQ(gate.lengths[1], std::optional<uint64_t>(300));
  EXPECT_EQ(std::string(gate.memory[0]->begin(), gate.memory[0]->begin() + 100000), big);
}

TEST(HttpConnectionBodyPlace, TakesNoPlaceTooSmallNorForABodyOfUnknownLength) {
  Harness h;
  PlacingGate gate;
  gate.spare = kRequestBodyPadding - 1;  // no room for the padding
  gate.install(h);
  const std::string big = bodyOf(50000);
  const std::string stream = "POST /place HTTP/1.1\r\nContent-Length: 50000\r\n\r\n" + big;
  Served whole = h.whole(stream);
  EXPECT_EQ(whole.placed, std::vector<bool>({false}));
  EXPECT_NE(whole.written.find(big), std::string::npos);

  gate.spare = kRequestBodyPadding;
  gate.lengths.clear();
  Served chunked = h.whole("POST /place HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.placed, std::vector<bool>({false}));
  EXPECT_NE(chunked.written.find("\n\nhello"), std::string::npos);
  ASSERT_EQ(gate.lengths.size(), 1u);
  EXPECT_EQ(gate.lengths[0], std::nullopt);
}

// A place given to a request that is then refused (by the gate itself, or over the body
// limit) is let go at once, not held by the refused exchange.
TEST(HttpConnectionBodyPlace, LetsThePlaceOfARefusedRequestGo) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  Harness h(limits);
  PlacingGate gate;
  gate.install(h);
  // Checked while the connection that refused it still holds what it holds.
  size_t released = 0;
  h.beforeClose([&] {
    ASSERT_EQ(gate.memory.size(), 1u);
    std::weak_ptr<std::vector<uint8_t>> given = gate.memory[0];
    gate.memory.clear();
    released += given.expired();
  });
  Served over = h.whole("POST /place HTTP/1.1\r\nContent-Length: 2000\r\n\r\n");
  EXPECT_TRUE(over.written.starts_with("HTTP/1.1 413")) << over.written;
  Served refused = h.whole("POST /place/refuse HTTP/1.1\r\nContent-Length: 10\r\n\r\nxx");
  EXPECT_TRUE(refused.written.starts_with("HTTP/1.1 403")) << refused.written;
  EXPECT_EQ(released, 2u);
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

// The rules read one byte at a time, as written in quick_head.h: what the reader's
// word-at-a-time passes must agree with.
QuickHeadReader::Field referenceField(std::string_view head, std::string_view& name, std::string_view& value,
                                      size_t& consumed) {
  size_t p = 0;
  while (p < head.size() && codecs::isHttpTokenChar(head[p])) ++p;
  if (p == 0) {
    if (head.size() < 2 || head[0] != '\r' || head[1] != '\n') return QuickHeadReader::Field::kDecline;
    consumed = 2;
    return QuickHeadReader::Field::kEnd;
  }
  if (p == head.size() || head[p] != ':') return QuickHeadReader::Field::kDecline;
  name = head.substr(0, p);
  const size_t value_start = ++p;
  while (p < head.size() && codecs::isHttpFieldByte(head[p])) ++p;
  if (head.size() - p < 2 || head[p] != '\r' || head[p + 1] != '\n') return QuickHeadReader::Field::kDecline;
  value = head.substr(value_start, p - value_start);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  consumed = p + 2;
  return QuickHeadReader::Field::kField;
}

// Every byte value at every place of a long name and of a long value (each place of the
// reader's eight-byte words, and the bytes after the last whole word): the reader splits,
// takes and declines exactly as the byte-by-byte rules do.
TEST(QuickHeadReader, ReadsEveryByteAtEveryPlaceAsTheByteRulesDo) {
  const std::string name = "Inference-Header-Content-Length";  // 31 bytes: 3 words and 7
  const std::string value = "application/octet-stream;q=0.9";    // 30
  size_t compared = 0;
  for (int part = 0; part < 2; ++part) {
    const size_t size = part == 0 ? name.size() : value.size();
    for (size_t at = 0; at < size; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string n = name, v = value;
        (part == 0 ? n : v)[at] = static_cast<char>(byte);
        // A short rest after the line too: the last word of the head may cross its end.
        for (const std::string& head : {n + ": " + v + "\r\n\r\n", n + ":" + v + "\r\n"}) {
          std::string_view got_name, got_value, want_name, want_value;
          size_t want_consumed = 0;
          const QuickHeadReader::Field want = referenceField(head, want_name, want_value, want_consumed);
          QuickHeadReader in(head.data(), head.size());
          const QuickHeadReader::Field got = in.nextField(got_name, got_value);
          ASSERT_EQ(got, want) << "byte " << byte << " at " << at << " of the " << (part == 0 ? "name" : "value");
          if (got != QuickHeadReader::Field::kField) continue;
          ASSERT_EQ(got_name, want_name) << "byte " << byte << " at " << at;
          ASSERT_EQ(got_value, want_value) << "byte " << byte << " at " << at;
          ASSERT_EQ(in.consumed(), want_consumed);
          ++compared;
        }
      }
    }
  }
  // Not only refusals were compared: a token byte in the name, a field byte in the value.
  EXPECT_GT(compared, 10000u);
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
