#include "codecs/protobuf_peek.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "codecs/parameters.h"
#include "codecs/protobuf_wire.h"
#include "codecs/sequence_peek.h"

namespace infergate::codecs {
namespace {

constexpr uint32_t kModelNameField = 1;
constexpr uint32_t kModelVersionField = 2;
constexpr uint32_t kParametersField = 4;
constexpr uint32_t kEntryKeyField = 1;
constexpr uint32_t kEntryValueField = 2;

// Merges one InferParameter message into `value` as protobuf merges a oneof: the last
// member set wins; a member with another wire type is an unknown field (skipped).
Status mergeInferParameter(std::span<const uint8_t> message, std::optional<ParamValue>& value) {
  return forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type == WireType::kVarint && (tag.number == 1 || tag.number == 2 || tag.number == 5)) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t v, reader.readVarint());
      if (tag.number == 1) value = (v != 0);
      if (tag.number == 2) value = static_cast<int64_t>(v);
      if (tag.number == 5) value = v;
      return absl::OkStatus();
    }
    if (tag.type == WireType::kLen && tag.number == 3) {
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
      value = std::string(asChars(s));
      return absl::OkStatus();
    }
    if (tag.type == WireType::kI64 && tag.number == 4) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t bits, reader.readFixed64());
      value = std::bit_cast<double>(bits);
      return absl::OkStatus();
    }
    return reader.skip(tag);
  });
}

// Applies one parameters-map entry to `sequence`. Two passes over the entry's few tags:
// the key first (the last key field wins and may follow the value), then, only for the
// three sequence keys, the value fields, merged.
Status applyParameterEntry(std::span<const uint8_t> entry, SequenceRef& sequence) {
  std::string_view key;
  INFERGATE_RETURN_IF_ERROR(forEachField(entry, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || tag.number != kEntryKeyField) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
    key = asChars(s);
    return absl::OkStatus();
  }));
  if (!isSequenceKey(key)) return absl::OkStatus();
  std::optional<ParamValue> value;
  INFERGATE_RETURN_IF_ERROR(forEachField(entry, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || tag.number != kEntryValueField) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
    return mergeInferParameter(s, value);
  }));
  applySequenceParameter(key, value ? &*value : nullptr, sequence);
  return absl::OkStatus();
}

}  // namespace

StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message) {
  ModelRef ref;
  INFERGATE_RETURN_IF_ERROR(forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen ||
        (tag.number != kModelNameField && tag.number != kModelVersionField &&
         tag.number != kParametersField)) {
      return reader.skip(tag);
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
    if (tag.number == kParametersField) return applyParameterEntry(value, ref.sequence);
    (tag.number == kModelNameField ? ref.model_name : ref.model_version) = asChars(value);
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
      // As WireReader: the 10th byte may carry only bit 63.
      if (shift == 63 && b > 1) return invalidArgument("varint past 64 bits");
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

  // The next n bytes as one span: in place when they lie in the current segment, else
  // gathered into `scratch` (the span then points into it).
  StatusOr<std::span<const uint8_t>> view(uint64_t n, std::string& scratch) {
    if (n == 0 || (!done() && segments_[seg_].size() - pos_ >= n)) {
      std::span<const uint8_t> in_place;
      if (n > 0) in_place = segments_[seg_].subspan(pos_, static_cast<size_t>(n));
      advance(static_cast<size_t>(n));
      return in_place;
    }
    INFERGATE_RETURN_IF_ERROR(read(n, scratch));
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scratch.data()),
                                    scratch.size());
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
  std::string scratch;  // a parameters entry that straddles segments
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
        if (number == kModelNameField) {
          INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_name));
        } else if (number == kModelVersionField) {
          INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_version));
        } else if (number == kParametersField) {
          INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> entry, cursor.view(length, scratch));
          INFERGATE_RETURN_IF_ERROR(applyParameterEntry(entry, ref.sequence));
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
