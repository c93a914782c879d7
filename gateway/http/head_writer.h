#pragma once

// An HTTP/1.1 head written piece after piece into storage sized for it beforehand: the
// server's response heads (http_connection.cc) and the native client's request heads
// (upstream/http_client_native.cc), one allocation each and plain copies, without a
// string's bounds and growth checks per piece. The caller counts every byte first.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace infergate::gateway::http {

class HeadWriter {
 public:
  explicit HeadWriter(char* at) : begin_(at), at_(at) {}
  explicit HeadWriter(uint8_t* at) : HeadWriter(reinterpret_cast<char*>(at)) {}

  HeadWriter& put(std::string_view s) {
    if (!s.empty()) std::memcpy(at_, s.data(), s.size());
    at_ += s.size();
    return *this;
  }
  // "name: value" and its CRLF.
  HeadWriter& field(std::string_view name, std::string_view value) {
    return put(name).put(": ").put(value).put("\r\n");
  }
  // What field() writes for these.
  static constexpr size_t fieldSize(std::string_view name, std::string_view value) {
    return name.size() + value.size() + 4;
  }
  size_t size() const { return static_cast<size_t>(at_ - begin_); }

 private:
  char* const begin_;
  char* at_;
};

}  // namespace infergate::gateway::http
