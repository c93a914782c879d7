#include "gateway/upstream/http_client_common.h"

#include <array>
#include <cstdio>

#include "codecs/status.h"
#include "codecs/text.h"
#include "config/listen_address.h"

namespace infergate::gateway::upstream::http_client_detail {

bool sendableTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  for (char c : target) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b == 0x7f) return false;
  }
  return true;
}

std::string visibleBytes(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

bool isClientOwnedHeader(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
      "upgrade", "te", "trailer", "expect",
  };
  for (std::string_view n : kNames) {
    if (equalsIgnoreCase(name, n)) return true;
  }
  return false;
}

bool validHeaderName(std::string_view name) {
  // RFC 9110 tchar, one lookup per byte: this runs for every header of every request.
  static constexpr auto kToken = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
    return t;
  }();
  if (name.empty()) return false;
  for (char c : name) {
    if (!kToken[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

bool validHeaderValue(std::string_view value) {
  // One pass (find_first_of would search the three bytes once per character).
  for (char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

std::string endpointText(const config::ListenAddress& endpoint) {
  return endpoint.text.empty() ? config::formatAddress(endpoint) : endpoint.text;
}

std::string callPrefix(std::string_view upstream_name, std::string_view endpoint) {
  return codecs::strCat("upstream '", upstream_name, "' (", endpoint, "): ");
}

std::string unsendableTargetMessage(std::string_view prefix, std::string_view target) {
  return codecs::strCat(prefix, "the target \"", visibleBytes(target),
                        "\" cannot be sent (a request target is '/' and bytes other than "
                        "controls and space)");
}

}  // namespace infergate::gateway::upstream::http_client_detail
