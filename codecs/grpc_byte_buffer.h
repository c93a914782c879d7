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
#include <cstdint>
#include <span>

#include "codecs/buffer.h"
#include "codecs/status.h"

namespace infergate::codecs {

inline constexpr size_t kInlineCopyBytes = 16;

// One gRPC message, handed along by value: a call's request, its answer through the
// callbacks. It holds either
//   - a grpc::ByteBuffer (what grpc++ gave or takes), or
//   - a BufferChain (what the codecs and the native HTTP/2 engines make and read: those
//     never need grpc's slices, and making them costs allocations and reference counts
//     on every segment).
// It reads as a `const grpc::ByteBuffer&` wherever grpc wants one: a chain is turned into
// one then, once (toByteBuffer below), and kept. chain() and toChain() read it as Buffers.
// One thread at a time, reads included: unlike most values, two threads may not even read
// one at once, since the first grpc() of a chain writes (fleet_call.cc makes the grpc form
// before an attempt can be retried on another thread).
//
// It moves where grpc++ 1.51's ByteBuffer only copies (its copy constructor is all it
// has, so std::move of one copies it: grpc_byte_buffer_copy, an allocation and a reference
// on every slice, and every copy's destruction enters grpc core, an ExecCtx). A copy is
// explicit.
class MovableByteBuffer {
 public:
  MovableByteBuffer() = default;
  MovableByteBuffer(grpc::ByteBuffer&& other) noexcept { buffer_.Swap(&other); }  // NOLINT: implicit
  explicit MovableByteBuffer(const grpc::ByteBuffer& other) : buffer_(other) {}
  // The chain as the message. Segments lying in `unread` are memory whose bytes may not
  // be there yet (a request body still arriving): a grpc::ByteBuffer made of it references
  // them, never copies them.
  explicit MovableByteBuffer(BufferChain chain, std::span<const uint8_t> unread = {})
      : chain_(std::move(chain)), unread_(unread), has_chain_(true) {}
  // Moves are on every hand-over of a call's message (a score of them per call): inline,
  // and into grpc only to free a grpc::ByteBuffer this one held.
  MovableByteBuffer(MovableByteBuffer&& other) noexcept
      : chain_(std::move(other.chain_)), unread_(other.unread_), made_(other.made_), has_chain_(other.has_chain_) {
    buffer_.Swap(&other.buffer_);
    other.made_ = other.has_chain_ = false;
  }
  MovableByteBuffer(const MovableByteBuffer& other);  // std::function wants copyable
  MovableByteBuffer& operator=(MovableByteBuffer&& other) noexcept {
    if (this != &other) {
      buffer_.Clear();
      buffer_.Swap(&other.buffer_);
      chain_ = std::move(other.chain_);
      unread_ = other.unread_;
      made_ = other.made_;
      has_chain_ = other.has_chain_;
      other.made_ = other.has_chain_ = false;
    }
    return *this;
  }
  MovableByteBuffer& operator=(const MovableByteBuffer& other);
  ~MovableByteBuffer() = default;

  operator const grpc::ByteBuffer&() const { return grpc(); }  // NOLINT: implicit
  const grpc::ByteBuffer& grpc() const;
  // The grpc::ByteBuffer to change or take: a chain is turned into one and let go.
  grpc::ByteBuffer& get();

  bool valid() const { return has_chain_ || buffer_.Valid(); }
  size_t length() const { return has_chain_ ? chain_.size() : buffer_.Length(); }
  // The message's Buffers when it is held as a chain; null when it is a grpc::ByteBuffer.
  const BufferChain* chain() const { return has_chain_ ? &chain_ : nullptr; }
  // The message's bytes as Buffers either way: a grpc::ByteBuffer's slices referenced
  // (each kept alive by its Buffer), never copied. Empty for an invalid one.
  BufferChain toChain() const;
  // The same, taking a chain out instead of copying it; the message is left invalid.
  BufferChain takeChain() &&;

 private:
  mutable grpc::ByteBuffer buffer_;  // with has_chain_: made from chain_ when first asked
  BufferChain chain_;
  std::span<const uint8_t> unread_;
  mutable bool made_ = false;        // buffer_ holds chain_'s slices
  bool has_chain_ = false;
};

grpc::ByteBuffer toByteBuffer(const BufferChain& chain);
// The same, except that segments lying in `unread` are referenced whatever their size, never
// copied: memory whose bytes may not be there yet (a request body still arriving).
grpc::ByteBuffer toByteBuffer(const BufferChain& chain, std::span<const uint8_t> unread);
// A typed message (the non-infer RPCs, shared-memory registrations) serialized into one
// slice.
grpc::ByteBuffer toByteBuffer(const google::protobuf::MessageLite& message);

StatusOr<Buffer> fromByteBuffer(const grpc::ByteBuffer& buffer);
// The same for a message held either way: a chain of one segment is that segment, one of
// several is joined as above; never grpc slices made to be read.
StatusOr<Buffer> fromByteBuffer(const MovableByteBuffer& message);

}  // namespace infergate::codecs
