#include "codecs/protobuf_peek.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "codecs/parameters.h"
#include "codecs/protobuf_wire.h"
#include "codecs/sequence_peek.h"

namespace infergate::codecs {
namespace {

std::span<const uint8_t> bytesOf(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

constexpr uint32_t kModelNameField = 1;
constexpr uint32_t kModelVersionField = 2;
constexpr uint32_t kIdField = 3;
constexpr uint32_t kParametersField = 4;
constexpr uint32_t kInputsField = 5;
constexpr uint32_t kOutputsField = 6;
constexpr uint32_t kRawInputContentsField = 7;
constexpr uint32_t kInputParametersField = 4;   // InferInputTensor.parameters
constexpr uint32_t kOutputParametersField = 2;  // InferRequestedOutputTensor.parameters
constexpr uint32_t kEntryKeyField = 1;
constexpr uint32_t kEntryValueField = 2;

// The parameters field of an inputs (5) or outputs (6) element.
uint32_t tensorParametersField(uint32_t field) {
  return field == kInputsField ? kInputParametersField : kOutputParametersField;
}

// The key of a parameters-map entry: the last key field (protobuf's rule; it may follow
// the value), "" when there is none.
StatusOr<std::string_view> entryKey(std::span<const uint8_t> entry) {
  std::string_view key;
  INFERGATE_RETURN_IF_ERROR(forEachField(entry, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || tag.number != kEntryKeyField) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
    key = asChars(s);
    return absl::OkStatus();
  }));
  return key;
}

// Sets `found` when the entry's key names a shared-memory region. Only the key: the
// decoder refuses a region without byte_size, or of the wrong kind, but the message must
// be decoded to say so.
Status noteSharedMemoryEntry(std::span<const uint8_t> entry, bool& found) {
  INFERGATE_ASSIGN_OR_RETURN(std::string_view key, entryKey(entry));
  found = found || key == param::kShmRegion;
  return absl::OkStatus();
}

// Sets `found` when an input or requested output (`field` 5 or 6) has a parameters entry
// keyed shared_memory_region. Its other fields (name, datatype, shape, typed contents)
// are skipped by wire type and length.
Status noteSharedMemoryTensor(std::span<const uint8_t> tensor, uint32_t field, bool& found) {
  const uint32_t parameters = tensorParametersField(field);
  return forEachField(tensor, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || tag.number != parameters) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> entry, reader.readLengthDelimited());
    return noteSharedMemoryEntry(entry, found);
  });
}

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
  INFERGATE_ASSIGN_OR_RETURN(std::string_view key, entryKey(entry));
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
    if (tag.type != WireType::kLen || tag.number < kModelNameField ||
        tag.number > kOutputsField || tag.number == kIdField) {
      return reader.skip(tag);  // raw_input_contents (7) among them, by its length
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
    switch (tag.number) {
      case kParametersField:
        return applyParameterEntry(value, ref.sequence);
      case kInputsField:
      case kOutputsField:
        return noteSharedMemoryTensor(value, tag.number, ref.shared_memory);
      default: {
        INFERGATE_ASSIGN_OR_RETURN(
            (tag.number == kModelNameField ? ref.model_name : ref.model_version),
            asUtf8(value, tag.number == kModelNameField ? "the model name" : "the model version"));
        return absl::OkStatus();
      }
    }
  }));
  return ref;
}

namespace {

// A forward-only cursor over segments, counting the bytes it has passed.
class SegmentCursor {
 public:
  explicit SegmentCursor(std::span<const std::span<const uint8_t>> segments) : segments_(segments) {
    for (std::span<const uint8_t> segment : segments) remaining_ += segment.size();
    settle();
  }

  bool done() const { return seg_ >= segments_.size(); }
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return remaining_; }

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
    offset_ += n;
    remaining_ -= n;
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
  uint64_t offset_ = 0;
  uint64_t remaining_ = 0;
};

// Walks the fields of the next `size` bytes at the cursor (a message or a sub-message),
// calling fn(number, length) -> Status for each LEN field with the cursor at its value;
// fn consumes exactly `length` bytes (read, view or skip). Other fields are skipped.
// Groups are refused (callers fall back to the contiguous peek), and so is a field that
// runs past `size`, as WireReader refuses one past its span.
template <typename Fn>
Status forEachSegmentedField(SegmentCursor& cursor, uint64_t size, Fn&& fn) {
  if (size > cursor.remaining()) return invalidArgument("a field runs past the end of the message");
  const uint64_t end = cursor.offset() + size;
  while (cursor.offset() < end) {
    INFERGATE_ASSIGN_OR_RETURN(uint64_t key, cursor.readVarint());
    uint64_t number = key >> 3;
    if (number == 0 || number > kMaxFieldNumber) return invalidArgument("invalid field number");
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
        if (cursor.offset() > end || length > end - cursor.offset()) {
          return invalidArgument("a field runs past the end of its message");
        }
        INFERGATE_RETURN_IF_ERROR(fn(static_cast<uint32_t>(number), length));
        break;
      }
      default:
        return invalidArgument("wire type ", key & 7, " is not read by the segmented peek");
    }
    if (cursor.offset() > end) return invalidArgument("a field runs past the end of its message");
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<OwnedModelRef> peekModelInferRequest(std::span<const std::span<const uint8_t>> segments) {
  OwnedModelRef ref;
  std::string scratch;  // a parameters entry that straddles segments
  SegmentCursor cursor(segments);
  // An input or output is walked in place, not gathered: one with typed contents may be
  // as big as its tensor. Only its parameters entries are gathered when they straddle.
  auto tensor = [&](uint32_t field, uint64_t length) -> Status {
    const uint32_t parameters = tensorParametersField(field);
    return forEachSegmentedField(cursor, length, [&](uint32_t number, uint64_t n) -> Status {
      if (number != parameters) return cursor.skip(n);
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> entry, cursor.view(n, scratch));
      return noteSharedMemoryEntry(entry, ref.shared_memory);
    });
  };
  INFERGATE_RETURN_IF_ERROR(forEachSegmentedField(
      cursor, cursor.remaining(), [&](uint32_t number, uint64_t length) -> Status {
        switch (number) {
          case kModelNameField: {
            INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_name));
            return asUtf8(bytesOf(ref.model_name), "the model name").status();
          }
          case kModelVersionField: {
            INFERGATE_RETURN_IF_ERROR(cursor.read(length, ref.model_version));
            return asUtf8(bytesOf(ref.model_version), "the model version").status();
          }
          case kParametersField: {
            INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> entry,
                                       cursor.view(length, scratch));
            return applyParameterEntry(entry, ref.sequence);
          }
          case kInputsField:
          case kOutputsField:
            return tensor(number, length);
          default:
            return cursor.skip(length);
        }
      }));
  return ref;
}

ModelInferHead findModelInferHead(std::span<const uint8_t> prefix, size_t message_size, size_t from) {
  using State = ModelInferHead::State;
  const bool whole = prefix.size() >= message_size;
  const std::span<const uint8_t> message = prefix.first(std::min(prefix.size(), message_size));
  if (from > message.size()) return {State::kNeedMore, 0};
  WireReader reader(message.subspan(from));
  size_t at = 0;  // in the reader's span: where the field being read starts
  // An error inside the prefix may be its end cutting a varint or a value short: only the
  // whole message tells malformed from not yet in.
  auto cut = [&] { return ModelInferHead{whole ? State::kNone : State::kNeedMore, from + at}; };
  while (!reader.done()) {
    at = reader.position();
    StatusOr<FieldTag> tag = reader.readTag();
    if (!tag.ok()) return cut();
    if (tag->number == kRawInputContentsField && tag->type == WireType::kLen) return {State::kFound, from + at};
    if (!reader.skip(*tag).ok()) return cut();
  }
  return {whole ? State::kNone : State::kNeedMore, from + reader.position()};
}

}  // namespace infergate::codecs
