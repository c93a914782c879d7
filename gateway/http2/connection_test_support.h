#pragma once

// What the connection tests (client_connection_test.cc, server_connection_test.cc) share:
// header fields as the tests write them, a body an owner serves from memory, the
// connection-wide events an owner counts, a script of hand-built frames, and what an
// nghttp2 session (the peer each side is checked against) has to send.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nghttp2/nghttp2.h>

#include "gateway/http2/frame.h"
#include "gateway/http2/hpack.h"

namespace infergate::gateway::http2 {

using Fields = std::vector<std::pair<std::string, std::string>>;

// A body served as Connection::Handler's bodyReady and writeData ask for it; `ready` of
// its bytes are there so far.
struct MemoryBody {
  std::string body;
  size_t sent = 0;
  size_t ready = SIZE_MAX;  // bytes of the body available so far

  // bodyReady(): at most `max` of the bytes there and not sent; `last` when they end it.
  size_t readyFor(size_t max, bool& last) const {
    const size_t have = std::min(ready, body.size());
    const size_t n = std::min(max, have - sent);
    last = sent + n == body.size();
    return n;
  }
  // writeData(): the frame header, then the next `length` bytes.
  void writeInto(std::string& out, const uint8_t* head, size_t length) {
    out.append(reinterpret_cast<const char*>(head), kFrameHeaderBytes);
    out.append(body, sent, length);
    sent += length;
  }
};

// What nghttp2's session (the tests' other implementation of HTTP/2) has to send.
inline std::string drained(nghttp2_session* session) {
  std::string out;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session, &data);
    if (n <= 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  return out;
}

// A role's Handler that counts the connection-wide events.
template <typename Handler>
struct CountingHandler : Handler {
  int settings = 0, ping_acks = 0, goaways = 0;
  uint32_t goaway_code = UINT32_MAX;  // the last GOAWAY's; none yet

  void onSettings() override { ++settings; }
  void onPingAck() override { ++ping_acks; }
  void onGoaway(uint32_t code) override {
    ++goaways;
    goaway_code = code;
  }
};

// Frames written by hand: what an implementation of the peer would not send.
struct Script {
  std::string bytes;
  HpackEncoder encoder;

  Script& preface() {  // a client's: the connection preface and an empty SETTINGS
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
  // A header block in this script's own HPACK state.
  std::string block(const Fields& fields, HpackEncoder::Indexing how = HpackEncoder::Indexing::kIndex) {
    std::string b;
    encoder.beginBlock(b);
    for (const auto& [n, v] : fields) encoder.encode(n, v, how, b);
    return b;
  }
  std::string take() { return std::exchange(bytes, {}); }
};

}  // namespace infergate::gateway::http2
