#pragma once

// Private to config/: the list of errors one load collects, so that a file with five
// mistakes is reported with five lines, not fixed one run at a time.

#include <string>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::config {

struct ConfigError {
  SourceLocation where;
  std::string key_path;  // "listeners.http.address", "routes[1].upstream"; empty = none
  std::string message;
};

// "file:line:column: key.path: message" (or "file:line:column: message" without a path).
std::string formatError(const ConfigError& error);

class ConfigErrors {
 public:
  void add(SourceLocation where, std::string key_path, std::string message);

  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }

  // OK when empty; else one INVALID_ARGUMENT whose message holds one formatted error per
  // line, ordered by position in the file (ties keep the order they were found in).
  codecs::Status toStatus() const;

 private:
  std::vector<ConfigError> errors_;
};

}  // namespace infergate::config
