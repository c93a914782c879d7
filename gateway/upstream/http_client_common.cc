#include "gateway/upstream/http_client_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>
#include <cstdio>

#include "codecs/status.h"
#include "codecs/text.h"
#include "config/listen_address.h"

namespace infergate::gateway::upstream::http_client_detail {

bool sendableTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  return codecs::noByteWhere(
      target, [](uint64_t w) { return codecs::anyByteBelow(w, 0x21) || codecs::anyByteIs(w, 0x7f); },
      [](unsigned char b) { return b <= 0x20 || b == 0x7f; });
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
  // content-length, transfer-encoding, connection, keep-alive, proxy-connection, upgrade,
  // te, trailer, expect: picked by length first (asked for every header of every request).
  auto is = [name](std::string_view n) { return equalsIgnoreCase(name, n); };
  switch (name.size()) {
    case 2: return is("te");
    case 6: return is("expect");
    case 7: return is("upgrade") || is("trailer");
    case 10: return is("connection") || is("keep-alive");
    case 14: return is("content-length");
    case 16: return is("proxy-connection");
    case 17: return is("transfer-encoding");
    default: return false;
  }
}

bool validHeaderName(std::string_view name) { return codecs::isHttpToken(name); }

bool validHeaderValue(std::string_view value) {
  // No CR, LF or NUL (asked for every header of every request: a word at a time).
  return codecs::noByteWhere(
      value,
      [](uint64_t w) { return codecs::anyByteIs(w, 0) || codecs::anyByteIs(w, '\r') || codecs::anyByteIs(w, '\n'); },
      [](unsigned char b) { return b == 0 || b == '\r' || b == '\n'; });
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

namespace {

// "a.b.c.d" in plain decimal (no leading zeros, each at most 255): the form nearly every
// endpoint is written in, read without inet_pton (asked for every request). False says
// only "not this form".
bool plainDottedQuad(std::string_view s) {
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    size_t start = i;
    unsigned value = 0;
    while (i < s.size() && i - start < 3 && s[i] >= '0' && s[i] <= '9') value = value * 10 + (s[i++] - '0');
    const size_t digits = i - start;
    if (digits == 0 || value > 255 || (digits > 1 && s[start] == '0')) return false;
    if (++parts < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  return i == s.size();
}

}  // namespace

bool isLiteralEndpoint(const config::ListenAddress& endpoint) {
  if (endpoint.kind == config::ListenAddress::Kind::kUnix) return true;
  if (endpoint.kind != config::ListenAddress::Kind::kTcp) return false;
  if (plainDottedQuad(endpoint.host)) return true;
  in6_addr any;
  return inet_pton(AF_INET, endpoint.host.c_str(), &any) == 1 ||
         inet_pton(AF_INET6, endpoint.host.c_str(), &any) == 1;
}

codecs::StatusOr<SocketAddress> literalSocketAddress(const config::ListenAddress& endpoint,
                                                     std::string_view upstream_name) {
  SocketAddress out;
  if (endpoint.kind == config::ListenAddress::Kind::kUnix) {
    auto* a = reinterpret_cast<sockaddr_un*>(&out.storage);
    if (endpoint.path.size() >= sizeof(a->sun_path)) {
      return codecs::withOrigin(
          codecs::invalidArgument(callPrefix(upstream_name, endpointText(endpoint)),
                                  "the socket path is longer than a unix socket address holds"),
          codecs::ErrorOrigin::kInternal);
    }
    a->sun_family = AF_UNIX;
    std::memcpy(a->sun_path, endpoint.path.data(), endpoint.path.size());
    out.length = static_cast<socklen_t>(sizeof(sockaddr_un));
    out.authority = "localhost";
  } else if (auto* a4 = reinterpret_cast<sockaddr_in*>(&out.storage);
             inet_pton(AF_INET, endpoint.host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(endpoint.port);
    out.length = sizeof(sockaddr_in);
    out.authority = codecs::strCat(endpoint.host, ":", endpoint.port);
  } else {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (inet_pton(AF_INET6, endpoint.host.c_str(), &a6->sin6_addr) != 1) {
      return codecs::withOrigin(codecs::internalError(callPrefix(upstream_name, endpointText(endpoint)),
                                                      "not an IP address: ", endpoint.host),
                                codecs::ErrorOrigin::kInternal);
    }
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(endpoint.port);
    out.length = sizeof(sockaddr_in6);
    out.authority = codecs::strCat("[", endpoint.host, "]:", endpoint.port);
  }
  return out;
}

codecs::StatusOr<ConnectTarget> connectTarget(const config::ListenAddress& endpoint, const HostAddresses* hosts,
                                              size_t attempt, size_t start, std::string_view upstream_name) {
  ConnectTarget target;
  if (isLiteralEndpoint(endpoint) || hosts == nullptr) {
    INFERGATE_ASSIGN_OR_RETURN(target.address, literalSocketAddress(endpoint, upstream_name));
    return target;
  }
  target.host = hosts->find(endpoint.host);
  if (target.host == nullptr || target.host->addresses.empty()) {
    hosts->missed();
    const std::string why = target.host == nullptr ? std::string("it was not looked up yet")
                                                   : std::string(codecs::messageOf(target.host->error));
    return absl::UnavailableError(codecs::strCat("cannot resolve '", endpoint.host, "': ", why));
  }
  target.count = target.host->addresses.size();
  target.start = (attempt == 0 ? target.host->preferred.load(std::memory_order_relaxed) : start) % target.count;
  target.index = (target.start + attempt) % target.count;
  config::ListenAddress at = endpoint;
  at.host = target.host->addresses[target.index];
  INFERGATE_ASSIGN_OR_RETURN(target.address, literalSocketAddress(at, upstream_name));
  target.address.authority = codecs::strCat(endpoint.host, ":", endpoint.port);  // as grpc and libcurl send it
  return target;
}

}  // namespace infergate::gateway::upstream::http_client_detail
