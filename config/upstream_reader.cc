// One `upstreams` entry: name, protocol, the keys that apply to that protocol, and the
// endpoint policies of a remote one (load balancing, health, retries, overload, affinity,
// shared-memory handoff).

#include <algorithm>

#include "config/listen_address.h"
#include "config/section_readers.h"

namespace infergate::config {
namespace {

using codecs::strCat;
using Protocol = UpstreamConfig::Protocol;

constexpr uint64_t kMaxChannels = 64;
constexpr uint64_t kMaxUpstreamConnections = 100000;
constexpr uint64_t kMaxPort = 65535;
constexpr uint64_t kMaxThreshold = 1000;              // health check probes in a row
constexpr uint64_t kMaxConsecutiveFailures = 1000000;
constexpr uint64_t kMaxRetries = 10;
constexpr uint64_t kMaxRetriesPerSecond = 1000000;
constexpr uint64_t kMaxRequests = 10000000;           // in flight or queued
constexpr uint64_t kMaxRetryAfterS = 86400;
constexpr uint64_t kMaxHandoffMinBytes = 2147483647;  // no inline tensor is bigger (int32
                                                      // gRPC messages and HTTP bodies)
constexpr uint64_t kMaxPoolBytes = uint64_t{1} << 40;  // 1 TiB
constexpr uint64_t kMaxDevice = 1023;
constexpr size_t kMaxPoolKeyPrefix = 200;  // leaves room under NAME_MAX (255) for the
                                           // pool's own suffix

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

// True when the first entry was read and kept: it is then `upstream.endpoints[0]`.
bool readEndpoints(YamlReader& reader, const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return false;
  if (items->empty()) reader.error(value, "at least one endpoint is required");
  bool first_kept = false;
  for (size_t i = 0; i < items->size(); ++i) {
    const YamlValue& item = (*items)[i];
    std::optional<std::string> text = reader.string(item);
    if (!text) continue;
    codecs::StatusOr<ListenAddress> parsed = parseEndpointAddress(*text);
    if (!parsed.ok()) {
      reader.error(item, std::string(codecs::messageOf(parsed.status())));
      continue;
    }
    auto same = std::find_if(
        upstream.endpoints.begin(), upstream.endpoints.end(),
        [&parsed](const ListenAddress& a) { return sameEndpoint(a, *parsed); });
    if (same != upstream.endpoints.end()) {
      reader.error(item, strCat("endpoint \"", *text, "\" is listed twice (also at line ",
                                same->where.line, ")"));
      continue;
    }
    parsed->where = item.where;
    upstream.endpoints.push_back(std::move(*parsed));
    first_kept = first_kept || i == 0;
  }
  return first_kept;
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

// False only when `value` is written and refused (`field` then keeps its default).
template <typename T>
bool readNumber(YamlReader& reader, const YamlValue* value, T& field, uint64_t min,
                uint64_t max) {
  if (!value) return true;
  std::optional<uint64_t> n = reader.unsignedInteger(*value, min, max);
  if (n) field = static_cast<T>(*n);
  return n.has_value();
}

// False only when `value` is written and refused.
bool readFlag(YamlReader& reader, const YamlValue* value, bool& field) {
  if (!value) return true;
  std::optional<bool> b = readBoolean(reader, *value);
  if (b) field = *b;
  return b.has_value();
}

// A name that may be left out but not written empty; `if_empty` says what to do instead.
void readName(YamlReader& reader, const YamlValue* value, std::string& field,
              std::string_view if_empty) {
  if (!value) return;
  std::optional<std::string> text = reader.string(*value);
  if (text && text->empty()) reader.error(*value, std::string(if_empty));
  if (text && !text->empty()) field = std::move(*text);
}

void readBalancingPolicy(YamlReader& reader, const YamlValue& value, LoadBalancingConfig& lb) {
  using Policy = LoadBalancingConfig::Policy;
  std::optional<std::string> text = reader.string(value);
  if (!text) return;
  if (*text == "round_robin") {
    lb.policy = Policy::kRoundRobin;
  } else if (*text == "least_request") {
    lb.policy = Policy::kLeastRequest;
  } else if (*text == "load_aware") {
    lb.policy = Policy::kLoadAware;
  } else {
    reader.error(value, strCat("unknown policy \"", *text,
                               "\" (allowed: round_robin, least_request, load_aware)"));
  }
}

void readLoadBalancing(YamlReader& reader, const YamlValue& value, LoadBalancingConfig& lb) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"policy", "hash_header", "metrics_port", "metrics_interval_ms"});
  if (!map) return;
  if (const YamlValue* v = map->find("policy")) readBalancingPolicy(reader, *v, lb);
  if (const YamlValue* v = map->find("hash_header")) {
    std::optional<std::string> text = reader.string(*v);
    std::string problem = text ? headerNameProblem(*text) : "";
    if (!problem.empty()) reader.error(*v, std::move(problem));
    if (text && problem.empty()) lb.hash_header = asciiLowercase(*text);
  }
  readNumber(reader, map->find("metrics_port"), lb.metrics_port, 0, kMaxPort);
  readNumber(reader, map->find("metrics_interval_ms"), lb.metrics_interval_ms, 1,
             kMaxTimeoutMs);
}

void readHealthCheck(YamlReader& reader, const YamlValue& value, HealthCheckConfig& hc) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"enabled", "interval_ms", "timeout_ms", "healthy_threshold",
              "unhealthy_threshold", "model", "version"});
  if (!map) return;
  readFlag(reader, map->find("enabled"), hc.enabled);
  readNumber(reader, map->find("interval_ms"), hc.interval_ms, 0, kMaxTimeoutMs);
  readNumber(reader, map->find("timeout_ms"), hc.timeout_ms, 1, kMaxTimeoutMs);
  readNumber(reader, map->find("healthy_threshold"), hc.healthy_threshold, 1, kMaxThreshold);
  readNumber(reader, map->find("unhealthy_threshold"), hc.unhealthy_threshold, 1,
             kMaxThreshold);
  const YamlValue* model = map->find("model");
  const YamlValue* version = map->find("version");
  readName(reader, model, hc.model, "leave model out to check the server only");
  readName(reader, version, hc.version, "leave version out to accept any version");
  if (version && !model) {
    reader.error(*version, "version needs model (the model whose version must be ready)");
  }
}

void readOutlier(YamlReader& reader, const YamlValue& value, OutlierConfig& o) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"consecutive_failures", "base_ejection_ms", "max_ejection_ms"});
  if (!map) return;
  readNumber(reader, map->find("consecutive_failures"), o.consecutive_failures, 0,
             kMaxConsecutiveFailures);
  const YamlValue* base = map->find("base_ejection_ms");
  const YamlValue* max = map->find("max_ejection_ms");
  bool both_read = readNumber(reader, base, o.base_ejection_ms, 1, kMaxTimeoutMs);
  both_read = readNumber(reader, max, o.max_ejection_ms, 1, kMaxTimeoutMs) && both_read;
  if (!both_read || o.base_ejection_ms <= o.max_ejection_ms) return;
  // At max_ejection_ms when it is written; otherwise base_ejection_ms passed the default.
  if (max) {
    reader.error(*max, strCat("must be at least base_ejection_ms (", o.base_ejection_ms,
                              base ? "" : " by default", "), got ", o.max_ejection_ms));
  } else {
    reader.error(*base, strCat("must be at most max_ejection_ms (", o.max_ejection_ms,
                               " by default), got ", o.base_ejection_ms));
  }
}

void readRetry(YamlReader& reader, const YamlValue& value, RetryConfig& r) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"max_retries", "budget_percent", "min_retries_per_second"});
  if (!map) return;
  readNumber(reader, map->find("max_retries"), r.max_retries, 0, kMaxRetries);
  readNumber(reader, map->find("budget_percent"), r.budget_percent, 0, 100);
  readNumber(reader, map->find("min_retries_per_second"), r.min_retries_per_second, 0,
             kMaxRetriesPerSecond);
}

void readOverload(YamlReader& reader, const YamlValue& value, OverloadConfig& o) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"max_in_flight", "max_in_flight_per_endpoint", "max_queue", "queue_timeout_ms",
              "retry_after_s"});
  if (!map) return;
  readNumber(reader, map->find("max_in_flight"), o.max_in_flight, 0, kMaxRequests);
  readNumber(reader, map->find("max_in_flight_per_endpoint"), o.max_in_flight_per_endpoint, 0,
             kMaxRequests);
  readNumber(reader, map->find("max_queue"), o.max_queue, 0, kMaxRequests);
  readNumber(reader, map->find("queue_timeout_ms"), o.queue_timeout_ms, 1, kMaxTimeoutMs);
  readNumber(reader, map->find("retry_after_s"), o.retry_after_s, 1, kMaxRetryAfterS);
}

void readAffinity(YamlReader& reader, const YamlValue& value, AffinityConfig& a) {
  std::optional<YamlMap> map = reader.mapping(value, {"sequences", "idle_timeout_ms"});
  if (!map) return;
  readFlag(reader, map->find("sequences"), a.sequences);
  readNumber(reader, map->find("idle_timeout_ms"), a.idle_timeout_ms, 1, kMaxTimeoutMs);
}

// Empty when the handoff pool's shared-memory objects may be named `prefix` + a suffix.
std::string poolKeyPrefixProblem(std::string_view prefix) {
  if (!prefix.starts_with('/')) {
    return strCat("\"", prefix, "\" must start with '/' (a POSIX shared-memory name)");
  }
  if (prefix.find('/', 1) != std::string_view::npos) {
    return strCat("\"", prefix, "\" has a '/' after the first; a shared-memory name has one");
  }
  if (prefix.size() > kMaxPoolKeyPrefix) {
    return strCat("is ", prefix.size(), " characters long; at most ", kMaxPoolKeyPrefix,
                  " (the pool adds its own suffix)");
  }
  if (prefix.substr(1).starts_with(kTritonReservedShmPrefix)) {
    return strCat("\"", prefix, "\" starts with a prefix reserved by Triton (\"/",
                  kTritonReservedShmPrefix, "\", the python backend's own regions)");
  }
  return "";
}

void readHandoffKind(YamlReader& reader, const YamlValue& value, HandoffConfig& h) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return;
  if (*text == "system") {
    h.kind = HandoffConfig::Kind::kSystem;
  } else if (*text == "cuda") {
    h.kind = HandoffConfig::Kind::kCuda;
  } else {
    reader.error(value, strCat("unknown kind \"", *text, "\" (allowed: system, cuda)"));
  }
}

// Writing the section turns the handoff on; `enabled: false` keeps it written but off.
void readHandoff(YamlReader& reader, const YamlValue& value, HandoffConfig& h) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"enabled", "passthrough", "min_bytes", "pool_bytes", "kind", "device",
              "key_prefix"});
  if (!map) return;
  h.where = map->where;
  h.enabled = true;
  readFlag(reader, map->find("enabled"), h.enabled);
  readFlag(reader, map->find("passthrough"), h.passthrough);
  const YamlValue* min = map->find("min_bytes");
  const YamlValue* pool = map->find("pool_bytes");
  bool both_read = readNumber(reader, min, h.min_bytes, 1, kMaxHandoffMinBytes);
  both_read = readNumber(reader, pool, h.pool_bytes, 0, kMaxPoolBytes) && both_read;
  // A pool smaller than the smallest tensor it takes would never be used.
  if (both_read && h.pool_bytes != 0 && h.pool_bytes < h.min_bytes) {
    if (pool) {
      reader.error(*pool, strCat("must be 0 (no pool) or at least min_bytes (", h.min_bytes,
                                 min ? "" : " by default", "), got ", h.pool_bytes));
    } else {
      reader.error(*min, strCat("must be at most pool_bytes (", h.pool_bytes,
                                " by default), got ", h.min_bytes, "; or set pool_bytes: 0"));
    }
  }
  if (const YamlValue* v = map->find("kind")) readHandoffKind(reader, *v, h);
  readNumber(reader, map->find("device"), h.device, 0, kMaxDevice);
  if (const YamlValue* v = map->find("key_prefix")) {
    std::optional<std::string> text = reader.string(*v);
    std::string problem = text ? poolKeyPrefixProblem(*text) : "";
    if (!problem.empty()) reader.error(*v, std::move(problem));
    if (text && problem.empty()) h.key_prefix = std::move(*text);
  }
}

// Empty when `name` may be sent as SNI and verified against the upstream's certificate.
std::string serverNameProblem(std::string_view name) {
  if (name.empty()) return "leave server_name out to use each endpoint's host";
  for (char c : name) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return strCat("\"", name,
                    "\" has whitespace or a control character; a server name has none");
    }
  }
  return "";
}

// `upstreams[].tls`: the connections to every endpoint use TLS. Paths are resolved as
// readConfigPath says; the files are read by tls/ when the upstream is set up.
std::optional<UpstreamTlsConfig> readUpstreamTls(YamlReader& reader, const YamlValue& value) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"ca", "server_name", "cert", "key", "insecure_skip_verify"});
  if (!map) return std::nullopt;
  UpstreamTlsConfig tls;
  tls.where = map->where;
  const YamlValue* ca = map->find("ca");
  const YamlValue* server_name = map->find("server_name");
  const YamlValue* cert = map->find("cert");
  const YamlValue* key = map->find("key");
  auto readPath = [&reader](const YamlValue* v, std::string& field) {
    if (!v) return;
    if (std::optional<std::string> path = readConfigPath(reader, *v)) field = std::move(*path);
  };
  readPath(ca, tls.ca);
  readPath(cert, tls.cert);
  readPath(key, tls.key);
  if (server_name) {
    std::optional<std::string> text = reader.string(*server_name);
    std::string problem = text ? serverNameProblem(*text) : "";
    if (!problem.empty()) reader.error(*server_name, std::move(problem));
    if (text && problem.empty()) tls.server_name = std::move(*text);
  }
  // At the one written: the client certificate is useless without its key, and the other
  // way round.
  if (cert && !key) reader.error(*cert, "give cert and key together");
  if (key && !cert) reader.error(*key, "give cert and key together");
  if (const YamlValue* v = map->find("insecure_skip_verify")) {
    readFlag(reader, v, tls.insecure_skip_verify);
    if (tls.insecure_skip_verify && (ca || server_name)) {
      reader.error(*v, "insecure_skip_verify verifies nothing: leave out ca and server_name, "
                       "or set it false");
    }
  }
  return tls;
}

// `colocated` and the endpoint policies, all for grpc and http upstreams only.
// `first_endpoint_kept`: endpoints[0] is the first endpoint as written.
void readEndpointPolicies(YamlReader& reader, const YamlMap& map,
                          std::optional<Protocol> protocol, bool first_endpoint_kept,
                          UpstreamConfig& upstream) {
  bool colocated_read = true;
  if (const YamlValue* v = keyFor(reader, map, "colocated", protocol, kRemoteOnly)) {
    colocated_read = readFlag(reader, v, upstream.colocated);
    const ListenAddress* first = first_endpoint_kept ? &upstream.endpoints[0] : nullptr;
    if (upstream.colocated && first && first->kind == ListenAddress::Kind::kDns) {
      // A dns: entry is every address of a name: no one of them is "the" local one.
      reader.error(*v, strCat("the first endpoint \"", first->text,
                              "\" is a dns: name, not one colocated endpoint (list the "
                              "colocated one first, as host:port or unix:path)"));
    }
  }
  if (const YamlValue* v = keyFor(reader, map, "stream_requests", protocol, kRemoteOnly)) {
    readFlag(reader, v, upstream.stream_requests);
  }
  if (const YamlValue* v = keyFor(reader, map, "load_balancing", protocol, kRemoteOnly)) {
    readLoadBalancing(reader, *v, upstream.load_balancing);
  }
  if (const YamlValue* v = keyFor(reader, map, "health_check", protocol, kRemoteOnly)) {
    readHealthCheck(reader, *v, upstream.health_check);
  }
  if (const YamlValue* v = keyFor(reader, map, "outlier", protocol, kRemoteOnly)) {
    readOutlier(reader, *v, upstream.outlier);
  }
  if (const YamlValue* v = keyFor(reader, map, "retry", protocol, kRemoteOnly)) {
    readRetry(reader, *v, upstream.retry);
  }
  if (const YamlValue* v = keyFor(reader, map, "overload", protocol, kRemoteOnly)) {
    readOverload(reader, *v, upstream.overload);
  }
  if (const YamlValue* v = keyFor(reader, map, "affinity", protocol, kRemoteOnly)) {
    readAffinity(reader, *v, upstream.affinity);
  }
  if (const YamlValue* v = keyFor(reader, map, "handoff", protocol, kRemoteOnly)) {
    readHandoff(reader, *v, upstream.handoff);
    // Shared memory is only shared on one host. (A refused `colocated` is reported already.)
    if (colocated_read && !upstream.colocated) {
      reader.error(*v, "handoff needs colocated: true (the first endpoint on this host, "
                       "whose memory the gateway shares)");
    }
  }
}

}  // namespace

std::optional<UpstreamConfig> readUpstream(YamlReader& reader, const YamlValue& value,
                                           UpstreamMarks& marks, bool& names_known) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"name", "protocol", "endpoints", "http_format", "timeout_ms",
              "connect_timeout_ms", "channels", "max_connections", "headers", "models",
              "colocated", "stream_requests", "load_balancing", "health_check", "outlier",
              "retry", "overload", "affinity", "handoff", "tls"});
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

  bool first_endpoint_kept = false;
  if (const YamlValue* v = keyFor(reader, *map, "endpoints", protocol, kRemoteOnly)) {
    first_endpoint_kept = readEndpoints(reader, *v, upstream);
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
  readEndpointPolicies(reader, *map, protocol, first_endpoint_kept, upstream);
  if (const YamlValue* v = keyFor(reader, *map, "tls", protocol, kRemoteOnly)) {
    upstream.tls = readUpstreamTls(reader, *v);
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
