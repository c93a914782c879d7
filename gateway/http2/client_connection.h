#pragma once

// The client side of one HTTP/2 connection (RFC 9113), without I/O: the owner feeds it
// what the server sent (receive()) and lets it frame what may go (send()); everything it
// has to say goes through its Handler, on the owner's thread, from inside those calls.
// What both sides share (frames, SETTINGS, PING, windows, bodies) is Connection's
// (connection.h).
//
// What it does, for the gateway's gRPC calls toward upstreams:
//   - the preface, SETTINGS (no push; the connection's window HTTP/2's largest, each
//     stream's Options::stream_window, given back as the bytes arrive: the owner reads
//     every byte as it comes, or, for a stream whose window its owner holds (ownWindow),
//     as the owner lets go of them) and their acknowledgements;
//   - requests: HEADERS (HPACK, CONTINUATION past the server's frame size) on odd stream
//     ids in order, opened as the server's SETTINGS_MAX_CONCURRENT_STREAMS allows (the
//     others wait, ids already given), then the body as DATA frames within the server's
//     windows and frame size, taken from the owner without a copy (Handler::writeData);
//   - answers: header blocks (a final one, 1xx ones skipped, then trailers) checked against
//     HTTP/2's rules for a response and handed over field by field, DATA as it arrives;
//   - PING (answered; the owner's own PINGs and their ACKs), GOAWAY (streams past its last
//     id are refused, and no new stream opens), RST_STREAM, WINDOW_UPDATE, PRIORITY
//     (ignored), frames of unknown types (ignored).
//
// Errors. The server breaking a rule of the connection (RFC 9113 5.4.1) makes receive()
// return false: a GOAWAY naming the error is queued and the connection is done (error()
// says what broke). A stream's own fault (a malformed header block, a window overflow)
// resets that stream (RST_STREAM, onStreamClose with the code, not by the peer).
//
// A stream closes once both sides ended it, or when either reset it; an answer that ends
// before the request does resets the request's rest (CANCEL) and closes as answered
// (NO_ERROR). onStreamClose is the last a stream hears, and never comes from inside
// submitRequest() or resetStream().
//
// Threads: one thread at a time (the owner's loop).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/http2/connection.h"

namespace infergate::gateway::http2 {

class ClientConnection final : public Connection {
 public:
  class Handler : public Connection::Handler {
   public:
    // The stream's HEADERS are next in writeBytes().
    virtual void beforeHeaders(int32_t stream) = 0;
    // A field of a header block. The block counts once onHeadersEnd() comes: a block that
    // breaks half-way ends in onStreamClose() instead.
    virtual void onField(int32_t stream, std::string_view name, std::string_view value) = 0;
    virtual void onHeadersEnd(int32_t stream, bool end_stream) = 0;
  };

  struct Options {
    uint32_t max_header_list_bytes = 1 << 20;  // announced; a larger answer block resets its stream
    // Each stream's receive window, announced as SETTINGS_INITIAL_WINDOW_SIZE (at most
    // HTTP/2's largest): what the server may send on a stream ahead of its owner.
    int64_t stream_window = kLargestWindow;
  };

  ClientConnection(Handler& handler, Options options);

  // A request whose body follows (bodyReady), or none (`has_body` false). The stream id, or
  // 0 when this connection opens no more streams (ids used up, GOAWAY, a connection
  // error): the caller goes elsewhere.
  int32_t submitRequest(std::span<const Field> fields, bool has_body);

  // The stream's window is its owner's from now on (call it before any of its DATA can
  // arrive, right after submitRequest): its received bytes are given back only as the
  // owner frees them (freeWindow), once half the window is free. An owner that keeps bytes
  // holds the server back by that much; one that frees each byte as it comes (or keeps
  // less than half the window) never stalls it. Padding is freed here.
  void ownWindow(int32_t stream);
  // `bytes` of the stream's DATA, received earlier, are the owner's no more. A stream
  // unknown, reset or not owned: nothing.
  void freeWindow(int32_t stream, size_t bytes);

  // Whether the server sent GOAWAY, or the connection failed.
  bool goingAway() const { return goaway_received_ || terminated_; }
  size_t openStreams() const { return streams_.size(); }

 private:
  struct WaitingField {
    std::string name, value;
    HpackEncoder::Indexing indexing;
  };
  struct Stream : StreamState {
    bool opened = false;  // its HEADERS framed
    bool has_body = false;
    bool final_headers = false;  // a final (non-1xx) header block came
    int64_t received = 0;  // since the last WINDOW_UPDATE
    bool owned_window = false;  // ownWindow: given back only as freed
    int64_t freed = 0;          // of `received`, freed by the owner
    std::vector<WaitingField> waiting;  // its fields, copied, until it opens
  };

  StreamState* findStream(int32_t id) override {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }
  void forEachStream(absl::FunctionRef<void(StreamState&)> fn) override {
    for (auto& [id, s] : streams_) fn(s);
  }
  // Whether `id` names no stream this end opened (even: the server's; past the last).
  bool idle(int32_t id) const override { return (id & 1) == 0 || id > last_opened_; }
  bool onStreamData(StreamState& s, uint32_t length) override;
  void onStreamPadding(StreamState& s, size_t bytes) override;
  void giveBackFreed(Stream& s);
  void onRemoteEnd(StreamState& s) override;
  bool onHeadersStart(int32_t id) override;
  bool onHeaderBlock(int32_t id) override;
  bool onGoawayFrame(int32_t last_stream, uint32_t code) override;
  bool onRstFrame(uint32_t code) override;
  void onBodyDone(StreamState& s) override;
  void closeStream(int32_t id, uint32_t code, bool by_peer) override;
  int32_t lastPeerStream() const override { return 0; }  // the server opens no streams here
  bool beforeBodies() override;
  bool wantsWriteMore() const override {
    return !waiting_open_.empty() && opened_count_ < peer_max_streams_ && !terminated_;
  }
  void onHeadersWritten(int32_t id) override { owner_.beforeHeaders(id); }
  void open(Stream& s, std::span<const Field> fields);

  Handler& owner_;
  const int64_t stream_window_;
  std::unordered_map<int32_t, Stream> streams_;
  std::deque<int32_t> waiting_open_;  // ids given, HEADERS not framed (the stream limit)
  size_t opened_count_ = 0;  // streams_ opened and not closed
  int32_t next_id_ = 1;
  int32_t last_opened_ = 0;
};

}  // namespace infergate::gateway::http2
