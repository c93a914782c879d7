#include "gateway/http/http_connection.h"

// Reading requests: the quick reader for the common head (quick_head.h), http_parser for
// every other, and the steps a request goes through whichever read it (beginRequest,
// admitHead, completeRequest). The socket, the responses and the timers are in
// http_connection.cc.

#include <algorithm>
#include <array>
#include <cstring>

#include "codecs/status.h"
#include "codecs/text.h"
#include "gateway/http/quick_head.h"

namespace infergate::gateway::http {
namespace {

// Room made for a request's headers up front (the vector grows past it): what the Triton
// clients and curl send fits.
constexpr size_t kExpectedHeaders = 16;
// A body handed over early tells its arrival once at least this much more is in.
constexpr uint64_t kArrivalStep = 256 * 1024;
constexpr std::string_view kChunkWithoutCrlf =
    "malformed HTTP request: chunk data not followed by CRLF";
// The quick reader looks no further for a head's end, and takes at most this many fields
// (the header count limit may be lower).
constexpr size_t kQuickHeadMax = 8 * 1024;
constexpr size_t kQuickMaxHeaders = 32;

// Target bytes the quick reader takes: RFC 3986 unreserved, sub-delims, ':', '@', '/',
// '?' and '%'; every one is a plain path or query byte to http_parser too.
constexpr auto kQuickTargetBytes = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (char c : std::string_view("-._~!$&'()*+,;=:@/?%")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool isQuickTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  for (char c : target) {
    if (!kQuickTargetBytes[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// The fields that frame a request or that http_parser reads itself.
enum class QuickFraming { kNone, kContentLength, kHost, kConnection, kDecline };

QuickFraming quickFraming(std::string_view name) {
  static constexpr std::pair<std::string_view, QuickFraming> kFields[] = {
      {"host", QuickFraming::kHost},
      {"content-length", QuickFraming::kContentLength},
      {"connection", QuickFraming::kConnection},
      {"upgrade", QuickFraming::kDecline},
      {"expect", QuickFraming::kDecline},
      {"proxy-connection", QuickFraming::kDecline},
  };
  // No two of these names have the same length: one comparison at most per field
  // (Transfer-Encoding, and every name http_parser reads as it, is declined first).
  static constexpr auto kByLength = [] {
    std::array<std::pair<std::string_view, QuickFraming>, 18> t{};
    for (const auto& field : kFields) {
      // A second name of one length would stop the build here (no constant evaluation).
      if (!t[field.first.size()].first.empty()) throw "two framing fields of one length";
      t[field.first.size()] = field;
    }
    return t;
  }();
  if (readAsTransferEncoding(name)) return QuickFraming::kDecline;
  if (name.size() >= kByLength.size()) return QuickFraming::kNone;
  const auto& [field, framing] = kByLength[name.size()];
  return !field.empty() && codecs::equalsIgnoreCase(name, field) ? framing : QuickFraming::kNone;
}

}  // namespace

void HttpConnection::parse(const char* data, size_t size) {
  if (read_state_ == ReadState::kError) return;
  if (quick_body_left_ > 0) {  // the rest of a body whose head the quick reader read
    const size_t take = static_cast<size_t>(std::min<uint64_t>(size, quick_body_left_));
    uint8_t* dst = body_->data + body_size_;
    if (reinterpret_cast<const uint8_t*>(data) != dst) std::memcpy(dst, data, take);  // not read in place
    body_size_ += take;
    quick_body_left_ -= take;
    data += take;
    size -= take;
    if (quick_body_left_ > 0) {
      bodyProgress();
      return;
    }
    if (!completeRequest(/*keep_alive=*/true)) return;
  }
  // Requests of the common shape first; the rest (a head cut by the read, anything
  // uncommon) goes to http_parser from its first byte.
  while (size > 0 && quick_ok_ && read_state_ == ReadState::kIdle) {
    const size_t used = quickRequest(data, size);
    if (closed_ || read_state_ == ReadState::kError) return;
    if (used == 0) break;
    data += used;
    size -= used;
  }
  if (size == 0) return;
  if (chunk_crlf_owed_ > 0) {  // the CRLF after a chunk's data, cut by the previous read
    const char* p = data;
    if (!checkChunkEnd(p, data + size)) {
      failRequest(400, kChunkWithoutCrlf);
      return;
    }
  }
  parse_end_ = data + size;
  size_t parsed = http_parser_execute(&parser_, &parserSettings(), data, size);
  // http_parser stops after a request asking to Upgrade. No upgrade is taken (RFC 9110
  // 7.8 lets a server ignore it): the request was served as HTTP/1.1, and the bytes after
  // it are the next request, however the reads cut them.
  while (parser_.upgrade && parsed < size && !closed_ && read_state_ != ReadState::kError &&
         HTTP_PARSER_ERRNO(&parser_) == HPE_OK) {
    parser_.upgrade = 0;
    data += parsed;
    size -= parsed;
    parsed = http_parser_execute(&parser_, &parserSettings(), data, size);
  }
  parse_end_ = nullptr;
  if (closed_ || read_state_ == ReadState::kError) return;
  if (parsed != size || HTTP_PARSER_ERRNO(&parser_) != HPE_OK) {
    http_errno err = HTTP_PARSER_ERRNO(&parser_);
    if (err == HPE_HEADER_OVERFLOW) {
      failRequest(431, "request headers exceed the size limit");
    } else {
      failRequest(400, codecs::strCat("malformed HTTP request: ", http_errno_description(err)));
    }
  }
}

// A request whose head QuickHeadReader reads (gateway/http/quick_head.h): GET or POST, an
// origin-form target of plain URI bytes, HTTP/1.1, at most one Host (without SP, HTAB or
// comma), a body framed by one Content-Length or none, no Transfer-Encoding, Upgrade,
// Expect or Proxy-Connection, Connection only as keep-alive, within the limits, the head
// whole in this read (the body may follow in later reads). Whatever falls outside is
// declined (0) and left to http_parser, whose reading (and refusal) of it is the one that
// counts; inside, both read the request the same (the http_connection fuzzer compares
// them: the whole stream goes this way, the same stream cut byte by byte through
// http_parser). The bytes consumed, or 0.
size_t HttpConnection::quickRequest(const char* data, size_t size) {
  QuickHeadReader in(data, std::min(size, kQuickHeadMax));
  std::string_view line;
  if (!in.nextLine(line)) return 0;
  std::string_view method;
  if (line.starts_with("GET ")) {
    method = "GET";
  } else if (line.starts_with("POST ")) {
    method = "POST";
  } else {
    return 0;
  }
  constexpr std::string_view kVersion = " HTTP/1.1";
  if (!line.ends_with(kVersion) || line.size() < method.size() + 1 + kVersion.size()) return 0;
  const std::string_view target =
      line.substr(method.size() + 1, line.size() - method.size() - 1 - kVersion.size());
  if (!isQuickTarget(target)) return 0;

  // Left uninitialized (value-initialized pairs of views would be 1 KiB zeroed per
  // request): only the first `count` are read.
  HeaderList::FieldSpan fields[kQuickMaxHeaders];
  size_t count = 0;
  bool host = false;
  std::optional<uint64_t> length;
  for (;;) {
    std::string_view name, value;
    const QuickHeadReader::Field field = in.nextField(name, value);
    if (field == QuickHeadReader::Field::kDecline) return 0;
    if (field == QuickHeadReader::Field::kEnd) break;
    if (count == kQuickMaxHeaders || count == limits_.max_header_count) return 0;
    switch (quickFraming(name)) {
      case QuickFraming::kNone:
        break;
      case QuickFraming::kContentLength:
        if (length) return 0;  // given twice: http_parser refuses it
        length = quickContentLength(value);
        if (!length) return 0;
        break;
      case QuickFraming::kHost:
        // (A byte loop: find_first_of calls memchr once per byte of the value.)
        if (host || std::any_of(value.begin(), value.end(),
                                [](char c) { return c == ' ' || c == '\t' || c == ','; })) {
          return 0;
        }
        host = true;
        break;
      case QuickFraming::kConnection:
        if (!codecs::equalsIgnoreCase(value, "keep-alive")) return 0;
        break;
      case QuickFraming::kDecline:
        return 0;
    }
    fields[count++] = in.placeOf(name, value);
  }
  const size_t head = in.consumed();
  const uint64_t body = length.value_or(0);
  if (head > limits_.max_header_bytes || body > limits_.max_body_bytes) return 0;

  beginRequest();
  HttpRequest& request = current_->request_;
  request.method = method;
  request.target = target;
  request.http_minor = 1;
  request.headers.addFromHead(std::string_view(data, head), std::span(fields, count));
  if (!admitHead(length, /*chunked=*/false)) return 0;
  ++quick_requests_;
  // The body's bytes in this read; the rest comes with the next reads (parse(), or
  // readIntoBody() straight into the storage).
  const size_t here = static_cast<size_t>(std::min<uint64_t>(body, size - head));
  if (here > 0) std::memcpy(body_->data, data + head, here);
  body_size_ = here;
  if (here < body) {
    quick_body_left_ = body - here;
    armTimer();
    if (!bodyProgress()) return 0;
    return head + here;
  }
  if (!completeRequest(/*keep_alive=*/true)) return 0;
  return head + here;
}

// ---- http_parser's callbacks, and the steps both readers share -------------------------

// RFC 9110: a request target too long is 414, headers too large 431 (RFC 6585).
//
// Past the limit, the answer waits for the token to be complete: a head that is too big and
// also malformed later in the same token gets the parser's 400 when it arrives in one read,
// so it must get 400 too when a read boundary cuts that token (a refusal must not depend on
// how the bytes were split). Until then the pieces are dropped, so memory stays bounded; the
// header timeout bounds the time.
HttpConnection::HeadPiece HttpConnection::addHeaderBytes(const char* at, size_t len, bool target) {
  header_bytes_ += len;
  if (header_bytes_ <= limits_.max_header_bytes) return HeadPiece::kKeep;
  if (!completesToken(at, len)) return HeadPiece::kDrop;
  if (target) {
    failRequest(414, codecs::strCat("the request target exceeds the limit of ",
                                    limits_.max_header_bytes, " bytes for the request head"));
  } else {
    failRequest(431, codecs::strCat("request headers exceed the limit of ",
                                    limits_.max_header_bytes, " bytes"));
  }
  return HeadPiece::kRefused;
}

bool HttpConnection::checkChunkEnd(const char*& p, const char* end) {
  for (; chunk_crlf_owed_ > 0 && p < end; ++p, --chunk_crlf_owed_) {
    if (*p != (chunk_crlf_owed_ == 2 ? '\r' : '\n')) return false;
  }
  return true;
}

namespace {

// What the request's framing headers say that the parser lets through and RFC 9112 does
// not: an answer to give instead of serving the request, or nothing.
std::optional<std::pair<int, std::string>> framingRefusal(const http_parser& p,
                                                          const HeaderList& headers) {
  if (p.http_major != 1) {
    return std::make_pair(505, codecs::strCat("HTTP/", static_cast<int>(p.http_major), ".",
                                              static_cast<int>(p.http_minor),
                                              " is not supported: send HTTP/1.1"));
  }
  size_t hosts = 0;
  // RFC 9110 5.1 / 5.6.2: a field name is a token. A name with a space before its colon is
  // the classic shape of request smuggling (a proxy and its upstream disagreeing on it).
  for (const auto& [name, value] : headers) {
    if (!codecs::isHttpToken(name)) {
      return std::make_pair(400, codecs::strCat("invalid header name '", name, "'"));
    }
    if (codecs::equalsIgnoreCase(name, "Host")) {
      ++hosts;
      if (value.find_first_of(" \t,") != std::string::npos) {
        return std::make_pair(400, codecs::strCat("invalid Host header '", value, "'"));
      }
    } else if (codecs::equalsIgnoreCase(name, "Transfer-Encoding") &&
               !codecs::equalsIgnoreCase(codecs::trimAscii(value), "chunked")) {
      // RFC 9112 6.3: chunked not the final coding leaves the body's end unknown (400);
      // 6.1: a coding the server does not implement before it is 501.
      const size_t comma = value.rfind(',');
      const std::string_view last =
          codecs::trimAscii(comma == std::string::npos ? std::string_view(value)
                                                       : std::string_view(value).substr(comma + 1));
      if (!codecs::equalsIgnoreCase(last, "chunked")) {
        return std::make_pair(400, codecs::strCat("Transfer-Encoding '", value,
                                                  "' does not end in chunked: the body's end "
                                                  "cannot be known"));
      }
      return std::make_pair(501, codecs::strCat("Transfer-Encoding '", value,
                                                "' is not supported (only chunked)"));
    }
  }
  if (hosts > 1) return std::make_pair(400, std::string("more than one Host header"));
  return std::nullopt;
}

}  // namespace

void HttpConnection::finishHeaderLine() {
  if (!in_header_value_) return;
  current_->request_.headers.add(header_field_, codecs::trimAscii(header_value_));
  header_field_.clear();
  header_value_.clear();
  in_header_value_ = false;
}

void HttpConnection::beginRequest() {
  current_ = std::make_shared<HttpExchange>(weak_from_this(), loop_);
  read_state_ = ReadState::kHeaders;
  header_bytes_ = 0;
  chunks_ = 0;
  chunk_left_ = 0;
  chunk_crlf_owed_ = 0;
  body_size_ = 0;
  early_after_ = 0;
  in_header_value_ = false;
  header_field_.clear();
  header_value_.clear();
}

int HttpConnection::onMessageBegin(http_parser* p) {
  auto* c = static_cast<HttpConnection*>(p->data);
  c->beginRequest();
  c->current_->request_.headers.reserve(kExpectedHeaders);
  c->armTimer();
  return 0;
}

int HttpConnection::onUrl(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<HttpConnection*>(p->data);
  HeadPiece piece = c->addHeaderBytes(at, len, /*target=*/true);
  if (piece == HeadPiece::kRefused) return -1;
  if (piece == HeadPiece::kKeep) c->current_->request_.target.append(at, len);
  return 0;
}

int HttpConnection::onHeaderField(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<HttpConnection*>(p->data);
  HeadPiece piece = c->addHeaderBytes(at, len);
  if (piece == HeadPiece::kRefused) return -1;
  if (c->in_header_value_) c->finishHeaderLine();
  // Counted once the name is complete, for the reason addHeaderBytes waits.
  if (c->completesToken(at, len) &&
      c->current_->request_.headers.size() >= c->limits_.max_header_count) {
    c->failRequest(431, codecs::strCat("more than ", c->limits_.max_header_count,
                                       " request headers"));
    return -1;
  }
  if (piece == HeadPiece::kKeep) c->header_field_.append(at, len);
  return 0;
}

int HttpConnection::onHeaderValue(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<HttpConnection*>(p->data);
  HeadPiece piece = c->addHeaderBytes(at, len);
  if (piece == HeadPiece::kRefused) return -1;
  c->in_header_value_ = true;
  if (piece == HeadPiece::kKeep) c->header_value_.append(at, len);
  return 0;
}

bool HttpConnection::reserveBody(uint64_t size) {
  uint64_t need = size + kRequestBodyPadding;
  if (body_ && body_->placed()) body_ = std::move(own_body_);  // back to the own storage
  if (!body_ || body_.use_count() > 1) body_ = std::make_shared<BodyStorage>();
  if (body_->capacity < need) {
    auto bigger = std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[need]);
    if (!bigger) return false;
    if (body_size_) std::memcpy(bigger.get(), body_->data, body_size_);
    body_->bytes = std::move(bigger);
    body_->data = body_->bytes.get();
    body_->capacity = need;
  }
  return true;
}

bool HttpConnection::takeBodyPlace(BodyPlace place, uint64_t content_length) {
  if (place.data == nullptr || place.capacity < content_length + kRequestBodyPadding) return false;
  if (body_ && !body_->placed()) own_body_ = std::move(body_);  // for the next requests
  body_ = std::make_shared<BodyStorage>();
  body_->place_owner = std::move(place.owner);
  body_->data = place.data;
  body_->capacity = place.capacity;
  return true;
}

int HttpConnection::onHeadersComplete(http_parser* p) {
  auto* c = static_cast<HttpConnection*>(p->data);
  c->finishHeaderLine();
  if (c->current_->request_.headers.size() > c->limits_.max_header_count) {
    c->failRequest(431, codecs::strCat("more than ", c->limits_.max_header_count,
                                       " request headers"));
    return -1;
  }
  HttpRequest& request = c->current_->request_;
  if (auto refusal = framingRefusal(*p, request.headers)) {
    c->failRequest(refusal->first, refusal->second);
    return -1;
  }
  request.method = http_method_str(static_cast<http_method>(p->method));
  request.http_minor = p->http_minor;
  c->current_->head_ = p->method == HTTP_HEAD;
  const bool has_length = (p->flags & F_CONTENTLENGTH) != 0;
  if (!c->admitHead(has_length ? std::optional<uint64_t>(p->content_length) : std::nullopt,
                    (p->flags & F_CHUNKED) != 0)) {
    return -1;
  }
  c->armTimer();
  // 100-continue: only here, the quick reader leaves a request with Expect to http_parser.
  const std::string_view* expect = request.headers.find("Expect");
  if (expect && codecs::equalsIgnoreCase(codecs::trimAscii(*expect), "100-continue") &&
      (has_length ? p->content_length > 0 : true) && c->pending_.empty() && c->out_.empty()) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    c->queueOut(codecs::Buffer::borrowed(kContinue));
    c->flush();
  }
  return 0;
}

bool HttpConnection::admitHead(std::optional<uint64_t> content_length, bool chunked) {
  HttpRequest& request = current_->request_;
  request.content_length = content_length;
  if (gate_ != nullptr) {
    if (std::optional<HttpResponse> refusal = (*gate_)(request, tls_.get())) {
      request.body_place = BodyPlace();  // not held while the refusal waits to be written
      refuseRequest(std::move(*refusal));
      return false;
    }
  }
  // Released on every way out but the one that reads the body there.
  BodyPlace place = std::move(request.body_place);
  request.body_place = BodyPlace();
  if (content_length && *content_length > limits_.max_body_bytes) {
    failRequest(413, codecs::strCat("request body of ", *content_length,
                                    " bytes exceeds the limit of ", limits_.max_body_bytes,
                                    " bytes"));
    return false;
  }
  // Early only where the body has a length and the handler can have it whole (the storage
  // is the body's full size from the start).
  const uint64_t early = request.early_dispatch_bytes;
  request.early_dispatch_bytes = 0;
  if (content_length && early > 0 && early < *content_length) early_after_ = early;
  if (content_length && takeBodyPlace(std::move(place), *content_length)) {
    read_state_ = ReadState::kBody;
    return true;
  }
  if (!reserveBody(std::max<uint64_t>(content_length.value_or(0), chunked ? 16 * 1024 : 0))) {
    failRequest(413, "not enough memory for the request body");
    return false;
  }
  read_state_ = ReadState::kBody;
  return true;
}

int HttpConnection::onBody(http_parser* p, const char* at, size_t len) {
  auto* c = static_cast<HttpConnection*>(p->data);
  if (c->body_size_ + len > c->limits_.max_body_bytes) {
    c->failRequest(413, codecs::strCat("request body exceeds the limit of ",
                                       c->limits_.max_body_bytes, " bytes"));
    return -1;
  }
  uint8_t* dst = c->body_->data + c->body_size_;
  if (reinterpret_cast<const uint8_t*>(at) != dst) {  // not read in place
    if (c->body_size_ + len + kRequestBodyPadding > c->body_->capacity) {
      uint64_t grow = std::max<uint64_t>(c->body_->capacity * 2, c->body_size_ + len);
      if (!c->reserveBody(std::min<uint64_t>(grow, c->limits_.max_body_bytes))) {
        c->failRequest(413, "not enough memory for the request body");
        return -1;
      }
      dst = c->body_->data + c->body_size_;
    }
    std::memcpy(dst, at, len);
  }
  c->body_size_ += len;
  if (!c->bodyProgress()) return -1;
  if ((p->flags & F_CHUNKED) && len > 0) {
    c->chunk_left_ -= std::min<uint64_t>(len, c->chunk_left_);
    if (c->chunk_left_ == 0) {  // the chunk's data ends here: CRLF must follow
      c->chunk_crlf_owed_ = 2;
      const char* after = at + len;
      if (!c->checkChunkEnd(after, c->parse_end_)) {
        c->failRequest(400, kChunkWithoutCrlf);
        return -1;
      }
    }
  }
  return 0;
}

int HttpConnection::onChunkHeader(http_parser* p) {
  auto* c = static_cast<HttpConnection*>(p->data);
  if (p->content_length > 0 && ++c->chunks_ > c->limits_.max_chunks) {
    c->failRequest(400, codecs::strCat("request body has more than ", c->limits_.max_chunks,
                                       " chunks"));
    return -1;
  }
  c->chunk_left_ = p->content_length;
  return 0;
}

int HttpConnection::onMessageComplete(http_parser* p) {
  auto* c = static_cast<HttpConnection*>(p->data);
  const bool keep_alive = http_should_keep_alive(p) != 0;
  // http_parser reads nothing more on this connection but the next request; the quick
  // reader must not read past its end either.
  if (!keep_alive) c->quick_ok_ = false;
  return c->completeRequest(keep_alive) ? 0 : -1;
}

// A request the headers gate asked for early: handed to the handler once early_after_
// body bytes are in, then its BodyArrival is told every kArrivalStep bytes. False once
// the connection closed or failed.
bool HttpConnection::bodyProgress() {
  if (arrival_) {
    // Told in steps (the end is told by completeRequest): a sender woken for every read
    // writes small pieces and wakes its upstream as often (bench/README.md, "Large bodies
    // as they arrive").
    if (body_size_ - arrival_->received() < kArrivalStep) return true;
    // Those the body's watchers start may answer, or close the connection.
    std::shared_ptr<BodyArrival> arrival = arrival_;
    arrival->advance(body_size_);
    return !closed_ && read_state_ != ReadState::kError;
  }
  if (early_after_ == 0 || body_size_ < early_after_) return true;
  const uint64_t size = current_->request_.content_length.value_or(0);
  if (body_size_ >= size || !body_ || body_->capacity < size + kRequestBodyPadding) return true;
  early_after_ = 0;
  std::shared_ptr<HttpExchange> exchange = current_;
  arrival_ = std::make_shared<BodyArrival>(body_->data, size);
  arrival_->advance(body_size_);
  exchange->request_.arrival = arrival_;
  // The quick reader takes only requests that keep the connection; http_parser knows from
  // the head whether this one does.
  fillRequest(*exchange, size, quick_body_left_ > 0 || http_should_keep_alive(&parser_) != 0);
  pending_.push_back(exchange);
  return runHandler(exchange);
}

void HttpConnection::fillRequest(HttpExchange& exchange, uint64_t body_size, bool keep_alive) {
  HttpRequest& request = exchange.request_;
  auto storage = body_;
  request.body = codecs::Buffer(std::shared_ptr<const void>(storage, storage->data), storage->data,
                                static_cast<size_t>(body_size));
  request.body_readable = storage->capacity;
  exchange.keep_alive_ = keep_alive;
  exchange.info_.start = std::chrono::steady_clock::now();
  exchange.info_.client_address = peer_;
  exchange.info_.request_bytes = body_size;
}

bool HttpConnection::runHandler(const std::shared_ptr<HttpExchange>& exchange) {
  handler_(exchange);
  if (closed_ || read_state_ == ReadState::kError) return false;
  updateInterest();
  return true;
}

bool HttpConnection::completeRequest(bool keep_alive) {
  if (arrival_) {  // the handler has it: what is left is to say the body is whole
    std::shared_ptr<BodyArrival> arrival = std::move(arrival_);
    current_.reset();
    read_state_ = ReadState::kIdle;
    armTimer();
    arrival->advance(body_size_);
    if (closed_ || read_state_ == ReadState::kError) return false;
    updateInterest();
    return true;
  }
  std::shared_ptr<HttpExchange> exchange = std::move(current_);
  fillRequest(*exchange, body_size_, keep_alive);
  read_state_ = ReadState::kIdle;
  pending_.push_back(exchange);
  armTimer();
  return runHandler(exchange);
}

const http_parser_settings& HttpConnection::parserSettings() {
  static const http_parser_settings settings = [] {
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_message_begin = &HttpConnection::onMessageBegin;
    s.on_url = &HttpConnection::onUrl;
    s.on_header_field = &HttpConnection::onHeaderField;
    s.on_header_value = &HttpConnection::onHeaderValue;
    s.on_headers_complete = &HttpConnection::onHeadersComplete;
    s.on_body = &HttpConnection::onBody;
    s.on_chunk_header = &HttpConnection::onChunkHeader;
    s.on_message_complete = &HttpConnection::onMessageComplete;
    return s;
  }();
  return settings;
}

}  // namespace infergate::gateway::http
