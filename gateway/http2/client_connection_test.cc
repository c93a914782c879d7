#include "gateway/http2/client_connection.h"

#include <nghttp2/nghttp2.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gateway/http2/connection_test_support.h"
#include "gtest/gtest.h"

namespace infergate::gateway::http2 {
namespace {

// The connection's owner: keeps what it is told, serves bodies from memory.
struct Owner : CountingHandler<ClientConnection::Handler> {
  struct Call : MemoryBody {
    std::vector<Fields> blocks;
    Fields staged;
    std::vector<bool> block_ended;
    std::string data;
    bool closed = false;
    uint32_t code = 0;
    bool by_peer = false;
    bool headers_written = false;
  };
  std::string out;
  bool writable = true;
  std::map<int32_t, Call> calls;
  std::vector<int32_t> close_order;

  bool canWrite() override { return writable; }
  void writeBytes(std::string_view bytes) override { out.append(bytes); }
  void beforeHeaders(int32_t stream) override { calls[stream].headers_written = true; }
  size_t bodyReady(int32_t stream, size_t max, bool& last) override { return calls[stream].readyFor(max, last); }
  void writeData(int32_t stream, const uint8_t* head, size_t length) override {
    calls[stream].writeInto(out, head, length);
  }
  void onField(int32_t stream, std::string_view name, std::string_view value) override {
    calls[stream].staged.emplace_back(std::string(name), std::string(value));
  }
  void onHeadersEnd(int32_t stream, bool end_stream) override {
    Call& c = calls[stream];
    c.blocks.push_back(std::move(c.staged));
    c.staged.clear();
    c.block_ended.push_back(end_stream);
  }
  void onData(int32_t stream, const uint8_t* data, size_t size) override {
    calls[stream].data.append(reinterpret_cast<const char*>(data), size);
  }
  void onStreamClose(int32_t stream, uint32_t code, bool by_peer) override {
    Call& c = calls[stream];
    EXPECT_FALSE(c.closed) << "stream " << stream << " closed twice";
    c.closed = true;
    c.code = code;
    c.by_peer = by_peer;
    close_order.push_back(stream);
  }
};

// nghttp2 as the server: an implementation of HTTP/2 that is not ours.
struct Server {
  struct Request {
    Fields fields;
    std::string body;
    bool ended = false;
    bool closed = false;
    uint32_t close_code = 0;
  };
  nghttp2_session* session = nullptr;
  std::map<int32_t, Request> requests;
  int ping_acks = 0;
  std::set<int32_t> open;
  size_t most_open = 0;
  std::map<int32_t, std::pair<std::string, size_t>> answers;  // body to send, sent

  explicit Server(std::vector<nghttp2_settings_entry> settings = {}) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* frame, const uint8_t* n, size_t nl, const uint8_t* v, size_t vl,
               uint8_t, void* user) {
          auto& s = *static_cast<Server*>(user);
          s.requests[frame->hd.stream_id].fields.emplace_back(std::string(reinterpret_cast<const char*>(n), nl),
                                                              std::string(reinterpret_cast<const char*>(v), vl));
          s.open.insert(frame->hd.stream_id);
          s.most_open = std::max(s.most_open, s.open.size());
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
          static_cast<Server*>(user)->requests[id].body.append(reinterpret_cast<const char*>(data), len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
      auto& s = *static_cast<Server*>(user);
      if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        s.requests[f->hd.stream_id].ended = true;
      }
      if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) ++s.ping_acks;
      return 0;
    });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cb, [](nghttp2_session*, int32_t id, uint32_t code, void* user) {
          auto& s = *static_cast<Server*>(user);
          s.requests[id].closed = true;
          s.requests[id].close_code = code;
          s.open.erase(id);
          return 0;
        });
    nghttp2_session_server_new(&session, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  }
  ~Server() { nghttp2_session_del(session); }

  bool feed(const std::string& bytes) {
    return nghttp2_session_mem_recv(session, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) ==
           static_cast<ssize_t>(bytes.size());
  }
  std::string take() { return drained(session); }
  // A gRPC answer: HEADERS, the body, trailers.
  void answer(int32_t id, std::string body, Fields trailers = {{"grpc-status", "0"}}) {
    answers[id] = {std::move(body), 0};
    std::vector<nghttp2_nv> head = {nv(":status", "200"), nv("content-type", "application/grpc")};
    nghttp2_data_provider provider;
    provider.source.ptr = this;
    provider.read_callback = [](nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                                nghttp2_data_source* source, void*) -> ssize_t {
      auto& s = *static_cast<Server*>(source->ptr);
      auto& [body, sent] = s.answers[id];
      const size_t n = std::min(length, body.size() - sent);
      std::memcpy(buf, body.data() + sent, n);
      sent += n;
      if (sent == body.size()) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        std::vector<nghttp2_nv> t;
        for (auto& [k, v] : s.trailers[id]) t.push_back(nv(k, v));
        nghttp2_submit_trailer(session, id, t.data(), t.size());
      }
      return static_cast<ssize_t>(n);
    };
    trailers_store(id, std::move(trailers));
    nghttp2_submit_response(session, id, head.data(), head.size(), &provider);
  }
  std::map<int32_t, Fields> trailers;
  void trailers_store(int32_t id, Fields t) { trailers[id] = std::move(t); }

  static nghttp2_nv nv(std::string_view n, std::string_view v) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
            reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(), NGHTTP2_NV_FLAG_NONE};
  }
};

// Moves bytes both ways until neither side has more.
void exchange(ClientConnection& client, Owner& owner, Server& server) {
  for (int round = 0; round < 10000; ++round) {
    client.send();
    const std::string to_server = std::move(owner.out);
    owner.out.clear();
    if (!to_server.empty()) {
      ASSERT_TRUE(server.feed(to_server));
    }
    const std::string to_client = server.take();
    if (!to_client.empty()) {
      ASSERT_TRUE(client.receive(reinterpret_cast<const uint8_t*>(to_client.data()), to_client.size()))
          << client.error();
    }
    if (to_server.empty() && to_client.empty()) return;
  }
  FAIL() << "the exchange never settled";
}

const std::vector<ClientConnection::Field> kRequestHead = {
    {":method", "POST"}, {":scheme", "http"}, {":path", "/inference.GRPCInferenceService/ModelInfer"},
    {":authority", "127.0.0.1:8001"}, {"te", "trailers"}, {"content-type", "application/grpc"},
    {"grpc-timeout", "5S", HpackEncoder::Indexing::kNoIndex},
};

Fields fieldsOf(const std::vector<ClientConnection::Field>& f) {
  Fields out;
  for (const auto& x : f) out.emplace_back(std::string(x.name), std::string(x.value));
  return out;
}

TEST(ClientConnection, AUnaryCallAgainstNghttp2) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  const int32_t id = client.submitRequest(kRequestHead, true);
  ASSERT_EQ(id, 1);
  owner.calls[id].body = std::string(100, 'q');
  exchange(client, owner, server);
  EXPECT_EQ(owner.settings, 1);
  ASSERT_TRUE(server.requests[id].ended);
  EXPECT_EQ(server.requests[id].fields, fieldsOf(kRequestHead));
  EXPECT_EQ(server.requests[id].body, std::string(100, 'q'));
  server.answer(id, "the answer", {{"grpc-status", "0"}, {"grpc-message", "fine"}});
  exchange(client, owner, server);
  const Owner::Call& c = owner.calls[id];
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[0], (Fields{{":status", "200"}, {"content-type", "application/grpc"}}));
  EXPECT_EQ(c.blocks[1], (Fields{{"grpc-status", "0"}, {"grpc-message", "fine"}}));
  EXPECT_EQ(c.block_ended, (std::vector<bool>{false, true}));
  EXPECT_EQ(c.data, "the answer");
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.code, kNoError);
  EXPECT_FALSE(c.by_peer);
  EXPECT_TRUE(server.requests[id].closed);
  EXPECT_EQ(client.openStreams(), 0u);
}

TEST(ClientConnection, ManyCallsWithBodiesPastEveryWindow) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) {
    const int32_t id = client.submitRequest(kRequestHead, true);
    ASSERT_EQ(id, 1 + 2 * i);
    std::string body(static_cast<size_t>(i) * 17000 + 1, '\0');
    for (size_t k = 0; k < body.size(); ++k) body[k] = static_cast<char>('a' + (k * 7 + i) % 26);
    owner.calls[id].body = body;
    ids.push_back(id);
  }
  exchange(client, owner, server);
  for (const int32_t id : ids) {
    ASSERT_TRUE(server.requests[id].ended) << id;
    EXPECT_EQ(server.requests[id].body, owner.calls[id].body) << id;
    std::string echo(server.requests[id].body.rbegin(), server.requests[id].body.rend());
    server.answer(id, echo);
  }
  exchange(client, owner, server);
  for (const int32_t id : ids) {
    const Owner::Call& c = owner.calls[id];
    EXPECT_EQ(c.data, std::string(c.body.rbegin(), c.body.rend())) << id;
    EXPECT_TRUE(c.closed && c.code == kNoError) << id;
  }
}

TEST(ClientConnection, AStreamWhoseWindowItsOwnerHoldsGetsNoMoreThanTheOwnerFrees) {
  // A 1 MiB stream window. Stream 1 is the owner's (ownWindow): the server may send it 1 MiB
  // and no more until the owner frees half of what came; stream 3 is not, and takes its
  // whole 4 MiB answer at once (given back as it arrives).
  Owner owner;
  ClientConnection::Options options;
  options.stream_window = 1 << 20;
  ClientConnection client(owner, options);
  Server server;
  const int32_t held = client.submitRequest(kRequestHead, false);
  client.ownWindow(held);
  const int32_t plain = client.submitRequest(kRequestHead, false);
  exchange(client, owner, server);
  std::string body(4 << 20, '\0');
  for (size_t k = 0; k < body.size(); ++k) body[k] = static_cast<char>(k * 31 % 251);
  server.answer(held, body);
  server.answer(plain, body);
  exchange(client, owner, server);
  EXPECT_TRUE(owner.calls[plain].data == body);
  EXPECT_TRUE(owner.calls[plain].closed);
  Owner::Call& c = owner.calls[held];
  EXPECT_EQ(c.data.size(), size_t{1} << 20) << "the server sent past the window the owner holds";
  client.freeWindow(held, 300000);  // less than half the window: nothing given back yet
  exchange(client, owner, server);
  EXPECT_EQ(c.data.size(), size_t{1} << 20);
  client.freeWindow(held, 300000);  // past half: the freed bytes go back, and as many come
  exchange(client, owner, server);
  EXPECT_EQ(c.data.size(), (size_t{1} << 20) + 600000);
  // The owner frees everything as it comes: the rest arrives whole and in order.
  for (size_t freed = 600000; freed < c.data.size();) {
    const size_t now = c.data.size() - freed;
    client.freeWindow(held, now);
    freed += now;
    exchange(client, owner, server);
  }
  EXPECT_TRUE(c.data == body);
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.code, kNoError);
  client.freeWindow(held, 100);  // a stream gone: nothing
  client.freeWindow(plain, 100);
}

TEST(ClientConnection, TheServersStreamLimitHoldsStreamsBackInOrder) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server({{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2}});
  exchange(client, owner, server);  // its SETTINGS arrive first
  std::vector<int32_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(client.submitRequest(kRequestHead, true));
    owner.calls[ids.back()].body = "x";
  }
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 5, 7, 9}));
  for (int round = 0; round < 5; ++round) {
    exchange(client, owner, server);
    for (auto& [id, r] : server.requests) {
      if (r.ended && !r.closed && server.answers.count(id) == 0) server.answer(id, "ok");
    }
  }
  exchange(client, owner, server);
  EXPECT_EQ(server.most_open, 2u);
  EXPECT_EQ(owner.close_order.size(), 5u);
  for (const int32_t id : ids) EXPECT_EQ(owner.calls[id].data, "ok") << id;
}

TEST(ClientConnection, ABodyThatIsNotThereYetWaitsForResume) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  const int32_t id = client.submitRequest(kRequestHead, true);
  owner.calls[id].body = "0123456789";
  owner.calls[id].ready = 4;
  exchange(client, owner, server);
  EXPECT_EQ(server.requests[id].body, "0123");
  EXPECT_FALSE(server.requests[id].ended);
  EXPECT_FALSE(client.wantsWrite());
  owner.calls[id].ready = SIZE_MAX;
  client.resumeData(id);
  EXPECT_TRUE(client.wantsWrite());
  exchange(client, owner, server);
  EXPECT_EQ(server.requests[id].body, "0123456789");
  EXPECT_TRUE(server.requests[id].ended);
}

TEST(ClientConnection, AnAnswerBeforeTheWholeRequestClosesTheStreamAnswered) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  const int32_t id = client.submitRequest(kRequestHead, true);
  owner.calls[id].body = "0123456789";
  owner.calls[id].ready = 3;
  exchange(client, owner, server);
  server.answer(id, "early", {{"grpc-status", "3"}});
  exchange(client, owner, server);
  const Owner::Call& c = owner.calls[id];
  EXPECT_EQ(c.data, "early");
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.code, kNoError);
  EXPECT_TRUE(server.requests[id].closed);
  EXPECT_EQ(server.requests[id].close_code, NGHTTP2_CANCEL);  // the rest of the request is not sent
  EXPECT_EQ(server.requests[id].body, "012");
}

TEST(ClientConnection, AHeaderBlockPastTheFrameSizeGoesOnInContinuations) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  std::vector<ClientConnection::Field> head = kRequestHead;
  const std::string big(40000, 'v');
  head.push_back({"x-big", big, HpackEncoder::Indexing::kNoIndex});
  const int32_t id = client.submitRequest(head, false);
  exchange(client, owner, server);
  EXPECT_TRUE(owner.calls[id].headers_written);
  ASSERT_TRUE(server.requests[id].ended);
  EXPECT_EQ(server.requests[id].fields.back(), (std::pair<std::string, std::string>("x-big", big)));
}

TEST(ClientConnection, GoawayRefusesTheStreamsItDidNotTake) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(client.submitRequest(kRequestHead, true));
    owner.calls[ids.back()].body = "b";
  }
  exchange(client, owner, server);
  ASSERT_EQ(nghttp2_submit_goaway(server.session, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, nullptr, 0), 0);
  exchange(client, owner, server);
  EXPECT_EQ(owner.goaways, 1);
  EXPECT_FALSE(owner.calls[1].closed);
  for (const int32_t id : {3, 5}) {
    EXPECT_TRUE(owner.calls[id].closed);
    EXPECT_EQ(owner.calls[id].code, kRefusedStream);
    EXPECT_TRUE(owner.calls[id].by_peer);
  }
  EXPECT_TRUE(client.goingAway());
  EXPECT_EQ(client.submitRequest(kRequestHead, true), 0);
  server.answer(1, "still");
  exchange(client, owner, server);
  EXPECT_EQ(owner.calls[1].data, "still");
  EXPECT_EQ(owner.calls[1].code, kNoError);
}

TEST(ClientConnection, ResetsBothWays) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  const int32_t a = client.submitRequest(kRequestHead, true);
  const int32_t b = client.submitRequest(kRequestHead, true);
  owner.calls[a].body = owner.calls[b].body = "0123";
  owner.calls[a].ready = owner.calls[b].ready = 2;
  exchange(client, owner, server);
  // Ours: closed once the frame is out, not before.
  client.resetStream(a, kCancel);
  EXPECT_FALSE(owner.calls[a].closed);
  exchange(client, owner, server);
  EXPECT_TRUE(owner.calls[a].closed);
  EXPECT_EQ(owner.calls[a].code, kCancel);
  EXPECT_FALSE(owner.calls[a].by_peer);
  EXPECT_EQ(server.requests[a].close_code, NGHTTP2_CANCEL);
  // The server's.
  ASSERT_EQ(nghttp2_submit_rst_stream(server.session, NGHTTP2_FLAG_NONE, b, NGHTTP2_INTERNAL_ERROR), 0);
  exchange(client, owner, server);
  EXPECT_TRUE(owner.calls[b].closed);
  EXPECT_EQ(owner.calls[b].code, kInternalError);
  EXPECT_TRUE(owner.calls[b].by_peer);
}

TEST(ClientConnection, PingsBothWays) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  exchange(client, owner, server);
  client.ping();
  exchange(client, owner, server);
  EXPECT_EQ(owner.ping_acks, 1);
  ASSERT_EQ(nghttp2_submit_ping(server.session, NGHTTP2_FLAG_NONE, nullptr), 0);
  exchange(client, owner, server);
  EXPECT_EQ(server.ping_acks, 1);
}

TEST(ClientConnection, APausedOutputResumesWhereItStopped) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server;
  const int32_t id = client.submitRequest(kRequestHead, true);
  owner.calls[id].body = std::string(50000, 'z');
  owner.writable = false;
  client.send();
  EXPECT_EQ(owner.out, "");
  EXPECT_TRUE(client.wantsWrite());
  owner.writable = true;
  exchange(client, owner, server);
  EXPECT_EQ(server.requests[id].body, std::string(50000, 'z'));
}

// ---- a server that breaks the rules, frame by frame ----

struct Broken {
  Owner owner;
  ClientConnection client{owner, {}};
  int32_t id = 0;
  Broken() {
    id = client.submitRequest(kRequestHead, true);
    owner.calls[id].body = "body";
    client.send();
    owner.out.clear();
  }
  bool feed(const std::string& bytes) {
    return client.receive(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  // The GOAWAY this end queued, by its error code.
  uint32_t goawayCode() {
    client.send();
    const std::string& o = owner.out;
    for (size_t at = 0; at + kFrameHeaderBytes <= o.size();) {
      const FrameHeader h = readFrameHeader(reinterpret_cast<const uint8_t*>(o.data() + at));
      if (h.type == FrameType::kGoaway) return readU32(reinterpret_cast<const uint8_t*>(o.data() + at + 13));
      at += kFrameHeaderBytes + h.length;
    }
    return UINT32_MAX;
  }
};

TEST(ClientConnection, EachConnectionErrorEndsItWithGoaway) {
  struct Case {
    const char* name;
    std::function<std::string(Script&)> build;
    uint32_t code;
    const char* error;
  };
  const Fields ok_head = {{":status", "200"}, {"content-type", "application/grpc"}};
  const Case cases[] = {
      {"not settings first", [](Script& s) { return s.frame(FrameType::kPing, 0, 0, std::string(8, 'p')).bytes; },
       kProtocolError, "the server's first frame is not SETTINGS"},
      {"frame too large", [](Script& s) { return s.settings().frame(FrameType::kData, 0, 1, std::string(16385, 'd')).bytes; },
       kFrameSizeError, "a frame of 16385 bytes, over the 16384 allowed"},
      {"data on stream 0", [](Script& s) { return s.settings().frame(FrameType::kData, 0, 0, "x").bytes; },
       kProtocolError, "a DATA frame on stream 0"},
      {"headers on a server stream", [&](Script& s) { return s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, 2, s.block(ok_head)).bytes; },
       kProtocolError, "a HEADERS frame on stream 2, which is not open"},
      {"push promise", [](Script& s) { return s.settings().frame(FrameType::kPushPromise, flags::kEndHeaders, 1, std::string(4, '\0')).bytes; },
       kProtocolError, "a PUSH_PROMISE, with push disabled"},
      {"bad hpack", [](Script& s) { return s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, 1, "\x80").bytes; },
       kCompressionError, "HPACK: index 0 is in neither table at byte 0 of the header block"},
      {"connection window overflow", [](Script& s) { return s.settings().frame(FrameType::kWindowUpdate, 0, 0, std::string("\x7f\xff\xff\xff", 4)).bytes; },
       kFlowControlError, "the connection's window past 2^31-1"},
      {"window update of 0", [](Script& s) { return s.settings().frame(FrameType::kWindowUpdate, 0, 0, std::string(4, '\0')).bytes; },
       kProtocolError, "a WINDOW_UPDATE of 0 for the connection"},
      {"initial window too large", [](Script& s) { return s.frame(FrameType::kSettings, 0, 0, std::string("\x00\x04\x80\x00\x00\x00", 6)).bytes; },
       kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"},
      {"settings ack with payload", [](Script& s) { return s.settings().frame(FrameType::kSettings, flags::kAck, 0, std::string(6, '\0')).bytes; },
       kFrameSizeError, "a SETTINGS ACK with a payload"},
      {"interrupted header block", [&](Script& s) {
         return s.settings().frame(FrameType::kHeaders, 0, 1, s.block(ok_head)).frame(FrameType::kPing, 0, 0, std::string(8, 'p')).bytes;
       }, kProtocolError, "a header block interrupted before its END_HEADERS"},
      {"goaway too short", [](Script& s) { return s.settings().frame(FrameType::kGoaway, 0, 0, "abc").bytes; },
       kFrameSizeError, "a GOAWAY frame shorter than 8 bytes"},
      {"max frame size too small", [](Script& s) { return s.frame(FrameType::kSettings, 0, 0, std::string("\x00\x05\x00\x00\x10\x00", 6)).bytes; },
       kProtocolError, "SETTINGS_MAX_FRAME_SIZE outside 16384..2^24-1"},
  };
  for (const Case& c : cases) {
    Broken b;
    Script s;
    EXPECT_FALSE(b.feed(c.build(s))) << c.name;
    EXPECT_TRUE(b.client.terminated()) << c.name;
    EXPECT_EQ(b.client.error(), c.error) << c.name;
    EXPECT_EQ(b.goawayCode(), c.code) << c.name;
    EXPECT_FALSE(b.feed("x")) << c.name << ": a finished connection reads nothing more";
    EXPECT_EQ(b.client.submitRequest(kRequestHead, false), 0) << c.name;
  }
}

TEST(ClientConnection, AMalformedAnswerResetsItsStreamOnly) {
  const Fields cases[] = {
      {{":status", "200"}, {"Content-Type", "application/grpc"}},  // uppercase
      {{"content-type", "application/grpc"}},  // no :status
      {{"content-type", "application/grpc"}, {":status", "200"}},  // pseudo after regular
      {{":status", "200"}, {":path", "/"}},  // a request's pseudo-field
      {{":status", "200"}, {"connection", "close"}},  // HTTP/1.1's
      {{":status", "20x"}},
      {{":status", "101"}},  // no upgrade in HTTP/2
  };
  for (const Fields& head : cases) {
    Broken b;
    Script s;
    ASSERT_TRUE(b.feed(s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, b.id, s.block(head)).bytes));
    EXPECT_EQ(b.owner.calls[b.id].blocks.size(), 0u) << head[0].first;
    b.client.send();
    EXPECT_TRUE(b.owner.calls[b.id].closed) << head[0].first;
    EXPECT_EQ(b.owner.calls[b.id].code, kProtocolError);
    EXPECT_FALSE(b.owner.calls[b.id].by_peer);
    EXPECT_FALSE(b.client.terminated());
    // A second stream on the same connection still works.
    const int32_t next = b.client.submitRequest(kRequestHead, false);
    b.client.send();
    Script t;
    t.encoder = std::move(s.encoder);
    ASSERT_TRUE(b.feed(t.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kEndStream, next,
                               t.block({{":status", "200"}, {"grpc-status", "0"}})).bytes));
    EXPECT_EQ(b.owner.calls[next].code, kNoError);
    EXPECT_EQ(b.owner.calls[next].blocks.size(), 1u);
  }
}

TEST(ClientConnection, TrailersMustEndTheStreamAndCarryNoPseudoFields) {
  for (const bool pseudo : {false, true}) {
    Broken b;
    Script s;
    s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, b.id, s.block({{":status", "200"}}));
    const Fields trailers = pseudo ? Fields{{":status", "200"}} : Fields{{"grpc-status", "0"}};
    s.frame(FrameType::kHeaders, flags::kEndHeaders | (pseudo ? flags::kEndStream : 0), b.id, s.block(trailers));
    ASSERT_TRUE(b.feed(s.bytes));
    b.client.send();
    EXPECT_EQ(b.owner.calls[b.id].blocks.size(), 1u);
    EXPECT_EQ(b.owner.calls[b.id].code, kProtocolError) << pseudo;
  }
}

TEST(ClientConnection, InformationalAnswersAreSkippedAndPaddingIsRead) {
  Broken b;
  Script s;
  s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, b.id, s.block({{":status", "100"}}));
  // Padded HEADERS with a priority, padded DATA (3 bytes of padding), then trailers.
  std::string head = std::string("\x02") + std::string(5, '\0') + s.block({{":status", "200"}}) + "pp";
  s.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kPadded | flags::kPriority, b.id, head);
  s.frame(FrameType::kData, flags::kPadded, b.id, std::string("\x03", 1) + "payload" + "xxx");
  s.frame(FrameType::kData, flags::kPadded, b.id, std::string("\x00", 1));
  s.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kEndStream, b.id, s.block({{"grpc-status", "0"}}));
  // Fed a byte at a time: where the reads fall does not matter.
  for (const char ch : s.bytes) ASSERT_TRUE(b.feed(std::string(1, ch)));
  b.client.send();
  const Owner::Call& c = b.owner.calls[b.id];
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[0], (Fields{{":status", "200"}}));
  EXPECT_EQ(c.data, "payload");
  EXPECT_TRUE(c.closed);
  EXPECT_EQ(c.code, kNoError);  // answered before the body went: closed as answered
}

}  // namespace
}  // namespace infergate::gateway::http2

namespace infergate::gateway::http2 {
namespace {

TEST(ClientConnection, AFieldWithAByteItMayNotHoldIsDroppedAndTheAnswerStands) {
  Broken b;
  Script s;
  s.settings().frame(FrameType::kHeaders, flags::kEndHeaders, b.id,
                     s.block({{":status", "200"}, {"x-a", "bad\r\nvalue"}, {"x b", "v"}, {"x-c", "ok "}}));
  s.frame(FrameType::kHeaders, flags::kEndHeaders | flags::kEndStream, b.id,
          s.block({{"grpc-status", "3"}, {"grpc-message", "bad input "}}));
  ASSERT_TRUE(b.feed(s.bytes));
  b.client.send();
  const Owner::Call& c = b.owner.calls[b.id];
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_EQ(c.blocks[0], (Fields{{":status", "200"}, {"x-c", "ok "}}));
  EXPECT_EQ(c.blocks[1], (Fields{{"grpc-status", "3"}, {"grpc-message", "bad input "}}));
  EXPECT_EQ(c.code, kNoError);
}

TEST(ClientConnection, StreamsWaitingForASlotAreRefusedByAnyGoaway) {
  Owner owner;
  ClientConnection client(owner, {});
  Server server({{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1}});
  exchange(client, owner, server);
  const int32_t a = client.submitRequest(kRequestHead, true);
  const int32_t b = client.submitRequest(kRequestHead, true);
  owner.calls[a].body = owner.calls[b].body = "x";
  exchange(client, owner, server);
  // A graceful shutdown's first GOAWAY names the largest id: stream b was never sent all
  // the same, and is refused at once.
  ASSERT_EQ(nghttp2_submit_goaway(server.session, NGHTTP2_FLAG_NONE, kLargestStreamId, NGHTTP2_NO_ERROR, nullptr, 0), 0);
  exchange(client, owner, server);
  EXPECT_TRUE(owner.calls[b].closed);
  EXPECT_EQ(owner.calls[b].code, kRefusedStream);
  EXPECT_TRUE(owner.calls[b].by_peer);
  EXPECT_FALSE(owner.calls[a].closed);
  server.answer(a, "done");
  exchange(client, owner, server);
  EXPECT_EQ(owner.calls[a].data, "done");
  EXPECT_EQ(client.openStreams(), 0u);
}

TEST(ClientConnection, AHundredStreamsAtMostBeforeTheServersSettings) {
  Owner owner;
  ClientConnection client(owner, {});
  for (int i = 0; i < 101; ++i) client.submitRequest(kRequestHead, false);
  client.send();
  ASSERT_EQ(owner.out.substr(0, kClientPrefaceBytes), std::string(kClientPreface, kClientPrefaceBytes));
  int headers = 0;
  for (size_t at = kClientPrefaceBytes; at + kFrameHeaderBytes <= owner.out.size();) {
    const FrameHeader h = readFrameHeader(reinterpret_cast<const uint8_t*>(owner.out.data() + at));
    if (h.type == FrameType::kHeaders) ++headers;
    at += kFrameHeaderBytes + h.length;
  }
  EXPECT_EQ(headers, 100);
}

TEST(ClientConnection, AServerThatFloodsPingsOrSettingsIsCutOff) {
  {
    Broken b;
    b.owner.writable = false;  // the server never reads our answers
    Script s;
    s.settings();
    for (int i = 0; i < 1001; ++i) s.frame(FrameType::kPing, 0, 0, std::string(8, 'p'));
    EXPECT_FALSE(b.feed(s.bytes));
    EXPECT_EQ(b.client.error(), "more than 1000 acknowledgements or refusals owed while the output is full");
  }
  {
    Broken b;
    Script s;
    std::string entries;
    for (int i = 0; i < 33; ++i) entries += std::string("\x00\x03\x00\x00\x00\x10", 6);
    EXPECT_FALSE(b.feed(s.frame(FrameType::kSettings, 0, 0, entries).bytes));
    EXPECT_EQ(b.client.error(), "a SETTINGS frame of more than 32 entries");
    EXPECT_EQ(b.goawayCode(), kEnhanceYourCalm);
  }
  {
    // While the output takes them, acknowledgements never pile up.
    Broken b;
    Script s;
    s.settings();
    for (int i = 0; i < 3000; ++i) s.frame(FrameType::kPing, 0, 0, std::string(8, 'p'));
    for (size_t at = 0; at < s.bytes.size(); at += 1700) {
      ASSERT_TRUE(b.feed(s.bytes.substr(at, 1700)));
      b.client.send();
    }
  }
}

}  // namespace
}  // namespace infergate::gateway::http2
