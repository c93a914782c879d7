#include "gateway/http2/server_connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gateway/http2/server_connection_test_harness.h"
#include "gtest/gtest.h"

namespace infergate::gateway::http2 {
namespace {

using namespace testing_h2;  // NOLINT(google-build-using-namespace): the harness of these tests

TEST(ServerConnection, AUnaryCallFromNghttp2) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::string(100, 'q'));
  pump(s, client);
  EXPECT_EQ(s.owner.settings, 1);
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"}));
  EXPECT_EQ(r.fields, kRequestHead);
  EXPECT_FALSE(r.too_large);
  EXPECT_EQ(r.data, std::string(100, 'q'));
  s.owner.answer(id, "the answer", {{"grpc-status", "0"}, {"grpc-message", "fine"}});
  pump(s, client);
  const Client::Call& c = client.calls[id];
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[0], kResponseHead);
  EXPECT_EQ(c.blocks[1], (Fields{{"grpc-status", "0"}, {"grpc-message", "fine"}}));
  EXPECT_EQ(c.frames, (Events{"HEADERS", "DATA", "HEADERS END_STREAM"}));
  EXPECT_EQ(c.data, "the answer");
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.close_code, NGHTTP2_NO_ERROR);
  EXPECT_EQ(r.events.back(), "close");
  EXPECT_EQ(r.code, kNoError);
  EXPECT_FALSE(r.by_peer);
  EXPECT_EQ(r.trailer_calls, 1);
  EXPECT_EQ(s.conn.openStreams(), 0u);
  EXPECT_FALSE(s.conn.done());  // no GOAWAY from either end: the connection stays
}

TEST(ServerConnection, ATrailersOnlyAnswerIsOneHeaderBlockThatEndsTheStream) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::nullopt);
  pump(s, client);
  EXPECT_EQ(s.owner.requests[id].events, (Events{"start", "headers", "end"}));
  const Fields only = withField(withField(kResponseHead, "grpc-status", "5"), "grpc-message", "no such model");
  s.owner.answerOnly(id, only);
  pump(s, client);
  const Client::Call& c = client.calls[id];
  EXPECT_EQ(c.frames, (Events{"HEADERS END_STREAM"}));
  ASSERT_EQ(c.blocks.size(), 1u);
  EXPECT_EQ(c.blocks[0], only);
  EXPECT_EQ(c.data, "");
  EXPECT_EQ(c.close_code, NGHTTP2_NO_ERROR);
  EXPECT_EQ(s.streamFrames(id), (Events{"HEADERS END_STREAM"}));
  EXPECT_TRUE(s.owner.requests[id].closed);
  EXPECT_EQ(s.owner.requests[id].code, kNoError);
  EXPECT_EQ(s.owner.requests[id].trailer_calls, 0);
}

TEST(ServerConnection, ManyStreamsWithBodiesPastEveryWindow) {
  ServerConnection::Options options;
  options.stream_window = 65535;
  Served s(options);
  Client client({}, /*manual_window=*/true);
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(client.request(kRequestHead, pattern(200 * 1024 + i, i)));
  pump(s, client);
  for (const int32_t id : ids) {
    const Owner::Request& r = s.owner.requests[id];
    EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"})) << id;
    EXPECT_EQ(r.data, client.calls[id].body) << id;
    EXPECT_GE(s.windowUpdates(id), 1u) << id;  // the stream's window was given back as it went
    s.owner.answer(id, std::string(r.data.rbegin(), r.data.rend()));
  }
  // The answers too pass nghttp2's windows (65,535 for the connection and each stream):
  // sending past one would be its FLOW_CONTROL_ERROR, a fault the pump reports.
  pump(s, client);
  for (const int32_t id : ids) {
    const Client::Call& c = client.calls[id];
    EXPECT_EQ(c.data, std::string(c.body.rbegin(), c.body.rend())) << id;
    EXPECT_TRUE(c.closed) << id;
    EXPECT_EQ(c.close_code, NGHTTP2_NO_ERROR) << id;
    EXPECT_TRUE(s.owner.requests[id].closed) << id;
    EXPECT_EQ(s.owner.requests[id].code, kNoError) << id;
  }
  EXPECT_EQ(s.conn.openStreams(), 0u);
}

TEST(ServerConnection, AnswersKeepWithinTheClientsWindows) {
  {
    // Streams' windows smaller than a frame, the connection's large.
    Client client({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1000}}, /*manual_window=*/true);
    ASSERT_EQ(nghttp2_session_set_local_window_size(client.session, NGHTTP2_FLAG_NONE, 0, 1 << 30), 0);
    Served s;
    const int32_t a = client.request(kRequestHead, std::nullopt);
    const int32_t b = client.request(kRequestHead, std::nullopt);
    pump(s, client);
    s.owner.answer(a, pattern(50000, 4));
    s.owner.answer(b, pattern(30000, 5));
    pump(s, client);
    for (const int32_t id : {a, b}) {
      EXPECT_EQ(client.calls[id].data, s.owner.requests[id].body) << id;
      EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR) << id;
    }
    for (const Frame& f : s.wire) {
      if (f.head.type == FrameType::kData) {
        EXPECT_LE(f.head.length, 1000u);
      }
    }
  }
  {
    // Streams' windows large, the connection's nghttp2's default 65,535, given back only
    // after each whole read: twenty answers at once must share it.
    Client client({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}}, /*manual_window=*/true);
    Served s;
    std::vector<int32_t> ids;
    for (int i = 0; i < 20; ++i) ids.push_back(client.request(kRequestHead, std::nullopt));
    pump(s, client);
    for (const int32_t id : ids) s.owner.answer(id, pattern(100000, id));
    pump(s, client);
    for (const int32_t id : ids) {
      EXPECT_EQ(client.calls[id].data, s.owner.requests[id].body) << id;
      EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR) << id;
    }
  }
}

TEST(ServerConnection, AStreamWindowTheOwnerDoesNotGiveBackHoldsItsClient) {
  ServerConnection::Options options;
  options.stream_window = 65535;
  Served s(options);
  s.owner.consume = false;
  Client client;
  const int32_t id = client.request(kRequestHead, pattern(200000, 1));
  pump(s, client);
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_EQ(r.data.size(), 65535u);  // the window, and no more
  EXPECT_EQ(r.events, (Events{"start", "headers", "data"}));
  size_t given = 0;
  auto giveBackWhatArrived = [&] {
    s.conn.consume(id, r.data.size() - given);
    given = r.data.size();
  };
  giveBackWhatArrived();
  pump(s, client);
  EXPECT_EQ(r.data.size(), 2 * 65535u);
  for (int i = 0; i < 10 && r.events.back() != "end"; ++i) {
    giveBackWhatArrived();
    pump(s, client);
  }
  EXPECT_EQ(r.data, client.calls[id].body);
  EXPECT_EQ(r.events.back(), "end");

  // A larger window lets that much through at once.
  const int32_t big = client.request(kRequestHead, pattern(3 << 20, 2));
  pump(s, client);
  const Owner::Request& b = s.owner.requests[big];
  EXPECT_EQ(b.data.size(), 65535u);
  s.conn.setStreamWindow(big, 1 << 20);
  pump(s, client);
  EXPECT_EQ(b.data.size(), size_t{1} << 20);
  s.conn.consume(big, size_t{1} << 20);  // the whole window back
  pump(s, client);
  EXPECT_EQ(b.data.size(), size_t{2} << 20);
  EXPECT_EQ(b.data, client.calls[big].body.substr(0, size_t{2} << 20));
  EXPECT_FALSE(b.closed);
}

// An answer whose owner ends its body while the client gives it no window (a gRPC answer
// cut short: its status came, the rest of its message never will) still ends, with its
// trailers: they take no window. Without that the stream, and what its answer holds, would
// wait for a WINDOW_UPDATE that a client not reading never sends.
TEST(ServerConnection, AnAnswerEndedWhileItsWindowIsShutStillGetsItsTrailers) {
  for (const bool connection_window : {false, true}) {
    SCOPED_TRACE(connection_window ? "the connection's window shut" : "the stream's window shut");
    Served s;
    Client client({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, connection_window ? 1 << 20 : 1000}},
                  /*manual_window=*/true);
    client.hold_windows = true;  // the connection's window stays nghttp2's 65,535
    const int32_t id = client.request(kRequestHead, std::nullopt);
    pump(s, client);
    s.owner.answer(id, pattern(100000, 3));
    pump(s, client);
    Owner::Request& r = s.owner.requests[id];
    EXPECT_EQ(r.sent, connection_window ? 65535u : 1000u);  // the window, and no more
    EXPECT_EQ(r.trailer_calls, 0);
    EXPECT_TRUE(s.conn.windowShut(id));
    r.body.resize(r.sent);  // the rest never comes
    s.conn.resumeData(id);
    s.conn.send();
    pump(s, client);
    EXPECT_EQ(r.trailer_calls, 1);
    EXPECT_TRUE(r.closed);
    EXPECT_EQ(client.calls[id].data, r.body);
    EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR);
    ASSERT_EQ(client.calls[id].blocks.size(), 2u);  // the head, then the trailers
    EXPECT_EQ(client.calls[id].blocks[1], (Fields{{"grpc-status", "0"}}));
  }
}

TEST(ServerConnection, AStreamPastTheLimitIsRefusedAndNeverReachesTheOwner) {
  ServerConnection::Options options;
  options.max_concurrent_streams = 2;
  Served s(options);
  Client client;
  // All sent before our SETTINGS reach nghttp2, which would otherwise hold the third back.
  const int32_t a = client.request(kRequestHead, "a");
  const int32_t b = client.request(kRequestHead, "b");
  const int32_t c = client.request(kRequestHead, "c");
  pump(s, client);
  EXPECT_EQ(s.owner.requests.count(c), 0u);
  EXPECT_TRUE(client.calls[c].closed);
  EXPECT_EQ(client.calls[c].close_code, NGHTTP2_REFUSED_STREAM);
  EXPECT_EQ(s.streamFrames(c), (Events{"RST_STREAM 7"}));
  for (const int32_t id : {a, b}) {
    EXPECT_EQ(s.owner.requests[id].events, (Events{"start", "headers", "data", "end"})) << id;
    EXPECT_FALSE(client.calls[id].closed) << id;
  }
  // Once one is answered, the next stream is taken.
  s.owner.answer(a, "A");
  pump(s, client);
  EXPECT_EQ(client.calls[a].data, "A");
  const int32_t d = client.request(kRequestHead, "d");
  pump(s, client);
  EXPECT_EQ(s.owner.requests[d].data, "d");
  s.owner.answer(d, "D");
  s.owner.answer(b, "B");
  pump(s, client);
  EXPECT_EQ(client.calls[d].data, "D");
  EXPECT_EQ(client.calls[b].data, "B");
  EXPECT_EQ(s.conn.openStreams(), 0u);
}

TEST(ServerConnection, AnAnswerBeforeTheWholeRequestResetsItsRestWithNoError) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, "0123456789");
  client.calls[id].ready = 3;
  pump(s, client);
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_EQ(r.events, (Events{"start", "headers", "data"}));
  EXPECT_EQ(r.data, "012");
  s.owner.answer(id, "early", {{"grpc-status", "3"}});
  pump(s, client);
  const Client::Call& c = client.calls[id];
  EXPECT_EQ(c.frames, (Events{"HEADERS", "DATA", "HEADERS END_STREAM", "RST_STREAM 0"}));
  EXPECT_EQ(c.data, "early");
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[1], (Fields{{"grpc-status", "3"}}));
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.close_code, NGHTTP2_NO_ERROR);
  EXPECT_EQ(r.events, (Events{"start", "headers", "data", "close"}));
  EXPECT_EQ(r.code, kNoError);
  EXPECT_FALSE(r.by_peer);
  EXPECT_EQ(s.conn.openStreams(), 0u);
}

TEST(ServerConnection, AMalformedRequestBlockResetsItsStreamOnly) {
  const Fields pseudo = {{":method", "POST"}, {":scheme", "http"}, {":path", "/m"}};
  struct Case {
    const char* name;
    Fields fields;
  };
  const Case cases[] = {
      {"no :path", {{":method", "POST"}, {":scheme", "http"}, {"content-type", "application/grpc"}}},
      {"no :method", {{":scheme", "http"}, {":path", "/m"}}},
      {"no :scheme", {{":method", "POST"}, {":path", "/m"}}},
      {"an empty :path", {{":method", "POST"}, {":scheme", "http"}, {":path", ""}}},
      {"a duplicate :path", withField(pseudo, ":path", "/n")},
      {"a duplicate :method", withField(pseudo, ":method", "GET")},
      {"a response's :status", withField(pseudo, ":status", "200")},
      {"an unknown pseudo-field", withField(pseudo, ":protocol", "x")},
      {"a pseudo-field after a regular one",
       {{":method", "POST"}, {":scheme", "http"}, {"content-type", "application/grpc"}, {":path", "/m"}}},
      {"an uppercase name", withField(pseudo, "Content-Type", "application/grpc")},
      {"connection", withField(pseudo, "connection", "keep-alive")},
      {"keep-alive", withField(pseudo, "keep-alive", "timeout=5")},
      {"transfer-encoding", withField(pseudo, "transfer-encoding", "chunked")},
      {"upgrade", withField(pseudo, "upgrade", "h2c")},
      {"te other than trailers", withField(pseudo, "te", "gzip")},
      {"a :method that is no token", {{":method", "PO ST"}, {":scheme", "http"}, {":path", "/m"}}},
      {"a :path not from /", {{":method", "POST"}, {":scheme", "http"}, {":path", "m"}}},
      {"a :path with a space", {{":method", "POST"}, {":scheme", "http"}, {":path", "/a b"}}},
      {"an :authority with a control byte", withField(pseudo, ":authority", "a\x01b")},
  };
  for (const Case& c : cases) {
    Served s;
    Script script;
    ASSERT_TRUE(s.feed(script.preface().headers(1, c.fields).take())) << c.name << ": " << s.conn.error();
    const std::vector<Frame> frames = s.frames();
    EXPECT_EQ(rstCode(frames, 1), kProtocolError) << c.name;
    EXPECT_FALSE(hasGoaway(frames)) << c.name;
    const Owner::Request& r = s.owner.requests[1];
    EXPECT_EQ(r.events, (Events{"start", "close"})) << c.name;  // no onHeadersEnd, no onRequestEnd
    EXPECT_EQ(r.code, kProtocolError) << c.name;
    EXPECT_FALSE(r.by_peer) << c.name;
    EXPECT_EQ(s.conn.openStreams(), 0u) << c.name;
    // The connection goes on, its HPACK table in step (the bad block's fields entered it).
    ASSERT_TRUE(s.feed(script.headers(3, withField(kRequestHead, "x-after", "ok")).take())) << c.name;
    expectServed(s, 3, c.name, withField(kRequestHead, "x-after", "ok"));
  }
}

TEST(ServerConnection, EachConnectionErrorEndsItWithGoaway) {
  struct Case {
    const char* name;
    std::function<std::string(Script&)> build;
    uint32_t code;
    int32_t last_stream;
    const char* error;
  };
  const Case cases[] = {
      {"an HTTP/1.1 request", [](Script&) { return std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"); },
       kProtocolError, 0, "the client's first bytes are not HTTP/2's connection preface"},
      {"a preface cut wrong", [](Script&) { return std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\n"); },
       kProtocolError, 0, "the client's first bytes are not HTTP/2's connection preface"},
      {"not SETTINGS first",
       [](Script& s) {
         s.bytes.append(kClientPreface, kClientPrefaceBytes);
         return s.frame(FrameType::kPing, 0, 0, std::string(8, 'p')).take();
       },
       kProtocolError, 0, "the client's first frame is not SETTINGS"},
      {"HEADERS on an even stream", [](Script& s) { return s.preface().headers(2, kRequestHead).take(); },
       kProtocolError, 0, "a HEADERS frame on stream 2, an even id, which a client may not open"},
      {"DATA on an idle stream", [](Script& s) { return s.preface().data(1, "x").take(); }, kProtocolError, 0,
       "a DATA frame on stream 1, which is not open"},
      {"DATA on a stream past the last",
       [](Script& s) { return s.preface().headers(1, kRequestHead, flags::kEndHeaders).data(3, "x").take(); },
       kProtocolError, 1, "a DATA frame on stream 3, which is not open"},
      {"DATA on stream 0", [](Script& s) { return s.preface().data(0, "x").take(); }, kProtocolError, 0,
       "a DATA frame on stream 0"},
      {"a frame too large",
       [](Script& s) {
         return s.preface().headers(1, kRequestHead, flags::kEndHeaders).data(1, std::string(16385, 'd')).take();
       },
       kFrameSizeError, 1, "a frame of 16385 bytes, over the 16384 allowed"},
      {"an HPACK block that does not decode",
       [](Script& s) { return s.preface().frame(FrameType::kHeaders, flags::kEndHeaders, 1, "\x80").take(); },
       kCompressionError, 1, "HPACK: index 0 is in neither table at byte 0 of the header block"},
      {"a header block interrupted by another frame",
       [](Script& s) {
         return s.preface().headers(1, kRequestHead, 0).frame(FrameType::kPing, 0, 0, std::string(8, 'p')).take();
       },
       kProtocolError, 0, "a header block interrupted before its END_HEADERS"},
      {"a header block continued on another stream",
       [](Script& s) {
         return s.preface().headers(1, kRequestHead, 0).frame(FrameType::kContinuation, flags::kEndHeaders, 3, "").take();
       },
       kProtocolError, 0, "a header block interrupted before its END_HEADERS"},
      {"a CONTINUATION without a block",
       [](Script& s) { return s.preface().frame(FrameType::kContinuation, flags::kEndHeaders, 1, "").take(); },
       kProtocolError, 0, "a CONTINUATION frame without a header block"},
      {"PUSH_PROMISE from a client",
       [](Script& s) {
         return s.preface().frame(FrameType::kPushPromise, flags::kEndHeaders, 1, std::string(4, '\0')).take();
       },
       kProtocolError, 0, "a PUSH_PROMISE from a client"},
      {"WINDOW_UPDATE on an idle stream",
       [](Script& s) { return s.preface().frame(FrameType::kWindowUpdate, 0, 5, std::string("\0\0\0\1", 4)).take(); },
       kProtocolError, 0, "a WINDOW_UPDATE on stream 5, which is not open"},
  };
  for (const Case& c : cases) {
    Served s;
    Script script;
    EXPECT_FALSE(s.feed(c.build(script))) << c.name;
    EXPECT_TRUE(s.conn.terminated()) << c.name;
    EXPECT_TRUE(s.conn.goingAway()) << c.name;
    EXPECT_EQ(s.conn.error(), c.error) << c.name;
    EXPECT_FALSE(s.conn.done()) << c.name << ": its GOAWAY is not written yet";
    const std::vector<Frame> frames = s.frames();
    EXPECT_TRUE(s.conn.done()) << c.name;
    ASSERT_FALSE(frames.empty()) << c.name;
    const Frame& last = frames.back();
    ASSERT_EQ(last.head.type, FrameType::kGoaway) << c.name;
    ASSERT_EQ(last.payload.size(), 8u) << c.name;
    EXPECT_EQ(last.word(0), static_cast<uint32_t>(c.last_stream)) << c.name;
    EXPECT_EQ(last.word(4), c.code) << c.name;
    EXPECT_EQ(s.unparsed, "") << c.name;
    EXPECT_FALSE(s.feed("x")) << c.name << ": a finished connection reads nothing more";
    EXPECT_TRUE(s.frames().empty()) << c.name << ": nor writes";
  }
}

TEST(ServerConnection, AResetOfAStreamNeverOpenedIsIgnored) {
  Served s;
  Script script;
  ASSERT_TRUE(s.feed(script.preface().headers(1, kRequestHead, flags::kEndHeaders).take()));
  s.frames();
  // An odd id past the last (a call cancelled before its HEADERS went), and an even one.
  ASSERT_TRUE(s.feed(script.rst(5, kCancel).rst(2, kCancel).take())) << s.conn.error();
  EXPECT_TRUE(s.frames().empty());
  EXPECT_FALSE(s.conn.terminated());
  EXPECT_FALSE(s.owner.requests[1].closed);
  ASSERT_TRUE(s.feed(script.data(1, "body", flags::kEndStream).take()));
  EXPECT_EQ(s.owner.requests[1].data, "body");
  expectServed(s, 1, "the open stream");
  ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take()));
  expectServed(s, 3, "a stream after");
}

TEST(ServerConnection, ResetsPastTheBurstEndTheConnection) {
  ServerConnection::Options options;
  options.reset_burst = 2;
  options.resets_per_second = 0;  // no refill: the count does not depend on the clock
  Served s(options);
  Script script;
  script.preface();
  for (const int32_t id : {1, 3, 5}) script.headers(id, kRequestHead, flags::kEndHeaders);
  ASSERT_TRUE(s.feed(script.take()));
  // Resets of streams never opened cost nothing; two of open streams are within the burst.
  ASSERT_TRUE(s.feed(script.rst(7, kCancel).rst(9, kCancel).rst(11, kCancel).take())) << s.conn.error();
  ASSERT_TRUE(s.feed(script.rst(1, kCancel).rst(3, kCancel).take())) << s.conn.error();
  EXPECT_TRUE(s.owner.requests[1].closed && s.owner.requests[3].closed);
  EXPECT_FALSE(s.feed(script.rst(5, kCancel).take()));
  EXPECT_EQ(s.conn.error(), "the client reset streams faster than 0 a second after a burst of 2");
  const std::vector<Frame> frames = s.frames();
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().name(), "GOAWAY 11");  // ENHANCE_YOUR_CALM
  EXPECT_EQ(frames.back().word(0), 5u);
}

TEST(ServerConnection, AHeaderListPastTheLimitIsToldAndTheTableStaysInStep) {
  ServerConnection::Options options;
  options.max_header_list_bytes = 400;  // kRequestHead counts 323
  Served s(options);
  Client client;
  const Fields big = withField(withField(kRequestHead, "x-big", std::string(1000, 'b')), "x-after", "after-value");
  const int32_t first = client.request(big, std::nullopt);
  pump(s, client);
  const Owner::Request& r = s.owner.requests[first];
  EXPECT_EQ(r.events, (Events{"start", "headers", "end"}));
  EXPECT_TRUE(r.too_large);
  EXPECT_EQ(r.fields, kRequestHead);  // the fields past the limit are not handed on
  s.owner.answerOnly(first, withField(kResponseHead, "grpc-status", "8"));
  pump(s, client);
  EXPECT_EQ(client.calls[first].close_code, NGHTTP2_NO_ERROR);
  // nghttp2 names x-after by its index in the table now: the fields past the limit entered it.
  const int32_t second = client.request(withField(kRequestHead, "x-after", "after-value"), std::nullopt);
  pump(s, client);
  const Owner::Request& t = s.owner.requests[second];
  EXPECT_EQ(t.events, (Events{"start", "headers", "end"}));
  EXPECT_FALSE(t.too_large);
  EXPECT_EQ(t.fields, withField(kRequestHead, "x-after", "after-value"));
  EXPECT_FALSE(s.conn.terminated());
}

TEST(ServerConnection, GoawayTakesNoNewStreamAndTheOpenOneIsAnswered) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::nullopt);
  pump(s, client);
  s.conn.goAway();
  EXPECT_TRUE(s.conn.goingAway());
  pump(s, client);
  EXPECT_EQ(client.goaways, 1);
  EXPECT_EQ(client.goaway_last, id);
  EXPECT_EQ(client.goaway_code, NGHTTP2_NO_ERROR);
  EXPECT_FALSE(s.conn.done());
  // A stream the client opens after it (nghttp2 would not: by hand, in a block that leaves
  // the HPACK tables alone) is ignored.
  Script late;
  const size_t from = s.wire.size();
  ASSERT_TRUE(s.feed(late.frame(FrameType::kHeaders, flags::kEndHeaders, 3,
                                late.block(kRequestHead, HpackEncoder::Indexing::kNoIndex))
                         .data(3, "late", flags::kEndStream)
                         .take()))
      << s.conn.error();
  EXPECT_EQ(s.owner.requests.count(3), 0u);
  s.take();
  EXPECT_EQ(s.streamFrames(3, from), Events{});
  EXPECT_FALSE(s.conn.done());
  s.owner.answer(id, "still");
  pump(s, client);
  EXPECT_EQ(client.calls[id].data, "still");
  EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR);
  EXPECT_EQ(s.owner.requests[id].code, kNoError);
  EXPECT_TRUE(s.conn.done());
}

TEST(ServerConnection, AGoawayForAnErrorAfterGoawayNamesNoLaterStream) {
  Served s;
  Script script;
  ASSERT_TRUE(s.feed(script.preface().headers(1, kRequestHead, flags::kEndHeaders).take()));
  s.conn.goAway();
  std::vector<Frame> frames = s.frames();
  ASSERT_FALSE(frames.empty());
  ASSERT_EQ(frames.back().head.type, FrameType::kGoaway);
  EXPECT_EQ(frames.back().word(0), 1u);
  EXPECT_EQ(frames.back().word(4), kNoError);
  ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take()));  // ignored
  EXPECT_EQ(s.owner.requests.count(3), 0u);
  EXPECT_FALSE(s.feed(script.data(1, std::string(16385, 'd')).take()));
  frames = s.frames();
  ASSERT_FALSE(frames.empty());
  ASSERT_EQ(frames.back().head.type, FrameType::kGoaway);
  // RFC 9113 6.8: a later GOAWAY may not name a larger last stream than an earlier one.
  EXPECT_EQ(frames.back().word(0), 1u);
  EXPECT_EQ(frames.back().word(4), kFrameSizeError);
}

TEST(ServerConnection, TheClientsResetClosesTheStreamAndNothingMoreGoesOnIt) {
  Served s;
  Client client;
  const int32_t answering = client.request(kRequestHead, "req");
  const int32_t waiting = client.request(kRequestHead, "req");
  pump(s, client);
  s.owner.requests[answering].ready = 5;
  s.owner.answer(answering, std::string(100, 'a'));
  pump(s, client);
  EXPECT_EQ(client.calls[answering].data, "aaaaa");
  for (const int32_t id : {answering, waiting}) {
    ASSERT_EQ(nghttp2_submit_rst_stream(client.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL), 0);
  }
  pump(s, client);
  for (const int32_t id : {answering, waiting}) {
    const Owner::Request& r = s.owner.requests[id];
    EXPECT_EQ(r.events.back(), "close") << id;
    EXPECT_EQ(r.code, kCancel) << id;
    EXPECT_TRUE(r.by_peer) << id;
  }
  EXPECT_EQ(s.conn.openStreams(), 0u);
  const size_t from = s.wire.size();
  s.owner.requests[answering].ready = SIZE_MAX;
  s.conn.resumeData(answering);
  s.owner.answer(waiting, "late");
  s.conn.resetStream(waiting, kInternalError);
  EXPECT_FALSE(s.conn.wantsWrite());
  pump(s, client);
  EXPECT_EQ(s.streamFrames(answering, from), Events{});
  EXPECT_EQ(s.streamFrames(waiting, from), Events{});
  EXPECT_EQ(s.owner.requests[answering].sent, 5u);
  EXPECT_EQ(s.owner.requests[answering].trailer_calls, 0);
}

TEST(ServerConnection, PaddingIsReadAndNotHandedOn) {
  Served s;
  Script script;
  script.preface();
  // Padded HEADERS with a priority, padded DATA (3 bytes of padding, then none).
  const std::string head = std::string("\x02") + std::string(5, '\0') + script.block(kRequestHead) + "pp";
  script.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kPadded | flags::kPriority, 1, head);
  script.data(1, std::string("\x03", 1) + "payload" + "xxx", flags::kPadded);
  script.data(1, std::string("\x00", 1) + "!", flags::kPadded);
  script.data(1, std::string("\x04", 1) + "yyyy", flags::kPadded | flags::kEndStream);
  // Fed a byte at a time, the preface too: where the reads fall does not matter.
  for (const char ch : script.bytes) ASSERT_TRUE(s.feed(std::string(1, ch))) << s.conn.error();
  const Owner::Request& r = s.owner.requests[1];
  EXPECT_EQ(r.fields, kRequestHead);
  EXPECT_EQ(r.data, "payload!");
  EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"}));
}

TEST(ServerConnection, PaddingIsGivenBackSoTheWindowDoesNotLeak) {
  ServerConnection::Options options;
  options.stream_window = 65535;
  Served s(options);
  Client client;
  client.chunk = 10;  // 2,000 frames of 10 bytes, each with as much padding as it may hold
  client.padding = 256;
  const int32_t id = client.request(kRequestHead, pattern(20000, 3));
  pump(s, client);
  EXPECT_GT(client.padded_bytes, 4 * 65535u);  // padding alone would fill the window four times
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_EQ(r.data, client.calls[id].body);
  EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"}));
  // The owner gave back 20,000 bytes, less than half the window: the updates are the padding's.
  EXPECT_GE(s.windowUpdates(id), 1u);
}

TEST(ServerConnection, ARequestBlockInContinuationsDecodes) {
  {
    Served s;
    Script script;
    const std::string block = script.preface().block(withField(kRequestHead, "x-meta", "v"));
    const size_t third = block.size() / 3;
    script.frame(FrameType::kHeaders, flags::kEndStream, 1, block.substr(0, third));
    script.frame(FrameType::kContinuation, 0, 1, block.substr(third, third));
    script.frame(FrameType::kContinuation, flags::kEndHeaders, 1, block.substr(2 * third));
    ASSERT_TRUE(s.feed(script.take())) << s.conn.error();
    EXPECT_EQ(s.owner.requests[1].fields, withField(kRequestHead, "x-meta", "v"));
    EXPECT_EQ(s.owner.requests[1].events, (Events{"start", "headers", "end"}));
  }
  {
    // nghttp2 cuts a block past 16,384 bytes the same way.
    Served s;
    Client client;
    const std::string big(40000, 'v');
    const int32_t id = client.request(withField(kRequestHead, "x-big", big), "body");
    pump(s, client);
    EXPECT_EQ(s.owner.requests[id].fields, withField(kRequestHead, "x-big", big));
    EXPECT_EQ(s.owner.requests[id].data, "body");
  }
}

TEST(ServerConnection, AnAnswerBlockPastTheClientsFrameSizeGoesOnInContinuations) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::nullopt);
  pump(s, client);
  const std::string big(40 * 1024, 'm');
  const size_t from = s.wire.size();
  s.owner.answer(id, "body", {{"grpc-status", "0"}}, withField(kResponseHead, "x-big", big));
  pump(s, client);
  std::vector<const Frame*> block;
  for (size_t i = from; i < s.wire.size(); ++i) {
    const Frame& f = s.wire[i];
    if (f.head.stream != id) continue;
    if (f.head.type == FrameType::kData) break;
    block.push_back(&f);
  }
  ASSERT_EQ(block.size(), 3u);
  EXPECT_EQ(block[0]->head.type, FrameType::kHeaders);
  for (size_t i = 0; i < block.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(block[i]->head.type, FrameType::kContinuation) << i;
    }
    EXPECT_LE(block[i]->head.length, kDefaultMaxFrameBytes) << i;
    EXPECT_EQ((block[i]->head.flags & flags::kEndHeaders) != 0, i == 2) << i;
  }
  const Client::Call& c = client.calls[id];
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[0], withField(kResponseHead, "x-big", big));
  EXPECT_EQ(c.data, "body");
  EXPECT_EQ(c.blocks[1], (Fields{{"grpc-status", "0"}}));
  EXPECT_EQ(c.close_code, NGHTTP2_NO_ERROR);
}

TEST(ServerConnection, RequestTrailersEndTheRequest) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, "body", {{"x-checksum", "abc"}});
  pump(s, client);
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"}));
  EXPECT_EQ(r.fields, kRequestHead);  // the trailers' fields are not handed on
  EXPECT_EQ(r.data, "body");
  s.owner.answer(id, "ok");
  pump(s, client);
  EXPECT_EQ(client.calls[id].data, "ok");
  EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR);
  EXPECT_EQ(r.code, kNoError);
}

TEST(ServerConnection, RequestTrailersThatBreakTheRulesResetTheStream) {
  struct Case {
    const char* name;
    Fields fields;
    uint8_t flags;
  };
  const Case cases[] = {
      {"not ending the stream", {{"x-checksum", "abc"}}, flags::kEndHeaders},
      {"with a pseudo-field", {{":path", "/m"}}, flags::kEndHeaders | flags::kEndStream},
      {"with an uppercase name", {{"X-Checksum", "abc"}}, flags::kEndHeaders | flags::kEndStream},
  };
  for (const Case& c : cases) {
    Served s;
    Script script;
    script.preface().headers(1, kRequestHead, flags::kEndHeaders).data(1, "x");
    ASSERT_TRUE(s.feed(script.headers(1, c.fields, c.flags).take())) << c.name;
    const std::vector<Frame> frames = s.frames();
    EXPECT_EQ(rstCode(frames, 1), kProtocolError) << c.name;
    const Owner::Request& r = s.owner.requests[1];
    EXPECT_EQ(r.events, (Events{"start", "headers", "data", "close"})) << c.name;
    EXPECT_EQ(r.code, kProtocolError) << c.name;
    EXPECT_FALSE(r.by_peer) << c.name;
    ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take())) << c.name;
    expectServed(s, 3, c.name);
  }
}

// RFC 9113 8.1.1: a request whose content-length the DATA frames do not add up to is
// malformed; its stream is reset, the connection serves on. One that adds up is served.
TEST(ServerConnection, AContentLengthTheDataDoesNotMatchResetsTheStream) {
  auto with_length = [](std::string length) {
    Fields fields = kRequestHead;
    fields.push_back({"content-length", std::move(length)});
    return fields;
  };
  struct Case {
    const char* name;
    Fields fields;
    std::vector<std::string> data;  // the last one ends the stream; none: HEADERS ends it
  };
  const Case cases[] = {
      {"more than announced", with_length("3"), {"ab", "cd"}},
      {"less than announced", with_length("10"), {"abcd"}},
      {"announced, none sent", with_length("4"), {}},
      {"not a number", with_length("4x"), {"abcd"}},
      {"negative", with_length("-4"), {"abcd"}},
  };
  for (const Case& c : cases) {
    Served s;
    Script script;
    script.preface().headers(1, c.fields, c.data.empty() ? flags::kEndHeaders | flags::kEndStream : flags::kEndHeaders);
    for (size_t i = 0; i < c.data.size(); ++i) {
      script.data(1, c.data[i], i + 1 == c.data.size() ? flags::kEndStream : 0);
    }
    ASSERT_TRUE(s.feed(script.take())) << c.name << ": " << s.conn.error();
    EXPECT_EQ(rstCode(s.frames(), 1), kProtocolError) << c.name;
    const Owner::Request& r = s.owner.requests[1];
    EXPECT_EQ(std::count(r.events.begin(), r.events.end(), "end"), 0) << c.name << ": never a whole request";
    EXPECT_EQ(r.code, kProtocolError) << c.name;
    ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take())) << c.name;
    expectServed(s, 3, c.name);
  }
  {
    // Ended by trailers, short of the length.
    Served s;
    Script script;
    script.preface().headers(1, with_length("4"), flags::kEndHeaders).data(1, "ab");
    ASSERT_TRUE(s.feed(script.headers(1, {{"x-checksum", "abc"}}).take())) << s.conn.error();
    EXPECT_EQ(rstCode(s.frames(), 1), kProtocolError);
    EXPECT_EQ(std::count(s.owner.requests[1].events.begin(), s.owner.requests[1].events.end(), "end"), 0);
  }
  {
    // Padded frames: the padding is not payload. Twice the same value is one value.
    Served s;
    Fields fields = with_length("6");
    fields.push_back({"content-length", "6"});
    Script script;
    script.preface().headers(1, fields, flags::kEndHeaders);
    script.data(1, std::string("\x02", 1) + "abc" + "pp", flags::kPadded);
    script.data(1, "def", flags::kEndStream);
    ASSERT_TRUE(s.feed(script.take())) << s.conn.error();
    const Owner::Request& r = s.owner.requests[1];
    EXPECT_EQ(r.data, "abcdef");
    EXPECT_EQ(r.events, (Events{"start", "headers", "data", "end"}));
    EXPECT_EQ(rstCode(s.frames(), 1), UINT32_MAX) << "no reset";
  }
}

TEST(ServerConnection, AStreamsOwnFaultResetsItOnly) {
  {
    // Past its window: the owner gave nothing back.
    Served s;
    s.owner.consume = false;
    Script script;
    script.preface().headers(1, kRequestHead, flags::kEndHeaders);
    for (int i = 0; i < 5; ++i) script.data(1, std::string(16384, 'w'));
    ASSERT_TRUE(s.feed(script.take())) << s.conn.error();
    EXPECT_EQ(rstCode(s.frames(), 1), kFlowControlError);
    EXPECT_EQ(s.owner.requests[1].data.size(), 3 * 16384u);  // the frame past the window is not handed on
    EXPECT_EQ(s.owner.requests[1].code, kFlowControlError);
    ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take()));
    expectServed(s, 3, "after a window overflow");
  }
  {
    // DATA after END_STREAM.
    Served s;
    Script script;
    ASSERT_TRUE(s.feed(script.preface().headers(1, kRequestHead).data(1, "late").take())) << s.conn.error();
    EXPECT_EQ(rstCode(s.frames(), 1), kStreamClosed);
    EXPECT_EQ(s.owner.requests[1].events, (Events{"start", "headers", "end", "close"}));
    EXPECT_EQ(s.owner.requests[1].data, "");
    ASSERT_TRUE(s.feed(script.headers(3, kRequestHead).take()));
    expectServed(s, 3, "after DATA past END_STREAM");
  }
}

TEST(ServerConnection, PingsBothWays) {
  Served s;
  Client client;
  pump(s, client);
  ASSERT_EQ(nghttp2_submit_ping(client.session, NGHTTP2_FLAG_NONE, nullptr), 0);
  pump(s, client);
  EXPECT_EQ(client.ping_acks, 1);
  s.conn.ping();
  pump(s, client);
  EXPECT_EQ(s.owner.ping_acks, 1);
}

TEST(ServerConnection, APausedOutputResumesWhereItStopped) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::nullopt);
  s.owner.writable = false;
  pump(s, client);  // the request is read all the same
  EXPECT_EQ(s.owner.requests[id].events, (Events{"start", "headers", "end"}));
  s.owner.answer(id, std::string(50000, 'z'));
  s.conn.send();
  EXPECT_EQ(s.owner.out, "");
  EXPECT_TRUE(s.conn.wantsWrite());
  s.owner.writable = true;
  pump(s, client);
  EXPECT_EQ(client.calls[id].data, std::string(50000, 'z'));
  EXPECT_EQ(client.calls[id].close_code, NGHTTP2_NO_ERROR);
}

TEST(ServerConnection, TheClientsGoawayLetsTheOpenStreamsFinish) {
  Served s;
  Client client;
  const int32_t id = client.request(kRequestHead, std::nullopt);
  pump(s, client);
  ASSERT_EQ(nghttp2_submit_goaway(client.session, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, nullptr, 0), 0);
  pump(s, client);
  EXPECT_EQ(s.owner.goaways, 1);
  EXPECT_EQ(s.owner.goaway_code, kNoError);
  EXPECT_TRUE(s.conn.goingAway());
  EXPECT_FALSE(s.conn.done());
  s.owner.answer(id, "bye");
  pump(s, client);
  EXPECT_EQ(client.calls[id].data, "bye");
  EXPECT_TRUE(s.conn.done());
}

// A client that does not read while it makes the server refuse streams: each refusal is an
// RST_STREAM queued behind the blocked output, so they are capped as acknowledgements are.
TEST(ServerConnection, RefusalsOwedToAClientThatReadsNothingAreCapped) {
  ServerConnection::Options options;
  options.max_concurrent_streams = 1;
  Served s(options);
  s.owner.writable = false;
  Script script;
  script.preface().headers(1, kRequestHead, flags::kEndHeaders);  // the one slot, held open
  constexpr int kRefused = 100000;
  for (int i = 0; i < kRefused; ++i) {
    script.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kEndStream, 3 + 2 * i, "");
  }
  const bool ok = s.feed(script.take());
  s.owner.writable = true;
  const std::vector<Frame> frames = s.frames();
  const auto rsts = std::count_if(frames.begin(), frames.end(),
                                  [](const Frame& f) { return f.head.type == FrameType::kRstStream; });
  EXPECT_FALSE(ok) << rsts << " RST_STREAM frames were held for a client that reads nothing";
  EXPECT_EQ(s.conn.error(), "more than 1000 acknowledgements or refusals owed while the output is full");
  EXPECT_LT(rsts, 10000);
}

// Streams the server resets for the client's own fault (here WINDOW_UPDATE 0) count with
// the client's own resets ("MadeYouReset", CVE-2025-8671): each had started a call.
TEST(ServerConnection, ResetsForTheClientsFaultsCountWithItsOwn) {
  ServerConnection::Options options;
  options.reset_burst = 2;
  options.resets_per_second = 0;
  Served s(options);
  Script script;
  script.preface();
  ASSERT_TRUE(s.feed(script.take()));
  int started = 0;
  bool ok = true;
  for (int i = 0; i < 50 && ok; ++i) {
    const int32_t id = 1 + 2 * i;
    script.headers(id, kRequestHead, flags::kEndHeaders);
    script.frame(FrameType::kWindowUpdate, 0, id, std::string(4, '\0'));
    ok = s.feed(script.take());
    s.take();
    if (s.owner.requests[id].events.size() >= 2) ++started;
  }
  EXPECT_FALSE(ok) << started << " requests started and reset by the server without the limit noticing";
  EXPECT_EQ(s.conn.error(), "the client reset streams faster than 0 a second after a burst of 2");
  EXPECT_LE(started, 3);
}

// RFC 9113 6.9.2: a receiver that announces a smaller initial window than 65,535 must take
// what the client sent before it saw the SETTINGS.
TEST(ServerConnection, DataSentBeforeTheClientSawASmallerWindowIsTaken) {
  ServerConnection::Options options;
  options.stream_window = 16384;
  Served s(options);
  s.owner.consume = false;  // the owner holds what it reads (as for a backlogged relay)
  Client client;
  const int32_t id = client.request(kRequestHead, std::string(40000, 'x'));
  ASSERT_TRUE(s.feed(client.take())) << s.conn.error();  // sent before the server's SETTINGS came
  s.take();
  const Owner::Request& r = s.owner.requests[id];
  EXPECT_NE(r.code, kFlowControlError) << "a conforming client's stream was reset FLOW_CONTROL_ERROR";
  EXPECT_EQ(r.data.size(), 40000u);
}

// RFC 9113 8.2.1: NUL, CR or LF in any field value makes the request malformed. Regular
// fields with them are dropped; a pseudo-field with them resets the stream (as nghttp2 did:
// the frontend would take such a :path for a method name).
TEST(ServerConnection, APseudoFieldWithControlBytesResetsTheStream) {
  Served s;
  Script script;
  const Fields head = {{":method", "POST"}, {":scheme", "http"}, {":path", std::string("/a\r\nx: y\0z", 11)},
                       {"content-type", "application/grpc"}};
  ASSERT_TRUE(s.feed(script.preface().headers(1, head).take())) << s.conn.error();
  const std::vector<Frame> frames = s.frames();
  EXPECT_EQ(rstCode(frames, 1), kProtocolError);
  EXPECT_NE(s.owner.requests[1].events, (Events{"start", "headers", "end"}))
      << "the owner took a :path holding CR, LF and NUL";
}

}  // namespace
}  // namespace infergate::gateway::http2
