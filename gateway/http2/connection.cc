#include "gateway/http2/connection.h"

#include <algorithm>
#include <cstring>

#include "codecs/status.h"
#include "codecs/text.h"

namespace infergate::gateway::http2 {
namespace {

// Frames the output may owe before a peer that makes this end answer (PING, SETTINGS, a
// refused stream) without reading the answers is cut off, and the entries a SETTINGS frame
// may hold (nghttp2's limits).
constexpr size_t kMaxOwedFrames = 1000;
constexpr size_t kMaxSettingsEntries = 32;
constexpr size_t kKeptBlockBytes = 64 * 1024;  // header block room kept between blocks

// The connection's receive window: HTTP/2's largest, given back once half is used (the
// owner reads every byte as it comes; streams hold back what they must).
constexpr int64_t kReceiveWindow = kLargestWindow;

bool hasUppercase(std::string_view name) {
  for (const char c : name) {
    if (c >= 'A' && c <= 'Z') return true;
  }
  return false;
}

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

Connection::FieldCheck Connection::checkRegularField(std::string_view name, std::string_view value) {
  if (hasUppercase(name) || connectionSpecific(name, value)) return FieldCheck::kMalformed;
  if (!codecs::isHttpToken(name) || !codecs::isHttpFieldValue(value)) return FieldCheck::kDrop;
  return FieldCheck::kKeep;
}

Connection::Connection(Handler& handler, Role role, uint32_t max_header_list_bytes, std::span<const Setting> settings)
    : handler_(handler),
      role_(role),
      max_header_list_bytes_(max_header_list_bytes),
      in_(role == Role::kServer ? In::kPreface : In::kHead) {
  if (role == Role::kClient) pending_.assign(kClientPreface, kClientPrefaceBytes);
  appendFrameHeader(pending_, settings.size() * 6, FrameType::kSettings, 0, 0);
  for (const auto& [id, value] : settings) {
    pending_.push_back(static_cast<char>(static_cast<uint16_t>(id) >> 8));
    pending_.push_back(static_cast<char>(static_cast<uint16_t>(id)));
    appendU32(pending_, value);
  }
  queueWindowUpdate(0, static_cast<uint32_t>(kReceiveWindow - kDefaultWindow));
}

// ---- output ----

void Connection::encodeHeaders(int32_t id, std::span<const Field> fields, bool end_stream) {
  // Encoded in place after room for the frame header; a block past the peer's frame size
  // (rare: large metadata) is cut into CONTINUATIONs afterwards.
  if (role_ == Role::kClient) marks_.push_back(Mark{pending_.size(), id});
  const size_t head = pending_.size();
  pending_.append(kFrameHeaderBytes, '\0');
  const size_t start = pending_.size();
  encoder_.beginBlock(pending_);
  for (const Field& f : fields) encoder_.encode(f.name, f.value, f.indexing, pending_);
  const size_t length = pending_.size() - start;
  const uint8_t end = end_stream ? flags::kEndStream : 0;
  if (length <= peer_max_frame_) {
    writeFrameHeader(reinterpret_cast<uint8_t*>(pending_.data() + head), static_cast<uint32_t>(length),
                     FrameType::kHeaders, end | flags::kEndHeaders, id);
    return;
  }
  const std::string block = pending_.substr(start);
  pending_.resize(head);
  for (size_t at = 0; at < block.size();) {
    const size_t n = std::min<size_t>(block.size() - at, peer_max_frame_);
    const uint8_t end_headers = at + n == block.size() ? flags::kEndHeaders : 0;
    if (at == 0) {
      appendFrameHeader(pending_, n, FrameType::kHeaders, end | end_headers, id);
    } else {
      appendFrameHeader(pending_, n, FrameType::kContinuation, end_headers, id);
    }
    pending_.append(block, at, n);
    at += n;
  }
}

bool Connection::decodeBlock(HpackDecoder::FieldFn field, HpackDecoder::Result& result) {
  result = decoder_.decode({reinterpret_cast<const uint8_t*>(block_.data()), block_.size()}, max_header_list_bytes_,
                           field);
  if (result.status.ok()) return true;
  return connectionError(kCompressionError, std::string(codecs::messageOf(result.status)));
}

void Connection::schedule(StreamState& s) {
  if (s.queued || s.deferred || s.local_ended || s.resetting || !s.sendable) return;
  s.queued = true;
  send_order_.push_back(s.id);
}

void Connection::resumeData(int32_t id) {
  if (terminated_) return;
  StreamState* s = findStream(id);
  if (s == nullptr) return;
  if (role_ == Role::kServer && s->sendable && !s->local_ended && !s->resetting &&
      (s->send_window <= 0 || send_window_ <= 0)) {
    // Waiting for window, its answer may have ended: the trailers take none, and go now
    // (a stream still queued for the connection's window is passed over once ended).
    bool last = false;
    (void)handler_.bodyReady(id, 0, last);
    if (last) {
      s->deferred = false;
      return onBodyDone(*s);
    }
  }
  if (!s->deferred) return;
  s->deferred = false;
  schedule(*s);
}

void Connection::resetStream(int32_t id, uint32_t code) {
  if (terminated_) return;  // the GOAWAY is the last frame
  if (StreamState* s = findStream(id)) reset(*s, code);
}

bool Connection::windowShut(int32_t id) {
  const StreamState* s = findStream(id);
  return s != nullptr && !s->resetting && (s->send_window <= 0 || send_window_ <= 0);
}

bool Connection::resetForFault(StreamState& s, uint32_t code) {
  reset(s, code);
  return onFaultReset();
}

void Connection::reset(StreamState& s, uint32_t code, uint32_t close_code) {
  if (s.resetting) return;
  s.resetting = true;
  if (s.known_to_peer) queueRst(s.id, code);
  closeAfterQueued(s.id, close_code);
}

void Connection::ping() {
  if (!terminated_) queueFrame(FrameType::kPing, 0, 0, std::string_view("\0\0\0\0\0\0\0\0", 8));
}

void Connection::queueFrame(FrameType type, uint8_t f, int32_t stream, std::string_view payload) {
  appendFrameHeader(pending_, payload.size(), type, f, stream);
  pending_.append(payload);
}

void Connection::queueWindowUpdate(int32_t stream, uint32_t increment) {
  appendFrameHeader(pending_, 4, FrameType::kWindowUpdate, 0, stream);
  appendU32(pending_, increment);
}

void Connection::queueRst(int32_t stream, uint32_t code) {
  appendFrameHeader(pending_, 4, FrameType::kRstStream, 0, stream);
  appendU32(pending_, code);
}

bool Connection::owePeer() {
  if (++owed_ <= kMaxOwedFrames) return true;
  return connectionError(kEnhanceYourCalm, codecs::strCat("more than ", kMaxOwedFrames,
                                                          " acknowledgements or refusals owed while the output is full"));
}

bool Connection::flushControl() {
  while (!pending_.empty() || !marks_.empty()) {
    if (!handler_.canWrite()) return false;
    owed_ = 0;
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
      if (m.headers_of != 0) onHeadersWritten(m.headers_of);
      if (m.closes != 0) closeStream(m.closes, m.close_code, false);
    }
    writeTo(flushing_.size());
    flushing_.clear();
    flushing_marks_.clear();
  }
  return true;
}

bool Connection::wantsWrite() {
  if (!pending_.empty() || !marks_.empty()) return true;
  if (wantsWriteMore()) return true;
  if (send_window_ <= 0) return false;
  for (const int32_t id : send_order_) {
    if (StreamState* s = findStream(id); s != nullptr && s->send_window > 0) return true;
  }
  return false;
}

void Connection::send() {
  // A handler's call back into send() (from a stream's close, say) frames nothing: the
  // outer call goes on with what it queued.
  if (sending_) return;
  sending_ = true;
  sendFrames();
  sending_ = false;
}

void Connection::sendFrames() {
  for (;;) {
    if (!flushControl() || terminated_) return;
    if (beforeBodies()) continue;
    // Bodies, a frame per stream in turn.
    bool progress = false;
    size_t turns = send_order_.size();
    while (turns-- > 0 && send_window_ > 0) {
      if (!handler_.canWrite()) return;
      const int32_t id = send_order_.front();
      send_order_.pop_front();
      StreamState* s = findStream(id);
      if (s == nullptr) continue;
      s->queued = false;
      if (s->resetting || s->local_ended) continue;
      if (s->send_window <= 0) continue;  // a WINDOW_UPDATE of the stream's puts it back
      const size_t max = static_cast<size_t>(std::min<int64_t>({send_window_, s->send_window, peer_max_frame_}));
      bool last = false;
      const size_t n = handler_.bodyReady(id, max, last);
      if (n == 0 && !last) {
        s->deferred = true;
        continue;
      }
      progress = true;
      // A client's request ends with its last DATA frame; a server's answer may end with
      // trailers (onBodyDone), and needs no empty frame before them.
      const bool data_ends = role_ == Role::kClient;
      if (n > 0 || data_ends) {
        uint8_t head[kFrameHeaderBytes];
        writeFrameHeader(head, static_cast<uint32_t>(n), FrameType::kData, last && data_ends ? flags::kEndStream : 0,
                         id);
        handler_.writeData(id, head, n);
        send_window_ -= static_cast<int64_t>(n);
        s->send_window -= static_cast<int64_t>(n);
      }
      if (last) {
        onBodyDone(*s);
      } else {
        schedule(*s);
      }
    }
    if (!progress) return;
  }
}

// ---- errors ----

bool Connection::notOpen(std::string_view frame) {
  return connectionError(kProtocolError, codecs::strCat(frame, " on stream ", frame_.stream, ", which is not open"));
}

bool Connection::connectionError(uint32_t code, std::string why) {
  if (terminated_) return false;
  terminated_ = true;
  error_ = std::move(why);
  pending_.clear();
  marks_.clear();
  appendFrameHeader(pending_, 8, FrameType::kGoaway, 0, 0);
  appendU32(pending_, static_cast<uint32_t>(lastPeerStream()));
  appendU32(pending_, code);
  return false;
}

// ---- input ----

bool Connection::receive(const uint8_t* data, size_t size) {
  // Checked per step too: a stream's end (dataDone) may charge a fault reset that ends the
  // connection without a return value to say so.
  while (size > 0) {
    if (terminated_) return false;
    switch (in_) {
      case In::kPreface: {
        const size_t n = std::min(size, kClientPrefaceBytes - preface_have_);
        if (std::memcmp(data, kClientPreface + preface_have_, n) != 0) {
          return connectionError(kProtocolError, "the client's first bytes are not HTTP/2's connection preface");
        }
        preface_have_ += n;
        data += n;
        size -= n;
        if (preface_have_ == kClientPrefaceBytes) in_ = In::kHead;
        break;
      }
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
          return connectionError(kProtocolError, role_ == Role::kServer ? "the client's first frame is not SETTINGS"
                                                                        : "the server's first frame is not SETTINGS");
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
        if (StreamState* s = findStream(frame_.stream); s != nullptr && !s->resetting) onStreamPadding(*s, pad_ + 1);
        if (left_ > 0) {
          in_ = In::kData;
        } else {
          dataDone();
        }
        break;
      }
      case In::kData: {
        const size_t n = std::min(size, left_);
        StreamState* s = findStream(frame_.stream);
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
  return !terminated_;
}

bool Connection::onDataStart() {
  const int32_t id = frame_.stream;
  if (id == 0) return connectionError(kProtocolError, "a DATA frame on stream 0");
  if (idle(id)) return notOpen("a DATA frame");
  // Flow control counts the whole frame, padding included.
  received_ += frame_.length;
  if (received_ > kReceiveWindow) return connectionError(kFlowControlError, "the peer sent past the window");
  if (received_ >= kReceiveWindow / 2) {
    queueWindowUpdate(0, static_cast<uint32_t>(received_));
    received_ = 0;
  }
  // A stream closed or reset meanwhile: its frames still in flight are dropped.
  if (StreamState* s = findStream(id); s != nullptr && !s->resetting && !onStreamData(*s, frame_.length)) {
    return false;
  }
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

void Connection::dataDone() {
  if (pad_ > 0) {  // the data is read, its padding is next
    in_ = In::kDataPadding;
    left_ = pad_;
    return;
  }
  in_ = In::kHead;
  if (frame_.flags & flags::kEndStream) {
    if (StreamState* s = findStream(frame_.stream); s != nullptr && !s->resetting) onRemoteEnd(*s);
  }
}

bool Connection::onFrame() {
  in_ = In::kHead;
  switch (frame_.type) {
    case FrameType::kHeaders:
      return onHeadersFrame();
    case FrameType::kContinuation:
      if (continuation_of_ == 0) return connectionError(kProtocolError, "a CONTINUATION frame without a header block");
      block_.append(payload_);
      // What the list limit allows, with room for HPACK's own bytes.
      if (block_.size() > size_t{max_header_list_bytes_} * 2 + 16384) {
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
        if (!owePeer()) return false;
        queueFrame(FrameType::kPing, flags::kAck, 0, payload_);
      }
      return true;
    case FrameType::kGoaway: {
      if (frame_.stream != 0) return connectionError(kProtocolError, "a GOAWAY frame on a stream");
      if (payload_.size() < 8) return connectionError(kFrameSizeError, "a GOAWAY frame shorter than 8 bytes");
      const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
      goaway_received_ = true;
      return onGoawayFrame(static_cast<int32_t>(readU32(p) & 0x7fffffffu), readU32(p + 4));
    }
    case FrameType::kWindowUpdate:
      return onWindowUpdateFrame();
    case FrameType::kRstStream:
      if (frame_.stream == 0) return connectionError(kProtocolError, "an RST_STREAM frame on stream 0");
      if (payload_.size() != 4) return connectionError(kFrameSizeError, "an RST_STREAM frame that is not 4 bytes");
      return onRstFrame(readU32(reinterpret_cast<const uint8_t*>(payload_.data())));
    case FrameType::kPriority:
      if (frame_.stream == 0) return connectionError(kProtocolError, "a PRIORITY frame on stream 0");
      if (payload_.size() != 5) {
        if (StreamState* s = findStream(frame_.stream)) return resetForFault(*s, kFrameSizeError);
      }
      return true;
    case FrameType::kPushPromise:
      return connectionError(kProtocolError, role_ == Role::kClient ? "a PUSH_PROMISE, with push disabled"
                                                                    : "a PUSH_PROMISE from a client");
    default:
      return true;  // an extension's frame: ignored
  }
}

bool Connection::onHeadersFrame() {
  const int32_t id = frame_.stream;
  if (id == 0) return connectionError(kProtocolError, "a HEADERS frame on stream 0");
  if (!onHeadersStart(id)) return false;
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

bool Connection::onBlockDone() {
  const int32_t id = continuation_of_;
  continuation_of_ = 0;
  const bool ok = onHeaderBlock(id);
  block_.clear();
  if (block_.capacity() > kKeptBlockBytes) block_.shrink_to_fit();  // a rare large block's room goes
  return ok;
}

bool Connection::onSettingsFrame() {
  if (frame_.stream != 0) return connectionError(kProtocolError, "a SETTINGS frame on a stream");
  if (frame_.flags & flags::kAck) {
    if (!payload_.empty()) return connectionError(kFrameSizeError, "a SETTINGS ACK with a payload");
    if (!settings_acked_) {
      settings_acked_ = true;
      onSettingsAcked();
    }
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
        // A server's SETTINGS may not carry it at all (RFC 9113 6.5.2): no role check needed
        // beyond the value, as nghttp2 accepts 0 from a server.
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
        if (!applyWindowDelta(delta)) return false;
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
  if (!owePeer()) return false;
  queueFrame(FrameType::kSettings, flags::kAck, 0, {});
  const bool first = !settings_seen_;
  settings_seen_ = true;
  if (first) handler_.onSettings();
  return true;
}

bool Connection::applyWindowDelta(int64_t delta) {
  bool overflow = false;
  forEachStream([&](StreamState& s) {
    s.send_window += delta;
    if (s.send_window > kLargestWindow) overflow = true;
    if (delta > 0 && s.send_window > 0) schedule(s);
  });
  if (overflow) return connectionError(kFlowControlError, "a stream's window past 2^31-1 after SETTINGS");
  return true;
}

bool Connection::onWindowUpdateFrame() {
  if (payload_.size() != 4) return connectionError(kFrameSizeError, "a WINDOW_UPDATE frame that is not 4 bytes");
  const uint32_t increment = readU32(reinterpret_cast<const uint8_t*>(payload_.data())) & 0x7fffffffu;
  if (frame_.stream == 0) {
    if (increment == 0) return connectionError(kProtocolError, "a WINDOW_UPDATE of 0 for the connection");
    send_window_ += increment;
    if (send_window_ > kLargestWindow) return connectionError(kFlowControlError, "the connection's window past 2^31-1");
    return true;
  }
  if (idle(frame_.stream)) return notOpen("a WINDOW_UPDATE");
  StreamState* s = findStream(frame_.stream);
  if (s == nullptr || s->resetting) return true;
  if (increment == 0) return resetForFault(*s, kProtocolError);
  s->send_window += increment;
  if (s->send_window > kLargestWindow) return resetForFault(*s, kFlowControlError);
  schedule(*s);
  return true;
}

}  // namespace infergate::gateway::http2
