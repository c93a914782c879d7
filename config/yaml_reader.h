#pragma once

// Private to config/ (never included by a public header): typed, located reads of a
// yaml-cpp document. Every read that fails records one error in ConfigErrors and returns
// nullopt, so the loader keeps going and reports every mistake in one pass.
//
// Types follow the YAML 1.2 core schema: a quoted scalar is always a string; a plain one
// is null (~, null, empty), a boolean (true/false), an integer (123, -4, 0x1f, 0o17),
// a float (1.5, 1e6, .inf) or else a string. yaml-cpp itself does not throw here: only
// node accessors that cannot fail are used.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_errors.h"

namespace infergate::config {

// One value of the document with the key path and location its errors name.
struct YamlValue {
  YAML::Node node;
  std::string path;      // "listeners.http.address", "routes[0].match"
  SourceLocation where;  // the value; the key's own position when the value is empty
};

// A mapping whose keys were checked (scalar, unique, allowed), in document order.
struct YamlMap {
  struct Entry {
    std::string key;
    SourceLocation key_where;
    YamlValue value;
  };
  std::string path;
  SourceLocation where;
  std::vector<Entry> entries;

  const YamlValue* find(std::string_view key) const;
};

// "a string", "an integer", "a float", "a boolean", "null", "a mapping", "a sequence".
const char* kindOf(const YAML::Node& node);

class YamlReader {
 public:
  YamlReader(std::string file, ConfigErrors& errors) : file_(std::move(file)), errors_(errors) {}

  SourceLocation locate(const YAML::Node& node) const;
  YamlValue root(const YAML::Node& node) const { return {node, "", locate(node)}; }

  // The mapping in `value`, its keys checked against `allowed`: an unknown key is an
  // error naming the allowed ones, a repeated key one naming the first. Those keys are
  // left out. nullopt (and an error) when `value` is not a mapping.
  std::optional<YamlMap> mapping(const YamlValue& value,
                                 std::initializer_list<std::string_view> allowed);
  // The same for a mapping whose keys are data (header names), not schema: any scalar
  // key is kept; a repeated one is still an error.
  std::optional<YamlMap> anyMapping(const YamlValue& value);

  // The items of a sequence, with paths "path[i]". nullopt (and an error) otherwise.
  std::optional<std::vector<YamlValue>> sequence(const YamlValue& value);

  // Any non-null scalar as written (so `model: 7` names model "7").
  std::optional<std::string> string(const YamlValue& value);

  // An integer in [min, max]: "expected an integer, got a string", "must not be
  // negative, got -1", "must be between 1 and 65535, got 70000".
  std::optional<uint64_t> unsignedInteger(const YamlValue& value, uint64_t min, uint64_t max);

  // `map[key]`, or nullptr after recording "missing required key" at the mapping.
  const YamlValue* require(const YamlMap& map, std::string_view key, std::string_view hint = "");

  void error(const SourceLocation& where, std::string path, std::string message) {
    errors_.add(where, std::move(path), std::move(message));
  }
  void error(const YamlValue& value, std::string message) {
    errors_.add(value.where, value.path, std::move(message));
  }

  const std::string& file() const { return file_; }

 private:
  // `allowed` null: every key is allowed.
  std::optional<YamlMap> readMapping(const YamlValue& value,
                                     const std::initializer_list<std::string_view>* allowed);

  std::string file_;
  ConfigErrors& errors_;
};

}  // namespace infergate::config
