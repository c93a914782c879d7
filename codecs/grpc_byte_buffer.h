#pragma once

// grpc::ByteBuffer <-> the codecs' Buffers, without copying tensor bytes.
//
//   BufferChain  [glue][tensor A][glue][tensor B]...
//                  |       |        |      |
//   ByteBuffer   [slice][slice]  [slice][slice]     one grpc slice per segment
//
// toByteBuffer(): each slice references its segment's bytes and holds a heap copy of the
// segment's Buffer (one reference on its owner) until grpc drops the slice, whenever and
// on whatever thread that is. Segments of at most kInlineCopyBytes (the few bytes of
// glue between raw contents) are copied into grpc's inline slices instead, which costs
// less than a referencing slice.
//
// fromByteBuffer(): a message that arrived as one slice is referenced (a grpc::Slice kept
// alive as the Buffer's owner); a message in several slices is copied once into one
// Buffer, since the decoders need contiguous bytes (a reused block of BufferPool::shared()
// from 1 MiB on).
//
// Errors: fromByteBuffer() returns INTERNAL for an uninitialised ByteBuffer or a failure
// to read it. Thread-safety: pure functions; the results may cross threads.

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>

#include "codecs/buffer.h"
#include "codecs/status.h"

namespace infergate::codecs {

inline constexpr size_t kInlineCopyBytes = 16;

// A grpc::ByteBuffer that moves. grpc++ 1.51's ByteBuffer has a copy constructor and no
// move constructor, so std::move of one copies it (grpc_byte_buffer_copy: an allocation
// and a reference on every slice) and every copy's destruction enters grpc core (an
// ExecCtx). Messages handed along by value (a call's request, its answer through the
// callbacks) travel as this; it reads as a `const grpc::ByteBuffer&` wherever grpc wants
// one. A copy is explicit.
class MovableByteBuffer {
 public:
  MovableByteBuffer() = default;
  MovableByteBuffer(grpc::ByteBuffer&& other) noexcept { buffer_.Swap(&other); }  // NOLINT: implicit
  explicit MovableByteBuffer(const grpc::ByteBuffer& other) : buffer_(other) {}
  MovableByteBuffer(MovableByteBuffer&& other) noexcept { buffer_.Swap(&other.buffer_); }
  MovableByteBuffer(const MovableByteBuffer& other) = default;  // std::function wants copyable
  MovableByteBuffer& operator=(MovableByteBuffer&& other) noexcept {
    if (this != &other) {
      buffer_.Clear();
      buffer_.Swap(&other.buffer_);
    }
    return *this;
  }
  MovableByteBuffer& operator=(const MovableByteBuffer& other) = default;
  ~MovableByteBuffer() = default;

  operator const grpc::ByteBuffer&() const { return buffer_; }  // NOLINT: implicit
  grpc::ByteBuffer& get() { return buffer_; }
  bool valid() const { return buffer_.Valid(); }
  size_t length() const { return buffer_.Length(); }

 private:
  grpc::ByteBuffer buffer_;
};

grpc::ByteBuffer toByteBuffer(const BufferChain& chain);
// The same, except that segments lying in `unread` are referenced whatever their size, never
// copied: memory whose bytes may not be there yet (a request body still arriving).
grpc::ByteBuffer toByteBuffer(const BufferChain& chain, std::span<const uint8_t> unread);
// A typed message (the non-infer RPCs, shared-memory registrations) serialized into one
// slice.
grpc::ByteBuffer toByteBuffer(const google::protobuf::MessageLite& message);

StatusOr<Buffer> fromByteBuffer(const grpc::ByteBuffer& buffer);

}  // namespace infergate::codecs
