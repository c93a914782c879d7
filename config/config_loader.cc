#include "config/config_loader.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <sstream>

#include "config/config_checks.h"
#include "config/listen_address.h"
#include "config/yaml_reader.h"

namespace infergate::config {
namespace {

using codecs::Status;
using codecs::StatusOr;
using codecs::strCat;

constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;
constexpr uint64_t kInt32Max = 2147483647;
constexpr uint64_t kInt64Max = 9223372036854775807;
constexpr uint64_t kMaxTimeoutMs = 86400000;  // 24 hours
constexpr uint64_t kMaxWorkers = 1024;

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
  std::optional<ListenerConfig> readListener(const YamlValue& value);
  void readLimits(const YamlValue& value);
  template <typename T>
  void readLimit(const YamlMap& map, std::string_view key, T& field, uint64_t max);
  void readUpstreams(const YamlValue& value);
  void readUpstream(const YamlValue& value, size_t index);
  void readProtocol(const YamlValue& value, UpstreamConfig& upstream);
  void readBuiltinModels(const YamlValue& value, UpstreamConfig& upstream);
  void readRoutes(const YamlValue& value);
  void readRoute(const YamlValue& value, size_t index);

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
  std::optional<YamlMap> map =
      reader_.mapping(top, {"listeners", "workers", "limits", "upstreams", "routes"});
  if (const YamlValue* v = map->find("listeners")) readListeners(*v);
  if (const YamlValue* v = map->find("workers")) {
    if (auto n = reader_.unsignedInteger(*v, 0, kMaxWorkers)) {
      config_.workers = static_cast<unsigned>(*n);
    }
  }
  if (const YamlValue* v = map->find("limits")) readLimits(*v);
  if (const YamlValue* v = map->find("upstreams")) readUpstreams(*v);
  if (const YamlValue* v = map->find("routes")) readRoutes(*v);
  return true;
}

void Loader::readListeners(const YamlValue& value) {
  marks_.listeners = value.where;
  std::optional<YamlMap> map = reader_.mapping(value, {"http", "grpc", "metrics"});
  if (!map) {
    marks_.frontend_listener_written = true;  // already reported: not "no listener" too
    return;
  }
  if (const YamlValue* v = map->find("http")) config_.http = readListener(*v);
  if (const YamlValue* v = map->find("grpc")) config_.grpc = readListener(*v);
  if (const YamlValue* v = map->find("metrics")) config_.metrics = readListener(*v);
  marks_.frontend_listener_written = map->find("http") || map->find("grpc");
}

std::optional<ListenerConfig> Loader::readListener(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(value, {"address"});
  if (!map) return std::nullopt;
  const YamlValue* address = reader_.require(*map, "address", "e.g. \"0.0.0.0:8000\"");
  if (!address) return std::nullopt;
  std::optional<std::string> text = reader_.string(*address);
  if (!text) return std::nullopt;
  StatusOr<ListenAddress> parsed = parseListenAddress(*text);
  if (!parsed.ok()) {
    reader_.error(*address, std::string(codecs::messageOf(parsed.status())));
    return std::nullopt;
  }
  ListenerConfig listener{std::move(*parsed), map->where};
  listener.address.where = address->where;
  return listener;
}

void Loader::readLimits(const YamlValue& value) {
  std::optional<YamlMap> map = reader_.mapping(
      value, {"max_header_bytes", "max_header_count", "max_input_bytes",
              "max_binary_body_bytes", "max_grpc_message_bytes", "header_timeout_ms",
              "body_timeout_ms", "idle_timeout_ms", "max_connections"});
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
  readLimit(*map, "max_connections", l.max_connections, 10000000);
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
  for (size_t i = 0; i < items->size(); ++i) readUpstream((*items)[i], i);
  marks_.upstream_written = !items->empty();
}

void Loader::readUpstream(const YamlValue& value, size_t index) {
  std::optional<YamlMap> map = reader_.mapping(value, {"name", "protocol", "models"});
  if (!map) {
    marks_.upstream_names_known = false;
    return;
  }
  UpstreamConfig upstream;
  upstream.where = map->where;
  const YamlValue* name = reader_.require(*map, "name");
  std::optional<std::string> name_text = name ? reader_.string(*name) : std::nullopt;
  if (const YamlValue* protocol =
          reader_.require(*map, "protocol", "one of builtin, grpc, http")) {
    readProtocol(*protocol, upstream);
  }
  if (const YamlValue* models = map->find("models")) {
    readBuiltinModels(*models, upstream);
    if (upstream.protocol != UpstreamConfig::Protocol::kBuiltin) {
      reader_.error(*models, "models applies to builtin upstreams only");
    }
  }
  if (!name_text) {
    // Not kept without a name. A name written as a mapping (say) may still be what a
    // route means, so routes are then not checked against the names.
    if (name) marks_.upstream_names_known = false;
    return;
  }
  upstream.name = std::move(*name_text);
  config_.upstreams.push_back(std::move(upstream));
  marks_.upstream_indices.push_back(index);
  marks_.upstream_names.push_back(name->where);
}

void Loader::readProtocol(const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::string> text = reader_.string(value);
  if (!text) return;
  if (*text == "builtin") {
    upstream.protocol = UpstreamConfig::Protocol::kBuiltin;
  } else if (*text == "grpc" || *text == "http") {
    upstream.protocol =
        *text == "grpc" ? UpstreamConfig::Protocol::kGrpc : UpstreamConfig::Protocol::kHttp;
    reader_.error(value, strCat("protocol \"", *text,
                                "\" is not supported yet: this version serves builtin "
                                "upstreams only (grpc and http upstreams come with routing)"));
  } else {
    reader_.error(value, strCat("unknown protocol \"", *text,
                                "\" (allowed: builtin, grpc, http)"));
  }
}

void Loader::readBuiltinModels(const YamlValue& value, UpstreamConfig& upstream) {
  std::optional<std::vector<YamlValue>> items = reader_.sequence(value);
  if (!items) return;
  for (const YamlValue& item : *items) {
    std::optional<std::string> model = reader_.string(item);
    if (!model) continue;
    if (model->empty()) {
      reader_.error(item, "a model name must not be empty");
    } else if (std::find(upstream.models.begin(), upstream.models.end(), *model) !=
               upstream.models.end()) {
      reader_.error(item, strCat("model \"", *model, "\" is listed twice"));
    } else {
      upstream.models.push_back(std::move(*model));
    }
  }
}

void Loader::readRoutes(const YamlValue& value) {
  marks_.routes = value.where;
  std::optional<std::vector<YamlValue>> items = reader_.sequence(value);
  if (!items) {
    marks_.route_written = true;
    return;
  }
  for (size_t i = 0; i < items->size(); ++i) readRoute((*items)[i], i);
  marks_.route_written = !items->empty();
}

void Loader::readRoute(const YamlValue& value, size_t index) {
  std::optional<YamlMap> map = reader_.mapping(value, {"match", "upstream"});
  if (!map) return;
  RouteConfig route;
  route.where = map->where;
  std::optional<std::string> model;
  SourceLocation model_where;
  if (const YamlValue* match = reader_.require(*map, "match", "e.g. match: { model: \"*\" }")) {
    std::optional<YamlMap> match_map = reader_.mapping(*match, {"model"});
    const YamlValue* model_value =
        match_map ? reader_.require(*match_map, "model", "an exact model name, or \"*\"")
                  : nullptr;
    if (model_value) {
      model = reader_.string(*model_value);
      model_where = model_value->where;
    }
  }
  const YamlValue* upstream = reader_.require(*map, "upstream");
  std::optional<std::string> upstream_name = upstream ? reader_.string(*upstream) : std::nullopt;
  if (!model || !upstream_name) return;
  route.model = std::move(*model);
  route.upstream = std::move(*upstream_name);
  config_.routes.push_back(std::move(route));
  marks_.route_indices.push_back(index);
  marks_.route_models.push_back(std::move(model_where));
  marks_.route_upstreams.push_back(upstream->where);
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

StatusOr<GatewayConfig> parseConfig(std::string_view yaml_text, std::string_view source_name) {
  ConfigErrors errors;
  GatewayConfig config;
  INFERGATE_RETURN_IF_ERROR(parseInto(yaml_text, source_name, errors, config));
  return config;
}

StatusOr<GatewayConfig> loadConfigFile(const std::string& path) {
  auto failed = [&path](int err) {
    std::string message = strCat("cannot read ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
                         : absl::FailedPreconditionError(message);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed(errno);
  std::string text;
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return failed(err);
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > kMaxConfigFileBytes) {
      ::close(fd);
      return absl::FailedPreconditionError(
          strCat("cannot read ", path, ": larger than ", kMaxConfigFileBytes, " bytes"));
    }
  }
  ::close(fd);
  return parseConfig(text, path);
}

}  // namespace infergate::config
