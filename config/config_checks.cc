#include "config/config_checks.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

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
    std::string path = strCat("upstreams[", marks.upstream_marks[i].index, "].name");
    const SourceLocation& where = marks.upstream_marks[i].name;
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
                        formatLocation(marks.upstream_marks[j].name), ")"));
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

bool upstreamKnown(const GatewayConfig& config, const LoadMarks& marks, std::string_view name) {
  // With a name unreadable, the route may mean that upstream: say nothing.
  return !marks.upstream_names_known || config.findUpstream(name) != nullptr;
}

// Whether every model name `later`'s model condition takes, `earlier`'s takes too.
bool modelCovers(const RouteMatch& earlier, const RouteMatch& later) {
  switch (earlier.kind) {
    case RouteMatch::Model::kAny: return true;
    case RouteMatch::Model::kPrefix:
      return later.kind != RouteMatch::Model::kAny && later.model.starts_with(earlier.model);
    case RouteMatch::Model::kExact:
      return later.kind == RouteMatch::Model::kExact && later.model == earlier.model;
  }
  return false;
}

// Whether route `earlier` already takes every request `later` would match: its model
// condition is wider, and each of its other conditions is one `later` has too. (A
// conservative test: routes whose conditions only together cover a later one, such as
// a route per version, are not caught.)
bool shadows(const RouteMatch& earlier, const RouteMatch& later) {
  if (!modelCovers(earlier, later)) return false;
  if (!earlier.version.empty() && earlier.version != later.version) return false;
  return std::all_of(earlier.headers.begin(), earlier.headers.end(), [&later](const auto& e) {
    return std::any_of(later.headers.begin(), later.headers.end(), [&e](const auto& l) {
      return l.name == e.name && l.value == e.value;
    });
  });
}

// `model_prefix "llm-", version "2", header x-tenant: "beta"`, for messages.
std::string describe(const RouteMatch& match) {
  std::string out;
  switch (match.kind) {
    case RouteMatch::Model::kAny: out = "model \"*\""; break;
    case RouteMatch::Model::kExact: out = strCat("model \"", match.model, "\""); break;
    case RouteMatch::Model::kPrefix: out = strCat("model_prefix \"", match.model, "\""); break;
  }
  if (!match.version.empty()) out += strCat(", version \"", match.version, "\"");
  for (const HeaderValue& h : match.headers) {
    out += strCat(", header ", h.name, ": \"", h.value, "\"");
  }
  return out;
}

void checkShadowed(const GatewayConfig& config, const LoadMarks& marks, size_t i,
                   ConfigErrors& errors) {
  const RouteMatch& later = config.routes[i].match;
  for (size_t j = 0; j < i; ++j) {
    const RouteMatch& earlier = config.routes[j].match;
    if (!shadows(earlier, later)) continue;
    std::string first = strCat("routes[", marks.route_marks[j].index, "] at ",
                               formatLocation(config.routes[j].where));
    bool catch_all = earlier.kind == RouteMatch::Model::kAny && earlier.version.empty() &&
                     earlier.headers.empty();
    errors.add(marks.route_marks[i].model, marks.route_marks[i].model_path,
               catch_all ? strCat("unreachable route: comes after the catch-all ", first)
                         : strCat("unreachable route: every request it matches is taken "
                                  "first by ", first, " (", describe(earlier), ")"));
    return;
  }
}

void checkTargets(const GatewayConfig& config, const LoadMarks& marks, size_t i,
                  ConfigErrors& errors) {
  const RouteConfig& route = config.routes[i];
  const RouteMarks& m = marks.route_marks[i];
  uint64_t total = 0;
  for (size_t k = 0; k < route.targets.size(); ++k) {
    const RouteTarget& target = route.targets[k];
    total += target.weight;
    if (!upstreamKnown(config, marks, target.upstream)) {
      errors.add(target.where, m.target_paths[k],
                 strCat("upstream \"", target.upstream, "\" is not defined (",
                        definedUpstreams(config), ")"));
    }
  }
  if (m.split && total != 100) {
    errors.add(*m.split, strCat("routes[", m.index, "].split"),
               strCat("weights add up to ", total, ", not 100"));
  }
  if (route.mirror.empty()) return;
  std::string mirror_path = strCat("routes[", m.index, "].mirror");
  if (!upstreamKnown(config, marks, route.mirror)) {
    errors.add(m.mirror, mirror_path,
               strCat("upstream \"", route.mirror, "\" is not defined (",
                      definedUpstreams(config), ")"));
  }
  for (const RouteTarget& target : route.targets) {
    if (target.upstream != route.mirror) continue;
    // The copy would go where the request already goes: twice the traffic, no insight.
    errors.add(m.mirror, mirror_path,
               strCat("mirror \"", route.mirror, "\" is also a target of this route; "
                      "mirror to another upstream"));
    break;
  }
}

void checkRoutes(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  if (!marks.route_written) {
    errors.add(marks.routes.value_or(marks.file_start), "routes",
               "no route: at least one route is required (e.g. - match: { model: \"*\" })");
  }
  for (size_t i = 0; i < config.routes.size(); ++i) {
    checkShadowed(config, marks, i, errors);
    checkTargets(config, marks, i, errors);
    const std::string& name = config.routes[i].name;
    for (size_t j = 0; j < i && !name.empty(); ++j) {
      if (config.routes[j].name != name) continue;
      errors.add(marks.route_marks[i].name, strCat("routes[", marks.route_marks[i].index, "].name"),
                 strCat("duplicate route name \"", name, "\" (first used at ",
                        formatLocation(marks.route_marks[j].name), "): metrics would merge them"));
      break;
    }
  }
}

}  // namespace

void checkConfig(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors) {
  checkListeners(config, marks, errors);
  checkUpstreams(config, marks, errors);
  checkRoutes(config, marks, errors);
  checkAuth(config, errors);
}

}  // namespace infergate::config
