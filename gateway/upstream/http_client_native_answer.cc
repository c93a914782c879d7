// NativeHttpClient's engine, the answer's side: reading the upstream's bytes, http_parser
// and its callbacks, and what an exchange's end does to its connection. The rest of the
// engine (requests, connections, endings, delivery) is in http_client_native.cc; the
// class in http_client_native_engine.h.

#include <http_parser.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "codecs/buffer.h"
#include "codecs/buffer_pool.h"
#include "codecs/status.h"
#include "codecs/text.h"
#include "gateway/http/quick_head.h"
#include "gateway/upstream/http_client_native_engine.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::Status;
using codecs::strCat;
using http_client_detail::kInitialBodyBytes;
using http_client_detail::kMaxReservedBodyBytes;
using native_detail::kReadBufferBytes;
using native_detail::upstreamError;

// Whether the socket holds no byte yet unread (and has not ended).
bool socketDrained(int fd) {
  char probe;
  ssize_t n = ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Reads per readable event under TLS (a record, at most 16 KiB, per read), so that one
// connection's large answer leaves the loop's other events their turn.
constexpr int kMaxTlsReads = 256;

// The most fields quickHead() takes; an answer with more goes to http_parser.
constexpr size_t kQuickMaxFields = 32;

std::string_view trimValue(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// ---- the answer ----

bool NativeHttpClient::Engine::nothingUnread(Connection& c) {
  if (c.tls == nullptr) return socketDrained(c.fd);
  if (!c.tls->hasBufferedInput() && socketDrained(c.fd)) return true;
  // A record waits: one that carries no data (a session ticket, a key update) is taken
  // here and leaves the connection reusable; data, an alert or the end does not.
  char probe;
  return c.tls->read(&probe, 1) < 0 && errno == EAGAIN && !c.tls->wantsWritable();
}

void NativeHttpClient::Engine::readSome(Connection& c) {
  if (c.call == nullptr) {
    // Idle: nothing was asked on it, so whatever came (bytes, the end) answers nothing and
    // the connection must not carry the next request. Under TLS a record without data
    // (a ticket, a key update) is taken and the connection stays.
    if (c.tls != nullptr && nothingUnread(c)) return;
    Pool& pool = *c.pool;
    dropConnection(c);
    serveWaiting(pool);
    return;
  }
  std::shared_ptr<Call> call = c.call;
  c.read_wants_write = false;
  for (int reads = 0;; ++reads) {
    if (c.tls != nullptr && reads == kMaxTlsReads) {
      if (c.tls->hasBufferedInput()) event_active(c.readable, EV_READ, 0);  // the rest next
      break;
    }
    char* into = read_buffer_.get();
    size_t room = kReadBufferBytes;
    if (call->streaming && call->window != nullptr && call->window->held >= kRelayWindowBytes) {
      call->window->wait(c);  // windowed pieces (windowed_data): the caller holds a window's worth
      break;
    }
    if (call->direct && call->blocks) {
      const BlockRoom block = blockRoom(c, *call);
      if (block == BlockRoom::kFailed) return;
      if (block == BlockRoom::kWait) break;
      into = reinterpret_cast<char*>(call->block.data()) + call->block_used;
      room = call->block.size() - call->block_used;
    } else if (call->direct) {
      into = reinterpret_cast<char*>(call->body.data()) + call->body_used;
      room = static_cast<size_t>(*call->content_length) - call->body_used;
    }
    ssize_t n = c.tls != nullptr ? c.tls->read(into, room) : ::recv(c.fd, into, room, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (c.tls != nullptr && c.tls->wantsWritable()) {
          c.read_wants_write = true;  // onWritable reads again
          watchWritable(c, true);
        }
        break;
      }
      if (c.tls != nullptr && !c.established) return handshakeFailed(c, c.tls->error());
      broken(c, errno, /*sending=*/false);
      return;
    }
    // The read that ends the handshake latches it before its bytes count: an upstream may
    // send its answer in the same flight.
    if (n > 0 && c.tls != nullptr && !c.established && tlsState(c) == TlsState::kFailed) return;
    if (n == 0) {
      if (c.tls != nullptr && !c.established) return handshakeFailed(c, "the upstream closed the connection");
      // The end of the stream: it completes a body that runs to the end of the connection.
      if (call->answer_started && !call->direct) {
        http_parser_execute(&c.parser, &parserSettings(), nullptr, 0);
        if (call->message_complete) {
          call->keep_alive = false;
          completed(c, /*drained=*/true);
          return;
        }
      }
      broken(c, 0, /*sending=*/false);
      return;
    }
    const bool first = !call->answer_started;
    call->answer_started = true;
    size_t head = 0;
    if (call->direct) {
      call->body_used += static_cast<size_t>(n);
      if (call->blocks) call->block_used += static_cast<size_t>(n);
      if (call->body_used == *call->content_length) call->message_complete = true;
    } else if (first && (head = quickHead(*call, into, static_cast<size_t>(n))) > 0) {
      quickBody(*call, into + head, static_cast<size_t>(n) - head);
    } else if (!parse(c, into, static_cast<size_t>(n))) {
      return;
    }
    if (call->relay && call->direct) relayProgress(*call);  // only a body still arriving relays
    if (call->message_complete) {
      // A read short of its room emptied the socket: nothing follows the answer, so the
      // connection needs no probe before it carries the next request. A sized body read
      // to its end (direct) says nothing of what may follow it, nor does a TLS record.
      completed(c, /*drained=*/c.tls == nullptr && !call->direct && static_cast<size_t>(n) < room);
      return;
    }
    // Drained for now (under TLS a read brings one record: on until the session says so).
    if (c.tls == nullptr && static_cast<size_t>(n) < room) break;
  }
  // A TLS handshake ends in a read: what waits to be written (the request) goes now.
  if (c.tls != nullptr && c.call != nullptr && !c.read_wants_write) {
    if (tlsState(c) == TlsState::kFailed) return;
    writeSome(c);
  }
}

bool NativeHttpClient::Engine::parse(Connection& c, const char* data, size_t size) {
  Call& call = *c.call;
  size_t parsed = http_parser_execute(&c.parser, &parserSettings(), data, size);
  http_errno err = HTTP_PARSER_ERRNO(&c.parser);
  if (err == HPE_PAUSED) {
    // Paused by onMessageComplete: bytes after the answer answer nothing asked.
    if (parsed < size) call.keep_alive = false;
    return true;
  }
  if (err != HPE_OK || parsed != size) {
    std::string detail = strCat(" (", http_errno_description(err), ")");
    Status status;
    if (!call.local_error.ok()) {
      status = call.local_error;
    } else if (!call.head_complete) {
      status = upstreamError(codecs::invalidArgument(
          prefix(call), "answered something that is not an HTTP/1.x response", detail));
    } else if (err == HPE_INVALID_CHUNK_SIZE || (c.parser.flags & F_CHUNKED) != 0) {
      status = upstreamError(codecs::invalidArgument(prefix(call), "answered a malformed chunked body",
                                                     detail));
    } else {
      status = upstreamError(codecs::invalidArgument(prefix(call), "answered a malformed response",
                                                     detail));
    }
    failExchange(c, std::move(status));
    return false;
  }
  // The rest of a sized body goes straight into its buffer: no parser, no copy.
  if (!call.streaming && call.head_complete && !call.message_complete && call.content_length &&
      (c.parser.flags & F_CHUNKED) == 0 && call.body.size() == *call.content_length &&
      call.body_used < call.body.size()) {
    call.direct = true;
    // The parser sees no more of this answer: whether the connection stays open is known
    // from the head already (version, Connection).
    call.keep_alive = http_should_keep_alive(&c.parser) != 0;
  }
  return true;
}

// ---- the common answer, without http_parser ----
//
// Most answers are a final status, a few headers and a Content-Length, whole in the first
// read: their head goes through http::QuickHeadReader (its rules in quick_head.h). An
// answer outside them (1xx, 204, 304, no Content-Length, Transfer-Encoding, a repeated
// Content-Length, obs-fold, a head cut by the read, a HEAD request, a streamed call, a
// body too large to reserve) is left whole to http_parser, which decides it as it always
// did.

size_t NativeHttpClient::Engine::quickHead(Call& call, const char* data, size_t size) const {
  if (call.streaming || call.head_only) return 0;
  http::QuickHeadReader in(data, size);
  // "HTTP/1.x NNN[ reason]"
  std::string_view line;
  if (!in.nextLine(line) || line.size() < 12 || line.substr(0, 7) != "HTTP/1." ||
      (line[7] != '0' && line[7] != '1') || line[8] != ' ' || (line.size() > 12 && line[12] != ' ') ||
      !codecs::isHttpFieldValue(line)) {
    return 0;
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return 0;
    status = status * 10 + (line[i] - '0');
  }
  if (status < 200 || status == 204 || status == 304) return 0;
  const bool http11 = line[7] == '1';
  bool close = false, keep_alive = false;
  std::optional<uint64_t> length;
  // Where each field lies, copied into the call's list at the end with the head's bytes
  // (left uninitialized: only the first `count` are read). More fields than this: declined.
  http::HeaderList::FieldSpan fields[kQuickMaxFields];
  size_t count = 0;
  for (;;) {
    std::string_view name, value;
    const http::QuickHeadReader::Field field = in.nextField(name, value);
    if (field == http::QuickHeadReader::Field::kDecline) return 0;
    if (field == http::QuickHeadReader::Field::kEnd) break;
    if (codecs::equalsIgnoreCase(name, "content-length")) {
      if (length) return 0;  // given twice: http_parser decides
      length = http::quickContentLength(value);
      if (!length) return 0;
    } else if (http::readAsTransferEncoding(name)) {
      return 0;
    } else if (codecs::equalsIgnoreCase(name, "connection")) {
      if (codecs::equalsIgnoreCase(value, "close")) {
        close = true;
      } else if (codecs::equalsIgnoreCase(value, "keep-alive")) {
        keep_alive = true;
      } else {
        return 0;  // a list of options: http_parser's to read
      }
    }
    if (count == kQuickMaxFields) return 0;
    fields[count++] = in.placeOf(name, value);
  }
  if (!length || *length > kMaxReservedBodyBytes) return 0;
  // A body that would be relayed to a relay taking blocks is read through them: the first
  // now (the body's bytes in this read fit it: the read buffer is no larger than a relayed
  // body), the rest as the window allows.
  static_assert(kReadBufferBytes <= kRelayStepBytes && kRelayStepBytes <= kRelayBlockBytes);
  call.blocks = call.relay && *length > kRelayStepBytes && call.callbacks.relay->takesBlocks();
  if (*length > 0) {
    try {
      if (call.blocks) {
        call.block = codecs::BufferPool::shared().allocate(std::min(kRelayBlockBytes, static_cast<size_t>(*length)));
        call.window = std::make_shared<RelayWindow>();
      } else {
        call.body = codecs::BufferPool::shared().allocate(static_cast<size_t>(*length));
      }
    } catch (const std::bad_alloc&) {
      call.blocks = false;
      return 0;  // http_parser's path grows the body as it comes and reports a shortage
    }
  }
  call.status = status;
  call.headers = http::HeaderList();
  call.headers.addFromHead(std::string_view(data, in.consumed()), std::span(fields, count));
  call.content_length = *length;
  call.head_complete = true;
  call.keep_alive = !close && (http11 || keep_alive);
  return in.consumed();
}

void NativeHttpClient::Engine::quickBody(Call& call, const char* data, size_t size) const {
  const size_t length = static_cast<size_t>(*call.content_length);
  const size_t take = std::min(size, length);
  if (call.blocks) {
    std::memcpy(call.block.data(), data, take);  // less than the block (see quickHead)
    call.block_used = take;
  } else if (take > 0) {
    std::memcpy(call.body.data(), data, take);
  }
  call.body_used = take;
  if (size > length) call.keep_alive = false;  // bytes beyond the answer: not reused
  if (take == length) {
    call.message_complete = true;
  } else {
    call.direct = true;  // the rest straight into the body, as parse() arranges
  }
}

void NativeHttpClient::Engine::relayProgress(Call& call) {
  if (!call.streaming) {
    if (*call.content_length <= kRelayStepBytes) {
      call.relay = false;  // not one whole step before its end: nothing to gain
      return;
    }
    call.streaming = true;  // the head goes on first
    markNews(call);
  }
  if (call.blocks) {
    if (call.block_used == call.block.size() || call.message_complete) handOnBlock(call);
    return;
  }
  const size_t ready = call.body_used - call.relayed;
  if (ready == 0 || (ready < kRelayStepBytes && !call.message_complete)) return;
  call.pieces.push_back(call.body.shareWritten(call.relayed, ready));
  call.relayed = call.body_used;
  markNews(call);
}

void NativeHttpClient::Engine::handOnBlock(Call& call) {
  if (call.block_used == 0) return;
  auto owner = std::make_shared<RelayBlock>(std::move(call.block), call.block_used, call.window);
  call.block = codecs::MutableBuffer();
  call.window->held += call.block_used;
  call.pieces.emplace_back(owner, owner->block.data(), call.block_used);
  call.block_used = 0;
  call.relayed = call.body_used;
  markNews(call);
}

// A streamed piece (windowed_data): a copy of its own, whose bytes count against the call's
// window until its last owner lets go of it.
codecs::Buffer NativeHttpClient::Engine::windowedPiece(Call& call, const char* data, size_t size) {
  codecs::MutableBuffer copy = codecs::MutableBuffer::allocate(size);
  std::memcpy(copy.data(), data, size);
  auto owner = std::make_shared<RelayBlock>(std::move(copy), size, call.window);
  call.window->held += size;
  return codecs::Buffer(owner, owner->block.data(), size);
}

NativeHttpClient::Engine::BlockRoom NativeHttpClient::Engine::blockRoom(Connection& c, Call& call) {
  if (call.block.size() > 0) return BlockRoom::kReady;  // a block is handed on once full
  if (call.window->held + kRelayBlockBytes > kRelayWindowBytes) {
    call.window->wait(c);
    return BlockRoom::kWait;
  }
  try {
    call.block = codecs::BufferPool::shared().allocate(
        std::min(kRelayBlockBytes, static_cast<size_t>(*call.content_length) - call.body_used));
  } catch (const std::bad_alloc&) {
    failExchange(c, codecs::withOrigin(codecs::resourceExhausted(prefix(call), "no memory for a block of a "
                                                                                "relayed response body"),
                                       codecs::ErrorOrigin::kInternal));
    return BlockRoom::kFailed;
  }
  return BlockRoom::kReady;
}

void NativeHttpClient::Engine::RelayWindow::wait(Connection& c) {
  waiting = &c;
  event_del(c.readable);
}

void NativeHttpClient::Engine::RelayWindow::release(size_t bytes) {
  held -= bytes;
  if (waiting == nullptr || held > kRelayWindowBytes / 2) return;
  Connection& c = *std::exchange(waiting, nullptr);
  // Level-triggered: what waits on the socket wakes it; under TLS the session may hold
  // records already read, which only a run of the handler finds.
  event_add(c.readable, nullptr);
  event_active(c.readable, EV_READ, 0);
}

void NativeHttpClient::Engine::completed(Connection& c, bool drained) {
  std::shared_ptr<Call> call = std::move(c.call);
  call->connection = nullptr;
  Pool& pool = *c.pool;
  const size_t total = call->head.size() + (call->sends_body ? call->request->body.size() : 0);
  // Under TLS `sent` counts bytes the session took: all of them must have left too.
  const bool all_sent = call->sent == total && (c.tls == nullptr || !c.tls->hasBufferedOutput());
  if (call->keep_alive && all_sent && (drained || nothingUnread(c))) {
    c.reused = true;
    c.read_wants_write = false;
    watchWritable(c, false);  // nothing to write while idle (a TLS round may have armed it)
    pool.idle.push_back(&c);  // `readable` stays armed: it is the idle watch
  } else {
    // An answer before the whole request went, an upstream that closes, or bytes beyond the
    // answer (a sized body is read to its end and no further): the next request's answer
    // must not come from them.
    dropConnection(c);
  }
  finish(*call, call->local_error);
  serveWaiting(pool);
}

void NativeHttpClient::Engine::broken(Connection& c, int err, bool sending) {
  std::shared_ptr<Call> call = c.call;
  Pool& pool = *c.pool;
  // A TLS failure's own words say more than its errno (EPROTO, EIO).
  const std::string tls_error = c.tls != nullptr && err != 0 ? c.tls->error() : std::string();
  // A kept-alive connection the upstream closed (or reset) before any byte of an answer:
  // the request goes again, once, on a fresh connection, as libcurl does.
  const bool resend = c.reused && !call->answer_started && !call->resent;
  dropConnection(c);
  if (resend) {
    call->resent = true;
    open(pool, call);
  } else {
    std::string_view what;
    if (sending) {
      what = "connection broken while sending the request";
    } else if (!call->answer_started) {
      what = err == 0 ? "connection closed without a response"
                      : "connection broken while receiving the response";
    } else {
      what = err == 0 ? "connection closed before the whole response arrived"
                      : "connection broken while receiving the response";
    }
    std::string detail = err == 0 ? std::string()
                         : strCat(" (", tls_error.empty() ? std::strerror(err) : tls_error.c_str(), ")");
    finish(*call, upstreamError(absl::UnavailableError(strCat(prefix(*call), what, detail))));
  }
  serveWaiting(pool);
}

void NativeHttpClient::Engine::failExchange(Connection& c, Status status) {
  std::shared_ptr<Call> call = c.call;
  Pool& pool = *c.pool;
  dropConnection(c);
  finish(*call, std::move(status));
  serveWaiting(pool);
}

// ---- http_parser callbacks (inside parse(): record only) ----

const http_parser_settings& NativeHttpClient::Engine::parserSettings() {
  static const http_parser_settings settings = [] {
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_message_begin = &Engine::onMessageBegin;
    s.on_header_field = &Engine::onHeaderField;
    s.on_header_value = &Engine::onHeaderValue;
    s.on_headers_complete = &Engine::onHeadersComplete;
    s.on_body = &Engine::onBody;
    s.on_message_complete = &Engine::onMessageComplete;
    return s;
  }();
  return settings;
}

int NativeHttpClient::Engine::onMessageBegin(http_parser* p) {
  Call& call = callOf(p);
  call.status = 0;
  call.raw_headers.clear();
  call.raw_headers.reserve(16);
  call.in_value = false;
  call.content_length.reset();
  return 0;
}

int NativeHttpClient::Engine::onHeaderField(http_parser* p, const char* at, size_t length) {
  Call& call = callOf(p);
  if (call.in_value || call.raw_headers.empty()) {
    call.raw_headers.emplace_back(std::string(at, length), std::string());
    call.in_value = false;
  } else {
    call.raw_headers.back().first.append(at, length);  // a name split across reads
  }
  return 0;
}

int NativeHttpClient::Engine::onHeaderValue(http_parser* p, const char* at, size_t length) {
  Call& call = callOf(p);
  if (call.raw_headers.empty()) return 0;
  call.raw_headers.back().second.append(at, length);
  call.in_value = true;
  return 0;
}

int NativeHttpClient::Engine::onHeadersComplete(http_parser* p) {
  Call& call = callOf(p);
  call.status = p->status_code;
  if (call.status < 100 || call.status > 999) {
    // http_parser takes any number; a status code has three digits (RFC 9110 15). Found by
    // the http_client fuzzer: "HTTP/1.1 2" was taken for an interim answer with a body.
    call.local_error = upstreamError(codecs::invalidArgument(
        call.owner->prefix(call), "answered something that is not an HTTP/1.x response (status code ",
        call.status, ")"));
    return -1;  // the parser stops with an error; parse() reports local_error
  }
  // An interim answer ends with its head (RFC 9110 15.2), whatever Content-Length it
  // carries: 1 tells http_parser so (found by the http_client fuzzer: "100" with a
  // Content-Length had its body read into the final answer's). Its end starts over.
  if (call.status < 200) return 1;
  call.head_complete = true;
  call.headers.reserve(call.raw_headers.size());
  for (auto& [name, value] : call.raw_headers) call.headers.add(name, trimValue(value));
  call.raw_headers.clear();
  if ((p->flags & F_CHUNKED) == 0 && p->content_length != ULLONG_MAX) {
    call.content_length = p->content_length;
  }
  // No body follows a HEAD's answer, a 204 or a 304 (RFC 9110 9.3.2, 15.3.5, 15.4.5),
  // whatever Content-Length says (a 304 may give the representation's).
  const bool no_body = call.head_only || call.status == 204 || call.status == 304;
  if (call.streaming) {
    call.owner->markNews(call);
  } else if (!no_body && call.content_length && *call.content_length > 0 &&
             *call.content_length <= kMaxReservedBodyBytes) {
    try {
      call.body = codecs::BufferPool::shared().allocate(static_cast<size_t>(*call.content_length));
    } catch (const std::bad_alloc&) {
      // Left empty: onBody grows it as bytes arrive and reports a real shortage.
    }
  }
  return no_body ? 1 : 0;  // 1: no body follows (http_parser's convention)
}

int NativeHttpClient::Engine::onBody(http_parser* p, const char* at, size_t length) {
  Call& call = callOf(p);
  try {
    if (call.streaming) {
      if (call.window != nullptr) {
        call.pieces.push_back(windowedPiece(call, at, length));
      } else {
        call.pieces.push_back(codecs::Buffer::copyOf(std::string_view(at, length)));
      }
      call.owner->markNews(call);
      return 0;
    }
    size_t needed = call.body_used + length;
    if (needed > call.body.size()) {
      size_t capacity = std::max({needed, call.body.size() * 2, kInitialBodyBytes});
      codecs::MutableBuffer grown = codecs::BufferPool::shared().allocate(capacity);
      if (call.body_used > 0) std::memcpy(grown.data(), call.body.data(), call.body_used);
      call.body = std::move(grown);
    }
    std::memcpy(call.body.data() + call.body_used, at, length);
    call.body_used += length;
    return 0;
  } catch (const std::bad_alloc&) {
    call.local_error = codecs::withOrigin(
        codecs::resourceExhausted(call.owner->prefix(call), "no memory for a response body of ",
                                  call.body_used + length, "+ bytes"),
        codecs::ErrorOrigin::kInternal);
    return 1;
  }
}

int NativeHttpClient::Engine::onMessageComplete(http_parser* p) {
  Call& call = callOf(p);
  if (call.status < 200) {  // the interim answer ended; the final one follows
    call.status = 0;
    call.raw_headers.clear();
    return 0;
  }
  call.message_complete = true;
  call.keep_alive = http_should_keep_alive(p) != 0;
  http_parser_pause(p, 1);  // whatever follows is not part of this answer
  return 0;
}

}  // namespace infergate::gateway::upstream
