#include "config/listen_address.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <string>

#include "codecs/text.h"

namespace infergate::config {

static_assert(kMaxUnixPathBytes + 1 == sizeof(sockaddr_un{}.sun_path),
              "kMaxUnixPathBytes must match this platform's sockaddr_un");

namespace {

using codecs::invalidArgument;
using codecs::Status;
using codecs::StatusOr;

constexpr std::string_view kUnixPrefix = "unix:";
constexpr std::string_view kDnsPrefix = "dns:";
constexpr std::string_view kExample = " (expected host:port, e.g. 0.0.0.0:8000)";
constexpr std::string_view kDnsExample =
    " (expected dns:NAME:PORT, e.g. dns:triton-headless.default.svc.cluster.local:8001)";

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlnum(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

StatusOr<uint16_t> parsePort(std::string_view port, std::string_view text) {
  if (port.empty()) return invalidArgument("missing port in \"", text, "\"", kExample);
  for (char c : port) {
    if (!isDigit(c)) return invalidArgument("port \"", port, "\" is not a number");
  }
  std::optional<uint64_t> value = port.size() <= 6 ? codecs::parseUint64(port) : std::nullopt;
  if (!value || *value > 65535) {
    return invalidArgument("port ", port, " is out of range (0-65535)");
  }
  return static_cast<uint16_t>(*value);
}

bool isIpv4Literal(const std::string& host) {
  in_addr a;
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

Status checkIpv6(std::string_view host) {
  std::string_view addr = host.substr(0, host.find('%'));
  std::string_view zone = addr.size() < host.size() ? host.substr(addr.size() + 1) : "";
  in6_addr a;
  if (inet_pton(AF_INET6, std::string(addr).c_str(), &a) != 1) {
    return invalidArgument("\"", host, "\" is not a valid IPv6 address");
  }
  if (addr.size() < host.size()) {
    bool ok = !zone.empty();
    for (char c : zone) ok = ok && (isAlnum(c) || c == '_' || c == '-' || c == '.');
    if (!ok) return invalidArgument("\"", host, "\" has a bad IPv6 zone");
  }
  return Status();
}

bool isNumeric(std::string_view host) {
  for (char c : host) {
    if (!isDigit(c) && c != '.') return false;
  }
  return true;
}

// A DNS name: labels of letters, digits and '-' (not at either end), 63 bytes at most,
// 253 in all. "localhost" is one.
bool isHostName(std::string_view host) {
  bool ok = host.size() <= 253;
  for (std::string_view label : codecs::splitOn(host, '.')) {
    ok = ok && !label.empty() && label.size() <= 63 && label.front() != '-' &&
         label.back() != '-';
    for (char c : label) ok = ok && (isAlnum(c) || c == '-');
  }
  return ok;
}

Status checkHostName(std::string_view host) {
  if (!isHostName(host)) {
    return invalidArgument("\"", host, "\" is not a valid host name or IP address");
  }
  return Status();
}

Status checkHost(std::string_view host, std::string_view text) {
  if (host.empty()) {
    return invalidArgument("missing host in \"", text,
                           "\" (use 0.0.0.0 or [::] for every interface)");
  }
  if (isNumeric(host)) {
    if (!isIpv4Literal(std::string(host))) {
      return invalidArgument("\"", host, "\" is not a valid IPv4 address");
    }
    return Status();
  }
  return checkHostName(host);
}

StatusOr<ListenAddress> parseUnix(std::string_view text) {
  std::string_view path = text.substr(kUnixPrefix.size());
  if (path.empty()) return invalidArgument("unix socket path is empty in \"", text, "\"");
  if (path.find('\0') != std::string_view::npos) {
    return invalidArgument("unix socket path contains a NUL byte");
  }
  if (path.size() > kMaxUnixPathBytes) {
    return invalidArgument("unix socket path is ", path.size(), " bytes long; at most ",
                           kMaxUnixPathBytes, " fit in sockaddr_un");
  }
  ListenAddress a;
  a.kind = ListenAddress::Kind::kUnix;
  a.path = std::string(path);
  a.text = std::string(text);
  return a;
}

StatusOr<ListenAddress> parseTcp(std::string_view text) {
  ListenAddress a;
  a.kind = ListenAddress::Kind::kTcp;
  a.text = std::string(text);
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return invalidArgument("missing ']' after the IPv6 address in \"", text, "\"");
    }
    std::string_view host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return invalidArgument("missing port in \"", text, "\"", kExample);
    if (rest.front() != ':') {
      return invalidArgument("expected ':' and a port after ']' in \"", text, "\"");
    }
    if (host.empty()) return invalidArgument("empty IPv6 address in \"", text, "\"");
    INFERGATE_RETURN_IF_ERROR(checkIpv6(host));
    a.host = std::string(host);
    port = rest.substr(1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return invalidArgument("missing port in \"", text, "\"", kExample);
    }
    std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
      return invalidArgument("an IPv6 address needs brackets: \"[", host, "]:",
                             text.substr(colon + 1), "\"");
    }
    INFERGATE_RETURN_IF_ERROR(checkHost(host, text));
    a.host = std::string(host);
    port = text.substr(colon + 1);
  }
  INFERGATE_ASSIGN_OR_RETURN(a.port, parsePort(port, text));
  return a;
}

// "dns:NAME:PORT": NAME must be a name to resolve; an IP literal is refused with the
// form that means it.
StatusOr<ListenAddress> parseDns(std::string_view text) {
  std::string_view rest = text.substr(kDnsPrefix.size());
  size_t colon = rest.rfind(':');
  std::string_view name = rest.substr(0, colon);  // all of it without a ':'
  if (name.empty()) return invalidArgument("missing host name in \"", text, "\"", kDnsExample);
  if (colon == std::string_view::npos || colon + 1 == rest.size()) {
    return invalidArgument("missing port in \"", text, "\"", kDnsExample);
  }
  std::string_view port = rest.substr(colon + 1);
  std::string_view bare = name;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  bool ipv6 = checkIpv6(bare).ok();
  if (ipv6 || isIpv4Literal(std::string(bare))) {
    return invalidArgument("\"", name, "\" is an IP address, not a name to resolve (write \"",
                           ipv6 ? "[" : "", bare, ipv6 ? "]" : "", ":", port,
                           "\" without dns:)");
  }
  if (isNumeric(name) || !isHostName(name)) {
    return invalidArgument("\"", name, "\" is not a valid host name", kDnsExample);
  }
  ListenAddress a;
  a.kind = ListenAddress::Kind::kDns;
  a.host = std::string(name);
  a.text = std::string(text);
  INFERGATE_ASSIGN_OR_RETURN(a.port, parsePort(port, text));
  return a;
}

// The forms a socket can be bound to: "host:port", "[ipv6]:port", "unix:path".
StatusOr<ListenAddress> parseBindable(std::string_view text) {
  if (text.empty()) return invalidArgument("the address is empty", kExample);
  if (text.starts_with(kUnixPrefix)) return parseUnix(text);
  return parseTcp(text);
}

bool isIpv4Wildcard(const ListenAddress& a) { return a.host == "0.0.0.0"; }
bool isIpv6Wildcard(const ListenAddress& a) {
  in6_addr addr;
  return inet_pton(AF_INET6, a.host.c_str(), &addr) == 1 &&
         IN6_IS_ADDR_UNSPECIFIED(&addr);
}
bool isIpv6(const ListenAddress& a) { return a.host.find(':') != std::string::npos; }

// Whether `wildcard` (one of the two wildcards) covers `other`'s host.
bool covers(const ListenAddress& wildcard, const ListenAddress& other) {
  if (isIpv6Wildcard(wildcard)) return true;
  return isIpv4Wildcard(wildcard) && !isIpv6(other);
}

}  // namespace

StatusOr<ListenAddress> parseListenAddress(std::string_view text) {
  if (text.starts_with(kDnsPrefix)) {
    return invalidArgument("\"", text, "\": dns: is for upstream endpoints (every address a "
                           "name resolves to); a listener takes host:port or unix:path");
  }
  return parseBindable(text);
}

StatusOr<ListenAddress> parseEndpointAddress(std::string_view text) {
  StatusOr<ListenAddress> a = text.starts_with(kDnsPrefix) ? parseDns(text) : parseBindable(text);
  if (a.ok() && a->kind != ListenAddress::Kind::kUnix && a->port == 0) {
    // Port 0 means "any free port" on a listener; there is nothing to connect to.
    return invalidArgument("endpoint \"", text, "\" needs a port (0 is for listeners)");
  }
  return a;
}

bool sameEndpoint(const ListenAddress& a, const ListenAddress& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == ListenAddress::Kind::kUnix) return a.path == b.path;
  return a.port == b.port && codecs::equalsIgnoreCase(a.host, b.host);
}

bool listenAddressesClash(const ListenAddress& a, const ListenAddress& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == ListenAddress::Kind::kUnix) return a.path == b.path;
  if (a.port == 0 || a.port != b.port) return false;
  if (codecs::equalsIgnoreCase(a.host, b.host)) return true;
  return covers(a, b) || covers(b, a);
}

std::string formatHostPort(std::string_view host, uint16_t port) {
  return host.find(':') != std::string_view::npos ? codecs::strCat("[", host, "]:", port)
                                                  : codecs::strCat(host, ":", port);
}

std::string formatAddress(const ListenAddress& address) {
  if (address.kind == ListenAddress::Kind::kUnix) return "unix:" + address.path;
  return formatHostPort(address.host, address.port);
}

}  // namespace infergate::config
