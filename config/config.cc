#include "config/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "codecs/status.h"

namespace infergate::config {

std::string formatLocation(const SourceLocation& where) {
  return codecs::strCat(where.file, ":", where.line, ":", where.column);
}

const char* protocolName(UpstreamConfig::Protocol protocol) {
  switch (protocol) {
    case UpstreamConfig::Protocol::kBuiltin: return "builtin";
    case UpstreamConfig::Protocol::kGrpc: return "grpc";
    case UpstreamConfig::Protocol::kHttp: return "http";
  }
  return "unknown";
}

namespace {

constexpr const char* kApiGroupNames[kApiGroupCount] = {
    "health", "metadata", "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace", "logging", "admin"};

}  // namespace

const char* apiGroupName(ApiGroup group) { return kApiGroupNames[static_cast<size_t>(group)]; }

std::optional<ApiGroup> apiGroupNamed(std::string_view name) {
  for (size_t i = 0; i < kApiGroupCount; ++i) {
    if (name == kApiGroupNames[i]) return static_cast<ApiGroup>(i);
  }
  return std::nullopt;
}

bool ListenerConfig::publicByDefault(const ListenAddress& address) {
  switch (address.kind) {
    case ListenAddress::Kind::kUnix:
      return false;
    case ListenAddress::Kind::kDns:
    case ListenAddress::Kind::kTcp:
      break;
  }
  const std::string& host = address.host;
  if (host == "localhost") return false;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) != 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return false;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] != 127;
  }
  return true;
}

const UpstreamConfig* GatewayConfig::findUpstream(std::string_view name) const {
  for (const UpstreamConfig& upstream : upstreams) {
    if (upstream.name == name) return &upstream;
  }
  return nullptr;
}

}  // namespace infergate::config
