#include "gateway/http/http_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>

#include "codecs/status.h"
#include "codecs/text.h"
#include "gateway/http/head_writer.h"

namespace infergate::gateway::http {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Bodies at least this long (remaining) are read straight into their storage.
constexpr size_t kDirectReadMin = 16 * 1024;
constexpr size_t kMaxIov = 64;
// Between requests, no further request is read while this much of the answers waits for
// the client: one that sends without reading cannot make the gateway hold its answers
// without bound (a single answer larger than this is still written whole).
constexpr uint64_t kMaxUnreadAnswerBytes = 4 << 20;

}  // namespace

void HttpExchange::respond(HttpResponse response) {
  if (responded_) return;
  responded_ = true;
  response_ = std::move(response);
  if (auto connection = connection_.lock()) connection->onExchangeResponded();
}

void HttpExchange::beginStream(HttpResponse head, std::optional<uint64_t> length) {
  if (responded_) return;
  responded_ = true;
  streaming_ = true;
  stream_length_ = length;
  response_ = std::move(head);
  response_->body = codecs::BufferChain();
  if (auto connection = connection_.lock()) connection->onExchangeResponded();
}

void HttpExchange::sendChunk(codecs::Buffer data) {
  if (!streaming_ || stream_ended_ || data.empty()) return;
  stream_chunks_.push_back(std::move(data));
  if (auto connection = connection_.lock()) connection->onExchangeResponded();
}

void HttpExchange::endStream() {
  if (!streaming_ || stream_ended_) return;
  stream_ended_ = true;
  if (auto connection = connection_.lock()) connection->onExchangeResponded();
}

tls::ServerSession* HttpExchange::tlsSession() const {
  std::shared_ptr<HttpConnection> connection = connection_.lock();
  return connection ? connection->tls() : nullptr;
}

void HttpExchange::cancel() {
  if (done_) return;
  cancelled_ = true;
  if (on_cancel_) {
    auto handler = std::move(on_cancel_);
    handler();
  }
}

HttpConnection::HttpConnection(EventLoop& loop, int fd, const HttpLimits& limits,
                               const HttpHandler& handler,
                               std::function<void(HttpConnection*)> on_closed,
                               const ResponseObserver* observer, std::string peer,
                               std::unique_ptr<tls::ServerSession> tls, const HeadersGate* gate)
    : loop_(loop),
      fd_(fd),
      limits_(limits),
      handler_(handler),
      on_closed_(std::move(on_closed)),
      observer_(observer && *observer ? observer : nullptr),
      gate_(gate && *gate ? gate : nullptr),
      peer_(std::move(peer)),
      tls_(std::move(tls)),
      timer_(loop, [this] { onTimeout(); }),
      send_timer_(loop, [this] { onSendTimeout(); }) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  read_buffer_.resize(kReadChunk);
}

HttpConnection::~HttpConnection() {
  // A body still arriving never will: what waits for it is told (and let go).
  if (arrival_) std::exchange(arrival_, nullptr)->fail();
  if (event_) event_free(event_);
  tls_.reset();  // before its socket
  if (fd_ >= 0) ::close(fd_);
}

void HttpConnection::start() {
  event_ = event_new(loop_.base(), fd_, EV_READ | EV_PERSIST, &HttpConnection::onSocketEvent,
                     this);
  event_add(event_, nullptr);
  armTimer();
}

void HttpConnection::onSocketEvent(evutil_socket_t, short what, void* arg) {
  auto* self = static_cast<HttpConnection*>(arg);
  std::shared_ptr<HttpConnection> guard = self->shared_from_this();
  if (what & EV_WRITE) {
    if (self->tls_read_wants_write_) {  // the read that waited for this goes first
      self->tls_read_wants_write_ = false;
      self->onReadable();
      if (self->closed_) return;
    }
    self->onWritable();
  }
  if ((what & EV_READ) && !self->closed_) self->onReadable();
}

void HttpConnection::onReadable() {
  std::shared_ptr<HttpConnection> self = shared_from_this();
  for (int rounds = 0; rounds < 16 && !closed_ && reading_; ++rounds) {
    if (read_state_ == ReadState::kBody) {
      const DirectRead direct = readIntoBody();
      if (direct == DirectRead::kMore) continue;
      if (direct == DirectRead::kStopped) break;
    }
    if (closed_) return;
    ssize_t n = readSocket(read_buffer_.data(), read_buffer_.size());
    if (n > 0) {
      parse(read_buffer_.data(), static_cast<size_t>(n));
      // A short read drained the socket; over TLS it is one record, and more may wait
      // decrypted inside the session.
      if (static_cast<size_t>(n) < read_buffer_.size() && !(tls_ && tls_->hasBufferedInput())) {
        break;
      }
      continue;
    }
    if (n == 0) {  // the client closed: cancel what is in flight, as Triton does
      close();
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      close();
      return;
    }
    afterWouldBlock();
    break;
  }
  // Plaintext the session already decrypted raises no socket event: come back for it.
  if (tls_ && !closed_ && reading_ && tls_->hasBufferedInput()) event_active(event_, EV_READ, 0);
}

ssize_t HttpConnection::readSocket(void* buffer, size_t size) {
  return tls_ ? tls_->read(buffer, size) : ::read(fd_, buffer, size);
}

ssize_t HttpConnection::writeSocket(const iovec* iov, int count) {
  return tls_ ? tls_->writev(iov, count) : ::writev(fd_, iov, count);
}

void HttpConnection::afterWouldBlock() {
  if (tls_ && tls_->wantsWritable() && !tls_read_wants_write_) {
    tls_read_wants_write_ = true;
    updateInterest();
  }
}

// A body with a known remaining length goes from the socket straight into its storage;
// the parser then sees it in place and onBody recognises it without copying. A short read
// drained the socket: the next bytes wait for the next readable event, read there too (a
// read into the read buffer meanwhile would copy them once more).
HttpConnection::DirectRead HttpConnection::readIntoBody() {
  // Bytes of the body still to come: the quick reader's count, or http_parser's.
  const uint64_t left = quick_body_left_ > 0          ? quick_body_left_
                        : (parser_.flags & F_CHUNKED) ? 0
                                                      : parser_.content_length;
  if (!body_ || left < kDirectReadMin) return DirectRead::kNotTaken;
  size_t want = static_cast<size_t>(std::min<uint64_t>(left, 1 << 30));
  uint8_t* dst = body_->data + body_size_;
  ssize_t n = readSocket(dst, want);
  if (n > 0) {
    parse(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    const bool more = static_cast<size_t>(n) == want || (tls_ && tls_->hasBufferedInput());
    return !closed_ && more ? DirectRead::kMore : DirectRead::kStopped;
  }
  if (n == 0) {
    close();
  } else if (errno == EINTR) {
    return DirectRead::kMore;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
    close();
  } else {
    afterWouldBlock();
  }
  return DirectRead::kStopped;
}

// Answers the request being parsed with an error and closes after writing it: the
// stream's framing can no longer be trusted.
void HttpConnection::failRequest(int status, std::string_view message) {
  refuseRequest(HttpResponse::jsonError(status, message));
}

void HttpConnection::refuseRequest(HttpResponse response) {
  read_state_ = ReadState::kError;
  reading_ = false;
  close_after_write_ = true;
  // Told last, once the refusal is queued: what waits for the body may answer inside
  // fail(), and must find the request answered.
  std::shared_ptr<BodyArrival> arrival = std::exchange(arrival_, nullptr);
  if (current_ && current_->responded()) {
    // A request handed over early and answered already gets no second answer: the
    // connection closes once what is queued is written.
    current_.reset();
    arrival->fail();
    flush();
    return;
  }
  auto exchange = current_ ? current_ : std::make_shared<HttpExchange>(weak_from_this(), loop_);
  current_.reset();
  exchange->keep_alive_ = false;
  if (std::find(pending_.begin(), pending_.end(), exchange) == pending_.end()) {
    pending_.push_back(exchange);
  }
  exchange->respond(std::move(response));
  updateInterest();
  if (arrival) arrival->fail();
}

void HttpConnection::onExchangeResponded() {
  if (closed_) return;
  queueResponses();
  flush();
}

// Serialises the responses at the head of the queue that are ready, in request order. A
// streamed response holds the head of the line until it ends.
void HttpConnection::queueResponses() {
  while (!pending_.empty() && !closed_) {
    HttpExchange& exchange = *pending_.front();
    if (!exchange.response_) break;
    bool keep_alive = exchange.keep_alive_ && !draining_;
    if (exchange.streaming_) {
      if (!queueStream(exchange)) break;
      // Cut short: only the close tells the client that no more is coming; it counts as a
      // cut answer, not as its head's status.
      if (exchange.stream_length_ && exchange.stream_queued_ != *exchange.stream_length_) {
        keep_alive = false;
        exchange.info().cut = true;
      }
      // Told at its end, with the body bytes it carried (a cut one: those before the cut).
      observe(exchange, exchange.response_->status, exchange.stream_queued_);
    } else {
      observe(exchange, exchange.response_->status, exchange.response_->body.size());
      HttpResponse& response = *exchange.response_;
      queueOut(responseHead(exchange, response, keep_alive, response.body.size()));
      if (!exchange.head_) {
        for (const codecs::Buffer& segment : response.body.segments()) queueOut(segment);
      }
    }
    exchange.response_.reset();  // the segments keep the bytes alive
    exchange.done_ = true;
    pending_.pop_front();
    afterResponse(keep_alive);
  }
  updateInterest();
}

void HttpConnection::observe(HttpExchange& exchange, int status, uint64_t body_bytes) {
  if (exchange.observed_) return;
  exchange.observed_ = true;
  exchange.info_.response_bytes = body_bytes;
  if (observer_) (*observer_)(exchange, status, body_bytes);
}

// Exchanges that will get no response (the connection closes, or an earlier response
// closes it): their handlers are told, and the observer sees them as 499 (the client
// went away) unless it saw their response already; a stream the connection closes under
// is seen with its status and the body bytes it carried.
void HttpConnection::cancelPending(std::deque<std::shared_ptr<HttpExchange>> exchanges) {
  for (auto& exchange : exchanges) {
    exchange->cancel();
    if (exchange->stream_head_written_) {
      observe(*exchange, exchange->response_->status, exchange->stream_queued_);
    } else {
      observe(*exchange, 499, 0);
    }
  }
}

// Writes what a streamed exchange has so far; true once it has ended.
bool HttpConnection::queueStream(HttpExchange& exchange) {
  bool keep_alive = exchange.keep_alive_ && !draining_;
  if (!exchange.stream_head_written_) {
    queueOut(responseHead(exchange, *exchange.response_, keep_alive, exchange.stream_length_));
    exchange.stream_head_written_ = true;
  }
  if (exchange.stream_length_) {
    for (codecs::Buffer& piece : exchange.stream_chunks_) {
      const uint64_t room = *exchange.stream_length_ - exchange.stream_queued_;
      if (piece.size() > room) piece = piece.slice(0, static_cast<size_t>(room));
      exchange.stream_queued_ += piece.size();
      if (!piece.empty()) queueOut(std::move(piece));
    }
    exchange.stream_chunks_.clear();
    return exchange.stream_ended_;
  }
  for (codecs::Buffer& chunk : exchange.stream_chunks_) {
    exchange.stream_queued_ += chunk.size();
    char size[24];
    int n = std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    queueOut(codecs::Buffer::copyOf(std::string_view(size, static_cast<size_t>(n))));
    queueOut(std::move(chunk));
    queueOut(codecs::Buffer::borrowed("\r\n"));
  }
  exchange.stream_chunks_.clear();
  if (!exchange.stream_ended_) return false;
  queueOut(codecs::Buffer::borrowed("0\r\n\r\n"));
  return true;
}

codecs::Buffer HttpConnection::responseHead(const HttpExchange& exchange, const HttpResponse& response,
                                            bool keep_alive, std::optional<uint64_t> length) const {
  using namespace std::string_view_literals;
  auto decimal = [](char (&digits)[24], uint64_t n) {
    return std::string_view(digits, static_cast<size_t>(std::to_chars(digits, digits + sizeof(digits), n).ptr - digits));
  };
  char status_digits[24], length_digits[24];
  const std::string_view status = decimal(status_digits, static_cast<uint64_t>(response.status));
  const std::string_view reason = reasonPhrase(response.status);
  const std::string& request_id = exchange.info_.request_id;
  // Every byte counted before the one allocation: the status line, the fields, and the
  // longest of each line the connection adds (framing, Connection).
  size_t size = "HTTP/1.1 "sv.size() + status.size() + 1 + reason.size() + 2;
  for (const auto& [name, value] : response.headers) size += HeadWriter::fieldSize(name, value);
  for (const auto& [name, value] : response.relayed) size += HeadWriter::fieldSize(name, value);
  if (!request_id.empty()) size += "x-request-id: \r\n"sv.size() + request_id.size();
  size += std::max("Transfer-Encoding: chunked\r\n"sv.size(), "Content-Length: \r\n"sv.size() + 20);
  size += "Connection: keep-alive\r\n"sv.size() + 2;
  codecs::MutableBuffer storage = codecs::MutableBuffer::allocate(size);
  HeadWriter head(storage.data());
  head.put("HTTP/1.1 "sv).put(status).put(" "sv).put(reason).put("\r\n"sv);
  for (const auto& [name, value] : response.headers) head.field(name, value);
  const size_t relayable = std::min<size_t>(response.relayed_names.size(), 32);
  uint32_t relayed = 0;  // bit i: relayed_names[i] went out
  for (const auto& [name, value] : response.relayed) {
    for (size_t i = 0; i < relayable; ++i) {
      if ((relayed >> i & 1u) == 0 && codecs::equalsIgnoreCase(name, response.relayed_names[i])) {
        relayed |= 1u << i;
        head.field(name, value);
        break;
      }
    }
  }
  // Written here, not added to the response's headers: no copy of it per request.
  if (!request_id.empty()) head.field("x-request-id"sv, request_id);
  if (!length) {
    head.put("Transfer-Encoding: chunked\r\n"sv);
  } else {
    head.field("Content-Length"sv, decimal(length_digits, *length));
  }
  if (!keep_alive) {
    head.put("Connection: close\r\n"sv);
  } else if (exchange.request_.http_minor == 0) {
    head.put("Connection: keep-alive\r\n"sv);
  }
  head.put("\r\n"sv);
  return std::move(storage).freeze(head.size());
}

void HttpConnection::afterResponse(bool keep_alive) {
  if (keep_alive) return;
  close_after_write_ = true;
  // Nothing after a closing response is answered.
  auto later = std::move(pending_);
  pending_.clear();
  cancelPending(std::move(later));
  reading_ = false;
}

void HttpConnection::flush() {
  const bool was_waiting = want_write_;
  bool took = false;  // the socket took bytes
  // Over TLS, bytes the session took may still wait in it after out_ is empty.
  while (!out_.empty() || (tls_ && tls_->hasBufferedOutput())) {
    const bool tls_held = tls_ && tls_->hasBufferedOutput();
    iovec iov[kMaxIov];
    size_t count = 0;
    for (size_t i = 0; i < out_.size() && count < kMaxIov; ++i) {
      const codecs::Buffer& b = out_[i];
      size_t skip = i == 0 ? out_offset_ : 0;
      iov[count].iov_base = const_cast<uint8_t*>(b.data() + skip);
      iov[count].iov_len = b.size() - skip;
      ++count;
    }
    ssize_t n = writeSocket(iov, static_cast<int>(count));
    // A TLS session may send what it held and then refuse the next record: progress too.
    took = took || n > 0 || (tls_held && !tls_->hasBufferedOutput());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close();
      return;
    }
    size_t written = static_cast<size_t>(n);
    out_bytes_ -= written;
    while (written > 0) {
      size_t left = out_.front().size() - out_offset_;
      if (written >= left) {
        written -= left;
        out_.erase(out_.begin());
        out_offset_ = 0;
      } else {
        out_offset_ += written;
        written = 0;
      }
    }
  }
  want_write_ = !out_.empty() || (tls_ && tls_->hasBufferedOutput());
  if (!want_write_) {
    send_timer_.disarm();
  } else if (took || !was_waiting) {
    send_timer_.armLoosely(limits_.send_timeout);  // the client must take some within it
  }
  if (!want_write_ && close_after_write_ && pending_.empty()) {
    if (tls_) tls_->shutdown();
    ::shutdown(fd_, SHUT_WR);
    close();
    return;
  }
  if (!want_write_ && draining_ && pending_.empty() && !current_) {
    close();
    return;
  }
  updateInterest();
  armTimer();
}

void HttpConnection::onWritable() { flush(); }

void HttpConnection::updateInterest() {
  if (closed_ || !event_) return;
  bool read = reading_ && pending_.size() < limits_.max_pipelined &&
              !(read_state_ == ReadState::kIdle && out_bytes_ >= kMaxUnreadAnswerBytes);
  short want = (read ? EV_READ : 0) | (want_write_ || tls_read_wants_write_ ? EV_WRITE : 0);
  // Reading again after a pause: decrypted bytes already inside the session raise no event.
  if (read && tls_ && tls_->hasBufferedInput()) event_active(event_, EV_READ, 0);
  if (want == interest_) return;  // each change is an epoll_ctl: only when it changes
  interest_ = want;
  event_del(event_);
  event_assign(event_, loop_.base(), fd_, want | EV_PERSIST, &HttpConnection::onSocketEvent, this);
  if (want) event_add(event_, nullptr);
}

void HttpConnection::armTimer() {
  if (closed_) return;
  switch (read_state_) {
    case ReadState::kHeaders:
      timer_.armLoosely(limits_.header_timeout);
      return;
    case ReadState::kBody:
      timer_.armLoosely(limits_.body_timeout);
      return;
    case ReadState::kIdle:
      if (pending_.empty() && out_.empty()) {
        timer_.armLoosely(limits_.idle_timeout);
      } else {
        timer_.disarm();  // waiting on handlers: their own deadlines apply
      }
      return;
    case ReadState::kError:
      timer_.armLoosely(limits_.body_timeout);  // bound the time spent writing the error
      return;
  }
}

void HttpConnection::onTimeout() {
  std::shared_ptr<HttpConnection> self = shared_from_this();
  if (read_state_ == ReadState::kHeaders || read_state_ == ReadState::kBody) {
    failRequest(408, read_state_ == ReadState::kHeaders
                         ? "timed out waiting for the request headers"
                         : "timed out waiting for the request body");
    return;
  }
  close();
}

void HttpConnection::onSendTimeout() {
  if (!want_write_) return;
  send_timed_out_ = true;
  close();
}

void HttpConnection::closeWhenIdle() {
  draining_ = true;
  if (pending_.empty() && out_.empty() && read_state_ == ReadState::kIdle) close();
}

void HttpConnection::close() {
  if (closed_) return;
  closed_ = true;
  std::shared_ptr<HttpConnection> self = shared_from_this();
  timer_.disarm();
  send_timer_.disarm();
  if (event_) event_del(event_);
  if (arrival_) std::exchange(arrival_, nullptr)->fail();
  if (current_) current_->cancel();
  current_.reset();
  auto pending = std::move(pending_);
  pending_.clear();
  cancelPending(std::move(pending));
  out_.clear();
  out_bytes_ = 0;
  tls_.reset();  // before its socket
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (on_closed_) on_closed_(this);
}

}  // namespace infergate::gateway::http
