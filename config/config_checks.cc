#include "config/config_checks.h"

#include <iterator>
#include <string>

#include "config/listen_address.h"

namespace infergate::config {
namespace {

using codecs::strCat;

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

void checkListeners(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  if (!marks.frontend_listener_written) {
    errors.add(marks.listeners.value_or(marks.file_start), "listeners",
               "no listener: at least one of listeners.http and listeners.grpc is required");
  }
  struct Named {
    const char* name;
    const std::optional<ListenerConfig>& listener;
  };
  const Named all[] = {{"http", config.http}, {"grpc", config.grpc}, {"metrics", config.metrics}};
  for (size_t i = 0; i < std::size(all); ++i) {
    if (!all[i].listener) continue;
    const ListenAddress& a = all[i].listener->address;
    for (size_t j = 0; j < i; ++j) {
      if (!all[j].listener || !listenAddressesClash(a, all[j].listener->address)) continue;
      const ListenAddress& first = all[j].listener->address;
      errors.add(a.where, strCat("listeners.", all[i].name, ".address"),
                 strCat("address \"", a.text, "\" clashes with listeners.", all[j].name,
                        " (\"", first.text, "\" at ", formatLocation(first.where), ")"));
      break;
    }
  }
}

void checkUpstreams(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  if (!marks.upstream_written) {
    errors.add(marks.upstreams.value_or(marks.file_start), "upstreams",
               "no upstream: at least one upstream is required");
  }
  for (size_t i = 0; i < config.upstreams.size(); ++i) {
    const std::string& name = config.upstreams[i].name;
    std::string path = strCat("upstreams[", marks.upstream_indices[i], "].name");
    const SourceLocation& where = marks.upstream_names[i];
    bool valid = !name.empty();
    for (char c : name) valid = valid && isNameChar(c);
    if (!valid) {
      errors.add(where, path,
                 strCat("upstream name \"", name,
                        "\" must be non-empty letters, digits, '.', '_' and '-'"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (config.upstreams[j].name != name) continue;
      errors.add(where, path,
                 strCat("duplicate upstream name \"", name, "\" (first defined at ",
                        formatLocation(marks.upstream_names[j]), ")"));
      break;
    }
  }
}

std::string definedUpstreams(const GatewayConfig& config) {
  if (config.upstreams.empty()) return "no upstream is defined";
  std::string list = "defined: ";
  for (size_t i = 0; i < config.upstreams.size(); ++i) {
    list += strCat(i ? ", " : "", config.upstreams[i].name);
  }
  return list;
}

// Whether route `earlier` already takes every request `later` would match.
bool shadows(const RouteConfig& earlier, const RouteConfig& later) {
  return earlier.isCatchAll() || earlier.model == later.model;
}

void checkRoutes(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  if (!marks.route_written) {
    errors.add(marks.routes.value_or(marks.file_start), "routes",
               "no route: at least one route is required (e.g. - match: { model: \"*\" })");
  }
  for (size_t i = 0; i < config.routes.size(); ++i) {
    const RouteConfig& route = config.routes[i];
    std::string model_path = strCat("routes[", marks.route_indices[i], "].match.model");
    const SourceLocation& model_where = marks.route_models[i];
    if (route.model.empty()) {
      errors.add(model_where, model_path, "a model name must not be empty");
    } else if (!route.isCatchAll() && route.model.find('*') != std::string::npos) {
      errors.add(model_where, model_path,
                 strCat("\"", route.model, "\": '*' matches only on its own (any model); "
                        "prefix matching comes with routing"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (!shadows(config.routes[j], route)) continue;
      std::string why = config.routes[j].isCatchAll()
                            ? "comes after the catch-all"
                            : strCat("model \"", route.model, "\" is already matched by");
      errors.add(model_where, model_path,
                 strCat("unreachable route: ", why, " routes[", marks.route_indices[j], "] at ",
                        formatLocation(config.routes[j].where)));
      break;
    }
    bool known = !marks.upstream_names_known;
    for (const UpstreamConfig& u : config.upstreams) known = known || u.name == route.upstream;
    if (!known) {
      errors.add(marks.route_upstreams[i], strCat("routes[", marks.route_indices[i], "].upstream"),
                 strCat("upstream \"", route.upstream, "\" is not defined (",
                        definedUpstreams(config), ")"));
    }
  }
}

}  // namespace

void checkConfig(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  checkListeners(config, marks, errors);
  checkUpstreams(config, marks, errors);
  checkRoutes(config, marks, errors);
}

}  // namespace infergate::config
