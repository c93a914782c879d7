#pragma once

// The proto3 wire format, by hand, for the inference messages (PROTOCOL.md 11.2). The
// codecs read and write it directly so that tensor bytes are never copied into or out of
// generated message classes.
//
//   message := field*                       (any order; a field may repeat)
//   field   := tag value
//   tag     := varint(number << 3 | wire_type)          number 1 .. 2^29-1
//
//   wire_type 0 VARINT  value := 1..10 bytes, 7 bits each, low group first, the high
//                                bit of every byte but the last set ("more follows")
//             1 I64     value := 8 bytes little-endian (fixed64, double)
//             2 LEN     value := varint(length), then `length` bytes (string, bytes,
//                                sub-message, packed repeated scalars)
//             3 SGROUP  value := fields ... up to the EGROUP of the same number (legacy
//             4 EGROUP           groups: only ever skipped)
//             5 I32     value := 4 bytes little-endian (fixed32, float)
//
//   ModelInferRequest{model_name: "m", raw_input_contents: [16 bytes]}:
//     0a 01 6d            field 1 LEN, length 1, "m"
//     3a 10 <16 bytes>    field 7 LEN, length 16, the tensor bytes
//
//   map<string, InferParameter> = repeated LEN entries, each a message {1: key, 2: value}.
//   Repeated scalars are packed (one LEN field of concatenated values) by default in
//   proto3; a parser must also accept one field per value, and both mixed.
//
// Protobuf's merge rules that the decoders follow: the last occurrence of a scalar or
// string wins; repeated fields concatenate; a repeated sub-message field merges; a known
// field that arrives with an unexpected wire type is an unknown field (skipped).
//
// Errors: every overrun, overflow or malformed varint, field number 0, wire type 6/7, or
// unbalanced group is INVALID_ARGUMENT naming the byte offset. Nothing reads out of bounds.
// Thread-safety: WireReader and WireWriter are small per-call values; the free functions
// are pure.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/data_type.h"
#include "codecs/limits.h"
#include "codecs/parameters.h"
#include "codecs/shape.h"
#include "codecs/status.h"

namespace infergate::codecs {

enum class WireType : uint8_t {
  kVarint = 0,
  kI64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kI32 = 5,
};

struct FieldTag {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
};

inline constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;

// A bounds-checked cursor over a byte span that it does not own.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : data_(bytes.data()), size_(bytes.size()) {}

  bool done() const { return pos_ >= size_; }
  size_t position() const { return pos_; }

  StatusOr<FieldTag> readTag();
  StatusOr<uint64_t> readVarint();
  StatusOr<uint32_t> readFixed32();
  StatusOr<uint64_t> readFixed64();
  // The value of a LEN field, as a view into the reader's span.
  StatusOr<std::span<const uint8_t>> readLengthDelimited();
  // Skips the value of the field whose tag was just read (groups with their contents).
  Status skip(FieldTag tag);

 private:
  Status skipGroup(uint32_t number, int depth);
  Status skipValue(FieldTag tag, int depth);
  Status error(std::string_view what) const;

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Calls fn(FieldTag, WireReader&) -> Status for each field of `message`; fn reads the
// value, or returns reader.skip(tag) for a field it does not want.
template <typename Fn>
Status forEachField(std::span<const uint8_t> message, Fn&& fn) {
  WireReader reader(message);
  while (!reader.done()) {
    StatusOr<FieldTag> tag = reader.readTag();
    if (!tag.ok()) return tag.status();
    INFERGATE_RETURN_IF_ERROR(fn(*tag, reader));
  }
  return absl::OkStatus();
}

inline std::string_view asChars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A protobuf `string` field's bytes: valid UTF-8, as protobuf requires of a string, else
// INVALID_ARGUMENT naming `what` ("the model name", "parameter 'x'").
StatusOr<std::string_view> asUtf8(std::span<const uint8_t> bytes, std::string_view what);

size_t varintSize(uint64_t value);

// Appends fields to a std::string it does not own. Proto3 omits empty strings and zero
// scalars; these functions always write, the caller decides what to omit.
class WireWriter {
 public:
  explicit WireWriter(std::string& out) : out_(out) {}

  void tag(uint32_t number, WireType type) { varint(uint64_t{number} << 3 | uint64_t(type)); }
  void varint(uint64_t value);
  void fixed64(uint64_t value);
  void varintField(uint32_t number, uint64_t value);
  void bytesField(uint32_t number, std::string_view bytes);
  // Tag and length of a LEN field whose `length` bytes the caller appends (or chains).
  void lengthPrefix(uint32_t number, uint64_t length);
  // A sub-message: beginMessage() writes the tag, the caller writes the fields, and
  // endMessage(mark) inserts their length before them.
  size_t beginMessage(uint32_t number);
  void endMessage(size_t mark);

  std::string& out() { return out_; }

 private:
  std::string& out_;
};

// Where a tensor's bytes go in an encoded message: after the first `glue_offset` bytes of
// the glue (right after its raw-contents tag and length).
struct ChainCut {
  size_t glue_offset;
  const Buffer* data;
};

// The message as a chain: the glue cut at each ChainCut (offsets ascending) with the
// tensor's own Buffer spliced in; the glue is frozen into one Buffer that the glue
// segments share. No tensor byte is copied.
BufferChain spliceChain(std::string glue, std::span<const ChainCut> cuts);

// ---- pieces of the inference messages shared by the protobuf codecs ----------------

// Appends `value` to a repeated field's list unless it already holds limits.max_tensors
// entries (RESOURCE_EXHAUSTED: "<message> has more than N <what>").
inline Status pushCapped(std::vector<std::span<const uint8_t>>& list, std::span<const uint8_t> value,
                         std::string_view message, std::string_view what,
                         const DecodeLimits& limits) {
  if (list.size() >= limits.max_tensors) {
    return resourceExhausted(message, " has more than ", limits.max_tensors, " ", what);
  }
  list.push_back(value);
  return absl::OkStatus();
}
// A shape of more dimensions is RESOURCE_EXHAUSTED (8 bytes per 1-byte wire dim).
inline constexpr size_t kMaxShapeRank = 1024;

// Decodes one map<string, InferParameter> entry into `out`: bool_param -> bool,
// int64_param -> int64_t, string_param -> string, double_param -> double, uint64_param ->
// uint64_t. A repeated key keeps its first position and takes the last value (protobuf's
// map). An entry whose value sets no kind is INVALID_ARGUMENT; errors name the map's
// owner as `owner_kind` ("the request", "input", "output") and `owner_name`.
Status decodeParameterEntry(std::span<const uint8_t> entry, std::string_view owner_kind,
                            std::string_view owner_name, Parameters& out);

// Writes one map entry as field `number`: key and value always (as protobuf writes map
// entries), the value's oneof member always, even false / 0 / "".
void writeParameterEntry(WireWriter& writer, uint32_t number, std::string_view key,
                         const ParamValue& value);

// Appends the dims of a shape field (packed LEN, or one VARINT) read after `tag`.
// Negative dims are INVALID_ARGUMENT naming `tensor`.
Status readShapeDims(WireReader& reader, FieldTag tag, std::string_view tensor, Shape& shape);

// Writes a shape as one packed field; nothing for a rank-0 shape (proto3).
void writeShape(WireWriter& writer, uint32_t number, const Shape& shape);

// Converts typed InferTensorContents (every occurrence of the contents field, which
// protobuf merges) into the binary form of `datatype`: the field that belongs to the
// datatype is read, packed and unpacked alike (INT8/INT16 from int_contents and
// UINT8/UINT16 from uint_contents keep the low bytes; BOOL is 0/1; BYTES elements get
// 4-byte LE length prefixes). INVALID_ARGUMENT for FP16/BF16, for values in a field of
// another datatype, and for a value count that differs from the shape's element count;
// RESOURCE_EXHAUSTED when the binary form exceeds `max_bytes`.
StatusOr<Buffer> typedContentsToRaw(std::string_view tensor, DataType datatype, const Shape& shape,
                                    std::span<const std::span<const uint8_t>> contents,
                                    uint64_t max_bytes);

}  // namespace infergate::codecs
