#pragma once

// The project's HTTP/1.1 server connection: one accepted socket on one event loop.
//
//   socket --read--> read buffer --quick reader | http_parser--> HttpRequest --handler--> HttpExchange
//          <-writev-- [status line + headers][body segments...] <--respond()--'
//
// A request of the common shape whose head is whole in one read is read by the quick
// reader (quick_head.h: one pass, strict rules); any other goes to http_parser from its
// first byte, which decides it as before. Both read what both accept the same way.
//
// Over TLS (tls::ServerSession) the same, with the session's read/writev in place of the
// system calls: the handshake runs inside the first reads, plaintext lands where the
// plain socket's bytes would (a body straight into its storage), and small response
// segments are gathered into one record.
//
// Keep-alive; pipelined requests answered in order (a later response that is ready
// first waits for the earlier ones); Content-Length and chunked request bodies (both
// together, or any other Transfer-Encoding, are refused, as request smuggling guards);
// Expect: 100-continue; limits on header bytes, header count, body size and chunk count;
// header, body and idle timeouts, and a send timeout (a client that takes none of the
// answer bytes waiting for it for that long is disconnected; and while 4 MiB of answers
// wait for it, no further request is read). A body with a Content-Length is read straight
// from the socket into its own storage (no intermediate copy), which is kept per
// connection and reused by the next request once no Buffer refers to it. A request the headers gate asks
// for early (HttpRequest::early_dispatch_bytes) goes to the handler while its body is still
// arriving, and its BodyArrival is told every 256 KiB, of the end, or of the failure (the
// client went away, the body timed out: a request the handler answered already gets no
// second answer, and the connection closes after the first).
//
// Threading: everything here runs on the connection's loop. HttpExchange::respond() must
// be called on that loop (post to HttpExchange::loop() from other threads).
// Lifetime: the connection owns itself through the server's connection set; exchanges
// hold only a weak reference, so a response for a closed connection is dropped, and a
// connection that closes with requests in flight calls their cancel handlers.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <http_parser.h>

#include "gateway/http/event_loop.h"
#include "gateway/http/http_message.h"
#include "gateway/telemetry/request_info.h"
#include "tls/server_session.h"

namespace infergate::gateway::http {

struct HttpLimits {
  size_t max_header_bytes = 64 * 1024;  // request line + header lines
  size_t max_header_count = 100;
  uint64_t max_body_bytes = 0x7fffffffULL;
  uint32_t max_chunks = 65536;  // non-empty chunks of a chunked body (Triton's cap)
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds idle_timeout{300'000};
  // Bytes of an answer wait for the client, which takes none of them for this long: the
  // connection is closed (nginx's send_timeout).
  std::chrono::milliseconds send_timeout{60'000};
  size_t max_pipelined = 64;  // requests parsed ahead of their responses
};

class HttpConnection;

class HttpExchange {
 public:
  HttpExchange(std::weak_ptr<HttpConnection> connection, EventLoop& loop)
      : connection_(std::move(connection)), loop_(loop) {}

  const HttpRequest& request() const { return request_; }
  HttpRequest& mutableRequest() { return request_; }
  EventLoop& loop() { return loop_; }

  // Sends the response (after the responses of earlier pipelined requests). Loop thread;
  // the first call wins, later ones are ignored. Dropped if the connection is gone. A
  // request with an id (info().request_id) gets it back as x-request-id.
  void respond(HttpResponse response);
  bool responded() const { return responded_; }
  // Streams the response instead: `head`'s status and headers go out with
  // Transfer-Encoding: chunked (its body is ignored), then each sendChunk() as one chunk,
  // then endStream() ends it. Loop thread; counts as the response for responded().
  // With `length`, the head says Content-Length: length instead and the pieces go out as
  // they are (a relayed answer). Bytes past `length` are dropped; a stream ended short of
  // it closes the connection once its bytes are written (the client learns that the
  // answer was cut from the close, as from any proxy).
  void beginStream(HttpResponse head, std::optional<uint64_t> length = std::nullopt);
  void sendChunk(codecs::Buffer data);
  void endStream();
  bool streaming() const { return streaming_; }

  // True once the client went away before the response was written.
  bool cancelled() const { return cancelled_; }
  // Called on the loop thread if the connection closes before the response is written.
  void setCancelHandler(std::function<void()> handler) { on_cancel_ = std::move(handler); }

  // What the pipeline learns of this request (telemetry/request_info.h); `start` is the
  // time the request was read whole, or handed over early (HttpRequest::arrival). Loop
  // thread.
  telemetry::RequestInfo& info() { return info_; }
  // The connection's TLS session (its verified client certificate), null on plaintext or
  // once the connection closed. Loop thread.
  tls::ServerSession* tlsSession() const;

 private:
  friend class HttpConnection;
  void cancel();

  std::weak_ptr<HttpConnection> connection_;
  EventLoop& loop_;
  HttpRequest request_;
  std::optional<HttpResponse> response_;
  bool responded_ = false;
  bool cancelled_ = false;
  bool done_ = false;  // fully handed to the connection's output
  bool streaming_ = false;
  bool stream_head_written_ = false;
  bool stream_ended_ = false;
  std::optional<uint64_t> stream_length_;  // a sized stream's Content-Length
  uint64_t stream_queued_ = 0;             // its body bytes queued for writing so far
  std::vector<codecs::Buffer> stream_chunks_;
  bool keep_alive_ = true;
  bool head_ = false;
  bool observed_ = false;  // the ResponseObserver was told
  telemetry::RequestInfo info_;
  std::function<void()> on_cancel_;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;
// Told once of every request the handler got: when its response is queued for writing,
// with the status and the body's bytes; a streamed one when it ends, or when the
// connection closes under it, with the body bytes it carried (a relay cut short: those
// before the cut; chunk framing not counted); when the client went away before any
// response, with status 499 and no bytes. `exchange.info()` holds what the pipeline
// recorded. Loop thread; must not block.
using ResponseObserver = std::function<void(HttpExchange& exchange, int status, uint64_t body_bytes)>;
// Looks at a request once its headers are in, before any of its body is read: returns the
// response that refuses it (the connection answers it and closes, the body unread), or
// nothing to let the body come. May leave what it found in request.gate_state for the
// handler, and a place for the body in request.body_place. `tls`: the connection's TLS
// session (null: plaintext). Loop thread.
using HeadersGate =
    std::function<std::optional<HttpResponse>(HttpRequest& request, tls::ServerSession* tls)>;

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // Takes `fd` over (non-blocking, accepted). `on_closed` runs once when it closes.
  // `peer`: the client's address ("127.0.0.1:53122"), for the access log. `tls`: the
  // TLS session on `fd` (null: plaintext).
  HttpConnection(EventLoop& loop, int fd, const HttpLimits& limits, const HttpHandler& handler,
                 std::function<void(HttpConnection*)> on_closed,
                 const ResponseObserver* observer = nullptr, std::string peer = {},
                 std::unique_ptr<tls::ServerSession> tls = nullptr,
                 const HeadersGate* gate = nullptr);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  void start();
  // Closes now: pending exchanges are cancelled. Loop thread.
  void close();
  // Stops reading new requests and closes once the pending responses are written.
  void closeWhenIdle();

  // Whether it was closed for the send timeout (HttpLimits::send_timeout). Loop thread.
  bool sendTimedOut() const { return send_timed_out_; }

  // The TLS session, null on a plaintext connection. Loop thread.
  tls::ServerSession* tls() const { return tls_.get(); }
  // Requests read without http_parser (the common shape, whole in one read). Loop thread.
  uint64_t quickRequests() const { return quick_requests_; }

 private:
  friend class HttpExchange;
  // Storage for a request body: the connection's own (`bytes`), reused across its
  // requests, or a place the headers gate gave (BodyPlace), for one request.
  struct BodyStorage {
    std::unique_ptr<uint8_t[]> bytes;
    std::shared_ptr<void> place_owner;  // a BodyPlace's owner
    uint8_t* data = nullptr;
    size_t capacity = 0;
    bool placed() const { return place_owner != nullptr; }
  };
  // What readIntoBody() did: read into the body, and more may be waiting; stopped (the
  // socket drained or would block, or the connection closed); or nothing, because the
  // body is not read straight into its storage (the read buffer takes the bytes).
  enum class DirectRead { kMore, kStopped, kNotTaken };

  static void onSocketEvent(evutil_socket_t fd, short what, void* arg);
  void onReadable();
  void onWritable();
  // The socket's read / writev, through the TLS session when there is one.
  ssize_t readSocket(void* buffer, size_t size);
  ssize_t writeSocket(const iovec* iov, int count);
  // After a read that came back EAGAIN: over TLS, the session may need the socket
  // writable first.
  void afterWouldBlock();
  DirectRead readIntoBody();
  void parse(const char* data, size_t size);
  size_t quickRequest(const char* data, size_t size);
  // The steps every request goes through, whichever reader read it: a new exchange; its
  // head is in and its framing checked (the gate, the body's limit and room; false once
  // refused); its body is in (handed to the handler; false once the connection
  // closed or failed).
  void beginRequest();
  bool admitHead(std::optional<uint64_t> content_length, bool chunked);
  bool completeRequest(bool keep_alive);
  // More of the body is in: the request goes to the handler early, or its arrival is told.
  // False once the connection closed or failed.
  bool bodyProgress();
  // The request's body (`body_size` bytes of the storage: the whole body, or its length to
  // be when handed over early), keep-alive and what the pipeline records at the hand-over.
  void fillRequest(HttpExchange& exchange, uint64_t body_size, bool keep_alive);
  // Runs the handler on a request already in pending_. False once the connection closed
  // or failed.
  bool runHandler(const std::shared_ptr<HttpExchange>& exchange);
  void failRequest(int status, std::string_view message);
  // Answers the request being read with `response` and closes after it (the rest of the
  // request unread).
  void refuseRequest(HttpResponse response);
  void onExchangeResponded();
  void queueResponses();
  bool queueStream(HttpExchange& exchange);
  // `length`: the Content-Length; none: chunked.
  codecs::Buffer responseHead(const HttpExchange& exchange, const HttpResponse& response,
                              bool keep_alive, std::optional<uint64_t> length) const;
  void afterResponse(bool keep_alive);
  void observe(HttpExchange& exchange, int status, uint64_t body_bytes);
  void cancelPending(std::deque<std::shared_ptr<HttpExchange>> exchanges);
  void queueOut(codecs::Buffer bytes) {
    out_bytes_ += bytes.size();
    out_.push_back(std::move(bytes));
  }
  void flush();
  void updateInterest();
  void armTimer();
  void onTimeout();
  void onSendTimeout();

  // http_parser callbacks
  static const http_parser_settings& parserSettings();
  static int onMessageBegin(http_parser* p);
  static int onUrl(http_parser* p, const char* at, size_t len);
  static int onHeaderField(http_parser* p, const char* at, size_t len);
  static int onHeaderValue(http_parser* p, const char* at, size_t len);
  static int onHeadersComplete(http_parser* p);
  static int onBody(http_parser* p, const char* at, size_t len);
  static int onChunkHeader(http_parser* p);
  static int onMessageComplete(http_parser* p);
  // What to do with a piece of the request head the parser handed over.
  enum class HeadPiece { kKeep, kDrop, kRefused };
  HeadPiece addHeaderBytes(const char* at, size_t len, bool target = false);
  void finishHeaderLine();
  // Whether a piece the parser handed over ends before the bytes being parsed do: then the
  // parser saw the byte after it, and the token (target, field name, value) is complete.
  bool completesToken(const char* at, size_t len) const { return at + len < parse_end_; }
  // Checks the CRLF owed after a chunk's data against the bytes in [*p, end); false when a
  // byte is not the one owed.
  bool checkChunkEnd(const char*& p, const char* end);
  // The connection's own storage with room for `size` body bytes (those read so far kept).
  bool reserveBody(uint64_t size);
  // Whether the body of `content_length` bytes goes where the headers gate placed it.
  bool takeBodyPlace(BodyPlace place, uint64_t content_length);

  EventLoop& loop_;
  int fd_;
  const HttpLimits& limits_;
  const HttpHandler& handler_;
  std::function<void(HttpConnection*)> on_closed_;
  const ResponseObserver* observer_;
  const HeadersGate* gate_;
  const std::string peer_;
  std::unique_ptr<tls::ServerSession> tls_;
  bool tls_read_wants_write_ = false;  // a TLS read waits for the socket to be writable
  event* event_ = nullptr;
  LoopTimer timer_;
  http_parser parser_;

  enum class ReadState { kIdle, kHeaders, kBody, kError };
  ReadState read_state_ = ReadState::kIdle;
  std::vector<char> read_buffer_;

  // The request being parsed.
  std::shared_ptr<HttpExchange> current_;
  std::string header_field_, header_value_;
  bool in_header_value_ = false;
  size_t header_bytes_ = 0;
  uint32_t chunks_ = 0;
  const char* parse_end_ = nullptr;  // the end of the bytes parse() is parsing
  // Chunked bodies: data bytes left in the current chunk, then the CRLF bytes still owed
  // after it (2: "\r\n", 1: "\n"). Debian's libhttp-parser is built lenient and skips any
  // two bytes there; RFC 9112 7.1 wants CRLF, and a proxy that reads past something else
  // frames the stream differently from the next hop.
  uint64_t chunk_left_ = 0;
  uint8_t chunk_crlf_owed_ = 0;
  std::shared_ptr<BodyStorage> body_;
  std::shared_ptr<BodyStorage> own_body_;  // kept while body_ is a placed one
  uint64_t body_size_ = 0;
  // The request being read goes to the handler once this many body bytes are in (0: once
  // whole), and then `arrival_` follows its body.
  uint64_t early_after_ = 0;
  std::shared_ptr<BodyArrival> arrival_;
  // Whether the quick reader may read the next request: not after http_parser read one
  // that ends the connection (it reads nothing after that).
  bool quick_ok_ = true;
  uint64_t quick_requests_ = 0;
  // Body bytes still to come for a request whose head the quick reader read (http_parser
  // knows nothing of that request).
  uint64_t quick_body_left_ = 0;

  // Requests waiting for (or writing) their responses, oldest first.
  std::deque<std::shared_ptr<HttpExchange>> pending_;
  std::vector<codecs::Buffer> out_;  // segments not yet written
  size_t out_offset_ = 0;            // bytes of out_.front() already written
  bool close_after_write_ = false;
  bool closed_ = false;
  bool draining_ = false;
  uint64_t out_bytes_ = 0;  // bytes of out_ not yet written
  bool want_write_ = false;
  // The send timeout: armed when output begins to wait for the socket and again after each
  // write the socket took, disarmed once nothing waits. Apart from timer_, whose deadline
  // follows the request being read.
  LoopTimer send_timer_;
  bool send_timed_out_ = false;
  bool reading_ = true;
  short interest_ = EV_READ;  // the events event_ is registered for
};

}  // namespace infergate::gateway::http
