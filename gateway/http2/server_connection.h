#pragma once

// The server side of one HTTP/2 connection (RFC 9113), without I/O: the owner feeds it what
// the client sent (receive()) and lets it frame what may go (send()); everything it has to
// say goes through its Handler, on the owner's thread, from inside those calls. What both
// sides share (frames, SETTINGS, PING, windows, bodies) is Connection's (connection.h).
//
// What it does, for the gateway's gRPC frontend:
//   - the client's preface, then its SETTINGS first; this end's SETTINGS (the stream limit,
//     the streams' initial window) and a connection window of HTTP/2's largest, given back
//     as the bytes arrive;
//   - requests: a new odd stream id past the last opens a stream; its header block is
//     checked against HTTP/2's rules for a request (RFC 9113 8.3.1: :method, :scheme and
//     :path once each, pseudo-fields first, no uppercase or connection-specific names;
//     8.2.1 and 8.3.1's forms for the pseudo-fields' values: a token for :method and
//     :scheme, a :path from '/' or '*', no control byte or space in :path or :authority) and
//     handed over field by field; DATA as it arrives; request trailers end the request
//     (their fields are not handed on);
//   - streams' windows are the owner's to give back (consume(), setStreamWindow()), so a
//     stream whose bytes the owner cannot take yet stops its client alone;
//   - answers: submitResponse() writes the response's header block at once, the body
//     follows as DATA frames taken from the owner without a copy (Handler::bodyReady,
//     writeData), and when the body ends the trailers (Handler::trailers) end the stream;
//   - goAway(): graceful, naming the last stream taken; streams the client opens after it
//     are ignored, those taken go on.
//
// Errors. The client breaking a rule of the connection (RFC 9113 5.4.1) makes receive()
// return false: a GOAWAY naming the error is queued and the connection is done (error()
// says what broke). A stream's own fault (a malformed request block, a window overflow,
// DATA after its END_STREAM) resets that stream (RST_STREAM, onStreamClose with the code).
// A header list past the limit is not a fault: onHeadersEnd says it was too large, for the
// owner to answer. A stream past SETTINGS_MAX_CONCURRENT_STREAMS is refused
// (REFUSED_STREAM) and never reaches the owner. RST_STREAM for a stream never opened is
// ignored (grpc's clients send it for a call cancelled before its HEADERS went; RFC 9113
// makes it a connection error, which would end every call on the connection). A client
// whose streams are reset faster than Options allow, by its RST_STREAM or for its faults
// (a burst, then a rate: "rapid reset", CVE-2023-44487, and "MadeYouReset", CVE-2025-8671:
// each such stream had started a call), is cut off, ENHANCE_YOUR_CALM; so is one that
// makes this end queue more than 1,000 refusals or acknowledgements while it reads none.
// After a connection error nothing but its GOAWAY goes: the submit calls do nothing.
//
// A stream closes once both sides ended it, or when either reset it; an answer that ends
// before the request does resets the request's rest (RST_STREAM NO_ERROR, RFC 9113 8.1)
// and closes as answered (NO_ERROR). onStreamClose is the last a stream hears, and never
// comes from inside the submit calls or resetStream().
//
// Threads: one thread at a time (the owner's loop).

#include <chrono>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/http2/connection.h"

namespace infergate::gateway::http2 {

class ServerConnection final : public Connection {
 public:
  class Handler : public Connection::Handler {
   public:
    // A request's header block begins on a new stream: its fields follow.
    virtual void onRequestStart(int32_t stream) = 0;
    // A field of the request's header block. The block counts once onHeadersEnd() comes:
    // a malformed one ends in onStreamClose() instead.
    virtual void onField(int32_t stream, std::string_view name, std::string_view value) = 0;
    // `too_large`: the list passed Options::max_header_list_bytes, and the fields past the
    // limit were not handed on.
    virtual void onHeadersEnd(int32_t stream, bool too_large) = 0;
    // The client ended its side (END_STREAM, on DATA, on the header block or on trailers).
    virtual void onRequestEnd(int32_t stream) = 0;
    // The answer's body ended (bodyReady's `last`): the trailers that end the stream.
    // `fields` comes empty; what it points into must stay until the call returns.
    virtual void trailers(int32_t stream, std::vector<Field>& fields) = 0;
  };

  struct Options {
    uint32_t max_concurrent_streams = 100;
    // A stream's receive window, announced as SETTINGS_INITIAL_WINDOW_SIZE.
    uint32_t stream_window = kDefaultWindow;
    uint32_t max_header_list_bytes = 1 << 20;  // not announced; see onHeadersEnd
    // Streams the client may reset: a burst, refilled at a rate per second (nghttp2's
    // defaults).
    uint32_t reset_burst = 1000;
    uint32_t resets_per_second = 33;
  };

  ServerConnection(Handler& handler, Options options);

  // The response's header block (:status first), and with `end_stream` the stream's end
  // (Trailers-Only in gRPC's terms); otherwise the body follows through bodyReady.
  void submitResponse(int32_t stream, std::span<const Field> fields, bool end_stream);
  // `bytes` of the stream's DATA that the owner is done with: its window takes them back
  // (a WINDOW_UPDATE once half the window is used up).
  void consume(int32_t stream, size_t bytes);
  // Raises the stream's receive window to `window` (more than it was): the client may send
  // that much more at once.
  void setStreamWindow(int32_t stream, int32_t window);
  // A graceful GOAWAY: no stream after the last one taken; those go on.
  void goAway();

  // Whether the connection has nothing left to do: it failed and its GOAWAY is written, or
  // either end said GOAWAY, no stream is open and nothing waits to be framed.
  bool done();
  bool goingAway() const { return goaway_sent_ || goaway_received_ || terminated_; }
  // The connection failed because the client reset streams faster than Options allow.
  bool resetFlooded() const { return reset_flooded_; }
  size_t openStreams() const { return streams_.size(); }

 private:
  struct Stream : StreamState {
    bool response_started = false;  // submitResponse() came
    int64_t window = 0;  // its receive window's size
    int64_t available = 0;  // what the client may still send
    int64_t consumed = 0;  // taken by the owner, not yet given back
    // The request's content-length, when it gave one, and the DATA payload so far (padding
    // not counted): they must agree at the request's end (RFC 9113 8.1.1).
    std::optional<uint64_t> content_length;
    uint64_t data_bytes = 0;
  };

  Stream* find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }
  StreamState* findStream(int32_t id) override { return find(id); }
  void forEachStream(absl::FunctionRef<void(StreamState&)> fn) override {
    for (auto& [id, s] : streams_) fn(s);
  }
  // Even ids are a server's (it opens none here); odd ones past the last are the client's next.
  bool idle(int32_t id) const override { return (id & 1) == 0 || id > last_stream_; }
  bool onStreamData(StreamState& s, uint32_t length) override;
  void onStreamPadding(StreamState& s, size_t bytes) override;
  void giveBack(Stream& s, size_t bytes);  // consume() of a live stream
  void onRemoteEnd(StreamState& s) override;
  bool onHeadersStart(int32_t id) override;
  bool onHeaderBlock(int32_t id) override;
  bool onGoawayFrame(int32_t last_stream, uint32_t code) override;
  bool onRstFrame(uint32_t code) override;
  void onBodyDone(StreamState& s) override;
  bool onFaultReset() override { return chargeReset(); }
  void onSettingsAcked() override;
  void closeStream(int32_t id, uint32_t code, bool by_peer) override;
  // Never past what goAway() named (RFC 9113 6.8): the streams ignored since are not taken.
  int32_t lastPeerStream() const override { return std::min(last_stream_, goaway_last_); }
  // This end's side is framed: the stream closes once the client's is too, or at once
  // with the rest of the request refused.
  void localEnded(Stream& s);
  // Reads a block nobody takes (the table must follow).
  bool discardBlock();
  bool requestBlock(Stream& s);
  // A stream reset, by the client or for its fault: one of the burst's tokens. False: none
  // left, the connection ended.
  bool chargeReset();

  Handler& owner_;
  Options options_;
  std::unordered_map<int32_t, Stream> streams_;
  int32_t last_stream_ = 0;  // the highest stream id the client opened
  int32_t goaway_last_ = kLargestStreamId;  // streams past it are ignored (after goAway())
  bool goaway_sent_ = false;
  std::vector<Field> trailer_fields_;  // reused for Handler::trailers
  // The client's resets this end still lets pass, and when that was counted.
  double reset_tokens_ = 0;
  std::chrono::steady_clock::time_point reset_counted_;
  bool reset_flooded_ = false;
};

}  // namespace infergate::gateway::http2
