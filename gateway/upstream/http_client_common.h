#pragma once

// What the two engines of HttpUpstreamClient (http_client.h) share: the rules a request's
// target and headers must meet before they go on the wire, and how an endpoint and a
// call are named in messages. Loop-thread free: plain functions.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "codecs/status.h"
#include "codecs/text.h"
#include "config/config.h"
#include "gateway/upstream/host_addresses.h"

namespace infergate::gateway::upstream::http_client_detail {

// A buffered answer's body of unknown length starts with this much and doubles.
inline constexpr size_t kInitialBodyBytes = 16 * 1024;
// Content-Length is trusted for the up-front reservation up to Triton's own cap (int32,
// PROTOCOL.md pitfall 18); past it the buffer grows as bytes actually arrive, so a lying
// header cannot make the client reserve an absurd amount.
inline constexpr uint64_t kMaxReservedBodyBytes = 0x7fffffff;

// What may stand as a request line's target: an origin-form path, no control byte, no space.
bool sendableTarget(std::string_view target);

// `bytes` for a message, control bytes and DEL written \xNN.
std::string visibleBytes(std::string_view bytes);

using codecs::equalsIgnoreCase;  // header names compare ASCII case-insensitively

// Request headers the client itself owns: message framing (Content-Length is set from the
// body; a forwarded Transfer-Encoding would announce a chunked upload), the connection's
// keep-alive, and hop-by-hop headers that must not cross a proxy (RFC 9110 7.6.1).
bool isClientOwnedHeader(std::string_view name);

// A header name is an RFC 9110 token; anything else (':', spaces, CR/LF) would change the
// meaning of the header line built from it.
bool validHeaderName(std::string_view name);

// CR, LF or NUL in a value would split the header line or cut it short.
bool validHeaderValue(std::string_view value);

// A header of the caller's that goes upstream as given: a valid line, not one the client owns.
inline bool forwardableHeader(std::string_view name, std::string_view value) {
  return validHeaderName(name) && validHeaderValue(value) && !isClientOwnedHeader(name);
}

// The endpoint as written in the configuration (or formatted when it was built in code).
std::string endpointText(const config::ListenAddress& endpoint);

// "upstream 'NAME' (ENDPOINT): ", the start of every message about a call.
std::string callPrefix(std::string_view upstream_name, std::string_view endpoint);

// A plaintext endpoint the native engines (HTTP/1.1 and gRPC) connect to without a
// resolver: an IPv4 or IPv6 literal, or a unix: path.
bool isLiteralEndpoint(const config::ListenAddress& endpoint);

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string authority;  // Host / :authority: "1.2.3.4:80", "[::1]:80", "localhost" (unix)
};

// The socket address of an isLiteralEndpoint() endpoint. Errors (stamped kInternal, named
// as callPrefix does): a unix path longer than sockaddr_un holds, a host that is no literal.
codecs::StatusOr<SocketAddress> literalSocketAddress(const config::ListenAddress& endpoint,
                                                     std::string_view upstream_name);

// Whether the native engines reach `endpoint`: a literal, or a host name when `hosts` (the
// gateway's discovery) resolves names for them.
inline bool nativeReaches(const config::ListenAddress& endpoint, const HostAddresses* hosts) {
  return isLiteralEndpoint(endpoint) || (hosts != nullptr && endpoint.kind == config::ListenAddress::Kind::kTcp);
}

// Where one connection to an endpoint goes. A literal has one address. A host name has
// those `hosts` resolved: a connection's first try (attempt 0) goes to the address that
// connected last (`start`), its attempt-th try to the one `attempt` places after that
// start, and `count` is how many there are to try before the connection fails.
struct ConnectTarget {
  SocketAddress address;  // its authority: the endpoint as written ("triton:8001")
  std::shared_ptr<const HostAddresses::Entry> host;  // null for a literal
  size_t index = 0;
  size_t start = 0;  // attempt 0's index: what the next attempts count from
  size_t count = 1;
  // The connection reached the address: the next one starts there.
  void connected() const {
    if (host != nullptr) host->preferred.store(index, std::memory_order_relaxed);
  }
};

// `start`: the first try's ConnectTarget::start, for an attempt after it (read afresh
// for attempt 0: another connection may have found a better address meanwhile).
// Errors: literalSocketAddress()'s; for a host name that `hosts` knows no address of,
// UNAVAILABLE "cannot resolve 'NAME': WHY" (the message alone: the caller names the call).
codecs::StatusOr<ConnectTarget> connectTarget(const config::ListenAddress& endpoint, const HostAddresses* hosts,
                                              size_t attempt, size_t start, std::string_view upstream_name);

// The refusal of a target sendableTarget() rejects: the request's fault, never sent.
std::string unsendableTargetMessage(std::string_view prefix, std::string_view target);

}  // namespace infergate::gateway::upstream::http_client_detail
