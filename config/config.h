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

struct UpstreamConfig {
  enum class Protocol { kBuiltin, kGrpc, kHttp };
  std::string name;
  Protocol protocol = Protocol::kBuiltin;
  std::vector<std::string> models;  // kBuiltin: demo models to serve; empty = all
  SourceLocation where;             // the upstream's mapping
};

// "builtin", "grpc", "http".
const char* protocolName(UpstreamConfig::Protocol protocol);

struct RouteConfig {
  static constexpr const char* kAnyModel = "*";
  std::string model;  // an exact model name, or "*" = any model
  std::string upstream;
  SourceLocation where;  // the route's mapping

  bool isCatchAll() const { return model == kAnyModel; }
};

struct GatewayConfig {
  std::string source;  // the file (or name) it was read from
  std::optional<ListenerConfig> http, grpc, metrics;
  unsigned workers = 0;  // HTTP event-loop threads; 0 = number of cores
  LimitsConfig limits;
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;  // in file order; the first match wins
};

}  // namespace infergate::config
