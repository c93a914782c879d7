#include "codecs/grpc_byte_buffer.h"

#include <grpc/slice.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
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

MovableByteBuffer::MovableByteBuffer(const MovableByteBuffer& other) { *this = other; }

MovableByteBuffer& MovableByteBuffer::operator=(const MovableByteBuffer& other) {
  if (this == &other) return *this;
  // A chain is copied as a chain (its Buffers shared); grpc's slices are made again only
  // if the copy is asked for them.
  if (other.has_chain_) {
    buffer_.Clear();
  } else {
    buffer_ = other.buffer_;
  }
  made_ = false;
  chain_ = other.chain_;
  unread_ = other.unread_;
  has_chain_ = other.has_chain_;
  return *this;
}

const grpc::ByteBuffer& MovableByteBuffer::grpc() const {
  if (has_chain_ && !made_) {
    grpc::ByteBuffer made = toByteBuffer(chain_, unread_);
    buffer_.Swap(&made);  // grpc++ 1.51's ByteBuffer has no move assignment: it would copy
    made_ = true;
  }
  return buffer_;
}

grpc::ByteBuffer& MovableByteBuffer::get() {
  grpc();
  chain_ = BufferChain();
  unread_ = {};
  has_chain_ = made_ = false;
  return buffer_;
}

BufferChain MovableByteBuffer::toChain() const {
  if (has_chain_) return chain_;
  BufferChain chain;
  std::vector<grpc::Slice> slices;
  if (!buffer_.Valid() || !buffer_.Dump(&slices).ok()) return chain;
  for (grpc::Slice& slice : slices) {
    if (slice.size() == 0) continue;
    auto owner = std::make_shared<grpc::Slice>(std::move(slice));
    chain.append(Buffer(owner, owner->begin(), owner->size()));
  }
  return chain;
}

BufferChain MovableByteBuffer::takeChain() && {
  BufferChain chain = has_chain_ ? std::move(chain_) : toChain();
  *this = MovableByteBuffer();
  return chain;
}

StatusOr<Buffer> fromByteBuffer(const MovableByteBuffer& message) {
  const BufferChain* chain = message.chain();
  if (chain == nullptr) return fromByteBuffer(message.grpc());
  if (chain->segments().size() <= 1) return chain->empty() ? Buffer() : chain->segments().front();
  MutableBuffer out = BufferPool::shared().allocate(chain->size());  // as below: reused from 1 MiB on
  chain->copyTo(out.data());
  return std::move(out).freeze();
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
