#include "config/yaml_reader.h"

#include <algorithm>
#include <charconv>

#include "codecs/text.h"

namespace infergate::config {
namespace {

using codecs::strCat;

enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHexDigit(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool allOf(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

std::string_view withoutSign(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  return s;
}

// YAML 1.2 core schema: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
bool isIntegerText(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x') return allOf(s.substr(2), isHexDigit);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o') {
    return allOf(s.substr(2), [](char c) { return c >= '0' && c <= '7'; });
  }
  return allOf(withoutSign(s), isDigit);
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? | [-+]?\.inf | \.nan
bool isFloatText(std::string_view s) {
  std::string_view body = withoutSign(s);
  for (std::string_view special : {".inf", ".Inf", ".INF"}) {
    if (body == special) return true;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  size_t e = body.find_first_of("eE");
  std::string_view mantissa = body.substr(0, e);
  if (e != std::string_view::npos && !allOf(withoutSign(body.substr(e + 1)), isDigit)) {
    return false;
  }
  size_t dot = mantissa.find('.');
  std::string_view whole = mantissa.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : mantissa.substr(dot + 1);
  bool whole_ok = whole.empty() || allOf(whole, isDigit);
  bool frac_ok = frac.empty() || allOf(frac, isDigit);
  return whole_ok && frac_ok && (!whole.empty() || !frac.empty());
}

ScalarKind classifyPlain(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" ||
      s == "FALSE") {
    return ScalarKind::kBool;
  }
  if (isIntegerText(s)) return ScalarKind::kInt;
  if (isFloatText(s)) return ScalarKind::kFloat;
  return ScalarKind::kString;
}

ScalarKind classify(const YAML::Node& node) {
  if (node.IsNull()) return ScalarKind::kNull;
  const std::string& tag = node.Tag();
  if (tag == "?") return classifyPlain(node.Scalar());  // plain (unquoted)
  if (tag == "tag:yaml.org,2002:int") return ScalarKind::kInt;
  if (tag == "tag:yaml.org,2002:float") return ScalarKind::kFloat;
  if (tag == "tag:yaml.org,2002:bool") return ScalarKind::kBool;
  return ScalarKind::kString;  // quoted ("!"), !!str, or an application tag
}

// `text` as sign and magnitude; nullopt magnitude when it overflows 64 bits.
struct ParsedInteger {
  bool negative = false;
  std::optional<uint64_t> magnitude;
};

ParsedInteger parseInteger(std::string_view text) {
  ParsedInteger out;
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'o')) {
    base = text[1] == 'x' ? 16 : 8;
    text.remove_prefix(2);
  } else {
    out.negative = !text.empty() && text.front() == '-';
    text = withoutSign(text);
  }
  uint64_t value = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (r.ec == std::errc() && r.ptr == text.data() + text.size()) out.magnitude = value;
  if (out.magnitude == 0u) out.negative = false;  // "-0" is zero
  return out;
}

const YamlMap::Entry* findEntry(const YamlMap& map, std::string_view key) {
  for (const YamlMap::Entry& entry : map.entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

}  // namespace

const YamlValue* YamlMap::find(std::string_view key) const {
  const Entry* entry = findEntry(*this, key);
  return entry ? &entry->value : nullptr;
}

const char* kindOf(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a sequence";
  switch (classify(node)) {
    case ScalarKind::kNull: return "null";
    case ScalarKind::kBool: return "a boolean";
    case ScalarKind::kInt: return "an integer";
    case ScalarKind::kFloat: return "a float";
    case ScalarKind::kString: return "a string";
  }
  return "a string";
}

SourceLocation YamlReader::locate(const YAML::Node& node) const {
  YAML::Mark mark = node.Mark();
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return {file_, 1, 1};
  return {file_, mark.line + 1, mark.column + 1};
}

std::optional<YamlMap> YamlReader::mapping(const YamlValue& value,
                                           std::initializer_list<std::string_view> allowed) {
  return readMapping(value, &allowed);
}

std::optional<YamlMap> YamlReader::anyMapping(const YamlValue& value) {
  return readMapping(value, nullptr);
}

std::optional<YamlMap> YamlReader::readMapping(
    const YamlValue& value, const std::initializer_list<std::string_view>* allowed) {
  if (!value.node.IsMap()) {
    error(value, strCat("expected a mapping, got ", kindOf(value.node)));
    return std::nullopt;
  }
  YamlMap map{value.path, value.where, {}};
  std::string prefix = value.path.empty() ? "" : value.path + ".";
  // Each pair is copied: yaml-cpp's iterator hands out a proxy that dies with the
  // expression, so references into `it->first` dangle.
  for (const auto& pair : value.node) {
    YAML::Node key = pair.first;
    SourceLocation key_where = locate(key);
    if (!key.IsScalar()) {
      error(key_where, value.path, strCat("a key must be a name, got ", kindOf(key)));
      continue;
    }
    const std::string& name = key.Scalar();
    std::string path = prefix + name;
    bool known = allowed == nullptr ||
                 std::find(allowed->begin(), allowed->end(), name) != allowed->end();
    if (!known) {
      std::string list;
      for (std::string_view a : *allowed) list += strCat(list.empty() ? "" : ", ", a);
      error(key_where, path, strCat("unknown key \"", name, "\" (allowed: ", list, ")"));
      continue;
    }
    if (const YamlMap::Entry* first = findEntry(map, name)) {
      error(key_where, path, strCat("duplicate key \"", name, "\" (first given at line ",
                                    first->key_where.line, ")"));
      continue;
    }
    // An empty value ("key:" and nothing) carries the position of whatever follows it;
    // errors about it point at the key instead.
    YAML::Node child = pair.second;
    SourceLocation child_where = child.IsNull() ? key_where : locate(child);
    map.entries.push_back({name, key_where, YamlValue{child, std::move(path), child_where}});
  }
  return map;
}

std::optional<std::vector<YamlValue>> YamlReader::sequence(const YamlValue& value) {
  if (!value.node.IsSequence()) {
    error(value, strCat("expected a sequence, got ", kindOf(value.node)));
    return std::nullopt;
  }
  std::vector<YamlValue> items;
  size_t i = 0;
  for (const auto& element : value.node) {
    YAML::Node item = element;
    SourceLocation where = item.IsNull() ? value.where : locate(item);
    items.push_back({item, strCat(value.path, "[", i++, "]"), where});
  }
  return items;
}

std::optional<std::string> YamlReader::string(const YamlValue& value) {
  if (!value.node.IsScalar()) {
    error(value, strCat("expected a string, got ", kindOf(value.node)));
    return std::nullopt;
  }
  return value.node.Scalar();
}

std::optional<uint64_t> YamlReader::unsignedInteger(const YamlValue& value, uint64_t min,
                                                    uint64_t max) {
  if (!value.node.IsScalar() || classify(value.node) != ScalarKind::kInt) {
    error(value, strCat("expected an integer, got ", kindOf(value.node)));
    return std::nullopt;
  }
  const std::string& text = value.node.Scalar();
  ParsedInteger n = parseInteger(text);
  std::string range = strCat("must be between ", min, " and ", max, ", got ", text);
  if (n.negative) {
    error(value, strCat("must not be negative (", range, ")"));
    return std::nullopt;
  }
  if (!n.magnitude || *n.magnitude < min || *n.magnitude > max) {
    error(value, range);
    return std::nullopt;
  }
  return *n.magnitude;
}

const YamlValue* YamlReader::require(const YamlMap& map, std::string_view key,
                                     std::string_view hint) {
  if (const YamlValue* value = map.find(key)) return value;
  std::string path = map.path.empty() ? std::string(key) : strCat(map.path, ".", key);
  error(map.where, std::move(path),
        strCat("missing required key \"", key, "\"", hint.empty() ? "" : " (", hint,
               hint.empty() ? "" : ")"));
  return nullptr;
}

}  // namespace infergate::config
