#pragma once

// The gateway's configuration as plain structs: what config_loader.h builds from YAML
// and every other folder reads. No YAML type appears here (YAML never leaves config/).
//
// Ownership and threads: a GatewayConfig is built once by loadConfigFile()/parseConfig(),
// already validated, and never changed afterwards; share it as
// `std::shared_ptr<const GatewayConfig>` and read it from any thread.
//
// The schema, with every key's default, is in config/README.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infergate::config {

// Where a value was written: 1-based line and column, as an editor shows them.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

// "file:line:column".
std::string formatLocation(const SourceLocation& where);

// A listener's `address`: "host:port", "[ipv6]:port" or "unix:/path/to.sock".
struct ListenAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;   // kTcp: IPv4 literal, IPv6 literal without brackets, or a name
  uint16_t port = 0;  // kTcp: 0 = any free port
  std::string path;   // kUnix: the socket's path (fits sockaddr_un::sun_path)
  std::string text;   // as written in the file, for messages and logs
  SourceLocation where;
};

struct ListenerConfig {
  ListenAddress address;
  SourceLocation where;  // the listener's mapping
};

// Defaults are Triton's where Triton has one (codecs/limits.h).
struct LimitsConfig {
  uint64_t max_header_bytes = 65536;               // request line + headers
  uint32_t max_header_count = 100;
  uint64_t max_input_bytes = 67108864;             // JSON header, JSON tensor, decompressed body
  uint64_t max_binary_body_bytes = 2147483647;     // binary-extension body (int32 on Triton)
  uint64_t max_grpc_message_bytes = 2147483647;
  uint64_t header_timeout_ms = 10000;              // request line + headers must arrive in
  uint64_t body_timeout_ms = 60000;                // the body must arrive in
  uint64_t idle_timeout_ms = 300000;               // keep-alive connection idle
  uint32_t max_connections = 10000;                // open client connections, all listeners
};

// A header (HTTP) or metadata entry (gRPC) with its value, as written in the file.
// Names are stored lowercase (HTTP names are case-insensitive, gRPC keys lowercase).
struct HeaderValue {
  std::string name;
  std::string value;
  SourceLocation where;
};

struct UpstreamConfig {
  enum class Protocol { kBuiltin, kGrpc, kHttp };
  // How an HTTP upstream is sent requests the gateway encodes itself (transcoded from
  // gRPC): the binary-tensor extension, or plain JSON for servers without it.
  enum class HttpFormat { kBinary, kJson };
  std::string name;
  Protocol protocol = Protocol::kBuiltin;
  std::vector<std::string> models;  // kBuiltin: demo models to serve; empty = all
  // kGrpc / kHttp: where the upstream listens, at least one ("host:port", "[v6]:port",
  // "unix:/path"; port 0 is refused). Requests are spread round robin.
  std::vector<ListenAddress> endpoints;
  HttpFormat http_format = HttpFormat::kBinary;  // kHttp only
  uint64_t timeout_ms = 0;                       // per request; 0 = no upstream limit
  uint64_t connect_timeout_ms = 5000;            // kGrpc / kHttp
  uint32_t channels = 2;                         // kGrpc: channels per endpoint
  uint32_t max_connections = 64;                 // kHttp: open connections per endpoint, per worker
  // Added to every request toward this upstream (e.g. authorization), replacing a
  // forwarded client header of the same name.
  std::vector<HeaderValue> headers;
  SourceLocation where;  // the upstream's mapping

  bool isRemote() const { return protocol != Protocol::kBuiltin; }
};

// "builtin", "grpc", "http".
const char* protocolName(UpstreamConfig::Protocol protocol);

// What a route matches. Every condition given must hold.
struct RouteMatch {
  enum class Model { kAny, kExact, kPrefix };
  Model kind = Model::kAny;
  std::string model;    // kExact: the name; kPrefix: the prefix (non-empty); kAny: ""
  std::string version;  // "" = any version (including none)
  // Each must be present on the request with exactly this value (HTTP header or gRPC
  // metadata; names lowercase).
  std::vector<HeaderValue> headers;
};

// One upstream of a route, with its share of the traffic.
struct RouteTarget {
  std::string upstream;
  uint32_t weight = 100;  // `upstream: x` is one target of weight 100; a split's add to 100
  SourceLocation where;
};

struct RouteConfig {
  RouteMatch match;
  std::vector<RouteTarget> targets;  // at least one
  // Rewrite toward the upstream; the client keeps seeing the names it asked for.
  std::string rewrite_model;    // "" = keep the client's model name
  std::string rewrite_version;  // "" = keep the client's version
  uint64_t timeout_ms = 0;      // 0 = the upstream's timeout_ms (then none)
  std::string mirror;           // an upstream sent a copy of each request, answer dropped; "" = none
  SourceLocation where;         // the route's mapping
};

// Which client headers (HTTP) / metadata (gRPC) travel to the upstream. Hop-by-hop
// headers (Connection, Keep-Alive, TE, Transfer-Encoding, Upgrade, Proxy-*, Host,
// Content-Length) are never forwarded, whatever this says.
struct ForwardConfig {
  // Lowercase names; a trailing '*' makes a prefix ("triton-grpc-protocol-*").
  std::vector<std::string> headers = {"traceparent", "tracestate", "triton-grpc-protocol-*"};
};

// When the gateway answers ready (/v2/health/ready, ServerReady, grpc health).
struct ReadinessConfig {
  enum class Policy {
    kAllRoutes,  // every route has at least one reachable upstream (default)
    kAnyRoute,   // at least one route has
    kAlways,     // once listening
  };
  Policy policy = Policy::kAllRoutes;
  uint64_t probe_interval_ms = 2000;  // how often remote upstreams are asked if they are ready
};

struct GatewayConfig {
  std::string source;  // the file (or name) it was read from
  std::optional<ListenerConfig> http, grpc, metrics;
  unsigned workers = 0;  // HTTP event-loop threads; 0 = number of cores
  LimitsConfig limits;
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;  // in file order; the first match wins
  ForwardConfig forward;
  ReadinessConfig readiness;

  // The upstream named `name`, or nullptr.
  const UpstreamConfig* findUpstream(std::string_view name) const;
};

}  // namespace infergate::config
