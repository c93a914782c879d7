#include "config/config_loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <exception>
#include <sstream>

#include "config/config_checks.h"
#include "config/listen_address.h"
#include "config/section_readers.h"
#include "config/text_file.h"
#include "config/yaml_reader.h"

namespace infergate::config {
namespace {

using codecs::Status;
using codecs::StatusOr;
using codecs::strCat;

constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;
constexpr uint64_t kInt32Max = 2147483647;
constexpr uint64_t kInt64Max = 9223372036854775807;
constexpr uint64_t kMaxWorkers = 1024;
constexpr uint64_t kMaxBusyPollUs = 10'000;
constexpr uint64_t kMaxShmRegions = 1000000;
constexpr uint64_t kMinTlsWatchIntervalMs = 1000;

enum class ListenerKind { kHttp, kGrpc, kMetrics };

// Empty when client system regions may have keys starting with `prefix`; else why not.
// Keys are POSIX shared-memory names: leading '/'s, then a name without '/'.
std::string shmKeyPrefixProblem(std::string_view prefix) {
  std::string_view name = prefix.substr(std::min(prefix.find_first_not_of('/'), prefix.size()));
  if (prefix.empty()) return "a key prefix must not be empty: it would admit every key";
  if (name.empty()) {
    return strCat("\"", prefix, "\" is only slashes: it would admit every key");
  }
  if (name.find('/') != std::string_view::npos) {
    return strCat("\"", prefix,
                  "\" has a '/' after its leading ones; a shared-memory key has none there");
  }
  // Either way round: "/triton" admits the reserved keys, and so does a longer prefix.
  if (name.starts_with(kTritonReservedShmPrefix) || kTritonReservedShmPrefix.starts_with(name)) {
    return strCat("\"", prefix, "\" would admit keys reserved by Triton (\"/",
                  kTritonReservedShmPrefix, "...\", the python backend's own regions)");
  }
  return "";
}

// Reads one GatewayConfig section by section. Each read records its own errors and
// leaves the default in place, so one pass reports every mistake in the file.
class Loader {
 public:
  Loader(std::string_view source, ConfigErrors& errors) : reader_(std::string(source), errors) {
    config_.source = std::string(source);
    marks_.file_start = {config_.source, 1, 1};
  }

  // False when the document is not a mapping at all (then only that is reported).
  bool load(const YAML::Node& root);
  const GatewayConfig& config() const { return config_; }
  const LoadMarks& marks() const { return marks_; }

 private:
  void readListeners(const YamlValue& value);
  std::optional<ListenerConfig> readListener(const YamlValue& value, ListenerKind kind);
  std::optional<ServerTlsConfig> readServerTls(const YamlValue& value, bool grpcpp);
  void readTlsVersion(const YamlValue& value, TlsVersion& out);
  void readLimits(const YamlValue& value);
  template <typename T>
  void readLimit(const YamlMap& map, std::string_view key, T& field, uint64_t max);
  void readUpstreams(const YamlValue& value);
  void readRoutes(const YamlValue& value);
  void readForward(const YamlValue& value);
  void readReadiness(const YamlValue& value);
  void readDiscovery(const YamlValue& value);
  void readLifecycle(const YamlValue& value);
  void readShm(const YamlValue& value);
  void readObservability(const YamlValue& value);
  template <typename E>
  void readChoice(const YamlValue& value, std::string_view what,
                  std::initializer_list<std::pair<std::string_view, E>> choices, E& out);
  void readShmKeyPrefixes(const YamlValue& value);
  void readShmListeners(const YamlValue& value);

  YamlReader reader_;
  GatewayConfig config_;
  LoadMarks marks_;
};

bool Loader::load(const YAML::Node& root) {
  if (root.IsNull()) {
    reader_.error(marks_.file_start, "", "the configuration is empty");
    return false;
  }
  YamlValue top = reader_.root(root);
  if (!root.IsMap()) {
    reader_.error(top.where, "",
                  strCat("expected a mapping at the top level, got ", kindOf(root)));
    return false;
  }
  std::optional<YamlMap> map = reader_.mapping(
      top, {"listeners", "workers", "busy_poll_us", "limits", "upstreams", "routes", "forward", "readiness",
            "discovery", "lifecycle", "shm", "observability", "auth", "rate_limits"});
  if (const YamlValue* v = map->find("listeners")) readListeners(*v);
  if (const YamlValue* v = map->find("workers")) {
    if (auto n = reader_.unsignedInteger(*v, 0, kMaxWorkers)) {
      config_.workers = static_cast<unsigned>(*n);
    }
  }
  if (const YamlValue* v = map->find("busy_poll_us")) {
    if (auto n = reader_.unsignedInteger(*v, 0, kMaxBusyPollUs)) {
      config_.busy_poll_us = static_cast<uint32_t>(*n);
    }
  }
  if (const YamlValue* v = map->find("limits")) readLimits(*v);
  if (const YamlValue* v = map->find("upstreams")) readUpstreams(*v);
  if (const YamlValue* v = map->find("routes")) readRoutes(*v);
  if (const YamlValue* v = map->find("forward")) readForward(*v);
  if (const YamlValue* v = map->find("readiness")) readReadiness(*v);
  if (const YamlValue* v = map->find("discovery")) readDiscovery(*v);
  if (const YamlValue* v = map->find("lifecycle")) readLifecycle(*v);
  if (const YamlValue* v = map->find("shm")) readShm(*v);
  if (const YamlValue* v = map->find("observability")) readObservability(*v);
  if (const YamlValue* v = map->find("auth")) readAuth(reader_, *v, config_.auth);
  if (const YamlValue* v = map->find("rate_limits")) readRateLimits(reader_, *v, config_.rate_limits);
  return true;
}

void Loader::readListeners(const YamlValue& value) {
  marks_.listeners = value.where;
  std::optional<YamlMap> map = reader_.mapping(value, {"http", "grpc", "metrics"});
  if (!map) {
    marks_.frontend_listener_written = true;  // already reported: not "no listener" too
    return;
  }
  if (const YamlValue* v = map->find("http")) config_.http = readListener(*v, ListenerKind::kHttp);
  if (const YamlValue* v = map->find("grpc")) config_.grpc = readListener(*v, ListenerKind::kGrpc);
  if (const YamlValue* v = map->find("metrics")) {
    config_.metrics = readListener(*v, ListenerKind::kMetrics);
  }
  marks_.frontend_listener_written = map->find("http") || map->find("grpc");
}

// The metrics listener takes `tls` and `public` (for the admin API's default), not `server`.
std::optional<ListenerConfig> Loader::readListener(const YamlValue& value, ListenerKind kind) {
  std::optional<YamlMap> map = kind == ListenerKind::kMetrics
                                   ? reader_.mapping(value, {"address", "tls", "public"})
                                   : kind == ListenerKind::kGrpc
                                         ? reader_.mapping(value, {"address", "tls", "public", "server"})
                                         : reader_.mapping(value, {"address", "tls", "public"});
  if (!map) return std::nullopt;
  // Which server carries a gRPC listener decides what its `tls` may set.
  bool native_grpc_server = true;
  if (const YamlValue* v = map->find("server")) {
    if (std::optional<std::string> server = reader_.string(*v)) {
      if (*server == "native" || *server == "grpc++") {
        native_grpc_server = *server == "native";
      } else {
        reader_.error(*v, codecs::strCat("server must be \"native\" or \"grpc++\", not \"", *server, "\""));
      }
    }
  }
  // `tls` is read even when the address is wrong, so its own mistakes are reported too.
  std::optional<ServerTlsConfig> tls;
  if (const YamlValue* v = map->find("tls")) tls = readServerTls(*v, kind == ListenerKind::kGrpc && !native_grpc_server);
  const YamlValue* address = reader_.require(*map, "address", "e.g. \"0.0.0.0:8000\"");
  if (!address) return std::nullopt;
  std::optional<std::string> text = reader_.string(*address);
  if (!text) return std::nullopt;
  StatusOr<ListenAddress> parsed = parseListenAddress(*text);
  if (!parsed.ok()) {
    reader_.error(*address, std::string(codecs::messageOf(parsed.status())));
    return std::nullopt;
  }
  ListenerConfig listener{std::move(*parsed), std::move(tls), std::nullopt, map->where};
  listener.address.where = address->where;
  if (const YamlValue* v = map->find("public")) listener.is_public = readBoolean(reader_, *v);
  listener.native_grpc_server = native_grpc_server;
  return listener;
}

// `listeners.http.tls` / `listeners.grpc.tls`. A gRPC listener on `server: grpc++` takes the
// certificate keys and client_auth only: grpc (1.51) has no per-server setting of the
// protocol version, ciphers or groups (it negotiates TLS 1.2 and 1.3 with its own cipher
// list). nullopt when the value is not a mapping (then only that is reported).
std::optional<ServerTlsConfig> Loader::readServerTls(const YamlValue& value, bool grpcpp) {
  using ClientAuth = ServerTlsConfig::ClientAuth;
  std::optional<YamlMap> map = reader_.mapping(
      value, {"cert", "key", "client_ca", "client_auth", "min_version", "ciphers",
              "ciphersuites", "groups", "watch_interval_ms"});
  if (!map) return std::nullopt;
  ServerTlsConfig tls;
  tls.where = map->where;
  const YamlValue* cert = reader_.require(*map, "cert", "a PEM certificate chain file");
  const YamlValue* key = reader_.require(*map, "key", "a PEM private key file");
  std::optional<std::string> cert_path = cert ? readConfigPath(reader_, *cert) : std::nullopt;
  std::optional<std::string> key_path = key ? readConfigPath(reader_, *key) : std::nullopt;
  if (cert_path) tls.cert = std::move(*cert_path);
  if (key_path) tls.key = std::move(*key_path);
  const YamlValue* client_ca = map->find("client_ca");
  if (client_ca) {
    std::optional<std::string> path = readConfigPath(reader_, *client_ca);
    if (path) tls.client_ca = std::move(*path);
  }
  if (const YamlValue* v = map->find("client_auth")) {
    readChoice<ClientAuth>(*v, "client_auth",
                           {{"none", ClientAuth::kNone},
                            {"optional", ClientAuth::kOptional},
                            {"require", ClientAuth::kRequire}},
                           tls.client_auth);
    // A client_ca written but refused is reported already.
    if (tls.client_auth != ClientAuth::kNone && !client_ca) {
      reader_.error(*v, strCat("\"", v->node.Scalar(),
                               "\" needs client_ca (the CA bundle that verifies client "
                               "certificates)"));
    }
  }
  // Written on a gRPC listener carried by grpc++, each of these is refused and not read.
  for (std::string_view name : {"min_version", "ciphers", "ciphersuites", "groups"}) {
    const YamlValue* v = map->find(name);
    if (v && grpcpp) {
      reader_.error(*v, strCat("the gRPC listener on server: grpc++ cannot set ", name,
                               " (grpc offers no per-server cipher, group or version "
                               "setting); remove it, or leave server native"));
    } else if (v && name == "min_version") {
      readTlsVersion(*v, tls.min_version);
    } else if (v) {
      std::string& field = name == "ciphers"        ? tls.ciphers
                           : name == "ciphersuites" ? tls.ciphersuites
                                                    : tls.groups;
      std::optional<std::string> text = reader_.string(*v);
      if (text && text->empty()) {
        reader_.error(*v, strCat("leave ", name, " out for OpenSSL's defaults"));
      } else if (text) {
        field = std::move(*text);
      }
    }
  }
  if (const YamlValue* v = map->find("watch_interval_ms")) {
    if (auto n = reader_.unsignedInteger(*v, kMinTlsWatchIntervalMs, kMaxTimeoutMs)) {
      tls.watch_interval_ms = *n;
    }
  }
  return tls;
}

// "1.2" or "1.3", a string: unquoted, 1.2 is a YAML float (and 1.20 would be the same
// number), so it is refused with the quoting it needs.
void Loader::readTlsVersion(const YamlValue& value, TlsVersion& out) {
  if (value.node.IsScalar() && std::string_view(kindOf(value.node)) == "a float" &&
      (value.node.Scalar() == "1.2" || value.node.Scalar() == "1.3")) {
    reader_.error(value, strCat("expected a string, got a float: write \"",
                                value.node.Scalar(), "\" (quoted)"));
    return;
  }
  readChoice<TlsVersion>(value, "min_version",
                         {{"1.2", TlsVersion::k12}, {"1.3", TlsVersion::k13}}, out);
}

void Loader::readLimits(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(
      value, {"max_header_bytes", "max_header_count", "max_input_bytes",
              "max_binary_body_bytes", "max_grpc_message_bytes", "header_timeout_ms",
              "body_timeout_ms", "idle_timeout_ms", "send_timeout_ms", "max_connections",
              "max_connections_per_client", "max_tensors", "max_tensor_rank",
              "max_tensor_elements", "max_json_depth", "grpc_reset_burst", "grpc_resets_per_second"});
  if (!map) return;
  LimitsConfig& l = config_.limits;
  readLimit(*map, "max_header_bytes", l.max_header_bytes, kInt32Max);
  readLimit(*map, "max_header_count", l.max_header_count, 65535);
  readLimit(*map, "max_input_bytes", l.max_input_bytes, kInt64Max);
  readLimit(*map, "max_binary_body_bytes", l.max_binary_body_bytes, kInt32Max);
  readLimit(*map, "max_grpc_message_bytes", l.max_grpc_message_bytes, kInt32Max);
  readLimit(*map, "header_timeout_ms", l.header_timeout_ms, kMaxTimeoutMs);
  readLimit(*map, "body_timeout_ms", l.body_timeout_ms, kMaxTimeoutMs);
  readLimit(*map, "idle_timeout_ms", l.idle_timeout_ms, kMaxTimeoutMs);
  readLimit(*map, "send_timeout_ms", l.send_timeout_ms, kMaxTimeoutMs);
  readLimit(*map, "max_connections", l.max_connections, 10000000);
  readLimit(*map, "max_connections_per_client", l.max_connections_per_client, 10000000);
  readLimit(*map, "max_tensors", l.max_tensors, 1000000);
  readLimit(*map, "max_tensor_rank", l.max_tensor_rank, 1024);
  readLimit(*map, "max_tensor_elements", l.max_tensor_elements, kInt64Max);
  readLimit(*map, "max_json_depth", l.max_json_depth, 1024);
  readLimit(*map, "grpc_reset_burst", l.grpc_reset_burst, 1000000);
  readLimit(*map, "grpc_resets_per_second", l.grpc_resets_per_second, 1000000);
}

// Every limit is at least 1: a zero size or timeout would refuse every request.
template <typename T>
void Loader::readLimit(const YamlMap& map, std::string_view key, T& field, uint64_t max) {
  const YamlValue* v = map.find(key);
  if (!v) return;
  if (std::optional<uint64_t> n = reader_.unsignedInteger(*v, 1, max)) {
    field = static_cast<T>(*n);
  }
}

void Loader::readUpstreams(const YamlValue& value) {
  marks_.upstreams = value.where;
  std::optional<std::vector<YamlValue>> items = reader_.sequence(value);
  if (!items) {
    marks_.upstream_written = true;
    marks_.upstream_names_known = false;
    return;
  }
  for (size_t i = 0; i < items->size(); ++i) {
    UpstreamMarks marks{.index = i};
    std::optional<UpstreamConfig> upstream =
        readUpstream(reader_, (*items)[i], marks, marks_.upstream_names_known);
    if (!upstream) continue;
    config_.upstreams.push_back(std::move(*upstream));
    marks_.upstream_marks.push_back(std::move(marks));
  }
  marks_.upstream_written = !items->empty();
}

void Loader::readRoutes(const YamlValue& value) {
  marks_.routes = value.where;
  std::optional<std::vector<YamlValue>> items = reader_.sequence(value);
  if (!items) {
    marks_.route_written = true;
    return;
  }
  for (size_t i = 0; i < items->size(); ++i) {
    RouteMarks marks{.index = i};
    std::optional<RouteConfig> route = readRoute(reader_, (*items)[i], marks);
    if (!route) continue;
    config_.routes.push_back(std::move(*route));
    marks_.route_marks.push_back(std::move(marks));
  }
  marks_.route_written = !items->empty();
}

// forward.headers: names, or prefixes with a trailing '*'. Given, it replaces the
// default list (so `headers: []` forwards nothing).
void Loader::readForward(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(value, {"headers"});
  const YamlValue* headers = map ? map->find("headers") : nullptr;
  std::optional<std::vector<YamlValue>> items =
      headers ? reader_.sequence(*headers) : std::nullopt;
  if (!items) return;
  std::vector<std::string>& out = config_.forward.headers;
  out.clear();
  for (const YamlValue& item : *items) {
    std::optional<std::string> text = reader_.string(item);
    if (!text) continue;
    std::string name = asciiLowercase(*text);
    std::string_view stem = name;
    if (stem.ends_with('*')) stem.remove_suffix(1);
    // "*" alone forwards every header. '*' is itself a token character: look for it.
    std::string problem = name == "*" ? "" : headerNameProblem(stem);
    if (problem.empty() && stem.find('*') != std::string_view::npos) {
      problem = strCat("\"", *text, "\": '*' is allowed only at the end (a prefix)");
    } else if (problem.empty() && std::find(out.begin(), out.end(), name) != out.end()) {
      problem = strCat("header \"", *text, "\" is listed twice");
    }
    if (!problem.empty()) {
      reader_.error(item, std::move(problem));
      continue;
    }
    out.push_back(std::move(name));
  }
}

void Loader::readReadiness(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(value, {"policy", "probe_interval_ms"});
  if (!map) return;
  ReadinessConfig& r = config_.readiness;
  if (const YamlValue* v = map->find("policy")) {
    std::optional<std::string> text = reader_.string(*v);
    if (text && *text == "all_routes") {
      r.policy = ReadinessConfig::Policy::kAllRoutes;
    } else if (text && *text == "any_route") {
      r.policy = ReadinessConfig::Policy::kAnyRoute;
    } else if (text && *text == "always") {
      r.policy = ReadinessConfig::Policy::kAlways;
    } else if (text) {
      reader_.error(*v, strCat("unknown policy \"", *text,
                               "\" (allowed: all_routes, any_route, always)"));
    }
  }
  if (const YamlValue* v = map->find("probe_interval_ms")) {
    if (auto n = reader_.unsignedInteger(*v, 1, kMaxTimeoutMs)) r.probe_interval_ms = *n;
  }
}

void Loader::readDiscovery(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(value, {"dns_refresh_ms", "hosts_file"});
  if (!map) return;
  DiscoveryConfig& d = config_.discovery;
  if (const YamlValue* v = map->find("dns_refresh_ms")) {
    if (auto n = reader_.unsignedInteger(*v, 1, kMaxTimeoutMs)) d.dns_refresh_ms = *n;
  }
  if (const YamlValue* v = map->find("hosts_file")) {
    // Only the text is checked: the file is read when names are looked up, on the
    // machine that runs the gateway.
    std::optional<std::string> path = reader_.string(*v);
    if (path && path->empty()) {
      reader_.error(*v, "leave hosts_file out to use the system resolver");
    } else if (path) {
      d.hosts_file = std::move(*path);
    }
  }
}

void Loader::readLifecycle(const YamlValue& value) {
  std::optional<YamlMap> map =
      reader_.mapping(value, {"watch_config", "watch_interval_ms", "drain_timeout_ms"});
  if (!map) return;
  LifecycleConfig& l = config_.lifecycle;
  if (const YamlValue* v = map->find("watch_config")) {
    if (std::optional<bool> b = readBoolean(reader_, *v)) l.watch_config = *b;
  }
  if (const YamlValue* v = map->find("watch_interval_ms")) {
    if (auto n = reader_.unsignedInteger(*v, 1, kMaxTimeoutMs)) l.watch_interval_ms = *n;
  }
  if (const YamlValue* v = map->find("drain_timeout_ms")) {
    if (auto n = reader_.unsignedInteger(*v, 1, kMaxTimeoutMs)) l.drain_timeout_ms = *n;
  }
}

template <typename E>
void Loader::readChoice(const YamlValue& value, std::string_view what,
                        std::initializer_list<std::pair<std::string_view, E>> choices, E& out) {
  std::optional<std::string> text = reader_.string(value);
  if (!text) return;
  std::string allowed;
  for (const auto& [name, e] : choices) {
    if (*text == name) {
      out = e;
      return;
    }
    allowed += strCat(allowed.empty() ? "" : ", ", name);
  }
  reader_.error(value, strCat("unknown ", what, " \"", *text, "\" (allowed: ", allowed, ")"));
}

void Loader::readObservability(const YamlValue& value) {
  std::optional<YamlMap> map =
      reader_.mapping(value, {"request_metrics", "max_series", "access_log", "log"});
  if (!map) return;
  ObservabilityConfig& o = config_.observability;
  if (const YamlValue* v = map->find("request_metrics")) {
    if (std::optional<bool> b = readBoolean(reader_, *v)) o.request_metrics = *b;
  }
  if (const YamlValue* v = map->find("max_series")) {
    if (auto n = reader_.unsignedInteger(*v, 1, 1000000)) o.max_series = *n;
  }
  if (const YamlValue* v = map->find("access_log")) {
    using Format = ObservabilityConfig::AccessLog::Format;
    std::optional<YamlMap> log =
        reader_.mapping(*v, {"enabled", "format", "path", "sample_percent"});
    if (log) {
      ObservabilityConfig::AccessLog& a = o.access_log;
      if (const YamlValue* e = log->find("enabled")) {
        if (std::optional<bool> b = readBoolean(reader_, *e)) a.enabled = *b;
      }
      if (const YamlValue* f = log->find("format")) {
        readChoice<Format>(*f, "format", {{"json", Format::kJson}, {"text", Format::kText}}, a.format);
      }
      if (const YamlValue* p = log->find("path")) {
        std::optional<std::string> path = reader_.string(*p);
        if (path && path->empty()) {
          reader_.error(*p, "an access log path must not be empty (\"-\" is standard output)");
        } else if (path) {
          a.path = std::move(*path);
        }
      }
      if (const YamlValue* n = log->find("sample_percent")) {
        if (auto pct = reader_.unsignedInteger(*n, 1, 100)) a.sample_percent = static_cast<uint32_t>(*pct);
      }
    }
  }
  if (const YamlValue* v = map->find("log")) {
    using Log = ObservabilityConfig::Log;
    std::optional<YamlMap> log = reader_.mapping(*v, {"level", "format"});
    if (log) {
      if (const YamlValue* l = log->find("level")) {
        readChoice<Log::Level>(*l, "level",
                               {{"error", Log::Level::kError},
                                {"warning", Log::Level::kWarning},
                                {"info", Log::Level::kInfo},
                                {"verbose", Log::Level::kVerbose}},
                               o.log.level);
      }
      if (const YamlValue* f = log->find("format")) {
        readChoice<Log::Format>(*f, "format",
                                {{"text", Log::Format::kText}, {"json", Log::Format::kJson}},
                                o.log.format);
      }
    }
  }
}

// `shm.enabled: false` with the other keys written is fine: they are checked all the same,
// so turning registration on later needs no other edit.
void Loader::readShm(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(
      value, {"enabled", "allowed_key_prefixes", "cuda", "max_regions", "listeners"});
  if (!map) return;
  ShmConfig& s = config_.shm;
  s.where = map->where;
  if (const YamlValue* v = map->find("enabled")) {
    if (std::optional<bool> b = readBoolean(reader_, *v)) s.enabled = *b;
  }
  if (const YamlValue* v = map->find("allowed_key_prefixes")) readShmKeyPrefixes(*v);
  if (const YamlValue* v = map->find("cuda")) {
    if (std::optional<bool> b = readBoolean(reader_, *v)) s.cuda = *b;
  }
  if (const YamlValue* v = map->find("max_regions")) {
    if (auto n = reader_.unsignedInteger(*v, 1, kMaxShmRegions)) {
      s.max_regions = static_cast<uint32_t>(*n);
    }
  }
  if (const YamlValue* v = map->find("listeners")) readShmListeners(*v);
}

void Loader::readShmKeyPrefixes(const YamlValue& value) {
  std::optional<std::vector<YamlValue>> items = reader_.sequence(value);
  if (!items) return;
  std::vector<std::string>& out = config_.shm.allowed_key_prefixes;
  for (const YamlValue& item : *items) {
    std::optional<std::string> text = reader_.string(item);
    if (!text) continue;
    std::string problem = shmKeyPrefixProblem(*text);
    if (problem.empty() && std::find(out.begin(), out.end(), *text) != out.end()) {
      problem = strCat("key prefix \"", *text, "\" is listed twice");
    }
    if (!problem.empty()) {
      reader_.error(item, std::move(problem));
      continue;
    }
    out.push_back(std::move(*text));
  }
}

// Given, the list replaces the default (both): `listeners: []` lets no frontend register.
void Loader::readShmListeners(const YamlValue& value) {
  readListenerList(reader_, value, config_.shm.http, config_.shm.grpc);
}

// yaml-cpp reports positions 0-based; an unknown position (-1) reads as 1:1.
SourceLocation locateMark(std::string_view source, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return {std::string(source), 1, 1};
  return {std::string(source), mark.line + 1, mark.column + 1};
}

// Records where each document starts; ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Anything after the first document. Not YAML::LoadAll: in yaml-cpp 0.7 a token that
// cannot start a node (a stray ',') is never consumed, and LoadAll then appends empty
// documents until memory runs out (jbeder/yaml-cpp#1040). Here at most three documents
// are read; two starting at the same place are that stuck token, a syntax error (then
// false: what YAML::Load returned is not what the file says).
bool checkSingleDocument(std::string_view yaml_text, std::string_view source,
                         ConfigErrors& errors) {
  std::istringstream in{std::string(yaml_text)};
  YAML::Parser parser(in);
  DocumentStarts handler;
  for (int i = 0; i < 3 && parser.HandleNextDocument(handler); ++i) {
  }
  const std::vector<YAML::Mark>& starts = handler.starts;
  for (size_t i = 1; i < starts.size(); ++i) {
    if (starts[i].pos == starts[i - 1].pos) {
      errors.add(locateMark(source, starts[i]), "",
                 "YAML syntax error: unexpected character (a stray ',' or the like)");
      return false;
    }
  }
  if (starts.size() > 1) {
    errors.add(locateMark(source, starts[1]), "",
               "a second YAML document (after '---') is not supported");
  }
  return true;
}

// The one place yaml-cpp runs: every exception it can throw ends here as an error.
Status parseInto(std::string_view yaml_text, std::string_view source, ConfigErrors& errors,
                 GatewayConfig& out) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!checkSingleDocument(yaml_text, source, errors)) return errors.toStatus();
    Loader loader(source, errors);
    if (loader.load(root)) checkConfig(loader.config(), loader.marks(), errors);
    out = loader.config();
  } catch (const YAML::Exception& e) {
    errors.add(locateMark(source, e.mark), "", strCat("YAML syntax error: ", e.msg));
  } catch (const std::exception& e) {
    errors.add({std::string(source), 1, 1}, "", strCat("cannot parse: ", e.what()));
  }
  return errors.toStatus();
}

}  // namespace

std::optional<bool> readBoolean(YamlReader& reader, const YamlValue& value) {
  // kindOf() applies the core schema (a quoted "true" is a string); a !!bool tag may
  // still carry other text, refused below.
  if (!value.node.IsScalar() || std::string_view(kindOf(value.node)) != "a boolean") {
    reader.error(value, strCat("expected a boolean, got ", kindOf(value.node)));
    return std::nullopt;
  }
  const std::string& text = value.node.Scalar();
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  reader.error(value, strCat("expected a boolean (true or false), got ", text));
  return std::nullopt;
}

std::optional<std::string> readConfigPath(YamlReader& reader, const YamlValue& value) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return std::nullopt;
  if (text->empty()) {
    reader.error(value, "a path is required");
    return std::nullopt;
  }
  return resolveConfigPath(reader.file(), *text);
}

std::string resolveConfigPath(std::string_view config_source, std::string_view path) {
  size_t slash = config_source.rfind('/');
  if (path.starts_with('/') || slash == std::string_view::npos) return std::string(path);
  return strCat(config_source.substr(0, slash + 1), path);
}

StatusOr<GatewayConfig> parseConfig(std::string_view yaml_text, std::string_view source_name) {
  ConfigErrors errors;
  GatewayConfig config;
  INFERGATE_RETURN_IF_ERROR(parseInto(yaml_text, source_name, errors, config));
  config.text = std::string(yaml_text);
  return config;
}

StatusOr<GatewayConfig> loadConfigFile(const std::string& path) {
  INFERGATE_ASSIGN_OR_RETURN(std::string text, readTextFile(path, kMaxConfigFileBytes));
  return parseConfig(text, path);
}

}  // namespace infergate::config
