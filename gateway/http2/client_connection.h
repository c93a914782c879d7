#pragma once

// The client side of one HTTP/2 connection (RFC 9113), without I/O: the owner feeds it
// what the server sent (receive()) and lets it frame what may go (send()); everything it
// has to say goes through its Handler, on the owner's thread, from inside those calls.
//
// What it does, for the gateway's gRPC calls toward upstreams:
//   - the preface, SETTINGS (no push; the largest windows HTTP/2 allows, given back as the
//     bytes arrive: the owner reads every byte as it comes) and their acknowledgements;
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

#include "gateway/http2/frame.h"
#include "gateway/http2/hpack.h"

namespace infergate::gateway::http2 {

class ClientConnection {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // -- output --
    // Whether the output takes more now; false pauses framing until the next send().
    virtual bool canWrite() = 0;
    // Control frames and header blocks (the handler copies them).
    virtual void writeBytes(std::string_view bytes) = 0;
    // The stream's HEADERS are next in writeBytes().
    virtual void beforeHeaders(int32_t stream) = 0;
    // Of the stream's body, how many bytes may go now, at most `max` (> 0); `last` when
    // they end it. 0 and not `last`: none yet (resumeData() when some came).
    virtual size_t bodyReady(int32_t stream, size_t max, bool& last) = 0;
    // A DATA frame: its 9-byte header, then the stream's next `length` body bytes, which
    // the last bodyReady() promised.
    virtual void writeData(int32_t stream, const uint8_t* head, size_t length) = 0;
    // -- input --
    // A field of a header block. The block counts once onHeadersEnd() comes: a block that
    // breaks half-way ends in onStreamClose() instead.
    virtual void onField(int32_t stream, std::string_view name, std::string_view value) = 0;
    virtual void onHeadersEnd(int32_t stream, bool end_stream) = 0;
    virtual void onData(int32_t stream, const uint8_t* data, size_t size) = 0;
    // `reset_by_peer`: the server's RST_STREAM (or its GOAWAY refusing the stream).
    virtual void onStreamClose(int32_t stream, uint32_t error_code, bool reset_by_peer) = 0;
    virtual void onSettings() = 0;  // the server's SETTINGS (its first: it speaks HTTP/2)
    virtual void onPingAck() = 0;
    virtual void onGoaway(uint32_t error_code) = 0;
  };

  struct Options {
    uint32_t max_header_list_bytes = 1 << 20;  // announced; a larger answer block resets its stream
  };

  struct Field {
    std::string_view name;
    std::string_view value;
    HpackEncoder::Indexing indexing = HpackEncoder::Indexing::kIndex;
  };

  ClientConnection(Handler& handler, Options options);
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // What the server sent, in any pieces. False: a connection error (see the top).
  bool receive(const uint8_t* data, size_t size);
  // Frames what may go now, through the handler.
  void send();
  // Whether send() has something it may frame now.
  bool wantsWrite() const;

  // A request whose body follows (bodyReady), or none (`has_body` false). The stream id, or
  // 0 when this connection opens no more streams (ids used up, GOAWAY, a connection
  // error): the caller goes elsewhere.
  int32_t submitRequest(std::span<const Field> fields, bool has_body);
  // More of the stream's body is ready (after bodyReady gave 0).
  void resumeData(int32_t stream);
  // Resets the stream (RST_STREAM `code`); it closes, by this end, once the frame is out.
  void resetStream(int32_t stream, uint32_t code);
  void ping();

  // Whether the server sent GOAWAY, or the connection failed.
  bool goingAway() const { return goaway_received_ || terminated_; }
  bool terminated() const { return terminated_; }
  const std::string& error() const { return error_; }
  size_t openStreams() const { return streams_.size(); }

 private:
  struct WaitingField {
    std::string name, value;
    HpackEncoder::Indexing indexing;
  };
  struct Stream {
    int32_t id = 0;
    bool opened = false;  // its HEADERS framed
    bool has_body = false;
    bool local_ended = false;  // END_STREAM framed
    bool remote_ended = false;
    bool final_headers = false;  // a final (non-1xx) header block came
    bool deferred = false;  // waiting for resumeData()
    bool queued = false;  // in send_order_
    bool resetting = false;  // RST_STREAM queued: nothing more of it is read or sent
    int64_t send_window = 0;
    int64_t received = 0;  // since the last WINDOW_UPDATE
    std::vector<WaitingField> waiting;  // its fields, copied, until it opens
  };
  // Queued output is one run of bytes (pending_) and marks in it: where a stream's HEADERS
  // start (beforeHeaders() is called there), and where an RST_STREAM of ours ends (the
  // stream closes there).
  struct Mark {
    size_t at = 0;
    int32_t headers_of = 0;
    int32_t closes = 0;
    uint32_t close_code = 0;
  };
  enum class In { kHead, kPayload, kDataPadLength, kData, kDataPadding };

  bool connectionError(uint32_t code, std::string why);
  // The connection error for `frame` naming a stream this end never opened.
  bool notOpen(std::string_view frame);
  // Whether `id` names no stream this end opened (even: the server's; past the last).
  bool neverOpened(int32_t id) const { return (id & 1) == 0 || id > last_opened_; }
  bool tooManyAcks();
  // Queues RST_STREAM `code`; the stream closes with `close_code` once it is out.
  void reset(Stream& s, uint32_t code, uint32_t close_code);
  void reset(Stream& s, uint32_t code) { reset(s, code, code); }
  void dataDone();  // a DATA frame's data is read: its padding, or the next frame
  bool onFrame();  // a whole non-DATA frame is in payload_
  bool onDataStart();
  bool onHeadersFrame();
  bool onBlockDone();
  bool onSettingsFrame();
  bool onGoawayFrame();
  bool onWindowUpdateFrame();
  bool onRstFrame();
  void open(Stream& s, std::span<const Field> fields);
  void encodeHeaders(Stream& s, std::span<const Field> fields);
  void closeStream(int32_t id, uint32_t code, bool by_peer);
  void remoteEnded(Stream& s);
  void queueWindowUpdate(int32_t stream, uint32_t increment);
  void queueFrame(FrameType type, uint8_t flags, int32_t stream, std::string_view payload);
  bool flushControl();  // false: the output is full
  void schedule(Stream& s);
  Stream* find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }

  Handler& handler_;
  Options options_;
  HpackEncoder encoder_;
  HpackDecoder decoder_;
  std::string pending_;
  std::vector<Mark> marks_;
  std::string flushing_;  // pending_ while it is handed over (swapped, keeping both buffers)
  std::vector<Mark> flushing_marks_;

  // The server's settings.
  uint32_t peer_max_frame_ = kDefaultMaxFrameBytes;
  // Until the server's SETTINGS say otherwise, as many streams as RFC 9113 5.1.2 advises
  // a server to allow at least.
  uint32_t peer_max_streams_ = 100;
  int64_t peer_initial_window_ = kDefaultWindow;
  int64_t send_window_ = kDefaultWindow;  // the connection's, toward the server
  int64_t received_ = 0;  // the connection's, since the last WINDOW_UPDATE

  std::unordered_map<int32_t, Stream> streams_;
  std::deque<int32_t> waiting_open_;  // ids given, HEADERS not framed (the stream limit)
  std::deque<int32_t> send_order_;  // streams with body to frame
  size_t opened_count_ = 0;  // streams_ opened and not closed
  int32_t next_id_ = 1;
  int32_t last_opened_ = 0;

  // Input.
  In in_ = In::kHead;
  uint8_t head_[kFrameHeaderBytes] = {};
  size_t head_have_ = 0;
  FrameHeader frame_;
  std::string payload_;  // a non-DATA frame's
  size_t left_ = 0;  // of the current frame's payload (or its data, or its padding)
  size_t pad_ = 0;
  int32_t continuation_of_ = 0;  // a header block that needs CONTINUATION
  bool block_end_stream_ = false;
  std::string block_;  // the header block being gathered
  bool settings_seen_ = false;
  size_t unsent_acks_ = 0;  // PING and SETTINGS ACKs queued since the output last took them
  bool goaway_received_ = false;
  bool terminated_ = false;
  std::string error_;
};

}  // namespace infergate::gateway::http2
