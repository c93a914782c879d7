#include "codecs/protobuf_wire.h"

#include <simdjson.h>

#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "codecs/bytes_tensor.h"

namespace infergate::codecs {

StatusOr<std::string_view> asUtf8(std::span<const uint8_t> bytes, std::string_view what) {
  std::string_view text = asChars(bytes);
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    return invalidArgument(what, " is not valid UTF-8 (a protobuf string must be)");
  }
  return text;
}

// ---- WireReader --------------------------------------------------------------------

namespace {

constexpr int kMaxGroupDepth = 64;

}  // namespace

Status WireReader::error(std::string_view what) const {
  return invalidArgument("malformed protobuf message: ", what, " at byte ", pos_);
}

StatusOr<uint64_t> WireReader::readVarint() {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos_ >= size_) return error("truncated varint");
    uint8_t byte = data_[pos_++];
    // The 10th byte may carry only bit 63; anything more overflows 64 bits.
    if (i == 9 && byte > 1) return error("varint longer than 10 bytes or past 64 bits");
    value |= uint64_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) return value;
  }
  return error("varint longer than 10 bytes");
}

StatusOr<FieldTag> WireReader::readTag() {
  StatusOr<uint64_t> raw = readVarint();
  if (!raw.ok()) return raw.status();
  if (*raw > std::numeric_limits<uint32_t>::max()) return error("tag past 32 bits");
  FieldTag tag{static_cast<uint32_t>(*raw >> 3), static_cast<WireType>(*raw & 7)};
  if (tag.number == 0) return error("field number 0");
  if ((*raw & 7) > 5) return error(strCat("invalid wire type ", *raw & 7));
  return tag;
}

StatusOr<uint32_t> WireReader::readFixed32() {
  if (size_ - pos_ < 4) return error("truncated fixed32");
  uint32_t value = loadU32Le(data_ + pos_);
  pos_ += 4;
  return value;
}

StatusOr<uint64_t> WireReader::readFixed64() {
  if (size_ - pos_ < 8) return error("truncated fixed64");
  uint64_t value = loadU32Le(data_ + pos_) | uint64_t{loadU32Le(data_ + pos_ + 4)} << 32;
  pos_ += 8;
  return value;
}

StatusOr<std::span<const uint8_t>> WireReader::readLengthDelimited() {
  StatusOr<uint64_t> length = readVarint();
  if (!length.ok()) return length.status();
  if (*length > size_ - pos_) {
    return error(strCat("length ", *length, " runs past the end (", size_ - pos_, " bytes left)"));
  }
  std::span<const uint8_t> value(data_ + pos_, static_cast<size_t>(*length));
  pos_ += value.size();
  return value;
}

Status WireReader::skip(FieldTag tag) { return skipValue(tag, 0); }

Status WireReader::skipValue(FieldTag tag, int depth) {
  switch (tag.type) {
    case WireType::kVarint:
      return readVarint().status();
    case WireType::kI64:
      return readFixed64().status();
    case WireType::kLen:
      return readLengthDelimited().status();
    case WireType::kI32:
      return readFixed32().status();
    case WireType::kStartGroup:
      return skipGroup(tag.number, depth + 1);
    case WireType::kEndGroup:
      return error("end-group without a start-group");
  }
  return error("invalid wire type");
}

Status WireReader::skipGroup(uint32_t number, int depth) {
  if (depth > kMaxGroupDepth) return error("groups nested too deeply");
  while (true) {
    if (done()) return error("unterminated group");
    StatusOr<FieldTag> tag = readTag();
    if (!tag.ok()) return tag.status();
    if (tag->type == WireType::kEndGroup) {
      if (tag->number != number) return error("end-group of another field");
      return absl::OkStatus();
    }
    INFERGATE_RETURN_IF_ERROR(skipValue(*tag, depth));
  }
}

// ---- WireWriter --------------------------------------------------------------------

size_t varintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

namespace {

size_t encodeVarint(uint64_t value, char* out) {
  size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<char>(value);
  return n;
}

}  // namespace

void WireWriter::varint(uint64_t value) {
  char buf[10];
  out_.append(buf, encodeVarint(value, buf));
}

void WireWriter::fixed64(uint64_t value) {
  appendU32Le(out_, static_cast<uint32_t>(value));
  appendU32Le(out_, static_cast<uint32_t>(value >> 32));
}

void WireWriter::varintField(uint32_t number, uint64_t value) {
  tag(number, WireType::kVarint);
  varint(value);
}

void WireWriter::bytesField(uint32_t number, std::string_view bytes) {
  lengthPrefix(number, bytes.size());
  out_.append(bytes);
}

void WireWriter::lengthPrefix(uint32_t number, uint64_t length) {
  tag(number, WireType::kLen);
  varint(length);
}

size_t WireWriter::beginMessage(uint32_t number) {
  tag(number, WireType::kLen);
  return out_.size();
}

void WireWriter::endMessage(size_t mark) {
  char buf[10];
  size_t n = encodeVarint(out_.size() - mark, buf);
  out_.insert(mark, buf, n);
}

BufferChain spliceChain(std::string glue, std::span<const ChainCut> cuts) {
  Buffer frozen = Buffer::fromString(std::move(glue));
  BufferChain chain;
  size_t done = 0;
  for (const ChainCut& cut : cuts) {
    chain.append(frozen.slice(done, cut.glue_offset - done));
    chain.append(*cut.data);
    done = cut.glue_offset;
  }
  chain.append(frozen.slice(done, frozen.size() - done));
  return chain;
}

// ---- InferParameter ----------------------------------------------------------------

namespace {

// Merges one InferParameter message into `value`: the last kind set wins.
Status decodeParamValue(std::span<const uint8_t> message, std::optional<ParamValue>& value) {
  return forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    bool varint = tag.type == WireType::kVarint;
    if (varint && (tag.number == 1 || tag.number == 2 || tag.number == 5)) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t v, reader.readVarint());
      if (tag.number == 1) value = (v != 0);
      if (tag.number == 2) value = static_cast<int64_t>(v);
      if (tag.number == 5) value = v;
      return absl::OkStatus();
    }
    if (tag.number == 3 && tag.type == WireType::kLen) {
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
      INFERGATE_ASSIGN_OR_RETURN(std::string_view text, asUtf8(s, "a string_param"));
      value = std::string(text);
      return absl::OkStatus();
    }
    if (tag.number == 4 && tag.type == WireType::kI64) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t bits, reader.readFixed64());
      value = std::bit_cast<double>(bits);
      return absl::OkStatus();
    }
    return reader.skip(tag);
  });
}

}  // namespace

namespace {

std::string ownerText(std::string_view kind, std::string_view name) {
  if (name.empty()) return std::string(kind);
  return strCat(kind, " '", name, "'");
}

}  // namespace

Status decodeParameterEntry(std::span<const uint8_t> entry, std::string_view owner_kind,
                            std::string_view owner_name, Parameters& out) {
  std::string_view key;
  std::optional<ParamValue> value;
  INFERGATE_RETURN_IF_ERROR(forEachField(entry, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || (tag.number != 1 && tag.number != 2)) {
      return reader.skip(tag);
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> s, reader.readLengthDelimited());
    if (tag.number == 1) {
      INFERGATE_ASSIGN_OR_RETURN(key, asUtf8(s, "a parameter name"));
      return absl::OkStatus();
    }
    return decodeParamValue(s, value);
  }));
  if (!value) {
    return invalidArgument("parameter '", key, "' of ", ownerText(owner_kind, owner_name),
                           " has no value");
  }
  out.set(std::string(key), std::move(*value));
  if (out.size() > kMaxParametersPerMap) {
    return resourceExhausted("more than ", kMaxParametersPerMap, " parameters in ",
                             ownerText(owner_kind, owner_name));
  }
  return absl::OkStatus();
}

void writeParameterEntry(WireWriter& writer, uint32_t number, std::string_view key,
                         const ParamValue& value) {
  size_t entry = writer.beginMessage(number);
  writer.bytesField(1, key);
  size_t param = writer.beginMessage(2);
  if (const bool* b = std::get_if<bool>(&value)) {
    writer.varintField(1, *b ? 1 : 0);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    writer.varintField(2, static_cast<uint64_t>(*i));
  } else if (const std::string* s = std::get_if<std::string>(&value)) {
    writer.bytesField(3, *s);
  } else if (const double* d = std::get_if<double>(&value)) {
    writer.tag(4, WireType::kI64);
    writer.fixed64(std::bit_cast<uint64_t>(*d));
  } else {
    writer.varintField(5, std::get<uint64_t>(value));
  }
  writer.endMessage(param);
  writer.endMessage(entry);
}

// ---- shapes ------------------------------------------------------------------------

namespace {

Status appendDim(uint64_t raw, std::string_view tensor, Shape& shape) {
  int64_t dim = static_cast<int64_t>(raw);
  if (dim < 0) {
    return invalidArgument("tensor '", tensor, "' has a negative dimension ", dim);
  }
  if (shape.rank() >= kMaxShapeRank) {
    return resourceExhausted("tensor '", tensor, "' has more than ", kMaxShapeRank, " dimensions");
  }
  shape.push_back(dim);
  return absl::OkStatus();
}

}  // namespace

Status readShapeDims(WireReader& reader, FieldTag tag, std::string_view tensor, Shape& shape) {
  if (tag.type == WireType::kVarint) {
    INFERGATE_ASSIGN_OR_RETURN(uint64_t raw, reader.readVarint());
    return appendDim(raw, tensor, shape);
  }
  if (tag.type != WireType::kLen) return reader.skip(tag);
  INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> packed, reader.readLengthDelimited());
  WireReader dims(packed);
  while (!dims.done()) {
    INFERGATE_ASSIGN_OR_RETURN(uint64_t raw, dims.readVarint());
    INFERGATE_RETURN_IF_ERROR(appendDim(raw, tensor, shape));
  }
  return absl::OkStatus();
}

void writeShape(WireWriter& writer, uint32_t number, const Shape& shape) {
  if (shape.rank() == 0) return;
  size_t size = 0;
  for (int64_t dim : shape) size += varintSize(static_cast<uint64_t>(dim));
  writer.lengthPrefix(number, size);
  for (int64_t dim : shape) writer.varint(static_cast<uint64_t>(dim));
}

// ---- typed InferTensorContents -> binary form ------------------------------------

namespace {

using Occurrences = std::span<const std::span<const uint8_t>>;

// InferTensorContents field names, by field number.
constexpr std::string_view kContentsNames[] = {
    "",  // no field 0
    "bool_contents",
    "int_contents",
    "int64_contents",
    "uint_contents",
    "uint64_contents",
    "fp32_contents",
    "fp64_contents",
    "bytes_contents",
};

struct ContentsField {
  uint32_t number;
  WireType type;  // of one unpacked value
};

std::optional<ContentsField> contentsFieldFor(DataType type) {
  switch (type) {
    case DataType::kBool:
      return ContentsField{1, WireType::kVarint};
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return ContentsField{2, WireType::kVarint};
    case DataType::kInt64:
      return ContentsField{3, WireType::kVarint};
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
      return ContentsField{4, WireType::kVarint};
    case DataType::kUint64:
      return ContentsField{5, WireType::kVarint};
    case DataType::kFp32:
      return ContentsField{6, WireType::kI32};
    case DataType::kFp64:
      return ContentsField{7, WireType::kI64};
    case DataType::kBytes:
      return ContentsField{8, WireType::kLen};
    default:
      return std::nullopt;
  }
}

// A contents field other than the datatype's: an error unless it holds no value.
Status rejectForeignField(FieldTag tag, WireReader& reader, std::string_view tensor,
                          DataType type) {
  if (tag.type == WireType::kLen && tag.number != 8) {
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> packed, reader.readLengthDelimited());
    if (packed.empty()) return absl::OkStatus();
  }
  return invalidArgument("tensor '", tensor, "' of datatype ", dataTypeName(type),
                         " carries typed data in ", kContentsNames[tag.number], "; expected ",
                         kContentsNames[contentsFieldFor(type)->number]);
}

StatusOr<uint64_t> readScalar(WireReader& reader, WireType type) {
  if (type == WireType::kI32) {
    INFERGATE_ASSIGN_OR_RETURN(uint32_t v, reader.readFixed32());
    return uint64_t{v};
  }
  if (type == WireType::kI64) return reader.readFixed64();
  return reader.readVarint();
}

// One occurrence of the datatype's own field: a BYTES element, one scalar, or packed
// scalars. fn(uint64_t) gets numbers (raw varint or fixed bits), fn(span) BYTES elements.
template <typename Fn>
Status readContentsValues(FieldTag tag, WireReader& reader, ContentsField field, Fn& fn) {
  if constexpr (std::is_invocable_v<Fn, std::span<const uint8_t>>) {
    if (tag.type != WireType::kLen) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> element, reader.readLengthDelimited());
    fn(element);
    return absl::OkStatus();
  } else {
    if (tag.type == field.type) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t v, readScalar(reader, field.type));
      fn(v);
      return absl::OkStatus();
    }
    if (tag.type != WireType::kLen) return reader.skip(tag);  // another encoding: unknown
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> packed, reader.readLengthDelimited());
    WireReader values(packed);
    while (!values.done()) {
      INFERGATE_ASSIGN_OR_RETURN(uint64_t v, readScalar(values, field.type));
      fn(v);
    }
    return absl::OkStatus();
  }
}

// Calls fn for each value of the datatype's field across every contents occurrence.
template <typename Fn>
Status forEachContentsValue(Occurrences contents, std::string_view tensor, DataType type, Fn&& fn) {
  const ContentsField field = *contentsFieldFor(type);
  for (std::span<const uint8_t> occurrence : contents) {
    Status status = forEachField(occurrence, [&](FieldTag tag, WireReader& reader) -> Status {
      if (tag.number == field.number) return readContentsValues(tag, reader, field, fn);
      if (tag.number <= 8) return rejectForeignField(tag, reader, tensor, type);
      return reader.skip(tag);
    });
    INFERGATE_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

Status checkCount(std::string_view tensor, DataType type, const Shape& shape, uint64_t count) {
  INFERGATE_ASSIGN_OR_RETURN(int64_t expected, shape.elementCount(tensor));
  if (count != static_cast<uint64_t>(expected)) {
    return invalidArgument("tensor '", tensor,
                           "': ", kContentsNames[contentsFieldFor(type)->number], " holds ", count,
                           " values but shape ", shape.toString(), " calls for ", expected);
  }
  return absl::OkStatus();
}

Status checkSize(std::string_view tensor, uint64_t bytes, uint64_t max_bytes) {
  if (bytes > max_bytes) {
    return resourceExhausted("tensor '", tensor, "' decoded from typed contents would take ", bytes,
                             " bytes, more than the limit of ", max_bytes);
  }
  return absl::OkStatus();
}

StatusOr<Buffer> bytesContentsToRaw(std::string_view tensor, const Shape& shape,
                                    Occurrences contents, uint64_t max_bytes) {
  uint64_t count = 0;
  uint64_t total = 0;
  bool too_long = false;
  INFERGATE_RETURN_IF_ERROR(forEachContentsValue(
      contents, tensor, DataType::kBytes, [&](std::span<const uint8_t> element) {
        ++count;
        total += 4 + element.size();
        too_long |= element.size() > std::numeric_limits<uint32_t>::max();
      }));
  if (too_long) {
    return invalidArgument("tensor '", tensor, "' has a BYTES element of 4 GiB or more");
  }
  INFERGATE_RETURN_IF_ERROR(checkCount(tensor, DataType::kBytes, shape, count));
  INFERGATE_RETURN_IF_ERROR(checkSize(tensor, total, max_bytes));
  MutableBuffer out = MutableBuffer::allocate(total);
  uint8_t* p = out.data();
  INFERGATE_RETURN_IF_ERROR(forEachContentsValue(
      contents, tensor, DataType::kBytes, [&](std::span<const uint8_t> element) {
        uint32_t n = static_cast<uint32_t>(element.size());
        for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(n >> (8 * i));
        if (n) std::memcpy(p, element.data(), n);
        p += n;
      }));
  return std::move(out).freeze();
}

}  // namespace

StatusOr<Buffer> typedContentsToRaw(std::string_view tensor, DataType datatype, const Shape& shape,
                                    Occurrences contents, uint64_t max_bytes) {
  if (!contentsFieldFor(datatype)) {
    return invalidArgument("tensor '", tensor, "' of datatype ", dataTypeName(datatype),
                           " cannot use typed contents; send it in raw contents");
  }
  if (datatype == DataType::kBytes) return bytesContentsToRaw(tensor, shape, contents, max_bytes);
  uint64_t count = 0;
  INFERGATE_RETURN_IF_ERROR(
      forEachContentsValue(contents, tensor, datatype, [&](uint64_t) { ++count; }));
  INFERGATE_RETURN_IF_ERROR(checkCount(tensor, datatype, shape, count));
  const size_t element_size = elementSize(datatype);
  INFERGATE_RETURN_IF_ERROR(checkSize(tensor, count * element_size, max_bytes));
  MutableBuffer out = MutableBuffer::allocate(count * element_size);
  uint8_t* p = out.data();
  const bool is_bool = datatype == DataType::kBool;
  INFERGATE_RETURN_IF_ERROR(forEachContentsValue(contents, tensor, datatype, [&](uint64_t v) {
    if (is_bool) v = (v != 0);
    for (size_t i = 0; i < element_size; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }));
  return std::move(out).freeze();
}

}  // namespace infergate::codecs
