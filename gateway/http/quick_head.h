#pragma once

// The common HTTP/1.1 head, read in one pass without http_parser: the server's requests
// (http_connection.cc) and the native client's answers (upstream/http_client_native_answer.cc)
// are nearly always a start line, a few field lines and a Content-Length, whole in the
// first read. Lines are found with memchr, and names and values are passed eight bytes at
// a time (codecs/text.h's skipHttpTokenBytes, skipHttpFieldBytes): a fraction of
// http_parser's cost per byte.
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
#include "gateway/http/http_message.h"

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
  // bytes or a line breaks the rules above. One pass: the name's bytes up to its colon,
  // the value's up to the first control byte, which must be the line's CRLF.
  Field nextField(std::string_view& name, std::string_view& value) {
    const char* p = skipTokenBytes(p_);
    if (p == p_) {  // no name: the blank line, or a line the rules refuse
      if (limit_ - p < 2 || p[0] != '\r' || p[1] != '\n') return Field::kDecline;
      p_ = p + 2;
      return Field::kEnd;
    }
    if (p == limit_ || *p != ':') return Field::kDecline;
    name = std::string_view(p_, static_cast<size_t>(p - p_));
    const char* const value_start = ++p;
    p = skipFieldBytes(p);
    if (limit_ - p < 2 || p[0] != '\r' || p[1] != '\n') return Field::kDecline;
    value = trimFieldValue(std::string_view(value_start, static_cast<size_t>(p - value_start)));
    p_ = p + 2;
    return Field::kField;
  }

  // Bytes read so far: after kEnd, the head's size with its blank line.
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

  // Where a field nextField() gave lies, as offsets from the reader's first byte (its
  // bytes, one read at most, keep them within 32 bits): for HeaderList::addFromHead.
  HeaderList::FieldSpan placeOf(std::string_view name, std::string_view value) const {
    return {static_cast<uint32_t>(name.data() - begin_), static_cast<uint32_t>(name.size()),
            static_cast<uint32_t>(value.data() - begin_), static_cast<uint32_t>(value.size())};
  }

 private:
  const char* skipTokenBytes(const char* p) const { return codecs::skipHttpTokenBytes(p, limit_); }
  const char* skipFieldBytes(const char* p) const { return codecs::skipHttpFieldBytes(p, limit_); }

  static std::string_view trimFieldValue(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  }

  const char* const begin_;
  const char* p_;
  const char* const limit_;
};

// Whether http_parser takes a field for Transfer-Encoding: libhttp-parser 2.9 does so for
// every name that starts with it ("Transfer-EncodingA" too). The quick readers leave such
// a field to http_parser, so that a message is framed the same whichever reads it.
inline bool readAsTransferEncoding(std::string_view name) {
  constexpr std::string_view kName = "transfer-encoding";
  return name.size() >= kName.size() && codecs::equalsIgnoreCase(name.substr(0, kName.size()), kName);
}

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
