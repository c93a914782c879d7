// Property: the route table picks what the documented rules pick.
//   - match() returns the first route, in file order, whose conditions all hold (the
//     reference below reads the conditions straight from the config, so the exact-name
//     index and Route::matches are both checked);
//   - pick() sends each target exactly its weight's share of 100 evenly spread draws, and
//     any draw to one of the route's targets;
//   - the loader, given the same routes as YAML, refuses exactly the routes an earlier
//     route shadows (README's rule), reads back every route it accepts unchanged, and a
//     route it calls unreachable is never the match of any request.
// Names come from a three-letter alphabet so that exact names, prefixes, versions and
// header conditions overlap often.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/text.h"
#include "config/config_loader.h"
#include "routing/route_table.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate;
using Kind = config::RouteMatch::Model;

namespace {

constexpr size_t kUpstreams = 3;
constexpr std::string_view kHeaderNames[] = {"x-a", "x-b"};
constexpr std::string_view kValues[] = {"1", "2"};

struct RouteSpec {
  Kind kind = Kind::kAny;
  std::string model;
  std::string version;
  std::vector<std::pair<std::string, std::string>> headers;  // sorted by name
  std::vector<std::pair<size_t, uint32_t>> targets;          // (upstream, weight)
};

std::string shortName(FuzzReader& in) {
  std::string name;
  size_t length = 1 + in.below(3);
  for (size_t i = 0; i < length; ++i) name.push_back(static_cast<char>('a' + in.below(3)));
  return name;
}

std::vector<std::pair<size_t, uint32_t>> readTargets(FuzzReader& in) {
  size_t count = 1 + in.below(3);
  size_t first = in.below(kUpstreams);
  if (count == 1) return {{first, 100}};
  std::vector<std::pair<size_t, uint32_t>> targets;
  uint32_t left = 100;
  for (size_t i = 0; i < count; ++i) {
    size_t upstream = (first + i) % kUpstreams;
    // Leave at least 1 for each target still to come.
    uint32_t weight = i + 1 == count ? left : 1 + static_cast<uint32_t>(in.below(left - (count - i - 1)));
    targets.emplace_back(upstream, weight);
    left -= weight;
  }
  return targets;
}

RouteSpec readRoute(FuzzReader& in) {
  RouteSpec route;
  route.kind = static_cast<Kind>(in.below(3));
  if (route.kind != Kind::kAny) route.model = shortName(in);
  size_t version = in.below(3);
  if (version > 0) route.version = std::string(kValues[version - 1]);
  for (std::string_view name : kHeaderNames) {
    size_t value = in.below(3);
    if (value > 0) route.headers.emplace_back(std::string(name), std::string(kValues[value - 1]));
  }
  route.targets = readTargets(in);
  return route;
}

class Headers : public routing::RequestHeaders {
 public:
  std::vector<std::pair<std::string, std::string>> values;
  std::optional<std::string_view> find(std::string_view name) const override {
    for (const auto& [n, v] : values) {
      if (n == name) return std::string_view(v);
    }
    return std::nullopt;
  }
};

struct Request {
  std::string model;
  std::string version;
  Headers headers;
};

bool modelHolds(const RouteSpec& route, std::string_view model) {
  switch (route.kind) {
    case Kind::kAny: return true;
    case Kind::kExact: return model == route.model;
    case Kind::kPrefix: return model.substr(0, route.model.size()) == route.model;
  }
  return false;
}

bool referenceMatches(const RouteSpec& route, const Request& request) {
  if (!modelHolds(route, request.model)) return false;
  if (!route.version.empty() && route.version != request.version) return false;
  for (const auto& [name, value] : route.headers) {
    auto found = request.headers.find(name);
    if (!found || *found != value) return false;
  }
  return true;
}

// README: "the earlier model condition covers the later one, the earlier version, if
// any, is the later's, and each earlier header condition is also a later one".
bool referenceShadows(const RouteSpec& earlier, const RouteSpec& later) {
  bool model_covers = false;
  switch (earlier.kind) {
    case Kind::kAny: model_covers = true; break;
    case Kind::kExact: model_covers = later.kind == Kind::kExact && later.model == earlier.model; break;
    case Kind::kPrefix:
      model_covers = later.kind != Kind::kAny && later.model.starts_with(earlier.model);
      break;
  }
  if (!model_covers) return false;
  if (!earlier.version.empty() && earlier.version != later.version) return false;
  return std::all_of(earlier.headers.begin(), earlier.headers.end(), [&later](const auto& h) {
    return std::find(later.headers.begin(), later.headers.end(), h) != later.headers.end();
  });
}

config::GatewayConfig buildConfig(const std::vector<RouteSpec>& specs) {
  config::GatewayConfig config;
  for (size_t i = 0; i < kUpstreams; ++i) {
    config::UpstreamConfig upstream;
    upstream.name = "u" + std::to_string(i);
    config.upstreams.push_back(std::move(upstream));
  }
  for (const RouteSpec& spec : specs) {
    config::RouteConfig route;
    route.match.kind = spec.kind;
    route.match.model = spec.model;
    route.match.version = spec.version;
    for (const auto& [name, value] : spec.headers) route.match.headers.push_back({name, value, {}});
    for (const auto& [upstream, weight] : spec.targets) {
      route.targets.push_back({"u" + std::to_string(upstream), weight, {}});
    }
    config.routes.push_back(std::move(route));
  }
  return config;
}

std::string yamlFor(const std::vector<RouteSpec>& specs) {
  std::string yaml =
      "listeners:\n  http: { address: \"127.0.0.1:0\" }\nupstreams:\n"
      "  - { name: u0, protocol: builtin }\n  - { name: u1, protocol: builtin }\n"
      "  - { name: u2, protocol: builtin }\nroutes:\n";
  for (const RouteSpec& spec : specs) {
    yaml += "  - match: { ";
    switch (spec.kind) {
      case Kind::kAny: yaml += "model: \"*\""; break;
      case Kind::kExact: yaml += "model: \"" + spec.model + "\""; break;
      case Kind::kPrefix: yaml += "model_prefix: \"" + spec.model + "\""; break;
    }
    if (!spec.version.empty()) yaml += ", version: \"" + spec.version + "\"";
    if (!spec.headers.empty()) {
      yaml += ", headers: {";
      for (size_t i = 0; i < spec.headers.size(); ++i) {
        yaml += (i ? ", " : " ") + spec.headers[i].first + ": \"" + spec.headers[i].second + "\"";
      }
      yaml += " }";
    }
    yaml += " }\n";
    if (spec.targets.size() == 1) {
      yaml += "    upstream: u" + std::to_string(spec.targets[0].first) + "\n";
      continue;
    }
    yaml += "    split: [";
    for (size_t i = 0; i < spec.targets.size(); ++i) {
      yaml += (i ? ", " : " ") + std::string("{ upstream: u") +
              std::to_string(spec.targets[i].first) +
              ", weight: " + std::to_string(spec.targets[i].second) + " }";
    }
    yaml += " ]\n";
  }
  return yaml;
}

// Requests near every route's conditions: its own name or prefix and that prefix
// extended by a letter outside the alphabet, or an unrelated name; each version; its own
// header conditions, none, or every header set to one value. Together they reach every
// route that some request reaches: each stands for the requests it differs from only in
// ways that meet fewer earlier conditions (a longer name, another version, more headers).
std::vector<Request> requestsFor(const std::vector<RouteSpec>& specs) {
  using HeaderSet = std::vector<std::pair<std::string, std::string>>;
  std::vector<HeaderSet> common = {{}};
  for (std::string_view value : kValues) {
    common.push_back({{std::string(kHeaderNames[0]), std::string(value)},
                      {std::string(kHeaderNames[1]), std::string(value)}});
  }
  std::vector<Request> requests;
  auto add = [&requests](const std::string& model, const HeaderSet& headers) {
    for (std::string_view version : {"", "1", "2", "z"}) {
      Request request{model, std::string(version), {}};
      request.headers.values = headers;
      requests.push_back(std::move(request));
    }
  };
  for (const HeaderSet& headers : common) add("z", headers);
  for (const RouteSpec& spec : specs) {
    if (spec.kind == Kind::kAny) add("z", spec.headers);
    for (const std::string& model : {spec.model, spec.model + "z"}) {
      if (spec.kind == Kind::kAny || (spec.kind == Kind::kExact && model != spec.model)) continue;
      add(model, spec.headers);
      for (const HeaderSet& headers : common) add(model, headers);
    }
  }
  return requests;
}

// The route indices the loader's message calls unreachable ("routes[N].match...:
// unreachable route: ..."); every other line is a property violation (the generator
// only writes valid routes).
std::vector<size_t> unreachableRoutes(std::string_view message) {
  std::vector<size_t> indices;
  while (!message.empty()) {
    size_t end = message.find('\n');
    std::string_view line = message.substr(0, end);
    size_t at = line.find(": routes[");
    FUZZ_CHECK(at != std::string_view::npos);
    FUZZ_CHECK(line.find(".match.model") != std::string_view::npos);
    FUZZ_CHECK(line.find(": unreachable route: ") != std::string_view::npos);
    size_t close = line.find(']', at);
    FUZZ_CHECK(close != std::string_view::npos);
    std::optional<uint64_t> index = codecs::parseUint64(line.substr(at + 9, close - at - 9));
    FUZZ_CHECK(index.has_value());
    indices.push_back(*index);
    if (end == std::string_view::npos) break;
    message.remove_prefix(end + 1);
  }
  return indices;
}

// `hits`: the route each of the requests matched, by index (specs.size(): none).
void checkLoaderAgrees(const std::vector<RouteSpec>& specs, const std::vector<size_t>& hits) {
  std::vector<bool> shadowed(specs.size(), false);
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t j = 0; j < i && !shadowed[i]; ++j) shadowed[i] = referenceShadows(specs[j], specs[i]);
  }
  auto parsed = config::parseConfig(yamlFor(specs), "fuzz.yaml");
  if (parsed.ok()) {
    FUZZ_CHECK(std::none_of(shadowed.begin(), shadowed.end(), [](bool b) { return b; }));
    FUZZ_CHECK(parsed->routes.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const config::RouteConfig& route = parsed->routes[i];
      FUZZ_CHECK(route.match.kind == specs[i].kind && route.match.model == specs[i].model);
      FUZZ_CHECK(route.match.version == specs[i].version);
      FUZZ_CHECK(route.match.headers.size() == specs[i].headers.size());
      for (size_t h = 0; h < specs[i].headers.size(); ++h) {
        FUZZ_CHECK(route.match.headers[h].name == specs[i].headers[h].first);
        FUZZ_CHECK(route.match.headers[h].value == specs[i].headers[h].second);
      }
      FUZZ_CHECK(route.targets.size() == specs[i].targets.size());
      for (size_t t = 0; t < specs[i].targets.size(); ++t) {
        FUZZ_CHECK(route.targets[t].upstream == "u" + std::to_string(specs[i].targets[t].first));
        FUZZ_CHECK(route.targets[t].weight == specs[i].targets[t].second);
      }
    }
    return;
  }
  checkIsCleanError(parsed.status());
  std::vector<size_t> reported = unreachableRoutes(std::string(parsed.status().message()));
  for (size_t i = 0; i < specs.size(); ++i) {
    bool named = std::find(reported.begin(), reported.end(), i) != reported.end();
    FUZZ_CHECK(named == shadowed[i]);
    if (named) FUZZ_CHECK(std::find(hits.begin(), hits.end(), i) == hits.end());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader in(data, size);
  std::vector<RouteSpec> specs;
  size_t count = 1 + in.below(8);
  for (size_t i = 0; i < count; ++i) specs.push_back(readRoute(in));

  auto table = routing::RouteTable::build(buildConfig(specs));
  FUZZ_CHECK(table.ok());
  std::vector<size_t> hits;
  for (const Request& request : requestsFor(specs)) {
    const routing::Route* hit = (*table)->match({request.model, request.version, &request.headers});
    std::optional<size_t> expected;
    for (size_t i = 0; i < specs.size() && !expected; ++i) {
      if (referenceMatches(specs[i], request)) expected = i;
    }
    FUZZ_CHECK(expected.has_value() == (hit != nullptr));
    if (hit != nullptr) FUZZ_CHECK(hit->index == *expected);
    hits.push_back(hit != nullptr ? hit->index : specs.size());
  }

  for (size_t i = 0; i < specs.size(); ++i) {
    const routing::Route& route = (*table)->routes()[i];
    // Draw k of 100 lands on point k of [0, 100): each target gets its weight of them.
    std::vector<uint32_t> hits(kUpstreams, 0);
    for (uint64_t k = 0; k < 100; ++k) {
      uint64_t draw = (((k << 32) + 99) / 100) << 32;
      size_t upstream = route.pick(draw);
      FUZZ_CHECK(upstream < kUpstreams);
      ++hits[upstream];
    }
    for (const auto& [upstream, weight] : specs[i].targets) FUZZ_CHECK(hits[upstream] == weight);
    size_t any = route.pick(in.u64());
    FUZZ_CHECK(std::any_of(specs[i].targets.begin(), specs[i].targets.end(),
                           [any](const auto& t) { return t.first == any; }));
  }
  checkLoaderAgrees(specs, hits);
  return 0;
}
