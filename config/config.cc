#include "config/config.h"

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

const UpstreamConfig* GatewayConfig::findUpstream(std::string_view name) const {
  for (const UpstreamConfig& upstream : upstreams) {
    if (upstream.name == name) return &upstream;
  }
  return nullptr;
}

}  // namespace infergate::config
