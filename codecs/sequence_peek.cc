#include "codecs/sequence_peek.h"

#include <variant>

#include "codecs/json_internal.h"

namespace infergate::codecs {
namespace {

using namespace json_internal;  // NOLINT: the codec's own plumbing

void setIntId(SequenceRef& ref, uint64_t id) {
  ref.kind = id == 0 ? SequenceRef::Kind::kNone : SequenceRef::Kind::kInt;
  ref.int_id = id;
  ref.string_id.clear();
}

void setStringId(SequenceRef& ref, std::string_view id) {
  ref.kind = id.empty() ? SequenceRef::Kind::kNone : SequenceRef::Kind::kString;
  ref.int_id = 0;
  ref.string_id.assign(id);
}

void clearId(SequenceRef& ref) { setIntId(ref, 0); }

// ---- JSON --------------------------------------------------------------------------

std::string_view trimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// The JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. simdjson's
// classification (get_number_type) does not validate, and its getters cannot tell a
// malformed number from one out of range.
bool isJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    size_t from = i;
    while (i < s.size() && isDigit(s[i])) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

Status malformed(std::string_view key, std::string_view what) {
  return invalidArgument("failed to parse parameter '", key, "' JSON: ", what);
}

Status checkNumber(od::value& value, std::string_view key) {
  std::string_view token = trimRight(value.raw_json_token());
  if (isJsonNumber(token)) return absl::OkStatus();
  return malformed(key, strCat("'", token.substr(0, 40), "' is not a JSON number"));
}

// Checks a scalar the peek does not use, so that what it walks is valid JSON; arrays and
// objects are left to the skip (balanced brackets only).
Status checkUnusedValue(od::value& value, od::json_type type, std::string_view key) {
  simdjson::error_code error = simdjson::SUCCESS;
  switch (type) {
    case od::json_type::string: {
      std::string_view s;
      error = value.get_string().get(s);
      break;
    }
    case od::json_type::boolean: {
      bool b;
      error = value.get_bool().get(b);
      break;
    }
    case od::json_type::null: {
      bool is_null = false;
      error = value.is_null().get(is_null);
      if (!error && !is_null) error = simdjson::N_ATOM_ERROR;
      break;
    }
    case od::json_type::number:
      return checkNumber(value, key);
    default:
      break;
  }
  if (error) return malformed(key, simdjson::error_message(error));
  return absl::OkStatus();
}

// sequence_id: an integer 0 .. 2^64-1 or a string; any other value is no id.
Status peekJsonSequenceId(od::value value, SequenceRef& ref) {
  constexpr std::string_view kKey = param::kSequenceId;
  od::json_type type;
  if (auto error = value.type().get(type)) return malformed(kKey, simdjson::error_message(error));
  if (type == od::json_type::string) {
    std::string_view id;
    if (auto error = value.get_string().get(id)) {
      return malformed(kKey, simdjson::error_message(error));
    }
    setStringId(ref, id);
    return absl::OkStatus();
  }
  clearId(ref);
  if (type != od::json_type::number) return checkUnusedValue(value, type, kKey);
  INFERGATE_RETURN_IF_ERROR(checkNumber(value, kKey));
  // Negative, fractional, with an exponent or past uint64: no id (HTTP refuses them).
  uint64_t id;
  if (!value.get_uint64().get(id)) setIntId(ref, id);
  return absl::OkStatus();
}

// sequence_start / sequence_end: true only for a JSON true.
Status peekJsonFlag(od::value value, std::string_view key, bool& flag) {
  flag = false;
  od::json_type type;
  if (auto error = value.type().get(type)) return malformed(key, simdjson::error_message(error));
  if (type != od::json_type::boolean) return checkUnusedValue(value, type, key);
  if (auto error = value.get_bool().get(flag)) {
    return malformed(key, simdjson::error_message(error));
  }
  return absl::OkStatus();
}

Status peekJsonParameters(od::value value, SequenceRef& ref) {
  od::object object;
  if (auto error = value.get_object().get(object)) {
    if (error == simdjson::INCORRECT_TYPE) {
      return invalidArgument("request 'parameters' must be a JSON object");
    }
    return jsonError(error, "parameters");
  }
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "parameters");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "parameters");
    // `key` dies at the next string decode: compared before the value is read.
    if (key == param::kSequenceId) {
      INFERGATE_RETURN_IF_ERROR(peekJsonSequenceId(field.value(), ref));
    } else if (key == param::kSequenceStart) {
      INFERGATE_RETURN_IF_ERROR(peekJsonFlag(field.value(), param::kSequenceStart, ref.start));
    } else if (key == param::kSequenceEnd) {
      INFERGATE_RETURN_IF_ERROR(peekJsonFlag(field.value(), param::kSequenceEnd, ref.end));
    }  // any other value is skipped unread when the iterator moves on
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<SequenceRef> peekSequenceFromJson(std::string_view json_header, size_t readable,
                                           const DecodeLimits& limits) {
  Document document;
  INFERGATE_RETURN_IF_ERROR(document.parse(json_header, readable, limits));
  INFERGATE_ASSIGN_OR_RETURN(od::object root, rootObject(document, "the inference request"));
  SequenceRef ref;
  for (auto field_result : root) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "the request");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "the request");
    if (key == "parameters") {
      INFERGATE_RETURN_IF_ERROR(peekJsonParameters(field.value(), ref));
    }  // "inputs", "outputs", "id", ...: skipped unread
  }
  if (hasTrailingContent(document)) {
    return invalidArgument("unexpected data after the JSON object of the inference request");
  }
  return ref;
}

// ---- decoded parameters ------------------------------------------------------------

bool isSequenceKey(std::string_view key) {
  return key == param::kSequenceId || key == param::kSequenceStart || key == param::kSequenceEnd;
}

void applySequenceParameter(std::string_view key, const ParamValue* value, SequenceRef& ref) {
  if (key == param::kSequenceId) {
    if (value == nullptr) {
      clearId(ref);
    } else if (const auto* s = std::get_if<std::string>(value)) {
      setStringId(ref, *s);
    } else if (const auto* u = std::get_if<uint64_t>(value)) {
      setIntId(ref, *u);
    } else if (const auto* i = std::get_if<int64_t>(value)) {
      setIntId(ref, static_cast<uint64_t>(*i));  // as Triton stores a gRPC int64_param
    } else {
      clearId(ref);  // bool, double
    }
    return;
  }
  bool* flag = key == param::kSequenceStart ? &ref.start
               : key == param::kSequenceEnd ? &ref.end
                                            : nullptr;
  if (flag == nullptr) return;
  const bool* b = value == nullptr ? nullptr : std::get_if<bool>(value);
  *flag = b != nullptr && *b;
}

SequenceRef sequenceOf(const Parameters& parameters) {
  SequenceRef ref;
  for (std::string_view key : {param::kSequenceId, param::kSequenceStart, param::kSequenceEnd}) {
    if (const ParamValue* value = parameters.find(key)) applySequenceParameter(key, value, ref);
  }
  return ref;
}

}  // namespace infergate::codecs
