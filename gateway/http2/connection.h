#pragma once

// What both ends of an HTTP/2 connection (RFC 9113) do alike, without I/O: the frame
// reader, the control output, SETTINGS, PING, WINDOW_UPDATE, the connection's windows and
// the framing of bodies within the peer's. ClientConnection (client_connection.h) and
// ServerConnection (server_connection.h) add their role: which streams exist and how they
// open, header blocks, closing. Their owners implement the role's Handler, which extends
// Connection::Handler below.
//
// Output: control frames and header blocks are queued as one run of bytes with marks in it
// (where a HEADERS starts, where a stream closes once its last frame is out), written
// through Handler::writeBytes; bodies go as DATA frames whose bytes the owner writes itself
// (Handler::writeData), never copied here.
//
// Input: receive() takes the peer's bytes in any pieces; DATA is handed on as it arrives,
// other frames are gathered whole (at most SETTINGS_MAX_FRAME_SIZE's initial 16,384
// bytes, the limit this end announces), header blocks with their CONTINUATIONs.
//
// Threads: one thread at a time (the owner's loop).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gateway/http2/frame.h"
#include "gateway/http2/hpack.h"

namespace infergate::gateway::http2 {

class Connection {
 public:
  // What every owner does. Calls come from inside receive(), send() and the role's
  // submit calls, on the owner's thread.
  class Handler {
   public:
    virtual ~Handler() = default;
    // -- output --
    // Whether the output takes more now; false pauses framing until the next send().
    virtual bool canWrite() = 0;
    // Control frames and header blocks (the handler copies them).
    virtual void writeBytes(std::string_view bytes) = 0;
    // Of the stream's body, how many bytes may go now, at most `max`; `last` when they end
    // it. 0 and not `last`: none yet (resumeData() when some came). `max` is 0 only for a
    // server's stream without window, asked whether its body ended (its trailers need none).
    virtual size_t bodyReady(int32_t stream, size_t max, bool& last) = 0;
    // A DATA frame: its 9-byte header, then the stream's next `length` body bytes, which
    // the last bodyReady() promised.
    virtual void writeData(int32_t stream, const uint8_t* head, size_t length) = 0;
    // -- input --
    virtual void onData(int32_t stream, const uint8_t* data, size_t size) = 0;
    // The last a stream hears. `reset_by_peer`: the peer's RST_STREAM (or, toward a
    // client, its GOAWAY refusing the stream).
    virtual void onStreamClose(int32_t stream, uint32_t error_code, bool reset_by_peer) = 0;
    virtual void onSettings() = 0;  // the peer's first SETTINGS: it speaks HTTP/2
    virtual void onPingAck() = 0;
    virtual void onGoaway(uint32_t error_code) = 0;
  };

  struct Field {
    std::string_view name;
    std::string_view value;
    HpackEncoder::Indexing indexing = HpackEncoder::Indexing::kIndex;
  };

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // What the peer sent, in any pieces. False: a connection error (error() says which; a
  // GOAWAY naming it is queued, and the connection is done).
  bool receive(const uint8_t* data, size_t size);
  // Frames what may go now, through the handler.
  void send();
  // Whether send() has something it may frame now.
  bool wantsWrite();

  // More of the stream's body is ready (after bodyReady gave 0), or, a server's stream
  // waiting for window, its body ended.
  void resumeData(int32_t stream);
  // Resets the stream (RST_STREAM `code`); it closes, by this end, once the frame is out.
  void resetStream(int32_t stream, uint32_t code);
  // Whether the stream may frame no body now for want of flow-control window: its own
  // window or the connection's is shut. False for a stream unknown or being reset.
  bool windowShut(int32_t stream);
  void ping();

  bool terminated() const { return terminated_; }
  // Whether control frames or header blocks wait to be written.
  bool controlPending() const { return !pending_.empty() || !marks_.empty(); }
  const std::string& error() const { return error_; }

 protected:
  enum class Role { kClient, kServer };
  // The state both roles keep of a stream; each role's own extends it.
  struct StreamState {
    int32_t id = 0;
    bool local_ended = false;  // END_STREAM framed
    bool remote_ended = false;
    bool deferred = false;  // waiting for resumeData()
    bool queued = false;  // in send_order_
    bool resetting = false;  // RST_STREAM queued: nothing more of it is read or sent
    bool known_to_peer = true;  // a client's stream: once its HEADERS are queued
    bool sendable = false;  // its body may be framed (its HEADERS are queued, a body follows)
    int64_t send_window = 0;
  };

  // Queues this end's start: the client's preface, `settings`, and a WINDOW_UPDATE that
  // opens the connection's receive window to HTTP/2's largest.
  using Setting = std::pair<SettingId, uint32_t>;
  Connection(Handler& handler, Role role, uint32_t max_header_list_bytes, std::span<const Setting> settings);
  virtual ~Connection() = default;

  // -- the role's part --
  virtual StreamState* findStream(int32_t id) = 0;
  virtual void forEachStream(absl::FunctionRef<void(StreamState&)> fn) = 0;
  // Whether `id` names a stream neither end opened yet (a frame for it is a connection
  // error where RFC 9113 5.1 says so).
  virtual bool idle(int32_t id) const = 0;
  // A DATA frame of `length` (padding included) for a stream that exists and is not
  // being reset: its own checks and window. False: the connection ended.
  virtual bool onStreamData(StreamState& s, uint32_t length) = 0;
  // Of that frame, the bytes that are padding (its pad length byte included): never handed
  // on, so never consumed by the owner.
  virtual void onStreamPadding(StreamState&, size_t) {}
  // END_STREAM arrived on a stream that is not being reset.
  virtual void onRemoteEnd(StreamState& s) = 0;
  // A whole header block (block_, its END_STREAM in block_end_stream_) for stream `id`.
  virtual bool onHeaderBlock(int32_t id) = 0;
  // A HEADERS frame's first checks, before its block is gathered.
  virtual bool onHeadersStart(int32_t id) = 0;
  virtual bool onGoawayFrame(int32_t last_stream, uint32_t code) = 0;
  virtual bool onRstFrame(uint32_t code) = 0;
  // The body the stream framed so far ended it (bodyReady's `last`).
  virtual void onBodyDone(StreamState& s) = 0;
  // Erases the stream and tells the handler (its last word).
  virtual void closeStream(int32_t id, uint32_t code, bool by_peer) = 0;
  // The last stream id a GOAWAY of this end names (the client opens, the server takes).
  virtual int32_t lastPeerStream() const = 0;
  // This end reset a stream for the peer's fault. False: the connection ends for it (the
  // server counts these with the client's own resets).
  virtual bool onFaultReset() { return true; }
  // The peer acknowledged this end's first SETTINGS.
  virtual void onSettingsAcked() {}
  // Before the bodies: the client opens streams waiting for a slot. True when it queued any.
  virtual bool beforeBodies() { return false; }
  virtual bool wantsWriteMore() const { return false; }

  // -- shared --
  bool connectionError(uint32_t code, std::string why);
  // The connection error for `frame` naming a stream not open.
  bool notOpen(std::string_view frame);
  // Queues RST_STREAM `code` (none for a stream the peer never saw); the stream closes with
  // `close_code` once it is out.
  void reset(StreamState& s, uint32_t code, uint32_t close_code);
  void reset(StreamState& s, uint32_t code) { reset(s, code, code); }
  // The stream's reset for the peer's fault (a stream error, RFC 9113 5.4.2). False: the
  // connection ended (onFaultReset).
  bool resetForFault(StreamState& s, uint32_t code);
  // A frame the peer made this end queue (an acknowledgement, a refusal). False: past
  // 1,000 while the output takes nothing, the connection ends (a peer that sends without
  // reading its answers).
  bool owePeer();
  // The stream closes with `code` once what is queued now is out (no frame of its own).
  void closeAfterQueued(int32_t id, uint32_t code) { marks_.push_back(Mark{pending_.size(), 0, id, code}); }
  void schedule(StreamState& s);
  // A header block for `id`: HEADERS, then CONTINUATIONs past the peer's frame size. For a
  // client, onHeadersWritten(id) comes when the output reaches it (a server needs no mark:
  // none splits its output).
  void encodeHeaders(int32_t id, std::span<const Field> fields, bool end_stream);
  // Decodes the header block just gathered (block_), handing its fields to `field` within
  // the list limit. False: HPACK failed, and the connection ended (COMPRESSION_ERROR).
  bool decodeBlock(HpackDecoder::FieldFn field, HpackDecoder::Result& result);
  void queueWindowUpdate(int32_t stream, uint32_t increment);
  void queueRst(int32_t stream, uint32_t code);
  void queueFrame(FrameType type, uint8_t flags, int32_t stream, std::string_view payload);
  // Where a stream's HEADERS start (the client tells its handler there).
  virtual void onHeadersWritten(int32_t) {}
  // A regular field of a header block (RFC 9113 8.2). Uppercase letters in its name, and
  // the fields of HTTP/1.1 connections (TE but "trailers"), make the block malformed.
  // Other bytes a field may not hold (a name not a token, a control byte in a value; blanks
  // at a value's ends are let through: grpc-message may end in a space) drop the field
  // alone and the block stands, as nghttp2 does: one bad header must not turn a request,
  // or a gRPC status, into a broken one.
  enum class FieldCheck { kKeep, kDrop, kMalformed };
  static FieldCheck checkRegularField(std::string_view name, std::string_view value);

  Handler& handler_;
  const Role role_;
  const uint32_t max_header_list_bytes_;
  HpackEncoder encoder_;
  HpackDecoder decoder_;

  // The peer's settings.
  uint32_t peer_max_frame_ = kDefaultMaxFrameBytes;
  // Until the peer's SETTINGS say otherwise, as many streams as RFC 9113 5.1.2 advises.
  uint32_t peer_max_streams_ = 100;
  int64_t peer_initial_window_ = kDefaultWindow;
  int64_t send_window_ = kDefaultWindow;  // the connection's, toward the peer

  std::deque<int32_t> send_order_;  // streams with body to frame

  // The header block just gathered.
  std::string block_;
  bool block_end_stream_ = false;
  FrameHeader frame_;  // the frame being read

  bool goaway_received_ = false;
  bool terminated_ = false;
  bool settings_acked_ = false;  // the peer acknowledged this end's first SETTINGS
  std::string error_;

 private:
  // Queued output is one run of bytes (pending_) and marks in it: where a stream's HEADERS
  // start, and where a stream closes (after an RST_STREAM of this end, or its last frame).
  struct Mark {
    size_t at = 0;
    int32_t headers_of = 0;
    int32_t closes = 0;
    uint32_t close_code = 0;
  };
  enum class In { kPreface, kHead, kPayload, kDataPadLength, kData, kDataPadding };

  // SETTINGS_INITIAL_WINDOW_SIZE changed by `delta`: every stream's send window with it.
  bool applyWindowDelta(int64_t delta);
  void dataDone();  // a DATA frame's data is read: its padding, or the next frame
  bool onFrame();  // a whole non-DATA frame is in payload_
  bool onDataStart();
  bool onHeadersFrame();
  bool onBlockDone();
  bool onSettingsFrame();
  bool onWindowUpdateFrame();
  bool flushControl();  // false: the output is full
  void sendFrames();  // send()'s work

  std::string pending_;
  std::vector<Mark> marks_;
  std::string flushing_;  // pending_ while it is handed over (swapped, keeping both buffers)
  std::vector<Mark> flushing_marks_;

  int64_t received_ = 0;  // the connection's, since the last WINDOW_UPDATE

  In in_;
  size_t preface_have_ = 0;  // of the client's preface (a server's input)
  uint8_t head_[kFrameHeaderBytes] = {};
  size_t head_have_ = 0;
  std::string payload_;  // a non-DATA frame's
  size_t left_ = 0;  // of the current frame's payload (or its data, or its padding)
  size_t pad_ = 0;
  int32_t continuation_of_ = 0;  // a header block that needs CONTINUATION
  bool settings_seen_ = false;
  size_t owed_ = 0;  // frames owePeer() queued since the output last took some
  bool sending_ = false;  // inside send()
};

}  // namespace infergate::gateway::http2
