#pragma once

// Listening sockets for TCP (IPv4/IPv6, SO_REUSEPORT, one socket per worker so the kernel
// spreads connections) and Unix-domain streams. Port 0 binds any free port once; the
// other workers' sockets then bind that same port. A port another socket listens on is
// refused (UNAVAILABLE), even one whose owner set SO_REUSEPORT too: a second process must
// not share a port silently.

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codecs/status.h"

namespace infergate::gateway::http {

struct ListenSpec {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host = "127.0.0.1";  // kTcp: an address or a name
  uint16_t port = 0;               // kTcp: 0 = any free port
  std::string path;                // kUnix

  static ListenSpec tcp(std::string host, uint16_t port) {
    return ListenSpec{Kind::kTcp, std::move(host), port, {}};
  }
  static ListenSpec unixPath(std::string path) { return ListenSpec{Kind::kUnix, {}, 0, std::move(path)}; }
};

struct BoundSockets {
  std::vector<int> fds;  // non-blocking, listening; TCP: `count` of them, Unix: one
  uint16_t port = 0;     // the bound TCP port (learned when 0 was asked)
  std::string address;   // "127.0.0.1:8000", "[::1]:8000" or "unix:/path"
};

// An accepted connection's peer as text: "127.0.0.1:53122", "[::1]:53122"; "" for any
// other family (unix sockets).
std::string socketAddressText(const sockaddr_storage& address);

// Errors: UNAVAILABLE naming the address and errno text (in use, permission, no such
// host). A Unix path that exists as a stale socket is replaced; any other file is an error.
codecs::StatusOr<BoundSockets> bindListener(const ListenSpec& spec, size_t count);

}  // namespace infergate::gateway::http
