#pragma once

// Addresses as text. Listeners: "host:port", "[ipv6]:port", "unix:/path/to.sock".
// Upstream endpoints: the same, with a port, or "dns:NAME:PORT" (every address NAME
// resolves to). Pure text checks (no name is resolved, no socket opened), so
// `infergate validate` gives the same answer on any machine.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::config {

// The longest unix socket path that fits sockaddr_un::sun_path with its NUL (checked
// against <sys/un.h> in listen_address.cc).
inline constexpr size_t kMaxUnixPathBytes = 107;

// Parses `text`. On success `where` is left empty (the loader fills it). Errors are
// INVALID_ARGUMENT with a message naming what is wrong and no location, e.g.
// "missing port in \"0.0.0.0\" (expected host:port, e.g. 0.0.0.0:8000)". The dns: form
// is refused (a listener binds one address).
codecs::StatusOr<ListenAddress> parseListenAddress(std::string_view text);

// Parses an upstream endpoint: a listener form with a port (1-65535), or "dns:NAME:PORT"
// (kDns) where NAME is a host name, not an IP literal. Errors as parseListenAddress, e.g.
// "endpoint \"h:0\" needs a port (0 is for listeners)".
codecs::StatusOr<ListenAddress> parseEndpointAddress(std::string_view text);

// True when two parsed endpoints name the same place: the same kind, unix path, or host
// (compared ignoring case, as text) and port. "h:1" and "dns:h:1" differ: one connection
// target against every address h resolves to.
bool sameEndpoint(const ListenAddress& a, const ListenAddress& b);

// True when binding both would clash: the same unix path, or the same non-zero TCP port on
// the same host or where one host is a wildcard that covers the other (0.0.0.0 covers IPv4
// and names; :: covers everything, since Linux listens dual-stack by default). Port 0
// never clashes. Names are compared as text (nothing is resolved).
bool listenAddressesClash(const ListenAddress& a, const ListenAddress& b);

// "host:port", or "[v6]:port" when the host is an IPv6 literal.
std::string formatHostPort(std::string_view host, uint16_t port);
// A concrete address (kTcp or kUnix) as grpc takes it for a target and as the gateway
// names it: formatHostPort(host, port), or "unix:/path".
std::string formatAddress(const ListenAddress& address);

}  // namespace infergate::config
