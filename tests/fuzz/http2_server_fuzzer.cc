// Property: the server side of the project's HTTP/2 (gateway/http2/server_connection.h)
// reads any bytes a client sends without crashing, and whatever it reads:
//   - the owner hears of a stream only between its onRequestStart and its one
//     onStreamClose, and nothing of a request after its end (no DATA after onRequestEnd);
//   - the bytes it writes are whole frames of at most the client's frame size, and every
//     header block in them decodes with an HPACK decoder of its own;
//   - a connection error ends the output with a GOAWAY naming it, and nothing is read
//     after it.
// The owner answers each request once its block is whole: a header block, then (when the
// request ends) a body and trailers, or at once Trailers-Only, as the plan says; it gives
// the streams' windows back or holds them, and its output fills up now and then.
//
// Input: a plan byte (the stream window and limit, how the owner answers, how the input is
// split), then what a client sends after HTTP/2's connection preface (the driver sends the
// preface itself). The same shape as grpc_server's inputs, so its corpus seeds this one.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gateway/http2/hpack.h"
#include "gateway/http2/server_connection.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using infergate::gateway::http2::Connection;
using infergate::gateway::http2::FrameHeader;
using infergate::gateway::http2::FrameType;
using infergate::gateway::http2::HpackDecoder;
using infergate::gateway::http2::ServerConnection;
namespace h2 = infergate::gateway::http2;

struct Owner final : ServerConnection::Handler {
  explicit Owner(uint8_t plan) : plan(plan) {}

  struct Call {
    bool headers_done = false;
    bool request_ended = false;
    bool answered = false;
    size_t body_left = 0;  // of the answer
  };
  uint8_t plan;
  ServerConnection* h2 = nullptr;
  std::string out;
  std::map<int32_t, Call> open;
  std::set<int32_t> closed;
  std::string trailer_value = "0";
  int writes = 0;

  bool consumes() const { return (plan & 0x04) == 0; }
  bool trailersOnly() const { return (plan & 0x08) != 0; }

  bool canWrite() override { return (plan & 0x10) == 0 || ++writes % 4 != 0; }
  void writeBytes(std::string_view bytes) override { out.append(bytes); }
  size_t bodyReady(int32_t stream, size_t max, bool& last) override {
    Call& c = open.at(stream);
    const size_t n = std::min(max, c.body_left);
    last = n == c.body_left;
    return n;
  }
  void writeData(int32_t stream, const uint8_t* head, size_t length) override {
    Call& c = open.at(stream);
    FUZZ_CHECK(length <= c.body_left);
    out.append(reinterpret_cast<const char*>(head), h2::kFrameHeaderBytes);
    out.append(length, 'b');
    c.body_left -= length;
  }
  void trailers(int32_t stream, std::vector<Connection::Field>& fields) override {
    FUZZ_CHECK(open.count(stream) == 1 && fields.empty());
    fields.push_back({"grpc-status", trailer_value});
  }
  void onRequestStart(int32_t stream) override {
    FUZZ_CHECK(open.count(stream) == 0 && closed.count(stream) == 0);
    open[stream];
  }
  void onField(int32_t stream, std::string_view name, std::string_view) override {
    FUZZ_CHECK(open.count(stream) == 1 && !open[stream].headers_done);
    FUZZ_CHECK(!name.empty());
  }
  void onHeadersEnd(int32_t stream, bool) override {
    Call& c = open.at(stream);
    FUZZ_CHECK(!c.headers_done);
    c.headers_done = true;
    if (trailersOnly()) answer(stream, true);
  }
  void onData(int32_t stream, const uint8_t*, size_t size) override {
    Call& c = open.at(stream);
    FUZZ_CHECK(c.headers_done && !c.request_ended);
    if (consumes()) h2->consume(stream, size);
  }
  void onRequestEnd(int32_t stream) override {
    Call& c = open.at(stream);
    FUZZ_CHECK(c.headers_done && !c.request_ended);
    c.request_ended = true;
    if (!c.answered) answer(stream, false);
  }
  void onStreamClose(int32_t stream, uint32_t, bool) override {
    FUZZ_CHECK(open.erase(stream) == 1);
    closed.insert(stream);
  }
  void onSettings() override {}
  void onPingAck() override {}
  void onGoaway(uint32_t) override {}

  void answer(int32_t stream, bool end) {
    Call& c = open.at(stream);
    c.answered = true;
    // Small, or past one frame and the client's first window (which grows only when the
    // input sends WINDOW_UPDATE).
    c.body_left = end ? 0 : (plan & 0x20) ? 100 : 70000;
    const Connection::Field head[] = {{":status", "200"}, {"content-type", "application/grpc"}};
    h2->submitResponse(stream, head, end);
  }
};

// The server's output as frames: whole, within the frame size, blocks that decode.
void checkOutput(const std::string& out, size_t max_frame, bool terminated) {
  HpackDecoder decoder;
  std::string block;
  size_t at = 0;
  FrameHeader last{};
  while (at < out.size()) {
    FUZZ_CHECK(out.size() - at >= h2::kFrameHeaderBytes);
    const FrameHeader f = h2::readFrameHeader(reinterpret_cast<const uint8_t*>(out.data() + at));
    at += h2::kFrameHeaderBytes;
    FUZZ_CHECK(f.length <= max_frame);
    FUZZ_CHECK(out.size() - at >= f.length);
    if (f.type == FrameType::kHeaders || f.type == FrameType::kContinuation) {
      block.append(out, at, f.length);
      if (f.flags & h2::flags::kEndHeaders) {
        const auto r = decoder.decode({reinterpret_cast<const uint8_t*>(block.data()), block.size()}, SIZE_MAX,
                                      [](std::string_view, std::string_view) {});
        FUZZ_CHECK(r.status.ok());
        block.clear();
      }
    }
    at += f.length;
    last = f;
  }
  FUZZ_CHECK(block.empty() || !terminated);
  if (terminated) FUZZ_CHECK(last.type == FrameType::kGoaway);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader in(data, size);
  const uint8_t plan = in.byte();
  Owner owner(plan);
  ServerConnection::Options options;
  options.stream_window = (plan & 0x01) ? 65535 : 8 << 20;
  options.max_concurrent_streams = (plan & 0x02) ? 2 : 100;
  options.max_header_list_bytes = (plan & 0x40) ? 200 : 1 << 20;
  ServerConnection connection(owner, options);
  owner.h2 = &connection;
  bool ok = connection.receive(reinterpret_cast<const uint8_t*>(h2::kClientPreface), h2::kClientPrefaceBytes);
  FUZZ_CHECK(ok);
  // The client's bytes in pieces of 1..16 (plan bit 7) or whole.
  const uint8_t* rest = data + (size > 0 ? 1 : 0);
  size_t left = size > 0 ? size - 1 : 0;
  while (ok && left > 0) {
    const size_t n = (plan & 0x80) ? std::min<size_t>(left, 1 + (left * 7) % 16) : left;
    ok = connection.receive(rest, n);
    rest += n;
    left -= n;
    connection.send();
  }
  for (int i = 0; i < 64 && connection.wantsWrite() && !connection.terminated(); ++i) connection.send();
  if (!ok) {
    FUZZ_CHECK(connection.terminated() && !connection.error().empty());
    FUZZ_CHECK(!connection.receive(data, size));  // nothing is read after the error
    for (int i = 0; i < 8 && connection.controlPending(); ++i) connection.send();
    FUZZ_CHECK(!connection.controlPending() && connection.done());
  }
  // The client may raise its frame size; nothing this end writes passes the largest.
  checkOutput(owner.out, h2::kLargestMaxFrameBytes, connection.terminated());
  return 0;
}
