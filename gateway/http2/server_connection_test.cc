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

#include "gateway/http2/test_memory_body.h"
#include "gtest/gtest.h"

namespace infergate::gateway::http2 {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Events = std::vector<std::string>;

const Fields kRequestHead = {
    {":method", "POST"}, {":scheme", "http"}, {":path", "/inference.GRPCInferenceService/ModelInfer"},
    {":authority", "127.0.0.1:8001"}, {"content-type", "application/grpc"}, {"te", "trailers"},
};
const Fields kResponseHead = {{":status", "200"}, {"content-type", "application/grpc"}};

Fields withField(Fields fields, std::string name, std::string value) {
  fields.emplace_back(std::move(name), std::move(value));
  return fields;
}

std::vector<ServerConnection::Field> fieldsFor(const Fields& fields) {
  std::vector<ServerConnection::Field> out;
  for (const auto& [n, v] : fields) out.push_back({n, v});
  return out;
}

// A frame as a test names it: "HEADERS", "DATA END_STREAM", "RST_STREAM 7".
std::string describe(FrameType type, uint8_t f, uint32_t code) {
  static const char* const kNames[] = {"DATA",  "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
                                       "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"};
  const auto t = static_cast<size_t>(type);
  std::string out = t < std::size(kNames) ? kNames[t] : "UNKNOWN";
  if ((type == FrameType::kData || type == FrameType::kHeaders) && (f & flags::kEndStream)) out += " END_STREAM";
  if (type == FrameType::kRstStream || type == FrameType::kGoaway) out += " " + std::to_string(code);
  return out;
}

// The connection's owner: keeps what it is told, serves answers' bodies from memory.
struct Owner : ServerConnection::Handler {
  struct Request : MemoryBody {
    Events events;  // "start", "headers", "data", "end", "close", in order (a run of data as one)
    Fields fields;
    bool too_large = false;
    std::string data;
    bool closed = false;
    uint32_t code = 0;
    bool by_peer = false;
    // The answer: its body (MemoryBody), then these.
    Fields trailers;
    int trailer_calls = 0;
  };
  ServerConnection* conn = nullptr;
  bool consume = true;  // every DATA chunk is given back as it arrives
  bool writable = true;
  std::string out;
  std::map<int32_t, Request> requests;
  int settings = 0, ping_acks = 0, goaways = 0;
  uint32_t goaway_code = UINT32_MAX;

  void note(int32_t stream, const std::string& event) {
    Request& r = requests[stream];
    EXPECT_FALSE(r.closed) << "stream " << stream << " heard " << event << " after its close";
    if (event == "data" && !r.events.empty() && r.events.back() == "data") return;
    r.events.push_back(event);
  }
  // The header block, then `body` through bodyReady and `trailers` through trailers().
  void answer(int32_t stream, std::string body, Fields trailers = {{"grpc-status", "0"}},
              const Fields& head = kResponseHead) {
    Request& r = requests[stream];
    r.body = std::move(body);
    r.trailers = std::move(trailers);
    conn->submitResponse(stream, fieldsFor(head), false);
  }
  // Trailers-Only.
  void answerOnly(int32_t stream, const Fields& head) { conn->submitResponse(stream, fieldsFor(head), true); }

  bool canWrite() override { return writable; }
  void writeBytes(std::string_view bytes) override { out.append(bytes); }
  size_t bodyReady(int32_t stream, size_t max, bool& last) override { return requests[stream].readyFor(max, last); }
  void writeData(int32_t stream, const uint8_t* head, size_t length) override {
    requests[stream].writeInto(out, head, length);
  }
  void trailers(int32_t stream, std::vector<ServerConnection::Field>& fields) override {
    EXPECT_TRUE(fields.empty());
    Request& r = requests[stream];
    EXPECT_EQ(r.sent, r.body.size()) << "trailers before the whole body of stream " << stream;
    ++r.trailer_calls;
    for (const auto& [n, v] : r.trailers) fields.push_back({n, v});
  }
  void onRequestStart(int32_t stream) override {
    EXPECT_TRUE(requests[stream].events.empty()) << "stream " << stream << " started twice";
    note(stream, "start");
  }
  void onField(int32_t stream, std::string_view name, std::string_view value) override {
    Request& r = requests[stream];
    EXPECT_EQ(r.events, Events{"start"}) << "a field out of its block: " << name;
    r.fields.emplace_back(std::string(name), std::string(value));
  }
  void onHeadersEnd(int32_t stream, bool too_large) override {
    note(stream, "headers");
    requests[stream].too_large = too_large;
  }
  void onData(int32_t stream, const uint8_t* data, size_t size) override {
    note(stream, "data");
    requests[stream].data.append(reinterpret_cast<const char*>(data), size);
    if (consume) conn->consume(stream, size);
  }
  void onRequestEnd(int32_t stream) override { note(stream, "end"); }
  void onStreamClose(int32_t stream, uint32_t code, bool by_peer) override {
    note(stream, "close");
    Request& r = requests[stream];
    r.closed = true;
    r.code = code;
    r.by_peer = by_peer;
  }
  void onSettings() override { ++settings; }
  void onPingAck() override { ++ping_acks; }
  void onGoaway(uint32_t code) override {
    ++goaways;
    goaway_code = code;
  }
};

struct Frame {
  FrameHeader head;
  std::string payload;
  uint32_t word(size_t at) const { return readU32(reinterpret_cast<const uint8_t*>(payload.data() + at)); }
  std::string name() const {
    const bool coded = head.type == FrameType::kRstStream || head.type == FrameType::kGoaway;
    return describe(head.type, head.flags, coded ? word(head.type == FrameType::kGoaway ? 4 : 0) : 0);
  }
};

// The connection under test and its owner; what it writes is also kept frame by frame.
struct Served {
  Owner owner;
  ServerConnection conn;
  std::vector<Frame> wire;
  std::string unparsed;

  explicit Served(ServerConnection::Options options = {}) : conn(owner, options) { owner.conn = &conn; }

  bool feed(std::string_view bytes) {
    return conn.receive(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  // Frames what may go; returns the bytes written.
  std::string take() {
    conn.send();
    std::string out = std::exchange(owner.out, {});
    unparsed += out;
    size_t at = 0;
    while (unparsed.size() - at >= kFrameHeaderBytes) {
      const FrameHeader h = readFrameHeader(reinterpret_cast<const uint8_t*>(unparsed.data() + at));
      if (unparsed.size() - at - kFrameHeaderBytes < h.length) break;
      wire.push_back({h, unparsed.substr(at + kFrameHeaderBytes, h.length)});
      at += kFrameHeaderBytes + h.length;
    }
    unparsed.erase(0, at);
    return out;
  }
  // What it wrote since the last call.
  std::vector<Frame> frames() {
    const size_t from = wire.size();
    take();
    return {wire.begin() + static_cast<std::ptrdiff_t>(from), wire.end()};
  }
  // The frames of `stream` on the wire, from frame `from` on.
  Events streamFrames(int32_t stream, size_t from = 0) const {
    Events out;
    for (size_t i = from; i < wire.size(); ++i) {
      if (wire[i].head.stream == stream) out.push_back(wire[i].name());
    }
    return out;
  }
  size_t windowUpdates(int32_t stream) const {
    return static_cast<size_t>(std::count_if(wire.begin(), wire.end(), [&](const Frame& f) {
      return f.head.type == FrameType::kWindowUpdate && f.head.stream == stream;
    }));
  }
};

nghttp2_nv nv(const std::string& n, const std::string& v) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(), NGHTTP2_NV_FLAG_NONE};
}

// nghttp2 as the client: an implementation of HTTP/2 that is not ours.
struct Client {
  struct Call {
    // The request's body, served from memory, and its trailers.
    std::string body;
    size_t sent = 0;
    size_t ready = SIZE_MAX;
    Fields trailers;
    // The answer.
    std::vector<Fields> blocks;
    std::string data;
    Events frames;  // as they arrived
    bool closed = false;
    uint32_t close_code = UINT32_MAX;
    size_t unconsumed = 0;  // with manual windows: read, not yet given back
  };
  nghttp2_session* session = nullptr;
  const bool manual_window;
  std::map<int32_t, Call> calls;
  size_t chunk = SIZE_MAX;  // the most body bytes a DATA frame carries
  size_t padding = 0;  // added to each frame, as far as nghttp2 allows
  size_t padded_bytes = 0;  // of DATA frames, padding added so far
  int ping_acks = 0, goaways = 0;
  int32_t goaway_last = -1;
  uint32_t goaway_code = UINT32_MAX;
  std::vector<std::string> faults;  // what nghttp2 found wrong with the server

  // `settings`: its SETTINGS (nghttp2's defaults otherwise). `manual_window`: its windows
  // are given back after each whole read instead of as each frame arrives (when nghttp2
  // would never see a frame past a window).
  explicit Client(std::vector<nghttp2_settings_entry> settings = {}, bool manual_window = false)
      : manual_window(manual_window) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
      static_cast<Client*>(user)->calls[f->hd.stream_id].blocks.emplace_back();
      return 0;
    });
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl, const uint8_t* v, size_t vl,
               uint8_t, void* user) {
          static_cast<Client*>(user)->calls[f->hd.stream_id].blocks.back().emplace_back(
              std::string(reinterpret_cast<const char*>(n), nl), std::string(reinterpret_cast<const char*>(v), vl));
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
          Call& c = static_cast<Client*>(user)->calls[id];
          c.data.append(reinterpret_cast<const char*>(data), len);
          c.unconsumed += len;
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
      auto& c = *static_cast<Client*>(user);
      const auto type = static_cast<FrameType>(f->hd.type);
      switch (type) {
        case FrameType::kData:
        case FrameType::kHeaders:
          c.calls[f->hd.stream_id].frames.push_back(describe(type, f->hd.flags, 0));
          break;
        case FrameType::kRstStream:
          c.calls[f->hd.stream_id].frames.push_back(describe(type, 0, f->rst_stream.error_code));
          break;
        case FrameType::kPing:
          if (f->hd.flags & NGHTTP2_FLAG_ACK) ++c.ping_acks;
          break;
        case FrameType::kGoaway:
          ++c.goaways;
          c.goaway_last = f->goaway.last_stream_id;
          c.goaway_code = f->goaway.error_code;
          break;
        default:
          break;
      }
      return 0;
    });
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, int error, void* user) {
          static_cast<Client*>(user)->faults.push_back("an invalid frame of type " + std::to_string(f->hd.type) +
                                                       " on stream " + std::to_string(f->hd.stream_id) + ": " +
                                                       nghttp2_strerror(error));
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
      auto& c = *static_cast<Client*>(user);
      // A test's own CANCEL and GOAWAY NO_ERROR are no fault of the server's.
      if (f->hd.type == NGHTTP2_RST_STREAM && f->rst_stream.error_code != NGHTTP2_CANCEL) {
        c.faults.push_back("sent RST_STREAM " + std::to_string(f->rst_stream.error_code) + " on stream " +
                           std::to_string(f->hd.stream_id));
      }
      if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR) {
        c.faults.push_back("sent GOAWAY " + std::to_string(f->goaway.error_code));
      }
      return 0;
    });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cb, [](nghttp2_session*, int32_t id, uint32_t code, void* user) {
          Call& call = static_cast<Client*>(user)->calls[id];
          EXPECT_FALSE(call.closed) << "stream " << id << " closed twice";
          call.closed = true;
          call.close_code = code;
          return 0;
        });
    nghttp2_session_callbacks_set_select_padding_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, size_t max_payload, void* user) -> ssize_t {
          auto& c = *static_cast<Client*>(user);
          const size_t length = std::min(max_payload, f->hd.length + c.padding);
          if (f->hd.type == NGHTTP2_DATA) c.padded_bytes += length - f->hd.length;
          return static_cast<ssize_t>(length);
        });
    nghttp2_option* option = nullptr;
    nghttp2_option_new(&option);
    nghttp2_option_set_no_auto_window_update(option, manual_window ? 1 : 0);
    nghttp2_session_client_new2(&session, cb, this, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  }
  ~Client() { nghttp2_session_del(session); }

  // A request, with a body (and trailers after it) or none: END_STREAM on its HEADERS.
  int32_t request(const Fields& head, std::optional<std::string> body, Fields trailers = {}) {
    std::vector<nghttp2_nv> nva;
    for (const auto& [n, v] : head) nva.push_back(nv(n, v));
    nghttp2_data_provider provider;
    provider.source.ptr = this;
    provider.read_callback = [](nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                                nghttp2_data_source* source, void*) -> ssize_t {
      auto& client = *static_cast<Client*>(source->ptr);
      Call& c = client.calls[id];
      const size_t have = std::min(c.ready, c.body.size());
      const size_t n = std::min({length, have - c.sent, client.chunk});
      if (n == 0 && c.sent < c.body.size()) return NGHTTP2_ERR_DEFERRED;
      std::memcpy(buf, c.body.data() + c.sent, n);
      c.sent += n;
      if (c.sent == c.body.size()) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!c.trailers.empty()) {
          *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
          std::vector<nghttp2_nv> t;
          for (const auto& [k, v] : c.trailers) t.push_back(nv(k, v));
          nghttp2_submit_trailer(session, id, t.data(), t.size());
        }
      }
      return static_cast<ssize_t>(n);
    };
    const int32_t id = nghttp2_submit_request(session, nullptr, nva.data(), nva.size(), body ? &provider : nullptr,
                                              nullptr);
    EXPECT_GT(id, 0);
    Call& c = calls[id];
    c.body = body.value_or("");
    c.trailers = std::move(trailers);
    return id;
  }
  // More of a request's body is there.
  void resume(int32_t id, size_t ready) {
    calls[id].ready = ready;
    nghttp2_session_resume_data(session, id);
  }

  bool feed(const std::string& bytes) {
    const bool read = nghttp2_session_mem_recv(session, reinterpret_cast<const uint8_t*>(bytes.data()),
                                               bytes.size()) == static_cast<ssize_t>(bytes.size());
    if (manual_window) {
      for (auto& [id, c] : calls) {
        if (c.unconsumed > 0) nghttp2_session_consume(session, id, std::exchange(c.unconsumed, 0));
      }
    }
    return read && faults.empty();
  }
  std::string take() {
    std::string out;
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session, &data);
      if (n <= 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    return out;
  }
};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "; ";
  return out;
}

// Moves bytes both ways until neither side has more.
void pump(Served& server, Client& client) {
  for (int round = 0; round < 100000; ++round) {
    const std::string to_server = client.take();
    ASSERT_EQ(client.faults, std::vector<std::string>{});  // what nghttp2 found wrong, as it answered it
    if (!to_server.empty()) {
      ASSERT_TRUE(server.feed(to_server)) << server.conn.error();
    }
    const std::string to_client = server.take();
    if (!to_client.empty()) {
      ASSERT_TRUE(client.feed(to_client)) << joined(client.faults);
    }
    if (to_server.empty() && to_client.empty()) return;
  }
  FAIL() << "the exchange never settled";
}

std::string pattern(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>('a' + (k * 7 + static_cast<size_t>(seed)) % 26);
  return s;
}

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

// ---- a client that breaks the rules, frame by frame ----

struct Script {
  std::string bytes;
  HpackEncoder encoder;
  Script& preface() {
    bytes.append(kClientPreface, kClientPrefaceBytes);
    return settings();
  }
  Script& settings() { return frame(FrameType::kSettings, 0, 0, ""); }
  Script& frame(FrameType type, uint8_t f, int32_t stream, std::string_view payload) {
    appendFrameHeader(bytes, payload.size(), type, f, stream);
    bytes.append(payload);
    return *this;
  }
  Script& headers(int32_t stream, const Fields& fields, uint8_t f = flags::kEndHeaders | flags::kEndStream) {
    return frame(FrameType::kHeaders, f, stream, block(fields));
  }
  Script& data(int32_t stream, std::string_view payload, uint8_t f = 0) {
    return frame(FrameType::kData, f, stream, payload);
  }
  Script& rst(int32_t stream, uint32_t code) {
    std::string p;
    appendU32(p, code);
    return frame(FrameType::kRstStream, 0, stream, p);
  }
  std::string block(const Fields& fields, HpackEncoder::Indexing how = HpackEncoder::Indexing::kIndex) {
    std::string b;
    encoder.beginBlock(b);
    for (const auto& [n, v] : fields) encoder.encode(n, v, how, b);
    return b;
  }
  std::string take() { return std::exchange(bytes, {}); }
};

// The code of the RST_STREAM among `frames` for `stream`; UINT32_MAX when none.
uint32_t rstCode(const std::vector<Frame>& frames, int32_t stream) {
  for (const Frame& f : frames) {
    if (f.head.type == FrameType::kRstStream && f.head.stream == stream) return f.word(0);
  }
  return UINT32_MAX;
}

bool hasGoaway(const std::vector<Frame>& frames) {
  return std::any_of(frames.begin(), frames.end(), [](const Frame& f) { return f.head.type == FrameType::kGoaway; });
}

// A stream served whole: the owner saw its request (`fields`, ended) and answers it
// Trailers-Only, which goes out and closes it.
void expectServed(Served& s, int32_t stream, const char* what, const Fields& fields = kRequestHead) {
  ASSERT_FALSE(s.owner.requests[stream].events.empty()) << what;
  EXPECT_EQ(s.owner.requests[stream].events.back(), "end") << what;
  EXPECT_EQ(s.owner.requests[stream].fields, fields) << what;
  s.owner.answerOnly(stream, withField(kResponseHead, "grpc-status", "0"));
  const std::vector<Frame> frames = s.frames();
  EXPECT_TRUE(std::any_of(frames.begin(), frames.end(), [&](const Frame& f) {
    return f.head.type == FrameType::kHeaders && f.head.stream == stream && (f.head.flags & flags::kEndStream);
  })) << what;
  EXPECT_TRUE(s.owner.requests[stream].closed) << what;
  EXPECT_EQ(s.owner.requests[stream].code, kNoError) << what;
  EXPECT_FALSE(s.conn.terminated()) << what;
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
