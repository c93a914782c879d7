#include "codecs/json_internal.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "codecs/bytes_tensor.h"
#include "codecs/json_depth.h"
#include "codecs/json_writer.h"

namespace infergate::codecs::json_internal {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are stored little-endian; a big-endian host needs byte swaps");

namespace {

// Parsers keep their buffers sized to the largest document they saw; one that grew past
// this is dropped before a small parse so that a single huge body does not pin memory.
constexpr size_t kParserKeepCapacity = 16 * kMiB;

struct ThreadState {
  od::parser parser;
  std::string scratch;
};

ThreadState& threadState() {
  thread_local ThreadState state;
  return state;
}

std::string_view trimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' ||
                        s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// NaN, Infinity and -Infinity: accepted by Triton (rapidjson kParseNanAndInfFlag) but not by
// simdjson, so they are recognised on the raw token.
bool parseNonFiniteLiteral(od::value& value, double* out) {
  std::string_view token = trimRight(value.raw_json_token());
  if (token == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (token == "Infinity") {
    *out = std::numeric_limits<double>::infinity();
  } else if (token == "-Infinity") {
    *out = -std::numeric_limits<double>::infinity();
  } else {
    return false;
  }
  return true;
}

std::string_view tokenForMessage(od::value& value) {
  std::string_view token = trimRight(value.raw_json_token());
  if (token.size() > 40) token = token.substr(0, 40);
  return token;
}

// ---- data decoding: one Sink per element kind, one walker for nesting --------------

template <typename C>
void storeLe(uint8_t* out, C v) {
  std::memcpy(out, &v, sizeof(C));
}

template <typename C>
struct IntSink {
  uint8_t* out;
  Status element(od::value& v, std::string_view tensor, uint64_t index) {
    int64_t x;
    if (v.get_int64().get(x)) {
      return invalidArgument("tensor '", tensor, "': data element ", index, " (",
                             tokenForMessage(v), ") is not an integer");
    }
    storeLe<C>(out + index * sizeof(C), static_cast<C>(x));  // narrowed like Triton: no check
    return absl::OkStatus();
  }
};

template <typename C>
struct UintSink {
  uint8_t* out;
  Status element(od::value& v, std::string_view tensor, uint64_t index) {
    uint64_t x;
    if (v.get_uint64().get(x)) {
      return invalidArgument("tensor '", tensor, "': data element ", index, " (",
                             tokenForMessage(v), ") is not a non-negative integer");
    }
    storeLe<C>(out + index * sizeof(C), static_cast<C>(x));
    return absl::OkStatus();
  }
};

template <typename C>
struct FloatSink {
  uint8_t* out;
  Status element(od::value& v, std::string_view tensor, uint64_t index) {
    double x;
    if (v.get_double().get(x) && !parseNonFiniteLiteral(v, &x)) {
      return invalidArgument("tensor '", tensor, "': data element ", index, " (",
                             tokenForMessage(v), ") is not a number");
    }
    storeLe<C>(out + index * sizeof(C), static_cast<C>(x));
    return absl::OkStatus();
  }
};

struct BoolSink {
  uint8_t* out;
  Status element(od::value& v, std::string_view tensor, uint64_t index) {
    bool x;
    if (v.get_bool().get(x)) {
      return invalidArgument("tensor '", tensor, "': data element ", index, " (",
                             tokenForMessage(v), ") is not true or false");
    }
    out[index] = x ? 1 : 0;
    return absl::OkStatus();
  }
};

struct BytesSink {
  std::string* out;
  uint64_t max_bytes;
  Status element(od::value& v, std::string_view tensor, uint64_t index) {
    std::string_view s;
    if (v.get_string().get(s)) {
      return invalidArgument("BYTES tensor '", tensor, "': data element ", index, " (",
                             tokenForMessage(v), ") is not a string");
    }
    if (s.size() > std::numeric_limits<uint32_t>::max()) {
      return invalidArgument("BYTES tensor '", tensor, "': element ", index,
                             " is longer than 2^32 - 1 bytes");
    }
    if (out->size() + 4 + s.size() > max_bytes) {
      return resourceExhausted("BYTES tensor '", tensor, "' decodes to more than ", max_bytes,
                               " bytes");
    }
    appendBytesElement(*out, s);
    return absl::OkStatus();
  }
};

// Recursion is bounded by Document::parse, which refuses a text nested deeper than
// limits.max_json_depth before any of it is walked.
template <typename Sink>
class DataWalker {
 public:
  DataWalker(Sink sink, std::string_view tensor, uint64_t capacity)
      : sink_(sink), tensor_(tensor), capacity_(capacity) {}

  Status walk(od::value& array_value) {
    od::array array;
    if (auto error = array_value.get_array().get(array)) {
      return invalidArgument("tensor '", tensor_, "': 'data' must be an array (",
                             simdjson::error_message(error), ")");
    }
    for (auto element_result : array) {
      od::value element;
      if (auto error = std::move(element_result).get(element)) {
        return jsonError(error, "tensor data");
      }
      // type() fails on the bare NaN / Infinity tokens: those are scalars for the sink.
      od::json_type type;
      if (!element.type().get(type) && type == od::json_type::array) {
        INFERGATE_RETURN_IF_ERROR(walk(element));
        continue;
      }
      if (count_ == capacity_) {
        return invalidArgument("tensor '", tensor_, "': data has more elements than its shape (",
                               capacity_, ")");
      }
      INFERGATE_RETURN_IF_ERROR(sink_.element(element, tensor_, count_));
      ++count_;
    }
    return absl::OkStatus();
  }

  uint64_t count() const { return count_; }

 private:
  Sink sink_;
  std::string_view tensor_;
  uint64_t capacity_;
  uint64_t count_ = 0;
};

template <typename Sink>
Status walkInto(Sink sink, od::value& data, std::string_view tensor, uint64_t expected) {
  DataWalker<Sink> walker(sink, tensor, expected);
  INFERGATE_RETURN_IF_ERROR(walker.walk(data));
  if (walker.count() != expected) {
    return invalidArgument("tensor '", tensor, "': shape calls for ", expected,
                           " elements but 'data' holds ", walker.count());
  }
  return absl::OkStatus();
}

Status decodeFixed(od::value& data, DataType type, uint8_t* out, std::string_view tensor,
                   uint64_t count) {
  switch (type) {
    case DataType::kBool:
      return walkInto(BoolSink{out}, data, tensor, count);
    case DataType::kUint8:
      return walkInto(UintSink<uint8_t>{out}, data, tensor, count);
    case DataType::kUint16:
      return walkInto(UintSink<uint16_t>{out}, data, tensor, count);
    case DataType::kUint32:
      return walkInto(UintSink<uint32_t>{out}, data, tensor, count);
    case DataType::kUint64:
      return walkInto(UintSink<uint64_t>{out}, data, tensor, count);
    case DataType::kInt8:
      return walkInto(IntSink<int8_t>{out}, data, tensor, count);
    case DataType::kInt16:
      return walkInto(IntSink<int16_t>{out}, data, tensor, count);
    case DataType::kInt32:
      return walkInto(IntSink<int32_t>{out}, data, tensor, count);
    case DataType::kInt64:
      return walkInto(IntSink<int64_t>{out}, data, tensor, count);
    case DataType::kFp32:
      return walkInto(FloatSink<float>{out}, data, tensor, count);
    case DataType::kFp64:
      return walkInto(FloatSink<double>{out}, data, tensor, count);
    default:
      return internalError("decodeFixed called for ", dataTypeName(type));
  }
}

// ---- data encoding -----------------------------------------------------------------

template <typename C, typename Write>
void appendArray(std::string& out, const Buffer& data, Write write) {
  const size_t n = data.size() / sizeof(C);
  const size_t start = out.size();
  out.resize(start + 2 + n * (kMaxJsonNumberChars + 1));
  char* p = out.data() + start;
  *p++ = '[';
  const uint8_t* src = data.data();
  for (size_t i = 0; i < n; ++i) {
    if (i) *p++ = ',';
    C v;
    std::memcpy(&v, src + i * sizeof(C), sizeof(C));
    p = write(p, v);
  }
  *p++ = ']';
  out.resize(p - out.data());
}

template <typename C>
char* writeInteger(char* p, C v) {
  return std::to_chars(p, p + kMaxJsonNumberChars, v).ptr;
}

}  // namespace

bool hasTrailingContent(Document& doc) { return !doc.doc().current_location().error(); }

Status repeatedKey(std::string_view where, std::string_view key) {
  return invalidArgument(where, ": key '", key, "' appears more than once");
}

Status jsonError(simdjson::error_code error, std::string_view what) {
  return invalidArgument("failed to parse ", what, " JSON: ", simdjson::error_message(error));
}

Status Document::parse(std::string_view text, size_t readable, const DecodeLimits& limits) {
  if (text.size() > limits.max_json_bytes) {
    return resourceExhausted("JSON of ", text.size(), " bytes exceeds the limit of ",
                             limits.max_json_bytes, " bytes");
  }
  INFERGATE_RETURN_IF_ERROR(checkJsonDepth(text, limits.max_json_depth));
  ThreadState& state = threadState();
  if (state.parser.capacity() > kParserKeepCapacity && text.size() < kParserKeepCapacity) {
    state.parser = od::parser();
    state.scratch = std::string();
  }
  // simdjson reads a token that runs to the end of the text (a number, an atom) on into the
  // padding. Bytes there are whatever the buffer held before, so a text cut off in such a
  // token would be read differently from one call to the next. In place only when the text
  // ends in a closing bracket (every complete document these decoders take); otherwise a
  // copy with blank padding.
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\n' || text[end - 1] == '\r' ||
                     text[end - 1] == '\t')) {
    --end;
  }
  const bool closed = end > 0 && (text[end - 1] == '}' || text[end - 1] == ']');
  simdjson::padded_string_view padded;
  if (closed && readable >= text.size() + simdjson::SIMDJSON_PADDING) {
    padded = simdjson::padded_string_view(text.data(), text.size(), readable);
  } else {
    if (state.scratch.size() < text.size() + simdjson::SIMDJSON_PADDING) {
      state.scratch.resize(text.size() + simdjson::SIMDJSON_PADDING);
    }
    std::memcpy(state.scratch.data(), text.data(), text.size());
    std::memset(state.scratch.data() + text.size(), ' ', simdjson::SIMDJSON_PADDING);
    padded = simdjson::padded_string_view(state.scratch.data(), text.size(),
                                          text.size() + simdjson::SIMDJSON_PADDING);
  }
  if (auto error = state.parser.iterate(padded).get(doc_)) return jsonError(error, "the");
  return absl::OkStatus();
}

StatusOr<od::object> rootObject(Document& doc, std::string_view what) {
  od::object object;
  if (auto error = doc.doc().get_object().get(object)) {
    if (error == simdjson::INCORRECT_TYPE) {
      return invalidArgument(what, " must be a JSON object");
    }
    return jsonError(error, what);
  }
  return object;
}

StatusOr<ParamValue> decodeParamValue(od::value value, std::string_view key) {
  // Triton's reader takes NaN and Infinity, and numbers past 64-bit integers, as doubles
  // (PROTOCOL 5.2); a reserved key's own check then names the key.
  double non_finite = 0;
  if (parseNonFiniteLiteral(value, &non_finite)) return ParamValue(non_finite);
  od::json_type type;
  if (auto error = value.type().get(type)) return jsonError(error, "parameter");
  switch (type) {
    case od::json_type::string: {
      std::string_view s;
      if (auto error = value.get_string().get(s)) return jsonError(error, "parameter");
      return ParamValue(std::string(s));
    }
    case od::json_type::boolean: {
      bool b;
      if (auto error = value.get_bool().get(b)) return jsonError(error, "parameter");
      return ParamValue(b);
    }
    case od::json_type::number: {
      od::number_type kind = od::number_type::floating_point_number;
      // An integer past 64 bits has no number type here: it is read as a double below.
      if (value.get_number_type().get(kind) != simdjson::SUCCESS) {
        kind = od::number_type::floating_point_number;
      }
      // An integer that fits neither int64 nor uint64 goes on to be read as a double.
      if (kind == od::number_type::signed_integer) {
        int64_t i;
        if (value.get_int64().get(i) == simdjson::SUCCESS) return ParamValue(i);
      }
      if (kind == od::number_type::unsigned_integer) {
        uint64_t u;
        if (value.get_uint64().get(u) == simdjson::SUCCESS) return ParamValue(u);
      }
      double d;
      if (value.get_double().get(d)) {
        // An integer past 64 bits: its decimal text, read as a double as rapidjson does.
        const std::string token(trimRight(value.raw_json_token()));
        char* end = nullptr;
        d = std::strtod(token.c_str(), &end);
        if (end != token.c_str() + token.size() || !std::isfinite(d)) {
          return invalidArgument("parameter '", key, "' is a number out of range");
        }
      }
      return ParamValue(d);
    }
    default:
      return invalidArgument("parameter '", key,
                             "' must be a string, a boolean or a number (arrays, objects and "
                             "null are not parameter values)");
  }
}

StatusOr<uint64_t> decodeUint(od::value value, std::string_view what) {
  uint64_t u;
  if (value.get_uint64().get(u)) {
    return invalidArgument("'", what, "' must be a non-negative integer, got ",
                           tokenForMessage(value));
  }
  return u;
}

StatusOr<bool> decodeBool(od::value value, std::string_view what) {
  bool b;
  if (value.get_bool().get(b)) {
    return invalidArgument("'", what, "' must be true or false, got ", tokenForMessage(value));
  }
  return b;
}

StatusOr<std::string_view> decodeString(od::value value, std::string_view what) {
  std::string_view s;
  if (value.get_string().get(s)) {
    return invalidArgument("'", what, "' must be a string, got ", tokenForMessage(value));
  }
  return s;
}

StatusOr<Shape> decodeShape(od::value value, std::string_view tensor, const DecodeLimits& limits) {
  od::array array;
  if (value.get_array().get(array)) {
    return invalidArgument("tensor '", tensor, "': 'shape' must be an array of integers");
  }
  Shape shape;
  for (auto dim_result : array) {
    od::value dim;
    if (auto error = std::move(dim_result).get(dim)) return jsonError(error, "shape");
    int64_t d;
    if (dim.get_int64().get(d) || d < 0) {
      return invalidArgument("tensor '", tensor,
                             "': 'shape' dimensions must be non-negative integers, got ",
                             tokenForMessage(dim));
    }
    if (shape.rank() == limits.max_rank) {
      return resourceExhausted("tensor '", tensor, "' has more than the limit of ",
                               limits.max_rank, " dimensions");
    }
    shape.push_back(d);
  }
  INFERGATE_RETURN_IF_ERROR(checkShapeLimits(shape, tensor, limits));
  return shape;
}

StatusOr<Buffer> decodeTensorData(od::value data, DataType datatype, const Shape& shape,
                                  std::string_view tensor, const DecodeLimits& limits) {
  if (isRawOnly(datatype)) {
    return invalidArgument("tensor '", tensor, "': receiving ", dataTypeName(datatype),
                           " data via JSON is not supported; use the binary data format");
  }
  if (datatype == DataType::kInvalid) {
    return invalidArgument("tensor '", tensor, "' has an invalid datatype");
  }
  // Triton counts 0 elements for a rank-0 shape on the JSON path (scalars cannot be sent
  // as JSON data).
  uint64_t expected = 0;
  if (shape.rank() != 0) {
    INFERGATE_ASSIGN_OR_RETURN(int64_t count, shape.elementCount(tensor));
    expected = static_cast<uint64_t>(count);
  }
  if (datatype == DataType::kBytes) {
    std::string out;
    INFERGATE_RETURN_IF_ERROR(
        walkInto(BytesSink{&out, limits.max_tensor_bytes}, data, tensor, expected));
    return Buffer::fromString(std::move(out));
  }
  const size_t element = elementSize(datatype);
  if (expected > limits.max_tensor_bytes / element) {
    return resourceExhausted("tensor '", tensor, "' of shape ", shape.toString(), " and type ",
                             dataTypeName(datatype), " decodes to more than ",
                             limits.max_tensor_bytes, " bytes");
  }
  MutableBuffer out = MutableBuffer::allocate(expected * element);
  INFERGATE_RETURN_IF_ERROR(decodeFixed(data, datatype, out.data(), tensor, expected));
  return std::move(out).freeze();
}

Status appendTensorData(std::string& out, DataType datatype, const Buffer& data,
                        std::string_view tensor) {
  switch (datatype) {
    case DataType::kBool:
      appendArray<uint8_t>(out, data, [](char* p, uint8_t v) {
        const char* s = v ? "true" : "false";
        size_t n = v ? 4 : 5;
        std::memcpy(p, s, n);
        return p + n;
      });
      return absl::OkStatus();
    case DataType::kUint8:
      appendArray<uint8_t>(out, data, writeInteger<uint8_t>);
      return absl::OkStatus();
    case DataType::kUint16:
      appendArray<uint16_t>(out, data, writeInteger<uint16_t>);
      return absl::OkStatus();
    case DataType::kUint32:
      appendArray<uint32_t>(out, data, writeInteger<uint32_t>);
      return absl::OkStatus();
    case DataType::kUint64:
      appendArray<uint64_t>(out, data, writeInteger<uint64_t>);
      return absl::OkStatus();
    case DataType::kInt8:
      appendArray<int8_t>(out, data, writeInteger<int8_t>);
      return absl::OkStatus();
    case DataType::kInt16:
      appendArray<int16_t>(out, data, writeInteger<int16_t>);
      return absl::OkStatus();
    case DataType::kInt32:
      appendArray<int32_t>(out, data, writeInteger<int32_t>);
      return absl::OkStatus();
    case DataType::kInt64:
      appendArray<int64_t>(out, data, writeInteger<int64_t>);
      return absl::OkStatus();
    case DataType::kFp32:  // written as the double it converts to, as Triton does
      appendArray<float>(out, data,
                         [](char* p, float v) { return writeJsonDouble(p, static_cast<double>(v)); });
      return absl::OkStatus();
    case DataType::kFp64:
      appendArray<double>(out, data, [](char* p, double v) { return writeJsonDouble(p, v); });
      return absl::OkStatus();
    case DataType::kBytes: {
      out.push_back('[');
      bool first = true;
      INFERGATE_RETURN_IF_ERROR(forEachBytesElement(data.span(), tensor, [&](std::string_view e) {
        if (!first) out.push_back(',');
        first = false;
        appendJsonString(out, e);
      }));
      out.push_back(']');
      return absl::OkStatus();
    }
    case DataType::kFp16:
    case DataType::kBf16:
      return invalidArgument("tensor '", tensor, "': sending ", dataTypeName(datatype),
                             " data via JSON is not supported; request it as binary data");
    case DataType::kInvalid:
      break;
  }
  return invalidArgument("tensor '", tensor, "' has an invalid datatype");
}

void appendParamValue(std::string& out, const ParamValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.append(v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          appendJsonInt(out, v);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          appendJsonUint(out, v);
        } else if constexpr (std::is_same_v<T, double>) {
          appendJsonDouble(out, v);
        } else {
          appendJsonString(out, v);
        }
      },
      value);
}

void appendParameters(std::string& out, const Parameters& params) {
  out.push_back('{');
  bool first = true;
  for (const auto& [key, value] : params) {
    if (!first) out.push_back(',');
    first = false;
    appendJsonString(out, key);
    out.push_back(':');
    appendParamValue(out, value);
  }
  out.push_back('}');
}

}  // namespace infergate::codecs::json_internal
