#pragma once

// Listener addresses as text: "host:port", "[ipv6]:port", "unix:/path/to.sock".
// Pure text checks (no name is resolved, no socket opened), so `infergate validate`
// gives the same answer on any machine. The routing issue reuses this for endpoints.

#include <cstddef>
#include <string_view>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::config {

// The longest unix socket path that fits sockaddr_un::sun_path with its NUL (checked
// against <sys/un.h> in listen_address.cc).
inline constexpr size_t kMaxUnixPathBytes = 107;

// Parses `text`. On success `where` is left empty (the loader fills it). Errors are
// INVALID_ARGUMENT with a message naming what is wrong and no location, e.g.
// "missing port in \"0.0.0.0\" (expected host:port, e.g. 0.0.0.0:8000)".
codecs::StatusOr<ListenAddress> parseListenAddress(std::string_view text);

// True when binding both would clash: the same unix path, or the same non-zero TCP port on
// the same host or where one host is a wildcard that covers the other (0.0.0.0 covers IPv4
// and names; :: covers everything, since Linux listens dual-stack by default). Port 0
// never clashes. Names are compared as text (nothing is resolved).
bool listenAddressesClash(const ListenAddress& a, const ListenAddress& b);

}  // namespace infergate::config
