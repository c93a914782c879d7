#pragma once

// NativeGrpcServer's insides (grpc_native_server.h), shared by its two files:
//   grpc_native_server.cc   workers, connections, their HTTP/2 (http2::ServerConnection)
//                           and its handler, the output queue, shutdown
//   grpc_native_calls.cc    a stream's calls: request messages in, ModelInfer served
//                           here, every other method relayed to grpc++, replies out
// Everything here runs on the connection's loop unless said otherwise.

#include <event2/event.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/compression.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/protobuf_peek.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/frontends/grpc_model_infer.h"
#include "gateway/frontends/grpc_native_server.h"
#include "gateway/http/body_arrival.h"
#include "gateway/http/event_loop.h"
#include "gateway/http2/server_connection.h"
#include "gateway/upstream/socket_output.h"
#include "tls/peer_identity.h"
#include "tls/server_session.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace native_server {

inline constexpr size_t kReadBufferBytes = 256 * 1024;
inline constexpr size_t kMaxQueuedBytes = 4 * 1024 * 1024;  // unwritten bytes before pausing
// Flow control. The connection's window is HTTP/2's largest, given back as the bytes
// arrive. A stream starts with kStreamWindow, given back as the bytes arrive too, except:
// a ModelInfer message larger than that (reassembled whole anyway, up to
// max_receive_message_bytes) has its stream's window raised to kRaisedStreamWindow when
// its length prefix arrives; and a relayed stream (grpc++) whose relay holds
// kRelayBacklogBytes that grpc++ has not taken keeps its bytes back until it has, so the
// client stops sending on that stream alone.
inline constexpr int32_t kWindow = INT32_MAX;
inline constexpr int32_t kStreamWindow = 8 * 1024 * 1024;
// A large ModelInfer message's stream window. Not kWindow: its stream may have opened
// before the client acknowledged kStreamWindow as the initial window, and the change of
// initial window then added to a window already raised would pass HTTP/2's largest (a
// FLOW_CONTROL_ERROR on either side).
inline constexpr int32_t kRaisedStreamWindow = kWindow - kStreamWindow;
inline constexpr size_t kRelayBacklogBytes = 8 * 1024 * 1024;
// A relayed stream's replies not yet framed for the client, past which the relay stops
// reading grpc++'s next one until the client takes them.
inline constexpr size_t kRelayReplyBacklogBytes = 4 * 1024 * 1024;
inline constexpr uint32_t kMaxConcurrentStreams = 4096;
inline constexpr size_t kMaxReservedMessageBytes = 64 * 1024 * 1024;  // allocated before it arrives
// A ModelInfer message of at least this many bytes is handed to its call once its head is
// in (grpc_native_calls.cc, "messages handed over early"), if the head lies within
// kMaxEarlyHeadBytes; its call is then told of every kArrivalStepBytes more.
inline constexpr size_t kEarlyMessageBytes = 1024 * 1024;
inline constexpr size_t kMaxEarlyHeadBytes = 1024 * 1024;
inline constexpr size_t kArrivalStepBytes = 256 * 1024;
// What announced messages reserved in one block (past kMaxReservedMessageBytes) may map
// ahead of their bytes, across the process; past it, messages are reserved in chunks.
inline constexpr uint64_t kMaxReservedAheadBytes = uint64_t{4} << 30;

struct Connection;
struct Stream;
class NativeModelInfer;
class RelayCall;

// The client certificate a TLS connection's handshake verified: who it names (what native
// calls are admitted by), and the certificate itself as PEM (what a relayed call carries
// to grpc++ in kNativePeerCertificateKey).
struct PeerCertificate {
  tls::PeerIdentity identity;
  std::string pem;
};

// A large ModelInfer message's head while it is looked for, then what it routed on
// (grpc_native_calls.cc, "messages handed over early").
struct EarlyHead {
  size_t scanned = 0;          // where the walk for the head resumes (whole fields before it)
  codecs::OwnedModelRef ref;   // what the head peeked to: the whole message must peek to it too
  std::vector<std::pair<std::string, std::string>> metadata;  // again, for a call that starts over
};

struct Stream {
  Connection* connection = nullptr;
  int32_t id = 0;

  // The request's header block, then its metadata.
  std::string method, path, content_type, encoding_name;
  codecs::ContentEncoding encoding = codecs::ContentEncoding::kIdentity;  // grpc-encoding, read by startCall()
  std::optional<std::chrono::nanoseconds> timeout;
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();  // startCall()
  std::vector<std::pair<std::string, std::string>> metadata;  // lowercase keys, -bin decoded
  size_t metadata_bytes = 0;
  bool metadata_too_large = false;
  bool bad_timeout = false;

  // Request messages: the one being reassembled.
  uint8_t head[5] = {};
  size_t head_have = 0;
  // Reassembled in chunks of at most kMaxReservedMessageBytes, each taken (from
  // codecs::BufferPool) as the bytes arrive. A larger message goes into one block when the
  // pool has a free one of its class (memory already held, so the announcement costs
  // nothing); ModelInfer's uncompressed message always does, a fresh mapping whose pages
  // are touched only as its bytes land (grpc_native_calls.cc, receiveData).
  codecs::BufferChain parts;
  codecs::MutableBuffer chunk;
  size_t chunk_have = 0;
  size_t message_size = 0, message_have = 0;
  bool compressed = false;
  int messages = 0;
  std::optional<codecs::MovableByteBuffer> unary_request;  // ModelInfer: its one message, until END_STREAM
  // ModelInfer's message handed to its call before it is whole: `early_head` while this
  // message (one chunk of its whole size) may go that way (made for such a message only);
  // once handed over, `request_arrival` too, told of its bytes until the last.
  std::unique_ptr<EarlyHead> early_head;
  std::shared_ptr<http::BodyArrival> request_arrival;
  size_t reserved_ahead = 0;  // its share of the one-block reservations (grpc_native_calls.cc)
  bool request_ended = false;
  size_t held = 0;  // received bytes whose stream window is kept back (the relay's backlog)

  // The call serving it (one of them, or none once answered).
  NativeModelInfer* infer = nullptr;  // holds the call's engine reference until the stream ends
  std::shared_ptr<RelayCall> relay;
  event* deadline_timer = nullptr;

  // The reply.
  bool headers_sent = false;  // the response HEADERS were submitted
  bool finished = false;      // the final status is set: no more messages
  std::vector<std::pair<std::string, std::string>> initial_metadata;
  std::vector<std::pair<std::string, std::string>> trailers;  // grpc-status first
  std::deque<upstream::GrpcOutMessage> out;
  size_t unpromised = 0;  // bytes of `out` not yet promised to HTTP/2 by bodyReady
  // A reply message whose bytes are still arriving (queueArrivingMessage): framed up to
  // the first byte not yet in; its arrival's news resumes the stream.
  std::shared_ptr<http::BodyArrival> arrival;
  uint64_t arrival_watch = 0;
  // The reply message is growing (queueGrowingMessage): its Buffers still come.
  bool growing = false;
  // The send timeout for a stream whose client reads its socket but gives the stream no
  // flow-control window: bytes promised so far, and at the connection's last check (with
  // whether bytes waited then). No progress over a whole check with bytes waiting at both
  // ends of it resets the stream.
  uint64_t promised = 0;
  uint64_t promised_at_check = 0;
  bool waited_at_check = false;

  ~Stream();
};

// A connection is its HTTP/2 state's handler: http2::ServerConnection calls back into it
// (grpc_native_server.cc) from inside receive() and send().
struct Connection final : http2::ServerConnection::Handler {
  NativeGrpcServer::Worker* worker = nullptr;
  http::EventLoop* loop = nullptr;
  int fd = -1;
  std::string peer;  // grpc's form: "ipv4:127.0.0.1:5000"
  std::string client;  // its entry in the server's ConnectionCaps ("": none)
  // TLS: the session every read and write goes through (null: plaintext), and the client
  // certificate it verified, read once the handshake is done (null: none).
  std::unique_ptr<tls::ServerSession> tls;
  std::shared_ptr<const PeerCertificate> peer_certificate;
  bool peer_certificate_read = false;
  bool read_wants_write = false;  // a TLS read waits for the socket to take a write
  event* readable = nullptr;
  event* writable = nullptr;
  event* timer = nullptr;  // the handshake's deadline, then the idle and send timeouts
  std::chrono::steady_clock::time_point last_active;  // its last call's end
  // Since when bytes for the client wait that it has taken none of (the send timeout);
  // unset while nothing waits or the socket took some at its last write.
  std::optional<std::chrono::steady_clock::time_point> output_stalled_since;
  // When the streams were last checked for replies stalled on flow control (every send
  // timeout, from the handshake's end).
  std::chrono::steady_clock::time_point streams_checked;
  std::unique_ptr<http2::ServerConnection> h2;
  bool spoke_http2 = false;   // the client's SETTINGS arrived
  bool in_callback = false;   // inside h2->receive(): no send from here
  bool going_away = false;    // GOAWAY sent: closes once its streams are done
  bool terminated = false;    // ... for a protocol error: nothing more is read
  bool paused = false;        // the output said it was full
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams;
  upstream::SocketOutput out;

  // http2::ServerConnection::Handler
  bool canWrite() override;
  void writeBytes(std::string_view bytes) override;
  size_t bodyReady(int32_t stream, size_t max, bool& last) override;
  void writeData(int32_t stream, const uint8_t* head, size_t length) override;
  void trailers(int32_t stream, std::vector<http2::Connection::Field>& fields) override;
  void onRequestStart(int32_t stream) override;
  void onField(int32_t stream, std::string_view name, std::string_view value) override;
  void onHeadersEnd(int32_t stream, bool too_large) override;
  void onData(int32_t stream, const uint8_t* data, size_t size) override;
  void onRequestEnd(int32_t stream) override;
  void onStreamClose(int32_t stream, uint32_t error_code, bool reset_by_peer) override;
  void onSettings() override;
  void onPingAck() override {}
  void onGoaway(uint32_t) override {}  // the client leaves: its calls are still answered
};

// grpc_native_server.cc
// Lets HTTP/2 frame and writes; closes the connection when it is done or broken. Not from
// inside h2->receive() (c.in_callback): the read's end pumps then.
void pump(Connection& c);
// A message of the stream's reply, queued behind the others (referenced, not copied);
// submitReply() hands it on.
void queueMessage(Stream& s, codecs::MovableByteBuffer message);
// The stream's one reply message, sent while the bytes it references arrive (`arrival`
// says how far: a ModelInfer answer relayed from an HTTP upstream, grpc_answer_relay.h).
// Its HEADERS go at once, its DATA as the bytes come. A status that comes before the
// message is whole (replyStatus) drops the rest: the client gets that status after a
// message cut short, never a whole answer.
void queueArrivingMessage(Stream& s, codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival);
// The stream's one reply message, `length` bytes whose Buffers follow in order
// (growMessage): its HEADERS go at once, each Buffer's bytes as the client's window lets
// them, and each Buffer is let go of once queued to the socket (a message relayed in
// blocks: grpc_answer_relay.h). A status before all `length` bytes came cuts it short, as
// for queueArrivingMessage.
void queueGrowingMessage(Stream& s, size_t length);
void growMessage(Stream& s, codecs::Buffer piece);
// The stream's reply changed (new message, final status): submits what HTTP/2 needs.
void submitReply(Stream& s);
// Answers the stream with `status` alone, unless it was answered (Trailers-Only, or the
// trailers after its messages). Outside h2->receive() this pumps, which may end the
// stream and its connection: nothing may touch `s` after either of these two.
void replyStatus(Stream& s, const ::grpc::Status& status,
                 std::vector<std::pair<std::string, std::string>> trailing = {});
NativeGrpcServer& serverOf(const Connection& c);
// Gives the stream's held bytes back to its window (the relay's backlog went under the
// limit) and writes the WINDOW_UPDATE. Outside h2->receive().
void releaseHeld(Stream& s);
// The client certificate of `c`'s TLS handshake; null for plaintext, before the handshake is
// done, or when the client sent none.
const std::shared_ptr<const PeerCertificate>& peerCertificateOf(Connection& c);
inline const Shared& sharedOf(const Connection& c) { return *serverOf(c).shared(); }

// grpc_native_calls.cc
// The header block is complete: starts the call (or refuses it).
void startCall(Stream& s);
// A DATA chunk of the request.
void receiveData(Stream& s, const uint8_t* data, size_t size);
// The client ended its side.
void endRequest(Stream& s);
// The stream is closing (answered, reset, or the connection went): the call lets go of it.
void detachCall(Stream& s, bool cancelled);
// The message's one-block reservation is over (its bytes are in, or the stream is gone).
void releaseAhead(Stream& s);
// Whether the stream's relay holds kRelayBacklogBytes or more that grpc++ has not taken.
bool relayBacklogged(const Stream& s);
// Of the stream's reply, `unpromised` fell: a relay that stopped reading grpc++'s replies
// reads on once it is under kRelayReplyBacklogBytes.
void replyDrained(Stream& s);
// The deadline passed.
void expireCall(Stream& s);


}  // namespace native_server
}  // namespace infergate::gateway::frontends::grpc_detail
