#include "codecs/protobuf_peek.h"

#include <algorithm>

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {

StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message) {
  ModelRef ref;
  INFERGATE_RETURN_IF_ERROR(forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || (tag.number != 1 && tag.number != 2)) {
      return reader.skip(tag);
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
    (tag.number == 1 ? ref.model_name : ref.model_version) = asChars(value);
    return absl::OkStatus();
  }));
  return ref;
}

namespace {

// A forward-only cursor over segments.
class SegmentCursor {
 public:
  explicit SegmentCursor(std::span<const std::span<const uint8_t>> segments) : segments_(segments) {
    settle();
  }

  bool done() const { return seg_ >= segments_.size(); }

  StatusOr<uint64_t> readVarint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return invalidArgument("truncated varint");
      uint8_t b = segments_[seg_][pos_];
      advance(1);
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return value;
    }
    return invalidArgument("malformed varint");
  }

  Status skip(uint64_t n) {
    while (n > 0) {
      if (done()) return invalidArgument("a field runs past the end of the message");
      size_t step = static_cast<size_t>(std::min<uint64_t>(n, segments_[seg_].size() - pos_));
      advance(step);
      n -= step;
    }
    return absl::OkStatus();
  }

  Status read(uint64_t n, std::string& out) {
    out.clear();
    while (n > 0) {
      if (done()) return invalidArgument("a field runs past the end of the message");
      size_t step = static_cast<size_t>(std::min<uint64_t>(n, segments_[seg_].size() - pos_));
      out.append(reinterpret_cast<const char*>(segments_[seg_].data() + pos_), step);
      advance(step);
      n -= step;
    }
    return absl::OkStatus();
  }

 private:
  void advance(size_t n) {
    pos_ += n;
    settle();
  }
  // Moves past exhausted (and empty) segments.
  void settle() {
    while (seg_ < segments_.size() && pos_ >= segments_[seg_].size()) {
      ++seg_;
      pos_ = 0;
    }
  }

  std::span<const std::span<const uint8_t>> segments_;
  size_t seg_ = 0;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<OwnedModelRef> peekModelInferRequest(std::span<const std::span<const uint8_t>> segments) {
  OwnedModelRef ref;
  SegmentCursor cursor(segments);
  while (!cursor.done()) {
    INFERGATE_ASSIGN_OR_RETURN(uint64_t key, cursor.readVarint());
    uint64_t number = key >> 3;
    if (number == 0 || number > 0x1fffffff) return invalidArgument("invalid field number");
    switch (static_cast<WireType>(key & 7)) {
      case WireType::kVarint:
        INFERGATE_RETURN_IF_ERROR(cursor.readVarint().status());
        break;
      case WireType::kI64:
        INFERGATE_RETURN_IF_ERROR(cursor.skip(8));
        break;
      case WireType::kI32:
        INFERGATE_RETURN_IF_ERROR(cursor.skip(4));
        break;
      case WireType::kLen: {
        INFERGATE_ASSIGN_OR_RETURN(uint64_t length, cursor.readVarint());
        if (number == 1) {
          INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_name));
        } else if (number == 2) {
          INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_version));
        } else {
          INFERGATE_RETURN_IF_ERROR(cursor.skip(length));
        }
        break;
      }
      default:
        return invalidArgument("wire type ", key & 7, " is not read by the segmented peek");
    }
  }
  return ref;
}

}  // namespace infergate::codecs
