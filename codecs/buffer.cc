#include "codecs/buffer.h"

namespace infergate::codecs {

Buffer Buffer::copyOf(std::string_view bytes) {
  MutableBuffer out = MutableBuffer::allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return std::move(out).freeze();
}

Buffer Buffer::fromString(std::string bytes) {
  auto owner = std::make_shared<std::string>(std::move(bytes));
  const auto* data = reinterpret_cast<const uint8_t*>(owner->data());
  size_t size = owner->size();
  return Buffer(std::move(owner), data, size);
}

Buffer Buffer::borrowed(std::string_view bytes) {
  return Buffer(nullptr, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

MutableBuffer MutableBuffer::allocate(size_t size) {
  // make_shared_for_overwrite: no zero fill; the caller writes every byte it freezes.
  std::shared_ptr<uint8_t[]> storage = std::make_shared_for_overwrite<uint8_t[]>(size ? size : 1);
  uint8_t* data = storage.get();
  return MutableBuffer(std::move(storage), data, size);
}

Buffer MutableBuffer::freeze(size_t used) && {
  Buffer out(std::shared_ptr<const void>(std::move(storage_), data_), data_, used);
  data_ = nullptr;
  size_ = 0;
  return out;
}

Buffer BufferChain::flatten() const {
  if (segments_.size() == 1) return segments_.front();
  MutableBuffer out = MutableBuffer::allocate(size_);
  copyTo(out.data());
  return std::move(out).freeze();
}

void BufferChain::copyTo(uint8_t* out) const {
  for (const Buffer& b : segments_) {
    std::memcpy(out, b.data(), b.size());
    out += b.size();
  }
}

std::string BufferChain::toString() const {
  std::string out(size_, '\0');
  copyTo(reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

}  // namespace infergate::codecs
