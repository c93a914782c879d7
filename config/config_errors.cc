#include "config/config_errors.h"

#include <algorithm>
#include <tuple>

#include "codecs/json_response_encoder.h"

namespace infergate::config {

namespace {

// Keys and values quoted from the file may hold any byte: control characters are written
// as \xNN and bytes that are not UTF-8 as U+FFFD, so each error stays one printable line
// (a NUL or a line break in a key would otherwise split it, in a terminal or a log).
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  return codecs::validUtf8(out);
}

}  // namespace

std::string formatError(const ConfigError& error) {
  if (error.key_path.empty()) {
    return printable(codecs::strCat(formatLocation(error.where), ": ", error.message));
  }
  return printable(codecs::strCat(formatLocation(error.where), ": ", error.key_path, ": ",
                                  error.message));
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
