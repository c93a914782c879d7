#pragma once

// NativeHttpClient's engine (http_client_native.h), shared by the two files that define
// it: http_client_native.cc (requests, connections, endings, delivery) and
// http_client_native_answer.cc (reading and parsing the upstream's answer). Internal: no
// other file includes it.

#include <event2/event.h>
#include <http_parser.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "gateway/http/event_loop.h"
#include "gateway/http/http_message.h"
#include "gateway/upstream/http_client.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/http_client_native.h"
#include "tls/client_session.h"

namespace infergate::gateway::upstream {
namespace native_detail {

// One receive buffer per client (loop thread only): what a read brings is parsed and
// copied out before the next read.
inline constexpr size_t kReadBufferBytes = 256 * 1024;

inline codecs::Status upstreamError(codecs::Status s) {
  return codecs::withOrigin(std::move(s), codecs::ErrorOrigin::kUpstream);
}

}  // namespace native_detail

class NativeHttpClient::Engine {
 public:
  Engine(http::EventLoop& loop, const HttpClientOptions& options)
      : loop_(loop), options_(options), read_buffer_(new char[native_detail::kReadBufferBytes]) {}
  ~Engine();

  std::shared_ptr<HttpCallHandle> send(const config::ListenAddress& endpoint,
                                       SharedHttpRequest request,
                                       HttpUpstreamCallbacks callbacks);
  void abandonAll();

 private:
  struct Pool;
  struct Connection;
  struct RelayWindow;

  class Call final : public HttpCallHandle, public std::enable_shared_from_this<Call> {
   public:
    void cancel() override {
      if (owner == nullptr) return;
      auto keep = shared_from_this();  // the engine may hold the last other reference
      owner->cancel(*this);
    }

    Engine* owner = nullptr;  // null once the call ended (delivered, cancelled, abandoned)
    Pool* pool = nullptr;
    Connection* connection = nullptr;  // while attached
    bool waiting = false;              // in pool->waiting
    event* deadline = nullptr;

    SharedHttpRequest request;
    HttpUpstreamCallbacks callbacks;
    bool streaming = false;  // on_head was given (with relay: once the relay began)
    // callbacks.relay given: a sized body still arriving after its head is relayed from
    // `body` as it comes; `relayed` of its bytes were handed on as pieces.
    bool relay = false;
    size_t relayed = 0;
    // A relay that takes blocks (AnswerRelay::takesBlocks): the body is read into `block`
    // (`block_used` of it filled; empty: none yet) instead of `body`, each block handed on
    // whole, and `window` counts what the relay holds of them. A streamed answer whose
    // caller asked for windowed_data counts its pieces in `window` too.
    bool blocks = false;
    codecs::MutableBuffer block;
    size_t block_used = 0;
    std::shared_ptr<RelayWindow> window;
    bool head_only = false;  // HEAD: no body follows whatever the headers say
    bool sends_body = false;
    std::string endpoint;  // for messages
    std::string head;      // the request line and headers
    size_t sent = 0;       // bytes of head and body written on the current connection
    // Bytes reached a socket: the upstream may be running the request.
    bool body_taken = false;
    bool resent = false;  // already sent again after a reused connection died
    size_t address_tries = 0;  // a host name's addresses that refused its connection so far
    size_t address_start = 0;  // the first of them (ConnectTarget::start)
    uint64_t arrival_watch = 0;  // request->arrival's watcher, while the body arrives

    // The answer as it arrives; a new message (after a 1xx) starts over.
    bool answer_started = false;  // a byte of an answer arrived on this connection
    int status = 0;
    std::vector<std::pair<std::string, std::string>> raw_headers;
    bool in_value = false;
    bool head_complete = false;
    http::HeaderList headers;  // built once head_complete
    std::optional<uint64_t> content_length;
    codecs::MutableBuffer body;  // buffered mode
    size_t body_used = 0;
    bool direct = false;  // the rest of a sized body is received straight into `body`
    bool message_complete = false;
    bool keep_alive = false;
    std::vector<codecs::Buffer> pieces;  // streaming mode, not yet delivered
    codecs::Status local_error;                  // no memory for the body

    // Delivery.
    bool queued = false;
    bool head_delivered = false;
    bool finished = false;
    codecs::Status outcome;
  };

  // The bytes a relay taking blocks holds of one call's body: handed on, not yet let go of
  // (each block's owner gives its bytes back when the last piece of it is dropped, which
  // may be after the call, the connection and the engine are gone). While a block more
  // would pass kRelayWindowBytes the connection's reading waits (`readable` deleted), and
  // it goes on once half of the window is let go of. Loop thread.
  struct RelayWindow {
    size_t held = 0;
    Connection* waiting = nullptr;  // the connection whose reading waits; null once it is gone
    void wait(Connection& c);       // `c`'s reading stops until release() lets it go on
    void release(size_t bytes);
  };
  // A block's owner, behind the piece made of it.
  struct RelayBlock {
    RelayBlock(codecs::MutableBuffer b, size_t n, std::shared_ptr<RelayWindow> w)
        : block(std::move(b)), bytes(n), window(std::move(w)) {}
    RelayBlock(const RelayBlock&) = delete;
    RelayBlock& operator=(const RelayBlock&) = delete;
    ~RelayBlock() { window->release(bytes); }
    codecs::MutableBuffer block;
    size_t bytes;
    std::shared_ptr<RelayWindow> window;
  };

  struct Connection {
    Engine* engine = nullptr;
    Pool* pool = nullptr;
    int fd = -1;
    event* readable = nullptr;  // armed for the connection's whole life (idle watch included)
    event* writable = nullptr;  // armed while connecting or while a write waits for room
    bool writable_armed = false;  // `writable` is added (watchWritable() keeps it)
    event* connect_timer = nullptr;
    bool connecting = false;
    bool reused = false;  // carried a whole exchange already
    http_client_detail::ConnectTarget target;  // the address it went to
    std::shared_ptr<Call> call;
    http_parser parser;
    // TLS (options.tls with a context): what reads and writes go through; null for
    // plaintext. `established` latches the handshake's end (OpenSSL reports a session that
    // failed later as unfinished again); the connect timer runs until then.
    std::unique_ptr<tls::ClientSession> tls;
    bool established = false;
    bool read_wants_write = false;  // a TLS read waits for the socket to take bytes
  };

  struct Pool {
    std::string key;
    config::ListenAddress endpoint;
    // Its authority is the Host header. A literal's address is resolved once here; a host
    // name's connections each find theirs (connectTarget).
    http_client_detail::SocketAddress address;
    bool named = false;
    size_t open = 0;   // connecting, busy or idle
    std::vector<Connection*> idle;
    std::deque<std::shared_ptr<Call>> waiting;
  };

  // -- requests --
  Pool* poolFor(const config::ListenAddress& endpoint, codecs::Status* error);
  void buildHead(Call& call, const Pool& pool) const;
  void dispatch(std::shared_ptr<Call> call);
  void serveWaiting(Pool& pool);
  void sweepPools();  // erases the pools left with no connection and no waiting call
  void open(Pool& pool, std::shared_ptr<Call> call);
  void attach(Connection& c, std::shared_ptr<Call> call);
  void connected(Connection& c);
  // `c` could not connect (`c.call` not yet sent): its call goes on to the host name's next
  // address, if one is left untried, on a fresh connection. False: nothing was tried.
  bool tryNextAddress(Connection& c);
  void writeSome(Connection& c);
  // Adds or deletes `c.writable` when that changes something: most writes find the socket
  // with room, and libevent would be asked to delete an event that was never added.
  static void watchWritable(Connection& c, bool on) {
    if (c.writable_armed == on) return;
    c.writable_armed = on;
    if (on) {
      event_add(c.writable, nullptr);
    } else {
      event_del(c.writable);
    }
  }
  // TLS: latches the handshake's end (stops the connect timer) and checks its ALPN.
  // kFailed: the connection failed (gone). Plaintext: kEstablished.
  enum class TlsState { kEstablished, kHandshaking, kFailed };
  TlsState tlsState(Connection& c);
  // The TLS handshake failed (`why`): the call was never sent.
  void handshakeFailed(Connection& c, std::string_view why);
  // Whether nothing of the upstream's waits unread on `c` (socket or TLS session); a TLS
  // record that carries no data (a ticket, a key update) is taken and is not a byte.
  bool nothingUnread(Connection& c);
  void cancel(Call& call);
  // A call waiting for a connection (in pool->waiting) leaves the queue.
  void leaveQueue(Call& call);
  // More of the call's body arrived (write on), or it never will (the call ends).
  void onArrival(Call& call);

  // -- the answer --
  void readSome(Connection& c);
  bool parse(Connection& c, const char* data, size_t size);
  // The answer on `c` is complete. `drained`: the last read found the socket empty, so no
  // byte beyond the answer is waiting (otherwise one is looked for before reuse).
  void completed(Connection& c, bool drained);
  // The common answer's head without http_parser (see the definition); the bytes of the
  // head taken, or 0 when http_parser must read the answer.
  size_t quickHead(Call& call, const char* data, size_t size) const;
  // After quickHead(): the body's bytes that came with the head.
  void quickBody(Call& call, const char* data, size_t size) const;
  // After a read of a relay call's answer (Call::relay) whose body is read straight into
  // its buffer (`direct`: it did not come whole with its head, and has a length the buffer
  // was sized by): the head is news once, then each kRelayStepBytes of body (and the rest
  // at the end) a piece. A body of one step or less is not relayed.
  void relayProgress(Call& call);
  // A relay taking blocks: the filled part of the call's block goes on as a piece.
  void handOnBlock(Call& call);
  // A streamed answer's piece under windowed_data: copied into storage counted in the
  // call's window until the piece is let go of.
  static codecs::Buffer windowedPiece(Call& call, const char* data, size_t size);
  // Before a read of a relay taking blocks: the block to read into. kWait: the relay holds
  // its window, so reading waits (`c.readable` deleted until it lets go); kFailed: no memory
  // for a block (the call failed, `c` is gone).
  enum class BlockRoom { kReady, kWait, kFailed };
  BlockRoom blockRoom(Connection& c, Call& call);
  // The connection failed under its call: closed (err 0) or an errno, while sending or not.
  void broken(Connection& c, int err, bool sending);
  void failExchange(Connection& c, codecs::Status status);

  // -- endings --
  void finish(Call& call, codecs::Status outcome);
  void dropConnection(Connection& c);
  void dropDeadline(Call& call);
  // UNAVAILABLE "<prefix>: `what`", not sent unless a byte of the request reached a socket
  // (a resend's did, on the connection before).
  codecs::Status openingFailed(const Call& call, std::string_view what) const;
  codecs::Status connectError(const Call& call, int err) const;
  // `handshaking`: connected, TLS not finished.
  codecs::Status connectTimeout(const Call& call, bool handshaking) const;
  std::string prefix(const Call& call) const { return http_client_detail::callPrefix(options_.upstream_name, call.endpoint); }

  // -- delivery --
  void markNews(Call& call);
  void scheduleDelivery();
  void deliverNews();

  // -- libevent and http_parser entry points --
  static void onReadable(evutil_socket_t fd, short events, void* arg);
  static void onWritable(evutil_socket_t fd, short events, void* arg);
  static void onConnectTimeout(evutil_socket_t fd, short events, void* arg);
  static void onDeadline(evutil_socket_t fd, short events, void* arg);
  static const http_parser_settings& parserSettings();
  static Call& callOf(http_parser* p) { return *static_cast<Connection*>(p->data)->call; }
  static int onMessageBegin(http_parser* p);
  static int onHeaderField(http_parser* p, const char* at, size_t length);
  static int onHeaderValue(http_parser* p, const char* at, size_t length);
  static int onHeadersComplete(http_parser* p);
  static int onBody(http_parser* p, const char* at, size_t length);
  static int onMessageComplete(http_parser* p);

  http::EventLoop& loop_;
  HttpClientOptions options_;
  std::unique_ptr<char[]> read_buffer_;
  std::unordered_map<std::string, std::unique_ptr<Pool>> pools_;
  Pool* last_pool_ = nullptr;  // the last one poolFor() found (null once swept)
  std::vector<std::string> maybe_empty_;  // pools to look at in sweepPools()
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::unordered_map<Call*, std::shared_ptr<Call>> calls_;  // not yet delivered whole
  std::vector<std::shared_ptr<Call>> news_;
  bool delivery_posted_ = false;
  bool* destroyed_ = nullptr;                      // while delivering: set by the destructor
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // posted tasks check it
};

}  // namespace infergate::gateway::upstream
