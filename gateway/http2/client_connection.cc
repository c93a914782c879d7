#include "gateway/http2/client_connection.h"

#include <algorithm>

namespace infergate::gateway::http2 {

// The streams' receive windows (Options::stream_window) are given back once half is used,
// or, for a window its owner holds, once half is freed.
ClientConnection::ClientConnection(Handler& handler, Options options)
    : Connection(handler, Role::kClient, options.max_header_list_bytes,
                 std::initializer_list<Setting>{
                     {SettingId::kEnablePush, 0},
                     {SettingId::kInitialWindowSize,
                      static_cast<uint32_t>(std::clamp<int64_t>(options.stream_window, 1, kLargestWindow))},
                     {SettingId::kMaxHeaderListSize, options.max_header_list_bytes},
                 }),
      owner_(handler),
      stream_window_(std::clamp<int64_t>(options.stream_window, 1, kLargestWindow)) {}

// ---- requests ----

int32_t ClientConnection::submitRequest(std::span<const Field> fields, bool has_body) {
  if (terminated_ || goaway_received_ || next_id_ <= 0) return 0;
  const int32_t id = next_id_;
  next_id_ = id <= kLargestStreamId - 2 ? id + 2 : -1;
  Stream& s = streams_[id];
  s.id = id;
  s.has_body = has_body;
  s.known_to_peer = false;
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
  s.known_to_peer = true;
  s.sendable = true;
  ++opened_count_;
  last_opened_ = s.id;
  encodeHeaders(s.id, fields, !s.has_body);
  if (s.has_body) {
    schedule(s);
  } else {
    s.local_ended = true;
  }
}

bool ClientConnection::beforeBodies() {
  // Streams waiting for a slot, in the order their ids were given.
  bool opened = false;
  while (!waiting_open_.empty() && opened_count_ < peer_max_streams_) {
    auto it = streams_.find(waiting_open_.front());
    waiting_open_.pop_front();
    if (it == streams_.end() || it->second.resetting) continue;
    Stream& s = it->second;
    std::vector<Field> fields;
    for (const WaitingField& f : s.waiting) fields.push_back({f.name, f.value, f.indexing});
    open(s, fields);
    s.waiting.clear();
    opened = true;
  }
  return opened;
}

void ClientConnection::onBodyDone(StreamState& s) {
  s.local_ended = true;
  if (s.remote_ended) closeStream(s.id, kNoError, false);
}

// ---- closing ----

void ClientConnection::closeStream(int32_t id, uint32_t code, bool by_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (it->second.opened) --opened_count_;
  streams_.erase(it);
  owner_.onStreamClose(id, code, by_peer);
}

void ClientConnection::onRemoteEnd(StreamState& s) {
  s.remote_ended = true;
  if (s.local_ended) return closeStream(s.id, kNoError, false);
  // Answered before the whole request went: the rest is not wanted (CANCEL on the wire),
  // and the stream closes as answered.
  reset(s, kCancel, kNoError);
}

// ---- input ----

bool ClientConnection::onStreamData(StreamState& state, uint32_t length) {
  auto& s = static_cast<Stream&>(state);
  if (!s.final_headers || s.remote_ended) return resetForFault(s, s.remote_ended ? kStreamClosed : kProtocolError);
  s.received += length;
  if (s.received > stream_window_) return resetForFault(s, kFlowControlError);
  if (s.owned_window) return true;  // given back as its owner frees it
  if (s.received >= stream_window_ / 2) {
    queueWindowUpdate(s.id, static_cast<uint32_t>(s.received));
    s.received = 0;
  }
  return true;
}

void ClientConnection::onStreamPadding(StreamState& state, size_t bytes) {
  auto& s = static_cast<Stream&>(state);
  if (!s.owned_window) return;  // counted with the frame, given back with the rest
  s.freed += static_cast<int64_t>(bytes);
  giveBackFreed(s);
}

void ClientConnection::ownWindow(int32_t stream) {
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second.owned_window = true;
}

void ClientConnection::freeWindow(int32_t stream, size_t bytes) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.resetting || !it->second.owned_window) return;
  Stream& s = it->second;
  s.freed = std::min(s.received, s.freed + static_cast<int64_t>(bytes));
  giveBackFreed(s);
}

void ClientConnection::giveBackFreed(Stream& s) {
  // Once the server has sent all it will (remote_ended), no window matters.
  if (s.freed < stream_window_ / 2 || s.remote_ended || terminated_) return;
  queueWindowUpdate(s.id, static_cast<uint32_t>(s.freed));
  s.received -= s.freed;
  s.freed = 0;
}

bool ClientConnection::onHeadersStart(int32_t id) {
  if (idle(id)) return notOpen("a HEADERS frame");
  return true;
}

bool ClientConnection::onHeaderBlock(int32_t id) {
  auto it = streams_.find(id);
  Stream* s = it == streams_.end() ? nullptr : &it->second;
  const bool live = s != nullptr && !s->resetting;
  // What the block must look like (RFC 9113 8.3.2, 8.1): a final answer has :status and
  // no other pseudo-field, before the regular ones; trailers have none; 1xx is skipped.
  const bool trailers = live && s->final_headers;
  int status = -1;
  bool malformed = false, regular_seen = false;
  HpackDecoder::Result r;
  const bool decoded = decodeBlock(
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
          if (status >= 200) owner_.onField(id, name, value);
          return;
        }
        regular_seen = true;
        const FieldCheck check = checkRegularField(name, value);
        if (check == FieldCheck::kMalformed) {
          malformed = true;
          return;
        }
        if (check == FieldCheck::kDrop) return;
        if (status < 0 && !trailers) {
          malformed = true;  // a field before :status, or no :status at all
          return;
        }
        if (status >= 200 || trailers) owner_.onField(id, name, value);
      },
      r);
  if (!decoded) return false;
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
  owner_.onHeadersEnd(id, block_end_stream_);
  if (block_end_stream_) {
    StreamState* t = findStream(id);  // the handler may have reset it
    if (t != nullptr && !t->resetting) onRemoteEnd(*t);
  }
  return true;
}

bool ClientConnection::onGoawayFrame(int32_t last, uint32_t code) {
  // Streams the server did not take, and those still waiting for a slot (whatever the
  // last id says: they were never sent): refused, for the owner to send elsewhere.
  std::vector<int32_t> refused;
  for (const auto& [id, s] : streams_) {
    if (id > last || !s.opened) refused.push_back(id);
  }
  std::sort(refused.begin(), refused.end());
  waiting_open_.clear();
  for (const int32_t id : refused) closeStream(id, kRefusedStream, true);
  owner_.onGoaway(code);
  return true;
}

bool ClientConnection::onRstFrame(uint32_t code) {
  if (idle(frame_.stream)) return notOpen("an RST_STREAM");
  // Even when an RST_STREAM of ours is on its way: closed now, as the server's says.
  if (findStream(frame_.stream) != nullptr) closeStream(frame_.stream, code, true);
  return true;
}

}  // namespace infergate::gateway::http2
