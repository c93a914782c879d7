#include "config/config_errors.h"

#include <algorithm>
#include <tuple>

namespace infergate::config {

std::string formatError(const ConfigError& error) {
  if (error.key_path.empty()) {
    return codecs::strCat(formatLocation(error.where), ": ", error.message);
  }
  return codecs::strCat(formatLocation(error.where), ": ", error.key_path, ": ",
                        error.message);
}

void ConfigErrors::add(SourceLocation where, std::string key_path, std::string message) {
  errors_.push_back({std::move(where), std::move(key_path), std::move(message)});
}

codecs::Status ConfigErrors::toStatus() const {
  if (errors_.empty()) return codecs::Status();
  std::vector<const ConfigError*> sorted;
  for (const ConfigError& e : errors_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const ConfigError* a, const ConfigError* b) {
    return std::tie(a->where.line, a->where.column) < std::tie(b->where.line, b->where.column);
  });
  std::string message;
  for (const ConfigError* e : sorted) {
    if (!message.empty()) message.push_back('\n');
    message += formatError(*e);
  }
  return codecs::invalidArgument(message);
}

}  // namespace infergate::config
