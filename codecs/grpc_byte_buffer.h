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

grpc::ByteBuffer toByteBuffer(const BufferChain& chain);
// A typed message (the non-infer RPCs, shared-memory registrations) serialized into one
// slice.
grpc::ByteBuffer toByteBuffer(const google::protobuf::MessageLite& message);

StatusOr<Buffer> fromByteBuffer(const grpc::ByteBuffer& buffer);

}  // namespace infergate::codecs
