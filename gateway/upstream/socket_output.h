#pragma once

// What the native HTTP/2 engines (the gRPC client, grpc_client_native*.cc, and the gRPC
// frontend's server, frontends/grpc_native_server.cc) have not written to their socket
// yet: owned bytes (frame headers, control frames, small pieces) and references into the
// messages' Buffers (their bytes, never copied), written by sendmsg many pieces at a time;
// and GrpcOutMessage, a gRPC message framed into that queue. One thread (the connection's
// loop).

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include <string_view>

#include "codecs/buffer.h"
#include "codecs/grpc_byte_buffer.h"
#include "gateway/http/body_arrival.h"

namespace infergate::gateway::upstream {

class SocketOutput {
 public:
  void queueOwned(const uint8_t* data, size_t size) {
    if (out_.empty() || out_.back().data != nullptr || out_.back().owned.size() > kOwnedSegmentBytes) {
      out_.emplace_back();
      out_.back().owned.swap(spare_);  // the last written segment's storage, if kept
    }
    out_.back().owned.append(reinterpret_cast<const char*>(data), size);
    queued_ += size;
  }
  // `size` bytes of `buffer` from `offset`: referenced (the queue holds the Buffer until
  // they are written), or copied when the Buffer is small (cheaper than a segment and a
  // reference of its own).
  void queueBuffer(const codecs::Buffer& buffer, size_t offset, size_t size) {
    const uint8_t* data = buffer.data() + offset;
    if (buffer.size() <= kCopiedBufferBytes) return queueOwned(data, size);
    Segment s;
    s.data = reinterpret_cast<const char*>(data);
    s.size = size;
    s.keep = buffer;
    out_.push_back(std::move(s));
    queued_ += size;
  }

  // Writes what the socket takes now. False: the socket failed (errno says why).
  bool flush(int fd) {
    return flushWith([fd](const iovec* iov, int count) {
      msghdr msg{};
      msg.msg_iov = const_cast<iovec*>(iov);
      msg.msg_iovlen = static_cast<size_t>(count);
      return ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    });
  }
  // The same through `write(iov, count)`, which behaves as writev on a non-blocking socket
  // (a TLS session's writev: tls/server_session.h).
  template <typename Write>
  bool flushWith(Write&& write) {
    iovec iov[kMaxIovecs];
    while (!out_.empty()) {
      int n = 0;
      for (auto it = out_.begin(); it != out_.end() && n < kMaxIovecs; ++it, ++n) {
        const size_t skip = n == 0 ? front_offset_ : 0;
        iov[n].iov_base = const_cast<char*>(it->bytes() + skip);
        iov[n].iov_len = it->length() - skip;
      }
      const ssize_t sent = write(iov, n);
      if (sent < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
      }
      written_ += static_cast<uint64_t>(sent);
      for (size_t left = static_cast<size_t>(sent); left > 0;) {
        const size_t rest = out_.front().length() - front_offset_;
        if (left < rest) {
          front_offset_ += left;
          break;
        }
        left -= rest;
        front_offset_ = 0;
        // A small owned segment's storage is kept for the next: a call's frames then
        // cost no allocation of their own.
        Segment& done = out_.front();
        if (done.data == nullptr && done.owned.capacity() <= kSpareBytes &&
            done.owned.capacity() > spare_.capacity()) {
          spare_.swap(done.owned);
          spare_.clear();
        }
        out_.pop_front();
      }
    }
    return true;
  }

  // A DATA frame: its 9-byte header, then what `fill()` queues (the frame's data; HTTP/2
  // here never pads).
  template <typename Fill>
  void queueDataFrame(const uint8_t* head, Fill&& fill) {
    queueOwned(head, 9);
    fill();
  }

  bool empty() const { return out_.empty(); }
  uint64_t queued() const { return queued_; }    // bytes ever queued
  uint64_t written() const { return written_; }  // bytes ever written
  uint64_t unwritten() const { return queued_ - written_; }

 private:
  static constexpr int kMaxIovecs = 512;  // one sendmsg
  static constexpr size_t kOwnedSegmentBytes = 16 * 1024;
  static constexpr size_t kCopiedBufferBytes = 256;
  static constexpr size_t kSpareBytes = 4096;  // the most storage kept from a written segment

  struct Segment {
    std::string owned;           // or, when data is set, a reference into `keep`
    const char* data = nullptr;
    size_t size = 0;
    codecs::Buffer keep;
    const char* bytes() const { return data != nullptr ? data : owned.data(); }
    size_t length() const { return data != nullptr ? size : owned.size(); }
  };

  std::deque<Segment> out_;
  std::string spare_;  // empty; its capacity is reused by the next owned segment
  size_t front_offset_ = 0;  // bytes of out_.front() already written
  uint64_t queued_ = 0, written_ = 0;
};

// One gRPC message as DATA frames carry it: the 5-byte prefix (uncompressed, big-endian
// length), then the message's own Buffers (a grpc::ByteBuffer's slices, when it is one),
// referenced, never copied; and how much of it is queued so far.
class GrpcOutMessage {
 public:
  GrpcOutMessage() = default;
  // A message lent (a request kept for a retry) shares its Buffers; one given moves them in.
  explicit GrpcOutMessage(const codecs::MovableByteBuffer& message) : GrpcOutMessage(message.toChain()) {}
  explicit GrpcOutMessage(codecs::MovableByteBuffer&& message) : GrpcOutMessage(std::move(message).takeChain()) {}
  explicit GrpcOutMessage(codecs::BufferChain segments) : segments_(std::move(segments)) {
    setPrefix(segments_.size());
  }
  // A message of `length` bytes whose Buffers come later (append), in order: queued only
  // as far as they go, each let go of once queued (the socket output keeps what it needs),
  // so that a message relayed in blocks holds only those not yet queued. Never rewound.
  static GrpcOutMessage growing(size_t length) {
    GrpcOutMessage m;
    m.growing_ = true;
    m.length_ = length;
    m.setPrefix(length);
    return m;
  }
  void append(codecs::Buffer piece) {
    appended_ += piece.size();
    if (!piece.empty()) pieces_.push_back(std::move(piece));
  }
  // Whether a growing message's Buffers came to its length (always, for any other).
  bool appendedAll() const { return !growing_ || appended_ >= length_; }

  size_t length() const { return growing_ ? length_ : segments_.size(); }  // the message's own bytes
  size_t size() const { return 5 + length(); }                            // framed
  bool queuedAll() const { return queued_ == size(); }

  // How many framed bytes from `from` on may be sent, when slices reference a body still
  // arriving: up to the first byte not yet in.
  size_t arrivedFrom(size_t from, const http::BodyArrival& arrival) const {
    size_t at = 5;  // the prefix is the message's own
    for (const codecs::Buffer& segment : segments_.segments()) {
      const size_t end = at + segment.size();
      if (end > from) {
        const size_t start = std::max(from, at);
        const size_t want = end - start;
        const size_t in = arrival.arrivedOf(segment.data() + (start - at), want);
        if (in < want) return start + in - from;
      }
      at = end;
    }
    return size() - from;
  }
  void rewind() { queued_ = segment_index_ = segment_offset_ = 0; }

  // Queues up to `max` more bytes of the framed message; returns how many.
  size_t queueInto(SocketOutput& out, size_t max) {
    size_t taken = 0;
    while (taken < max && queued_ < size()) {
      if (queued_ < 5) {
        const size_t n = std::min(max - taken, 5 - queued_);
        out.queueOwned(prefix_ + queued_, n);
        queued_ += n;
        taken += n;
        continue;
      }
      if (growing_) {
        if (segment_index_ == pieces_.size()) break;  // the rest has not come yet
        codecs::Buffer& piece = pieces_[segment_index_];
        const size_t n = std::min(max - taken, piece.size() - segment_offset_);
        out.queueBuffer(piece, segment_offset_, n);
        queued_ += n;
        taken += n;
        segment_offset_ += n;
        if (segment_offset_ == piece.size()) {
          piece = codecs::Buffer();  // let go of: the output keeps what it needs
          ++segment_index_;
          segment_offset_ = 0;
        }
        continue;
      }
      const codecs::Buffer& segment = segments_.segments()[segment_index_];
      const size_t n = std::min(max - taken, segment.size() - segment_offset_);
      if (n > 0) out.queueBuffer(segment, segment_offset_, n);
      queued_ += n;
      taken += n;
      segment_offset_ += n;
      if (segment_offset_ == segment.size()) {
        ++segment_index_;
        segment_offset_ = 0;
      }
    }
    return taken;
  }

 private:
  void setPrefix(size_t size) {
    const uint32_t length = static_cast<uint32_t>(std::min<size_t>(size, UINT32_MAX));
    prefix_[1] = static_cast<uint8_t>(length >> 24);
    prefix_[2] = static_cast<uint8_t>(length >> 16);
    prefix_[3] = static_cast<uint8_t>(length >> 8);
    prefix_[4] = static_cast<uint8_t>(length);
  }

  uint8_t prefix_[5] = {};
  codecs::BufferChain segments_;  // no empty segment (BufferChain drops them)
  size_t queued_ = 0;
  size_t segment_index_ = 0, segment_offset_ = 0;
  // A growing message: its length, and the Buffers appended, those before segment_index_
  // queued and let go of (empty), the one there queued up to segment_offset_. A vector, not
  // a deque: every message has one, and an empty vector allocates nothing.
  bool growing_ = false;
  size_t length_ = 0, appended_ = 0;
  std::vector<codecs::Buffer> pieces_;
};

}  // namespace infergate::gateway::upstream
