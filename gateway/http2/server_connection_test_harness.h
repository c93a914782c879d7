#pragma once

// The harness of server_connection_test.cc: the connection's owner (what it is told, answers
// served from memory), the server with its output read back as frames, nghttp2 as the
// client (an implementation of HTTP/2 that is not ours) and the pump between them, and the
// checks the hand-built cases share.

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gateway/http2/connection_test_support.h"
#include "gateway/http2/server_connection.h"
#include "gtest/gtest.h"

namespace infergate::gateway::http2::testing_h2 {

using Events = std::vector<std::string>;

inline const Fields kRequestHead = {
    {":method", "POST"}, {":scheme", "http"}, {":path", "/inference.GRPCInferenceService/ModelInfer"},
    {":authority", "127.0.0.1:8001"}, {"content-type", "application/grpc"}, {"te", "trailers"},
};
inline const Fields kResponseHead = {{":status", "200"}, {"content-type", "application/grpc"}};

inline Fields withField(Fields fields, std::string name, std::string value) {
  fields.emplace_back(std::move(name), std::move(value));
  return fields;
}

inline std::vector<ServerConnection::Field> fieldsFor(const Fields& fields) {
  std::vector<ServerConnection::Field> out;
  for (const auto& [n, v] : fields) out.push_back({n, v});
  return out;
}

// A frame as a test names it: "HEADERS", "DATA END_STREAM", "RST_STREAM 7".
inline std::string describe(FrameType type, uint8_t f, uint32_t code) {
  static const char* const kNames[] = {"DATA",  "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
                                       "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"};
  const auto t = static_cast<size_t>(type);
  std::string out = t < std::size(kNames) ? kNames[t] : "UNKNOWN";
  if ((type == FrameType::kData || type == FrameType::kHeaders) && (f & flags::kEndStream)) out += " END_STREAM";
  if (type == FrameType::kRstStream || type == FrameType::kGoaway) out += " " + std::to_string(code);
  return out;
}

// The connection's owner: keeps what it is told, serves answers' bodies from memory.
struct Owner : CountingHandler<ServerConnection::Handler> {
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

inline nghttp2_nv nv(const std::string& n, const std::string& v) {
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
  bool hold_windows = false;  // with manual windows: nothing read is given back
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
    if (manual_window && !hold_windows) {
      for (auto& [id, c] : calls) {
        if (c.unconsumed > 0) nghttp2_session_consume(session, id, std::exchange(c.unconsumed, 0));
      }
    }
    return read && faults.empty();
  }
  std::string take() { return drained(session); }
};

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "; ";
  return out;
}

// Moves bytes both ways until neither side has more.
inline void pump(Served& server, Client& client) {
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

inline std::string pattern(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>('a' + (k * 7 + static_cast<size_t>(seed)) % 26);
  return s;
}

// ---- a client that breaks the rules, frame by frame ----

// The code of the RST_STREAM among `frames` for `stream`; UINT32_MAX when none.
inline uint32_t rstCode(const std::vector<Frame>& frames, int32_t stream) {
  for (const Frame& f : frames) {
    if (f.head.type == FrameType::kRstStream && f.head.stream == stream) return f.word(0);
  }
  return UINT32_MAX;
}

inline bool hasGoaway(const std::vector<Frame>& frames) {
  return std::any_of(frames.begin(), frames.end(), [](const Frame& f) { return f.head.type == FrameType::kGoaway; });
}

// A stream served whole: the owner saw its request (`fields`, ended) and answers it
// Trailers-Only, which goes out and closes it.
inline void expectServed(Served& s, int32_t stream, const char* what, const Fields& fields = kRequestHead) {
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

}  // namespace infergate::gateway::http2::testing_h2
