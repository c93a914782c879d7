#pragma once

// What the native HTTP/2 engines (the gRPC client, grpc_client_native*.cc, and the gRPC
// frontend's server, frontends/grpc_native_server.cc) have not written to their socket
// yet: owned bytes (frame headers, control frames, small pieces) and references into grpc
// slices (the messages' bytes, never copied), written by sendmsg many pieces at a time.
// One thread (the connection's loop).

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <string>

#include <grpcpp/support/slice.h>

namespace infergate::gateway::upstream {

class SocketOutput {
 public:
  void queueOwned(const uint8_t* data, size_t size) {
    if (out_.empty() || out_.back().data != nullptr || out_.back().owned.size() > kOwnedSegmentBytes) {
      out_.emplace_back();
    }
    out_.back().owned.append(reinterpret_cast<const char*>(data), size);
    queued_ += size;
  }
  // `size` bytes of `slice` from `offset`: referenced (the queue holds the slice until they
  // are written), or copied when the slice is small: an inlined slice keeps its bytes in
  // the grpc::Slice object itself, which its owner may free before the write.
  void queueSlice(const ::grpc::Slice& slice, size_t offset, size_t size) {
    const char* data = reinterpret_cast<const char*>(slice.begin()) + offset;
    if (slice.size() <= kCopiedSliceBytes) return queueOwned(reinterpret_cast<const uint8_t*>(data), size);
    Segment s;
    s.data = data;
    s.size = size;
    s.keep = slice;
    out_.push_back(std::move(s));
    queued_ += size;
  }

  // Writes what the socket takes now. False: the socket failed (errno says why).
  bool flush(int fd) {
    iovec iov[kMaxIovecs];
    while (!out_.empty()) {
      int n = 0;
      for (auto it = out_.begin(); it != out_.end() && n < kMaxIovecs; ++it, ++n) {
        const size_t skip = n == 0 ? front_offset_ : 0;
        iov[n].iov_base = const_cast<char*>(it->bytes() + skip);
        iov[n].iov_len = it->length() - skip;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n);
      const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
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
        out_.pop_front();
      }
    }
    return true;
  }

  bool empty() const { return out_.empty(); }
  uint64_t queued() const { return queued_; }    // bytes ever queued
  uint64_t written() const { return written_; }  // bytes ever written
  uint64_t unwritten() const { return queued_ - written_; }

 private:
  static constexpr int kMaxIovecs = 512;  // one sendmsg
  static constexpr size_t kOwnedSegmentBytes = 16 * 1024;
  static constexpr size_t kCopiedSliceBytes = 256;

  struct Segment {
    std::string owned;           // or, when data is set, a reference into `keep`
    const char* data = nullptr;
    size_t size = 0;
    ::grpc::Slice keep;
    const char* bytes() const { return data != nullptr ? data : owned.data(); }
    size_t length() const { return data != nullptr ? size : owned.size(); }
  };

  std::deque<Segment> out_;
  size_t front_offset_ = 0;  // bytes of out_.front() already written
  uint64_t queued_ = 0, written_ = 0;
};

}  // namespace infergate::gateway::upstream
