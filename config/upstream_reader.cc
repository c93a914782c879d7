// One `upstreams` entry: name, protocol, and the keys that apply to that protocol.

#include <algorithm>

#include "config/listen_address.h"
#include "config/section_readers.h"

namespace infergate::config {
namespace {

using codecs::strCat;
using Protocol = UpstreamConfig::Protocol;

constexpr uint64_t kMaxChannels = 64;
constexpr uint64_t kMaxUpstreamConnections = 100000;

std::optional<Protocol> readProtocol(YamlReader& reader, const YamlValue& value) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return std::nullopt;
  if (*text == "builtin") return Protocol::kBuiltin;
  if (*text == "grpc") return Protocol::kGrpc;
  if (*text == "http") return Protocol::kHttp;
  reader.error(value, strCat("unknown protocol \"", *text, "\" (allowed: builtin, grpc, http)"));
  return std::nullopt;
}

// Which protocols a key applies to; `names` says so in the error.
struct Applies {
  bool builtin, grpc, http;
  const char* names;
};
constexpr Applies kRemoteOnly{false, true, true, "grpc and http"};
constexpr Applies kGrpcOnly{false, true, false, "grpc"};
constexpr Applies kHttpOnly{false, false, true, "http"};
constexpr Applies kBuiltinOnly{true, false, false, "builtin"};

// `map[key]` when it is there and applies to `protocol`. Written on an upstream it does
// not apply to, it is an error and is not read. With the protocol unknown (already an
// error) it is read, so its own mistakes are reported too.
const YamlValue* keyFor(YamlReader& reader, const YamlMap& map, std::string_view key,
                        std::optional<Protocol> protocol, Applies applies) {
  const YamlValue* value = map.find(key);
  if (!value || !protocol) return value;
  bool ok = *protocol == Protocol::kBuiltin ? applies.builtin
            : *protocol == Protocol::kGrpc  ? applies.grpc
                                            : applies.http;
  if (ok) return value;
  reader.error(*value, strCat(key, " applies to ", applies.names, " upstreams only"));
  return nullptr;
}

void readEndpoints(YamlReader& reader, const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return;
  if (items->empty()) reader.error(value, "at least one endpoint is required");
  for (const YamlValue& item : *items) {
    std::optional<std::string> text = reader.string(item);
    if (!text) continue;
    codecs::StatusOr<ListenAddress> parsed = parseListenAddress(*text);
    if (!parsed.ok()) {
      reader.error(item, std::string(codecs::messageOf(parsed.status())));
      continue;
    }
    if (parsed->kind == ListenAddress::Kind::kTcp && parsed->port == 0) {
      // Port 0 means "any free port" on a listener; there is nothing to connect to.
      reader.error(item, strCat("endpoint \"", *text, "\" needs a port (0 is for listeners)"));
      continue;
    }
    auto same = std::find_if(upstream.endpoints.begin(), upstream.endpoints.end(),
                             [&text](const ListenAddress& a) { return a.text == *text; });
    if (same != upstream.endpoints.end()) {
      reader.error(item, strCat("endpoint \"", *text, "\" is listed twice (also at line ",
                                same->where.line, ")"));
      continue;
    }
    parsed->where = item.where;
    upstream.endpoints.push_back(std::move(*parsed));
  }
}

void readHttpFormat(YamlReader& reader, const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return;
  if (*text == "binary") {
    upstream.http_format = UpstreamConfig::HttpFormat::kBinary;
  } else if (*text == "json") {
    upstream.http_format = UpstreamConfig::HttpFormat::kJson;
  } else {
    reader.error(value, strCat("unknown http_format \"", *text, "\" (allowed: binary, json)"));
  }
}

void readBuiltinModels(YamlReader& reader, const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return;
  for (const YamlValue& item : *items) {
    std::optional<std::string> model = reader.string(item);
    if (!model) continue;
    if (model->empty()) {
      reader.error(item, "a model name must not be empty");
    } else if (std::find(upstream.models.begin(), upstream.models.end(), *model) !=
               upstream.models.end()) {
      reader.error(item, strCat("model \"", *model, "\" is listed twice"));
    } else {
      upstream.models.push_back(std::move(*model));
    }
  }
}

template <typename T>
void readNumber(YamlReader& reader, const YamlValue* value, T& field, uint64_t min,
                uint64_t max) {
  if (!value) return;
  if (std::optional<uint64_t> n = reader.unsignedInteger(*value, min, max)) {
    field = static_cast<T>(*n);
  }
}

}  // namespace

std::optional<UpstreamConfig> readUpstream(YamlReader& reader, const YamlValue& value,
                                           UpstreamMarks& marks, bool& names_known) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"name", "protocol", "endpoints", "http_format", "timeout_ms",
              "connect_timeout_ms", "channels", "max_connections", "headers", "models"});
  if (!map) {
    names_known = false;
    return std::nullopt;
  }
  UpstreamConfig upstream;
  upstream.where = map->where;
  const YamlValue* name = reader.require(*map, "name");
  std::optional<std::string> name_text = name ? reader.string(*name) : std::nullopt;
  std::optional<Protocol> protocol;
  if (const YamlValue* p = reader.require(*map, "protocol", "one of builtin, grpc, http")) {
    protocol = readProtocol(reader, *p);
  }
  if (protocol) upstream.protocol = *protocol;

  if (const YamlValue* v = keyFor(reader, *map, "endpoints", protocol, kRemoteOnly)) {
    readEndpoints(reader, *v, upstream);
  } else if (upstream.isRemote()) {
    reader.require(*map, "endpoints", "e.g. endpoints: [\"127.0.0.1:8001\"]");
  }
  if (const YamlValue* v = keyFor(reader, *map, "http_format", protocol, kHttpOnly)) {
    readHttpFormat(reader, *v, upstream);
  }
  readNumber(reader, map->find("timeout_ms"), upstream.timeout_ms, 0, kMaxTimeoutMs);
  readNumber(reader, keyFor(reader, *map, "connect_timeout_ms", protocol, kRemoteOnly),
             upstream.connect_timeout_ms, 1, kMaxTimeoutMs);
  readNumber(reader, keyFor(reader, *map, "channels", protocol, kGrpcOnly), upstream.channels,
             1, kMaxChannels);
  readNumber(reader, keyFor(reader, *map, "max_connections", protocol, kHttpOnly),
             upstream.max_connections, 1, kMaxUpstreamConnections);
  if (const YamlValue* v = keyFor(reader, *map, "headers", protocol, kRemoteOnly)) {
    HeaderUse use = protocol == Protocol::kGrpc ? HeaderUse::kGrpcUpstream
                                                : HeaderUse::kHttpUpstream;
    upstream.headers = readHeaderValues(reader, *v, use);
  }
  if (const YamlValue* v = keyFor(reader, *map, "models", protocol, kBuiltinOnly)) {
    readBuiltinModels(reader, *v, upstream);
  }

  if (!name_text) {
    // Not kept without a name. A name written as a mapping (say) may still be what a
    // route means, so routes are then not checked against the names.
    if (name) names_known = false;
    return std::nullopt;
  }
  upstream.name = std::move(*name_text);
  marks.name = name->where;
  return upstream;
}

}  // namespace infergate::config
