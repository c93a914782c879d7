#include "codecs/json_value.h"

#include "codecs/json_internal.h"
#include "codecs/json_writer.h"

namespace infergate::codecs {
namespace {

using namespace json_internal;  // NOLINT

constexpr int kMaxDepth = 64;

StatusOr<JsonValue> build(od::value value, int depth) {
  if (depth > kMaxDepth) return invalidArgument("JSON nested deeper than ", kMaxDepth, " levels");
  od::json_type type;
  if (auto error = value.type().get(type)) return jsonError(error, "the request");
  switch (type) {
    case od::json_type::null: {
      // is_null() reports a literal that only starts like `null` as an error: read it
      // without simdjson's throwing conversion.
      bool is_null = false;
      if (!value.is_null().get(is_null) && is_null) return JsonValue();
      return invalidArgument("failed to parse the request JSON: bad literal");
    }
    case od::json_type::boolean: {
      bool b;
      if (auto error = value.get_bool().get(b)) return jsonError(error, "the request");
      return JsonValue(b);
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto error = value.get_string().get(s)) return jsonError(error, "the request");
      return JsonValue(std::string(s));
    }
    case od::json_type::number: {
      INFERGATE_ASSIGN_OR_RETURN(ParamValue v, decodeParamValue(value, "number"));
      if (auto* i = std::get_if<int64_t>(&v)) return JsonValue(*i);
      if (auto* u = std::get_if<uint64_t>(&v)) return JsonValue(*u);
      return JsonValue(std::get<double>(v));
    }
    case od::json_type::array: {
      od::array array;
      if (auto error = value.get_array().get(array)) return jsonError(error, "the request");
      JsonValue::Array out;
      for (auto element : array) {
        od::value v;
        if (auto error = std::move(element).get(v)) return jsonError(error, "the request");
        INFERGATE_ASSIGN_OR_RETURN(JsonValue child, build(v, depth + 1));
        out.push_back(std::move(child));
      }
      return JsonValue(std::move(out));
    }
    case od::json_type::object: {
      od::object object;
      if (auto error = value.get_object().get(object)) return jsonError(error, "the request");
      JsonValue::Object out;
      for (auto field_result : object) {
        od::field field;
        if (auto error = std::move(field_result).get(field)) return jsonError(error, "the request");
        std::string_view key;
        if (auto error = field.unescaped_key().get(key)) return jsonError(error, "the request");
        std::string owned(key);
        INFERGATE_ASSIGN_OR_RETURN(JsonValue child, build(field.value(), depth + 1));
        out.emplace_back(std::move(owned), std::move(child));
      }
      return JsonValue(std::move(out));
    }
  }
  return invalidArgument("failed to parse the request JSON");
}

void write(const JsonValue& v, std::string& out) {
  if (v.isNull()) {
    out += "null";
  } else if (v.isBool()) {
    out += v.asBool() ? "true" : "false";
  } else if (v.isString()) {
    appendJsonString(out, v.asString());
  } else if (v.isArray()) {
    out.push_back('[');
    bool first = true;
    for (const JsonValue& e : v.asArray()) {
      if (!first) out.push_back(',');
      first = false;
      write(e, out);
    }
    out.push_back(']');
  } else if (v.isObject()) {
    out.push_back('{');
    bool first = true;
    for (const auto& [k, e] : v.asObject()) {
      if (!first) out.push_back(',');
      first = false;
      appendJsonString(out, k);
      out.push_back(':');
      write(e, out);
    }
    out.push_back('}');
  } else if (auto i = v.asInt(); i && v.isInteger()) {
    appendJsonInt(out, *i);
  } else if (auto u = v.asUint(); u && v.isInteger()) {
    appendJsonUint(out, *u);
  } else {
    appendJsonDouble(out, v.asDouble());
  }
}

}  // namespace

std::optional<uint64_t> JsonValue::asUint() const {
  if (auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (auto* i = std::get_if<int64_t>(&v_); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

std::optional<int64_t> JsonValue::asInt() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  return std::nullopt;
}

double JsonValue::asDouble() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* u = std::get_if<uint64_t>(&v_)) return static_cast<double>(*u);
  return 0;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (!isObject()) return nullptr;
  for (const auto& [k, v] : asObject()) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string JsonValue::toJson() const {
  std::string out;
  write(*this, out);
  return out;
}

StatusOr<JsonValue> parseJson(std::string_view text) {
  Document document;
  INFERGATE_RETURN_IF_ERROR(document.parse(text, text.size(), DecodeLimits{}));
  od::value root;
  // A scalar document cannot be taken as a value in simdjson's on-demand API, so wrap.
  std::string wrapped;
  Document wrapped_doc;
  if (document.doc().get_value().get(root) != simdjson::SUCCESS) {
    wrapped = "[" + std::string(text) + "]";
    INFERGATE_RETURN_IF_ERROR(wrapped_doc.parse(wrapped, wrapped.size(), DecodeLimits{}));
    od::array array;
    if (auto e2 = wrapped_doc.doc().get_array().get(array)) return jsonError(e2, "the request");
    JsonValue::Array items;
    for (auto element : array) {
      od::value v;
      if (auto e3 = std::move(element).get(v)) return jsonError(e3, "the request");
      INFERGATE_ASSIGN_OR_RETURN(JsonValue child, build(v, 1));
      items.push_back(std::move(child));
    }
    if (items.size() != 1) return invalidArgument("failed to parse the request JSON");
    if (hasTrailingContent(wrapped_doc)) return invalidArgument("unexpected data after the JSON value");
    return items[0];
  }
  INFERGATE_ASSIGN_OR_RETURN(JsonValue value, build(root, 1));
  if (hasTrailingContent(document)) return invalidArgument("unexpected data after the JSON value");
  return value;
}

}  // namespace infergate::codecs
