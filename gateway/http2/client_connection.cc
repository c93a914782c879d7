#include "gateway/http2/client_connection.h"

#include <algorithm>
#include <cstring>

#include "codecs/status.h"
#include "codecs/text.h"

namespace infergate::gateway::http2 {
namespace {

// Acknowledgements the output may owe before a server that sends PING or SETTINGS without
// reading its answers is cut off, and the entries a SETTINGS frame may hold (nghttp2's
// limits).
constexpr size_t kMaxUnsentAcks = 1000;
constexpr size_t kMaxSettingsEntries = 32;
constexpr size_t kKeptBlockBytes = 64 * 1024;  // header block room kept between blocks

// The windows this end announces: HTTP/2's largest, given back once half is used.
constexpr int64_t kReceiveWindow = kLargestWindow;

// Header block bytes gathered before decoding, at most: what the list limit allows with
// room for HPACK's own bytes.
size_t maxBlockBytes(const ClientConnection::Options& o) { return size_t{o.max_header_list_bytes} * 2 + 16384; }

bool hasUppercase(std::string_view name) {
  for (const char c : name) {
    if (c >= 'A' && c <= 'Z') return true;
  }
  return false;
}

// RFC 9113 8.2.2: fields that belong to HTTP/1.1 connections only (and TE but "trailers").
bool connectionSpecific(std::string_view name, std::string_view value) {
  switch (name.size()) {
    case 2: return name == "te" && value != "trailers";
    case 7: return name == "upgrade";
    case 10: return name == "connection" || name == "keep-alive";
    case 16: return name == "proxy-connection";
    case 17: return name == "transfer-encoding";
    default: return false;
  }
}

}  // namespace

ClientConnection::ClientConnection(Handler& handler, Options options)
    : handler_(handler), options_(options) {
  std::string& start = pending_;
  start.assign(kClientPreface, kClientPrefaceBytes);
  const std::pair<SettingId, uint32_t> settings[] = {
      {SettingId::kEnablePush, 0},
      {SettingId::kInitialWindowSize, static_cast<uint32_t>(kReceiveWindow)},
      {SettingId::kMaxHeaderListSize, options_.max_header_list_bytes},
  };
  appendFrameHeader(start, std::size(settings) * 6, FrameType::kSettings, 0, 0);
  for (const auto& [id, value] : settings) {
    start.push_back(static_cast<char>(static_cast<uint16_t>(id) >> 8));
    start.push_back(static_cast<char>(static_cast<uint16_t>(id)));
    appendU32(start, value);
  }
  appendFrameHeader(start, 4, FrameType::kWindowUpdate, 0, 0);
  appendU32(start, static_cast<uint32_t>(kReceiveWindow - kDefaultWindow));
}

// ---- requests ----

int32_t ClientConnection::submitRequest(std::span<const Field> fields, bool has_body) {
  if (terminated_ || goaway_received_ || next_id_ <= 0) return 0;
  const int32_t id = next_id_;
  next_id_ = id <= kLargestStreamId - 2 ? id + 2 : -1;
  Stream& s = streams_[id];
  s.id = id;
  s.has_body = has_body;
  s.send_window = peer_initial_window_;
  if (waiting_open_.empty() && opened_count_ < peer_max_streams_) {
    open(s, fields);
  } else {
    for (const Field& f : fields) s.waiting.push_back({std::string(f.name), std::string(f.value), f.indexing});
    waiting_open_.push_back(id);
  }
  return id;
}

void ClientConnection::open(Stream& s, std::span<const Field> fields) {
  s.opened = true;
  ++opened_count_;
  last_opened_ = s.id;
  encodeHeaders(s, fields);
  if (s.has_body) {
    schedule(s);
  } else {
    s.local_ended = true;
  }
}

void ClientConnection::encodeHeaders(Stream& s, std::span<const Field> fields) {
  // Encoded in place after room for the frame header; a block past the server's frame size
  // (rare: large metadata) is cut into CONTINUATIONs afterwards.
  marks_.push_back(Mark{pending_.size(), s.id});
  const size_t head = pending_.size();
  pending_.append(kFrameHeaderBytes, '\0');
  const size_t start = pending_.size();
  encoder_.beginBlock(pending_);
  for (const Field& f : fields) encoder_.encode(f.name, f.value, f.indexing, pending_);
  const size_t length = pending_.size() - start;
  const uint8_t end_stream = s.has_body ? 0 : flags::kEndStream;
  if (length <= peer_max_frame_) {
    writeFrameHeader(reinterpret_cast<uint8_t*>(pending_.data() + head), static_cast<uint32_t>(length),
                     FrameType::kHeaders, end_stream | flags::kEndHeaders, s.id);
    return;
  }
  const std::string block = pending_.substr(start);
  pending_.resize(head);
  for (size_t at = 0; at < block.size();) {
    const size_t n = std::min<size_t>(block.size() - at, peer_max_frame_);
    const uint8_t end_headers = at + n == block.size() ? flags::kEndHeaders : 0;
    if (at == 0) {
      appendFrameHeader(pending_, n, FrameType::kHeaders, end_stream | end_headers, s.id);
    } else {
      appendFrameHeader(pending_, n, FrameType::kContinuation, end_headers, s.id);
    }
    pending_.append(block, at, n);
    at += n;
  }
}

void ClientConnection::schedule(Stream& s) {
  if (s.queued || s.deferred || s.local_ended || s.resetting || !s.opened) return;
  s.queued = true;
  send_order_.push_back(s.id);
}

void ClientConnection::resumeData(int32_t id) {
  Stream* s = find(id);
  if (s == nullptr || !s->deferred) return;
  s->deferred = false;
  schedule(*s);
}

void ClientConnection::resetStream(int32_t id, uint32_t code) {
  if (Stream* s = find(id)) reset(*s, code);
}

void ClientConnection::reset(Stream& s, uint32_t code, uint32_t close_code) {
  if (s.resetting) return;
  s.resetting = true;
  if (s.opened) {  // a stream the server never saw needs no frame
    appendFrameHeader(pending_, 4, FrameType::kRstStream, 0, s.id);
    appendU32(pending_, code);
  }
  marks_.push_back(Mark{pending_.size(), 0, s.id, close_code});
}

void ClientConnection::ping() { queueFrame(FrameType::kPing, 0, 0, std::string_view("\0\0\0\0\0\0\0\0", 8)); }

void ClientConnection::queueFrame(FrameType type, uint8_t f, int32_t stream, std::string_view payload) {
  appendFrameHeader(pending_, payload.size(), type, f, stream);
  pending_.append(payload);
}

void ClientConnection::queueWindowUpdate(int32_t stream, uint32_t increment) {
  appendFrameHeader(pending_, 4, FrameType::kWindowUpdate, 0, stream);
  appendU32(pending_, increment);
}

bool ClientConnection::tooManyAcks() {
  return connectionError(kEnhanceYourCalm, codecs::strCat("more than ", kMaxUnsentAcks,
                                                          " PING or SETTINGS frames to acknowledge while the output is full"));
}

bool ClientConnection::flushControl() {
  while (!pending_.empty() || !marks_.empty()) {
    if (!handler_.canWrite()) return false;
    unsent_acks_ = 0;
    // Swapped out first: what the handler's calls queue meanwhile goes in the next round.
    flushing_.swap(pending_);
    flushing_marks_.swap(marks_);
    pending_.clear();
    marks_.clear();
    size_t written = 0;
    auto writeTo = [&](size_t at) {
      if (at > written) handler_.writeBytes(std::string_view(flushing_).substr(written, at - written));
      written = std::max(written, at);
    };
    for (const Mark& m : flushing_marks_) {
      writeTo(m.at);
      if (m.headers_of != 0) handler_.beforeHeaders(m.headers_of);
      if (m.closes != 0) closeStream(m.closes, m.close_code, false);
    }
    writeTo(flushing_.size());
    flushing_.clear();
    flushing_marks_.clear();
  }
  return true;
}

// ---- output ----

bool ClientConnection::wantsWrite() const {
  if (!pending_.empty() || !marks_.empty()) return true;
  if (!waiting_open_.empty() && opened_count_ < peer_max_streams_ && !terminated_) return true;
  if (send_window_ <= 0) return false;
  for (const int32_t id : send_order_) {
    auto it = streams_.find(id);
    if (it != streams_.end() && it->second.send_window > 0) return true;
  }
  return false;
}

void ClientConnection::send() {
  for (;;) {
    if (!flushControl() || terminated_) return;
    // Streams waiting for a slot, in the order their ids were given.
    bool opened = false;
    while (!waiting_open_.empty() && opened_count_ < peer_max_streams_) {
      Stream* s = find(waiting_open_.front());
      waiting_open_.pop_front();
      if (s == nullptr || s->resetting) continue;
      std::vector<Field> fields;
      for (const WaitingField& f : s->waiting) fields.push_back({f.name, f.value, f.indexing});
      open(*s, fields);
      s->waiting.clear();
      opened = true;
    }
    if (opened) continue;
    // Bodies, a frame per stream in turn.
    bool progress = false;
    size_t turns = send_order_.size();
    while (turns-- > 0 && send_window_ > 0) {
      if (!handler_.canWrite()) return;
      const int32_t id = send_order_.front();
      send_order_.pop_front();
      Stream* s = find(id);
      if (s == nullptr) continue;
      s->queued = false;
      if (s->resetting || s->local_ended) continue;
      if (s->send_window <= 0) {  // a WINDOW_UPDATE of the stream's puts it back
        continue;
      }
      const size_t max = static_cast<size_t>(std::min<int64_t>({send_window_, s->send_window, peer_max_frame_}));
      bool last = false;
      const size_t n = handler_.bodyReady(id, max, last);
      if (n == 0 && !last) {
        s->deferred = true;
        continue;
      }
      uint8_t head[kFrameHeaderBytes];
      writeFrameHeader(head, static_cast<uint32_t>(n), FrameType::kData, last ? flags::kEndStream : 0, id);
      handler_.writeData(id, head, n);
      send_window_ -= static_cast<int64_t>(n);
      s->send_window -= static_cast<int64_t>(n);
      progress = true;
      if (last) {
        s->local_ended = true;
        if (s->remote_ended) closeStream(id, kNoError, false);
      } else {
        schedule(*s);
      }
    }
    if (!progress) return;
  }
}

// ---- closing ----

void ClientConnection::closeStream(int32_t id, uint32_t code, bool by_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (it->second.opened) --opened_count_;
  streams_.erase(it);
  handler_.onStreamClose(id, code, by_peer);
}

bool ClientConnection::notOpen(std::string_view frame) {
  return connectionError(kProtocolError, codecs::strCat(frame, " on stream ", frame_.stream, ", which is not open"));
}

bool ClientConnection::connectionError(uint32_t code, std::string why) {
  if (terminated_) return false;
  terminated_ = true;
  error_ = std::move(why);
  pending_.clear();
  marks_.clear();
  appendFrameHeader(pending_, 8, FrameType::kGoaway, 0, 0);
  appendU32(pending_, 0);  // the server opens no streams here
  appendU32(pending_, code);
  return false;
}

void ClientConnection::remoteEnded(Stream& s) {
  s.remote_ended = true;
  if (s.local_ended) return closeStream(s.id, kNoError, false);
  // Answered before the whole request went: the rest is not wanted (CANCEL on the wire),
  // and the stream closes as answered.
  reset(s, kCancel, kNoError);
}

// ---- input ----

bool ClientConnection::receive(const uint8_t* data, size_t size) {
  if (terminated_) return false;
  while (size > 0) {
    switch (in_) {
      case In::kHead: {
        const size_t n = std::min(size, kFrameHeaderBytes - head_have_);
        std::memcpy(head_ + head_have_, data, n);
        head_have_ += n;
        data += n;
        size -= n;
        if (head_have_ < kFrameHeaderBytes) return true;
        head_have_ = 0;
        frame_ = readFrameHeader(head_);
        if (frame_.length > kDefaultMaxFrameBytes) {
          return connectionError(kFrameSizeError, codecs::strCat("a frame of ", frame_.length, " bytes, over the ",
                                                                 kDefaultMaxFrameBytes, " allowed"));
        }
        if (!settings_seen_ && frame_.type != FrameType::kSettings) {
          return connectionError(kProtocolError, "the server's first frame is not SETTINGS");
        }
        if (continuation_of_ != 0 &&
            (frame_.type != FrameType::kContinuation || frame_.stream != continuation_of_)) {
          return connectionError(kProtocolError, "a header block interrupted before its END_HEADERS");
        }
        left_ = frame_.length;
        if (frame_.type == FrameType::kData) {
          if (!onDataStart()) return false;
          break;
        }
        payload_.clear();
        in_ = In::kPayload;
        if (left_ == 0 && !onFrame()) return false;
        break;
      }
      case In::kPayload: {
        const size_t n = std::min(size, left_);
        payload_.append(reinterpret_cast<const char*>(data), n);
        data += n;
        size -= n;
        left_ -= n;
        if (left_ == 0 && !onFrame()) return false;
        break;
      }
      case In::kDataPadLength: {
        pad_ = *data++;
        --size;
        --left_;
        if (pad_ > left_) return connectionError(kProtocolError, "a DATA frame's padding is longer than the frame");
        left_ -= pad_;
        if (left_ > 0) {
          in_ = In::kData;
        } else {
          dataDone();
        }
        break;
      }
      case In::kData: {
        const size_t n = std::min(size, left_);
        Stream* s = find(frame_.stream);
        if (s != nullptr && !s->resetting) handler_.onData(frame_.stream, data, n);
        data += n;
        size -= n;
        left_ -= n;
        if (left_ == 0) dataDone();
        break;
      }
      case In::kDataPadding: {
        const size_t n = std::min(size, left_);
        data += n;
        size -= n;
        left_ -= n;
        if (left_ == 0) {
          pad_ = 0;
          dataDone();
        }
        break;
      }
    }
  }
  return true;
}

bool ClientConnection::onDataStart() {
  const int32_t id = frame_.stream;
  if (id == 0) return connectionError(kProtocolError, "a DATA frame on stream 0");
  if (neverOpened(id)) return notOpen("a DATA frame");
  // Flow control counts the whole frame, padding included.
  received_ += frame_.length;
  if (received_ > kReceiveWindow) return connectionError(kFlowControlError, "the server sent past the window");
  if (received_ >= kReceiveWindow / 2) {
    queueWindowUpdate(0, static_cast<uint32_t>(received_));
    received_ = 0;
  }
  Stream* s = find(id);
  if (s != nullptr && !s->resetting) {
    if (!s->final_headers || s->remote_ended) {
      reset(*s, s->remote_ended ? kStreamClosed : kProtocolError);
    } else {
      s->received += frame_.length;
      if (s->received > kReceiveWindow) {
        reset(*s, kFlowControlError);
      } else if (s->received >= kReceiveWindow / 2) {
        queueWindowUpdate(id, static_cast<uint32_t>(s->received));
        s->received = 0;
      }
    }
  }
  // A stream closed or reset meanwhile: its frames still in flight are dropped.
  pad_ = 0;
  if (frame_.flags & flags::kPadded) {
    if (left_ == 0) return connectionError(kProtocolError, "a padded DATA frame without its pad length");
    in_ = In::kDataPadLength;
    return true;
  }
  if (left_ > 0) {
    in_ = In::kData;
  } else {
    dataDone();
  }
  return true;
}

void ClientConnection::dataDone() {
  if (pad_ > 0) {  // the data is read, its padding is next
    in_ = In::kDataPadding;
    left_ = pad_;
    return;
  }
  in_ = In::kHead;
  if (frame_.flags & flags::kEndStream) {
    if (Stream* s = find(frame_.stream); s != nullptr && !s->resetting) remoteEnded(*s);
  }
}

bool ClientConnection::onFrame() {
  in_ = In::kHead;
  switch (frame_.type) {
    case FrameType::kHeaders:
      return onHeadersFrame();
    case FrameType::kContinuation:
      if (continuation_of_ == 0) return connectionError(kProtocolError, "a CONTINUATION frame without a header block");
      block_.append(payload_);
      if (block_.size() > maxBlockBytes(options_)) {
        return connectionError(kEnhanceYourCalm, "a header block past any limit");
      }
      if (frame_.flags & flags::kEndHeaders) return onBlockDone();
      return true;
    case FrameType::kSettings:
      return onSettingsFrame();
    case FrameType::kPing:
      if (frame_.stream != 0) return connectionError(kProtocolError, "a PING frame on a stream");
      if (payload_.size() != 8) return connectionError(kFrameSizeError, "a PING frame that is not 8 bytes");
      if (frame_.flags & flags::kAck) {
        handler_.onPingAck();
      } else {
        if (++unsent_acks_ > kMaxUnsentAcks) return tooManyAcks();
        queueFrame(FrameType::kPing, flags::kAck, 0, payload_);
      }
      return true;
    case FrameType::kGoaway:
      return onGoawayFrame();
    case FrameType::kWindowUpdate:
      return onWindowUpdateFrame();
    case FrameType::kRstStream:
      return onRstFrame();
    case FrameType::kPriority:
      if (frame_.stream == 0) return connectionError(kProtocolError, "a PRIORITY frame on stream 0");
      if (payload_.size() != 5) {
        if (Stream* s = find(frame_.stream)) reset(*s, kFrameSizeError);
      }
      return true;
    case FrameType::kPushPromise:
      return connectionError(kProtocolError, "a PUSH_PROMISE, with push disabled");
    default:
      return true;  // an extension's frame: ignored
  }
}

bool ClientConnection::onHeadersFrame() {
  const int32_t id = frame_.stream;
  if (id == 0) return connectionError(kProtocolError, "a HEADERS frame on stream 0");
  if (neverOpened(id)) return notOpen("a HEADERS frame");
  std::string_view fragment = payload_;
  size_t pad = 0;
  if (frame_.flags & flags::kPadded) {
    if (fragment.empty()) return connectionError(kProtocolError, "a padded HEADERS frame without its pad length");
    pad = static_cast<uint8_t>(fragment[0]);
    fragment.remove_prefix(1);
  }
  if (frame_.flags & flags::kPriority) {
    if (fragment.size() < 5) return connectionError(kFrameSizeError, "a HEADERS frame too short for its priority");
    fragment.remove_prefix(5);
  }
  if (pad > fragment.size()) return connectionError(kProtocolError, "a HEADERS frame's padding is longer than the frame");
  fragment.remove_suffix(pad);
  block_.assign(fragment);
  block_end_stream_ = (frame_.flags & flags::kEndStream) != 0;
  continuation_of_ = id;
  if (frame_.flags & flags::kEndHeaders) return onBlockDone();
  return true;
}

bool ClientConnection::onBlockDone() {
  const int32_t id = continuation_of_;
  continuation_of_ = 0;
  Stream* s = find(id);
  const bool live = s != nullptr && !s->resetting;
  // What the block must look like (RFC 9113 8.3.2, 8.1): a final answer has :status and
  // no other pseudo-field, before the regular ones; trailers have none; 1xx is skipped.
  const bool trailers = live && s->final_headers;
  int status = -1;
  bool malformed = false, regular_seen = false;
  const HpackDecoder::Result r = decoder_.decode(
      {reinterpret_cast<const uint8_t*>(block_.data()), block_.size()}, options_.max_header_list_bytes,
      [&](std::string_view name, std::string_view value) {
        if (!live || malformed) return;
        if (!name.empty() && name[0] == ':') {
          if (trailers || regular_seen || name != ":status" || status >= 0 || value.size() != 3) {
            malformed = true;
            return;
          }
          status = 0;
          for (const char c : value) {
            if (c < '0' || c > '9') {
              malformed = true;
              return;
            }
            status = status * 10 + (c - '0');
          }
          if (status < 100 || status == 101) malformed = true;  // 101: no upgrade in HTTP/2 (RFC 9113 8.6)
          if (status >= 200) handler_.onField(id, name, value);
          return;
        }
        regular_seen = true;
        if (hasUppercase(name) || connectionSpecific(name, value)) {
          malformed = true;
          return;
        }
        // Other bytes a field may not hold (a name not a token, a control byte in a value;
        // blanks at a value's ends are let through: grpc-message may end in a space): the
        // field is dropped, the answer stands (as nghttp2 did: a gRPC status must not turn
        // into a broken answer over one header).
        if (!codecs::isHttpToken(name) || !codecs::isHttpFieldValue(value)) return;
        if (status < 0 && !trailers) {
          malformed = true;  // a field before :status, or no :status at all
          return;
        }
        if (status >= 200 || trailers) handler_.onField(id, name, value);
      });
  block_.clear();
  if (block_.capacity() > kKeptBlockBytes) block_.shrink_to_fit();  // a rare large block's room goes
  if (!r.status.ok()) return connectionError(kCompressionError, std::string(codecs::messageOf(r.status)));
  if (!live) return true;
  if (r.too_large) {
    reset(*s, kProtocolError);
    return true;
  }
  if (!trailers && status < 0) malformed = true;
  if (trailers && !block_end_stream_) malformed = true;
  if (status >= 100 && status < 200 && block_end_stream_) malformed = true;
  if (malformed) {
    reset(*s, kProtocolError);
    return true;
  }
  if (!trailers && status < 200) return true;  // informational: the final block follows
  s->final_headers = true;
  handler_.onHeadersEnd(id, block_end_stream_);
  if (block_end_stream_) {
    Stream* t = find(id);  // the handler may have reset it
    if (t != nullptr && !t->resetting) remoteEnded(*t);
  }
  return true;
}

bool ClientConnection::onSettingsFrame() {
  if (frame_.stream != 0) return connectionError(kProtocolError, "a SETTINGS frame on a stream");
  if (frame_.flags & flags::kAck) {
    if (!payload_.empty()) return connectionError(kFrameSizeError, "a SETTINGS ACK with a payload");
    return true;
  }
  if (payload_.size() % 6 != 0) return connectionError(kFrameSizeError, "a SETTINGS frame of a size not a multiple of 6");
  if (payload_.size() / 6 > kMaxSettingsEntries) {
    return connectionError(kEnhanceYourCalm, codecs::strCat("a SETTINGS frame of more than ", kMaxSettingsEntries,
                                                            " entries"));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
  for (size_t at = 0; at < payload_.size(); at += 6) {
    const uint16_t id = static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
    const uint32_t value = readU32(p + at + 2);
    switch (static_cast<SettingId>(id)) {
      case SettingId::kHeaderTableSize:
        encoder_.setPeerMaxTableBytes(value);
        break;
      case SettingId::kEnablePush:
        if (value > 1) return connectionError(kProtocolError, "SETTINGS_ENABLE_PUSH above 1");
        break;
      case SettingId::kMaxConcurrentStreams:
        peer_max_streams_ = value;
        break;
      case SettingId::kInitialWindowSize: {
        if (value > kLargestWindow) {
          return connectionError(kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
        }
        const int64_t delta = int64_t{value} - peer_initial_window_;
        peer_initial_window_ = value;
        for (auto& [sid, s] : streams_) {
          s.send_window += delta;
          if (s.send_window > kLargestWindow) {
            return connectionError(kFlowControlError, "a stream's window past 2^31-1 after SETTINGS");
          }
          if (delta > 0 && s.send_window > 0) schedule(s);
        }
        break;
      }
      case SettingId::kMaxFrameSize:
        if (value < kDefaultMaxFrameBytes || value > kLargestMaxFrameBytes) {
          return connectionError(kProtocolError, "SETTINGS_MAX_FRAME_SIZE outside 16384..2^24-1");
        }
        peer_max_frame_ = value;
        break;
      default:
        break;  // SETTINGS_MAX_HEADER_LIST_SIZE (advice) and others: nothing to do
    }
  }
  if (++unsent_acks_ > kMaxUnsentAcks) return tooManyAcks();
  queueFrame(FrameType::kSettings, flags::kAck, 0, {});
  const bool first = !settings_seen_;
  settings_seen_ = true;
  if (first) handler_.onSettings();
  return true;
}

bool ClientConnection::onGoawayFrame() {
  if (frame_.stream != 0) return connectionError(kProtocolError, "a GOAWAY frame on a stream");
  if (payload_.size() < 8) return connectionError(kFrameSizeError, "a GOAWAY frame shorter than 8 bytes");
  const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
  const int32_t last = static_cast<int32_t>(readU32(p) & 0x7fffffffu);
  const uint32_t code = readU32(p + 4);
  goaway_received_ = true;
  // Streams the server did not take, and those still waiting for a slot (whatever the
  // last id says: they were never sent): refused, for the owner to send elsewhere.
  std::vector<int32_t> refused;
  for (const auto& [id, s] : streams_) {
    if (id > last || !s.opened) refused.push_back(id);
  }
  std::sort(refused.begin(), refused.end());
  waiting_open_.clear();
  for (const int32_t id : refused) closeStream(id, kRefusedStream, true);
  handler_.onGoaway(code);
  return true;
}

bool ClientConnection::onWindowUpdateFrame() {
  if (payload_.size() != 4) return connectionError(kFrameSizeError, "a WINDOW_UPDATE frame that is not 4 bytes");
  const uint32_t increment = readU32(reinterpret_cast<const uint8_t*>(payload_.data())) & 0x7fffffffu;
  if (frame_.stream == 0) {
    if (increment == 0) return connectionError(kProtocolError, "a WINDOW_UPDATE of 0 for the connection");
    send_window_ += increment;
    if (send_window_ > kLargestWindow) return connectionError(kFlowControlError, "the connection's window past 2^31-1");
    return true;
  }
  if (neverOpened(frame_.stream)) return notOpen("a WINDOW_UPDATE");
  Stream* s = find(frame_.stream);
  if (s == nullptr || s->resetting) return true;
  if (increment == 0) {
    reset(*s, kProtocolError);
    return true;
  }
  s->send_window += increment;
  if (s->send_window > kLargestWindow) {
    reset(*s, kFlowControlError);
    return true;
  }
  schedule(*s);
  return true;
}

bool ClientConnection::onRstFrame() {
  if (frame_.stream == 0) return connectionError(kProtocolError, "an RST_STREAM frame on stream 0");
  if (payload_.size() != 4) return connectionError(kFrameSizeError, "an RST_STREAM frame that is not 4 bytes");
  if (neverOpened(frame_.stream)) return notOpen("an RST_STREAM");
  Stream* s = find(frame_.stream);
  if (s == nullptr) return true;
  // Even when an RST_STREAM of ours is on its way: closed now, as the server's says.
  closeStream(s->id, readU32(reinterpret_cast<const uint8_t*>(payload_.data())), true);
  return true;
}

}  // namespace infergate::gateway::http2
