#pragma once

// The common HTTP/1.1 head, read in one pass without http_parser: the server's requests
// (http_connection.cc) and the native client's answers (upstream/http_client_native_answer.cc)
// are nearly always a start line, a few field lines and a Content-Length, whole in the
// first read. Lines are found with memchr and every byte is checked by one table lookup,
// a fraction of http_parser's cost per byte.
//
// The rules are stricter than http_parser's, so that whatever this reader accepts,
// http_parser would read the same way: every line ends in CRLF, a field name is a token
// with its colon right after it (no obs-fold: a line starting with SP or HTAB has no
// token), a value holds no control byte but HTAB. Anything else is declined, and the
// caller hands the same bytes to http_parser, which decides them as it always did.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "codecs/text.h"

namespace infergate::gateway::http {

class QuickHeadReader {
 public:
  // Reads from the start of [data, data + size).
  QuickHeadReader(const char* data, size_t size) : begin_(data), p_(data), limit_(data + size) {}

  // The next CRLF-ended line, without its CRLF; false when none is whole or it ends in a
  // bare LF.
  bool nextLine(std::string_view& line) {
    const auto* lf = static_cast<const char*>(std::memchr(p_, '\n', static_cast<size_t>(limit_ - p_)));
    if (lf == nullptr || lf == p_ || lf[-1] != '\r') return false;
    line = std::string_view(p_, static_cast<size_t>(lf - 1 - p_));
    p_ = lf + 1;
    return true;
  }

  enum class Field { kField, kEnd, kDecline };
  // The next field line, split into its name and its value (SP and HTAB trimmed); kEnd at
  // the blank line that ends the head; kDecline when the head does not end within the
  // bytes or a line breaks the rules above.
  Field nextField(std::string_view& name, std::string_view& value) {
    std::string_view line;
    if (!nextLine(line)) return Field::kDecline;
    if (line.empty()) return Field::kEnd;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Field::kDecline;
    name = line.substr(0, colon);
    value = trimFieldValue(line.substr(colon + 1));
    if (!codecs::isHttpToken(name) || !codecs::isHttpFieldValue(value)) return Field::kDecline;
    return Field::kField;
  }

  // Bytes read so far: after kEnd, the head's size with its blank line.
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  static std::string_view trimFieldValue(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  }

  const char* const begin_;
  const char* p_;
  const char* const limit_;
};

// A Content-Length the quick readers take: 1 to 18 digits (leading zeros allowed, as
// http_parser allows them). Anything else (a sign, a list, spaces inside) is http_parser's
// to judge.
inline std::optional<uint64_t> quickContentLength(std::string_view value) {
  if (value.empty() || value.size() > 18) return std::nullopt;
  uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace infergate::gateway::http
