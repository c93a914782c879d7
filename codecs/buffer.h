#pragma once

// Byte storage that tensors travel in without being copied.
//
//   Buffer        an immutable, reference-counted view of bytes. Slicing shares the owner,
//                 so a tensor decoded from a request body is a Buffer into that body.
//   MutableBuffer exclusive writable storage (heap or pool) that a decoder fills and then
//                 freezes into a Buffer.
//   BufferChain   an ordered list of Buffers: an encoded body as segments (JSON header,
//                 then tensor blobs) for writev or a grpc::ByteBuffer of slices.
//
// Ownership: whoever holds a Buffer keeps its bytes alive; the owner may be a
// std::string, a pool block, a grpc slice or a shared-memory mapping. Buffers are safe to
// copy and to read from any thread; the bytes themselves are never written after freeze.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace infergate::codecs {

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<const void> owner, const uint8_t* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  // A new heap copy of `bytes`.
  static Buffer copyOf(std::string_view bytes);
  // Takes `bytes` over; no copy.
  static Buffer fromString(std::string bytes);
  // A view of memory the caller keeps alive for as long as any copy of the view exists
  // (static data, or a scope that provably outlives every use).
  static Buffer borrowed(std::string_view bytes);

  const uint8_t* data() const { return data_; }
  const char* chars() const { return reinterpret_cast<const char*>(data_); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {chars(), size_}; }
  std::span<const uint8_t> span() const { return {data_, size_}; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Bytes [offset, offset + length) sharing this buffer's owner. The caller checks bounds
  // (every decoder does, with overflow-safe arithmetic, before slicing).
  Buffer slice(size_t offset, size_t length) const {
    return Buffer(owner_, data_ + offset, length);
  }

  // Byte equality (not identity).
  bool operator==(const Buffer& other) const { return view() == other.view(); }

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class MutableBuffer {
 public:
  MutableBuffer() = default;
  MutableBuffer(std::shared_ptr<uint8_t[]> storage, uint8_t* data, size_t size)
      : storage_(std::move(storage)), data_(data), size_(size) {}

  // Uninitialised heap storage of `size` bytes.
  static MutableBuffer allocate(size_t size);

  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

  // The first `used` bytes as an immutable Buffer; this MutableBuffer is left empty.
  Buffer freeze(size_t used) &&;
  Buffer freeze() && { return std::move(*this).freeze(size_); }
  // Bytes [offset, offset + length), already written, as a Buffer sharing the storage
  // while the writer goes on filling the bytes after them: it never writes these again.
  // For handing on a body as it arrives (a relayed answer). The caller checks bounds.
  Buffer shareWritten(size_t offset, size_t length) const {
    return Buffer(std::shared_ptr<const void>(storage_, data_), data_ + offset, length);
  }

 private:
  std::shared_ptr<uint8_t[]> storage_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class BufferChain {
 public:
  BufferChain() = default;
  explicit BufferChain(Buffer buffer) { append(std::move(buffer)); }
  BufferChain(const BufferChain&) = default;
  BufferChain& operator=(const BufferChain&) = default;
  // A chain moved from is empty.
  BufferChain(BufferChain&& other) noexcept
      : segments_(std::move(other.segments_)), size_(std::exchange(other.size_, 0)) {
    other.segments_.clear();
  }
  BufferChain& operator=(BufferChain&& other) noexcept {
    if (this != &other) {
      segments_ = std::move(other.segments_);
      size_ = std::exchange(other.size_, 0);
      other.segments_.clear();
    }
    return *this;
  }

  void append(Buffer buffer) {
    if (buffer.empty()) return;
    size_ += buffer.size();
    segments_.push_back(std::move(buffer));
  }
  void append(const BufferChain& chain) {
    for (const Buffer& b : chain.segments_) append(b);
  }

  const std::vector<Buffer>& segments() const { return segments_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // One contiguous Buffer: the segment itself when there is one, else a copy.
  Buffer flatten() const;
  // Copies every byte to `out`, which has room for size() bytes.
  void copyTo(uint8_t* out) const;
  std::string toString() const;

 private:
  std::vector<Buffer> segments_;
  size_t size_ = 0;
};

}  // namespace infergate::codecs
