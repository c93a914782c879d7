#include "gateway/http2/server_connection.h"

#include <algorithm>

#include "codecs/status.h"
#include "codecs/text.h"

namespace infergate::gateway::http2 {
namespace {

// A pseudo-field's value in the form RFC 9113 8.3.1 gives it: a token (:method, :scheme),
// a :path from '/' (or '*', for OPTIONS), and in :path and :authority no byte a URI does
// not hold bare (controls, space, DEL).
bool pseudoValueOk(bool token, bool path, std::string_view value) {
  if (token) return codecs::isHttpToken(value);
  if (path && (value.empty() || (value[0] != '/' && value != "*"))) return false;
  for (const char c : value) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

ServerConnection::ServerConnection(Handler& handler, Options options)
    : Connection(handler, Role::kServer, options.max_header_list_bytes,
                 std::initializer_list<Setting>{
                     {SettingId::kMaxConcurrentStreams, options.max_concurrent_streams},
                     {SettingId::kInitialWindowSize, options.stream_window},
                 }),
      owner_(handler),
      options_(options),
      reset_tokens_(options.reset_burst),
      reset_counted_(std::chrono::steady_clock::now()) {}

// ---- answers ----

void ServerConnection::submitResponse(int32_t id, std::span<const Field> fields, bool end_stream) {
  Stream* s = find(id);
  // After a connection error its GOAWAY is the last frame.
  if (terminated_ || s == nullptr || s->resetting || s->response_started) return;
  s->response_started = true;
  encodeHeaders(id, fields, end_stream);
  if (end_stream) return localEnded(*s);
  s->sendable = true;
  schedule(*s);
}

void ServerConnection::onBodyDone(StreamState& state) {
  auto& s = static_cast<Stream&>(state);
  trailer_fields_.clear();
  owner_.trailers(s.id, trailer_fields_);
  encodeHeaders(s.id, trailer_fields_, true);
  trailer_fields_.clear();
  localEnded(s);
}

void ServerConnection::localEnded(Stream& s) {
  s.local_ended = true;
  if (s.remote_ended) return closeAfterQueued(s.id, kNoError);
  // Answered before the whole request came: the rest is not wanted (RFC 9113 8.1).
  reset(s, kNoError, kNoError);
}

void ServerConnection::goAway() {
  if (goaway_sent_ || terminated_) return;
  goaway_sent_ = true;
  goaway_last_ = last_stream_;
  std::string payload;
  appendU32(payload, static_cast<uint32_t>(last_stream_));
  appendU32(payload, kNoError);
  queueFrame(FrameType::kGoaway, 0, 0, payload);
}

bool ServerConnection::done() {
  if (terminated_) return !controlPending();  // its GOAWAY is out: nothing more goes
  return (goaway_sent_ || goaway_received_) && streams_.empty() && !wantsWrite();
}

void ServerConnection::closeStream(int32_t id, uint32_t code, bool by_peer) {
  if (streams_.erase(id) == 0) return;
  owner_.onStreamClose(id, code, by_peer);
}

// ---- windows ----

void ServerConnection::consume(int32_t id, size_t bytes) {
  if (Stream* s = find(id)) giveBack(*s, bytes);
}

void ServerConnection::giveBack(Stream& s, size_t bytes) {
  if (terminated_ || s.resetting || s.remote_ended) return;  // nothing more comes: no window to give
  s.consumed += static_cast<int64_t>(bytes);
  if (s.consumed < s.window / 2) return;
  queueWindowUpdate(s.id, static_cast<uint32_t>(s.consumed));
  s.available += s.consumed;
  s.consumed = 0;
}

void ServerConnection::setStreamWindow(int32_t id, int32_t window) {
  Stream* s = find(id);
  if (terminated_ || s == nullptr || s->resetting || s->remote_ended || window <= s->window) return;
  // What the owner consumed goes back with the raise, in one WINDOW_UPDATE.
  const int64_t increment = window - s->window + s->consumed;
  s->window = window;
  s->available += increment;
  s->consumed = 0;
  queueWindowUpdate(id, static_cast<uint32_t>(increment));
}

// ---- input ----

bool ServerConnection::onStreamData(StreamState& state, uint32_t length) {
  auto& s = static_cast<Stream&>(state);
  if (s.remote_ended) return resetForFault(s, kStreamClosed);
  s.data_bytes += length;  // the padding, counted here, comes off in onStreamPadding
  s.available -= length;
  if (s.available < 0) return resetForFault(s, kFlowControlError);
  return true;
}

void ServerConnection::onSettingsAcked() {
  // Streams opened before the client applied this end's SETTINGS could take the initial
  // 65,535 (RFC 9113 6.9.2); from now on the client counts with the window announced.
  if (options_.stream_window >= static_cast<uint32_t>(kDefaultWindow)) return;
  const int64_t shrink = kDefaultWindow - int64_t{options_.stream_window};
  for (auto& [id, s] : streams_) s.available -= shrink;
}

void ServerConnection::onStreamPadding(StreamState& state, size_t bytes) {
  auto& s = static_cast<Stream&>(state);
  s.data_bytes -= bytes;
  giveBack(s, bytes);
}

void ServerConnection::onRemoteEnd(StreamState& state) {
  auto& s = static_cast<Stream&>(state);
  // A content-length the DATA did not add up to: the request is malformed, and what the
  // owner was handed of it is not a request (RFC 9113 8.1.1).
  if (s.content_length && *s.content_length != s.data_bytes) {
    resetForFault(s, kProtocolError);
    return;
  }
  s.remote_ended = true;
  owner_.onRequestEnd(s.id);
}

bool ServerConnection::onHeadersStart(int32_t id) {
  if ((id & 1) == 0) {
    return connectionError(kProtocolError, codecs::strCat("a HEADERS frame on stream ", id,
                                                          ", an even id, which a client may not open"));
  }
  return true;
}

bool ServerConnection::discardBlock() {
  HpackDecoder::Result r;
  return decodeBlock([](std::string_view, std::string_view) {}, r);
}

bool ServerConnection::onHeaderBlock(int32_t id) {
  if (id > last_stream_) {  // a new stream
    last_stream_ = id;
    if (id > goaway_last_) return discardBlock();  // after this end's GOAWAY: ignored
    if (streams_.size() >= options_.max_concurrent_streams) {
      if (!discardBlock() || !owePeer()) return false;
      queueRst(id, kRefusedStream);
      return true;
    }
    Stream& s = streams_[id];
    s.id = id;
    s.send_window = peer_initial_window_;
    s.window = options_.stream_window;
    // Until the client acknowledges the window announced, it may count with HTTP/2's first.
    s.available = settings_acked_ ? s.window : std::max<int64_t>(s.window, kDefaultWindow);
    owner_.onRequestStart(id);
    return requestBlock(s);
  }
  Stream* s = find(id);
  if (s == nullptr || s->resetting) return discardBlock();  // closed: in flight
  // A second block: the request's trailers, which must end it and carry no pseudo-field.
  bool malformed = false;
  HpackDecoder::Result r;
  const bool decoded = decodeBlock(
      [&](std::string_view name, std::string_view value) {
        if ((!name.empty() && name[0] == ':') || checkRegularField(name, value) == FieldCheck::kMalformed) {
          malformed = true;
        }
      },
      r);
  if (!decoded) return false;
  if (s->remote_ended) return resetForFault(*s, kStreamClosed);
  if (malformed || !block_end_stream_) return resetForFault(*s, kProtocolError);
  onRemoteEnd(*s);
  return true;
}

bool ServerConnection::requestBlock(Stream& s) {
  const int32_t id = s.id;
  // What the block must look like (RFC 9113 8.3.1): :method, :scheme and :path once each
  // (:authority at most once), no other pseudo-field, all before the regular ones.
  bool method = false, scheme = false, path = false, authority = false;
  bool malformed = false, regular_seen = false;
  HpackDecoder::Result r;
  const bool decoded = decodeBlock(
      [&](std::string_view name, std::string_view value) {
        if (malformed) return;
        if (!name.empty() && name[0] == ':') {
          bool* seen = name == ":method"      ? &method
                       : name == ":scheme"    ? &scheme
                       : name == ":path"      ? &path
                       : name == ":authority" ? &authority
                                              : nullptr;
          if (regular_seen || seen == nullptr || *seen ||
              !pseudoValueOk(seen == &method || seen == &scheme, seen == &path, value)) {
            malformed = true;
            return;
          }
          *seen = true;
          owner_.onField(id, name, value);
          return;
        }
        regular_seen = true;
        const FieldCheck check = checkRegularField(name, value);
        if (check == FieldCheck::kMalformed) {
          malformed = true;
          return;
        }
        if (check == FieldCheck::kKeep) {
          if (name == "content-length") {
            // Digits only; given twice, the same both times (RFC 9110 8.6).
            const std::optional<uint64_t> n = codecs::parseUint64(value);
            if (!n || (s.content_length && *s.content_length != *n)) {
              malformed = true;
              return;
            }
            s.content_length = n;
          }
          owner_.onField(id, name, value);
        }
      },
      r);
  if (!decoded) return false;
  if (block_end_stream_ && s.content_length && *s.content_length != 0) malformed = true;
  if (malformed || !method || !scheme || !path) return resetForFault(s, kProtocolError);
  if (block_end_stream_) s.remote_ended = true;  // before the owner answers: no reset for the rest
  owner_.onHeadersEnd(id, r.too_large);
  if (block_end_stream_) {
    StreamState* t = findStream(id);
    if (t != nullptr && !t->resetting) owner_.onRequestEnd(id);
  }
  return true;
}

bool ServerConnection::onGoawayFrame(int32_t, uint32_t code) {
  owner_.onGoaway(code);  // the client leaves: what it asked for is still answered
  return true;
}

bool ServerConnection::onRstFrame(uint32_t code) {
  // A stream never opened: ignored (see the top of server_connection.h).
  if (findStream(frame_.stream) == nullptr) return true;
  if (!chargeReset()) return false;
  closeStream(frame_.stream, code, true);
  return true;
}

bool ServerConnection::chargeReset() {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - reset_counted_).count();
  reset_counted_ = now;
  reset_tokens_ = std::min<double>(options_.reset_burst, reset_tokens_ + seconds * options_.resets_per_second);
  if (reset_tokens_ < 1) {
    reset_flooded_ = true;
    return connectionError(kEnhanceYourCalm, codecs::strCat("the client reset streams faster than ",
                                                            options_.resets_per_second, " a second after a burst of ",
                                                            options_.reset_burst));
  }
  reset_tokens_ -= 1;
  return true;
}

}  // namespace infergate::gateway::http2
