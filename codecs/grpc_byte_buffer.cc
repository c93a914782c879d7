#include "codecs/grpc_byte_buffer.h"

#include <grpc/slice.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "codecs/buffer_pool.h"

namespace infergate::codecs {
namespace {

void releaseBuffer(void* user_data) { delete static_cast<Buffer*>(user_data); }

grpc::Slice referencingSlice(const Buffer& segment) {
  auto* holder = new Buffer(segment);
  grpc_slice slice = grpc_slice_new_with_user_data(const_cast<uint8_t*>(holder->data()),
                                                   holder->size(), releaseBuffer, holder);
  return grpc::Slice(slice, grpc::Slice::STEAL_REF);
}

}  // namespace

grpc::ByteBuffer toByteBuffer(const BufferChain& chain) { return toByteBuffer(chain, {}); }

grpc::ByteBuffer toByteBuffer(const BufferChain& chain, std::span<const uint8_t> unread) {
  std::vector<grpc::Slice> slices;
  slices.reserve(chain.segments().size());
  for (const Buffer& segment : chain.segments()) {
    const auto at = reinterpret_cast<uintptr_t>(segment.data());
    const auto from = reinterpret_cast<uintptr_t>(unread.data());
    const bool in_unread = at >= from && at - from < unread.size();
    if (segment.size() <= kInlineCopyBytes && !in_unread) {
      slices.emplace_back(segment.data(), segment.size());  // grpc::Slice copies
    } else {
      slices.push_back(referencingSlice(segment));
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer toByteBuffer(const google::protobuf::MessageLite& message) {
  return toByteBuffer(BufferChain(Buffer::fromString(message.SerializeAsString())));
}

StatusOr<Buffer> fromByteBuffer(const grpc::ByteBuffer& buffer) {
  if (!buffer.Valid()) return internalError("grpc::ByteBuffer is not initialised");
  grpc::Slice single;
  if (buffer.TrySingleSlice(&single).ok()) {
    auto owner = std::make_shared<grpc::Slice>(std::move(single));
    return Buffer(owner, owner->begin(), owner->size());
  }
  std::vector<grpc::Slice> slices;
  grpc::Status status = buffer.Dump(&slices);
  if (!status.ok()) {
    return internalError("cannot read grpc::ByteBuffer: ", status.error_message());
  }
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  if (slices.size() == 1) {
    auto owner = std::make_shared<grpc::Slice>(std::move(slices.front()));
    return Buffer(owner, owner->begin(), owner->size());
  }
  // Big messages (tensors) join into a reused block: a fresh one pays its page faults.
  MutableBuffer out = BufferPool::shared().allocate(total);
  uint8_t* p = out.data();
  for (const grpc::Slice& s : slices) {
    if (s.size() != 0) std::memcpy(p, s.begin(), s.size());
    p += s.size();
  }
  return std::move(out).freeze();
}

}  // namespace infergate::codecs
