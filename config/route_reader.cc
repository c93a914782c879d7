// One `routes` entry: match, targets (upstream or split), rewrite, timeout, mirror.
// Checks that need other entries (upstreams defined, weights adding up to 100, routes
// shadowed by earlier ones) are in config_checks.cc.

#include <algorithm>

#include "config/section_readers.h"

namespace infergate::config {
namespace {

using codecs::strCat;
using Model = RouteMatch::Model;

constexpr uint64_t kMaxWeight = 100;

// `match.model`: an exact name, or "*" for any. A '*' anywhere else is not a wildcard
// (prefixes have their own key), and is refused rather than matched literally.
bool readModel(YamlReader& reader, const YamlValue& value, RouteMatch& match) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return false;
  if (*text == "*") {
    match.kind = Model::kAny;
    return true;
  }
  if (text->empty()) {
    reader.error(value, "a model name must not be empty (\"*\" matches any model)");
    return false;
  }
  if (text->find('*') != std::string::npos) {
    // "llm-*" is almost certainly meant as a prefix: say exactly how to write it.
    std::string hint = "; prefixes are matched with model_prefix";
    if (text->find('*') == text->size() - 1) {
      hint = strCat("; for a prefix write model_prefix: \"", text->substr(0, text->size() - 1),
                    "\"");
    }
    reader.error(value,
                 strCat("\"", *text, "\": '*' matches only on its own (any model)", hint));
    return false;
  }
  match.kind = Model::kExact;
  match.model = std::move(*text);
  return true;
}

bool readModelPrefix(YamlReader& reader, const YamlValue& value, RouteMatch& match) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return false;
  if (text->empty()) {
    reader.error(value, "a model prefix must not be empty (for any model write model: \"*\")");
    return false;
  }
  if (text->find('*') != std::string::npos) {
    reader.error(value, strCat("\"", *text, "\": a prefix is matched as written, with no '*'"));
    return false;
  }
  match.kind = Model::kPrefix;
  match.model = std::move(*text);
  return true;
}

// False when any part of the match could not be read (each part's error is recorded).
bool readMatch(YamlReader& reader, const YamlValue& value, RouteMatch& match,
               RouteMarks& marks) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"model", "model_prefix", "version", "headers"});
  if (!map) return false;
  const YamlValue* model = map->find("model");
  const YamlValue* prefix = map->find("model_prefix");
  bool ok = false;
  if (model && prefix) {
    reader.error(*prefix, "give model or model_prefix, not both");
  } else if (model) {
    ok = readModel(reader, *model, match);
  } else if (prefix) {
    ok = readModelPrefix(reader, *prefix, match);
  } else {
    reader.require(*map, "model", "an exact model name, \"*\" for any, or model_prefix");
  }
  if (ok) {
    const YamlValue* written = model ? model : prefix;
    marks.model_path = written->path;
    marks.model = written->where;
  }
  if (const YamlValue* version = map->find("version")) {
    std::optional<std::string> text = reader.string(*version);
    if (text && (text->empty() || *text == "*")) {
      reader.error(*version, "leave version out to match any version");
      ok = false;
    } else if (text) {
      match.version = std::move(*text);
    } else {
      ok = false;
    }
  }
  if (const YamlValue* headers = map->find("headers")) {
    match.headers = readHeaderValues(reader, *headers, HeaderUse::kMatch, &ok);
  }
  return ok;
}

void readSplit(YamlReader& reader, const YamlValue& value, RouteConfig& route,
               RouteMarks& marks) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return;
  bool complete = true;
  if (items->size() < 2) {
    reader.error(value, "a split needs at least two entries (for one, write upstream: NAME)");
    complete = false;
  }
  for (const YamlValue& item : *items) {
    std::optional<YamlMap> map = reader.mapping(item, {"upstream", "weight"});
    const YamlValue* upstream = map ? reader.require(*map, "upstream") : nullptr;
    const YamlValue* weight = map ? reader.require(*map, "weight", "an integer 1-100") : nullptr;
    std::optional<std::string> name = upstream ? reader.string(*upstream) : std::nullopt;
    std::optional<uint64_t> share =
        weight ? reader.unsignedInteger(*weight, 1, kMaxWeight) : std::nullopt;
    if (!name || !share) {
      complete = false;
      continue;
    }
    auto same = std::find_if(route.targets.begin(), route.targets.end(),
                             [&name](const RouteTarget& t) { return t.upstream == *name; });
    if (same != route.targets.end()) {
      reader.error(*upstream, strCat("upstream \"", *name, "\" is already in this split (at line ",
                                     same->where.line, ")"));
      complete = false;
      continue;
    }
    route.targets.push_back({std::move(*name), static_cast<uint32_t>(*share), upstream->where});
    marks.target_paths.push_back(upstream->path);
  }
  // With an entry missing, the sum would be reported wrong for the wrong reason.
  if (complete) marks.split = value.where;
}

void readTargets(YamlReader& reader, const YamlMap& map, RouteConfig& route,
                 RouteMarks& marks) {
  const YamlValue* upstream = map.find("upstream");
  const YamlValue* split = map.find("split");
  if (upstream && split) {
    reader.error(*split, "give upstream or split, not both");
  } else if (upstream) {
    if (std::optional<std::string> name = reader.string(*upstream)) {
      route.targets.push_back({std::move(*name), 100, upstream->where});
      marks.target_paths.push_back(upstream->path);
    }
  } else if (split) {
    readSplit(reader, *split, route, marks);
  } else {
    reader.require(map, "upstream", "or split: [{ upstream: a, weight: 90 }, ...]");
  }
}

void readRewrite(YamlReader& reader, const YamlValue& value, RouteConfig& route) {
  std::optional<YamlMap> map = reader.mapping(value, {"model", "version"});
  if (!map) return;
  if (map->entries.empty()) reader.error(value, "rewrite needs model, version or both");
  auto read = [&reader, &map](std::string_view key, std::string& field) {
    const YamlValue* v = map->find(key);
    std::optional<std::string> text = v ? reader.string(*v) : std::nullopt;
    if (text && text->empty()) {
      reader.error(*v, strCat("a rewritten ", key, " must not be empty (leave it out to keep "
                              "the client's)"));
    } else if (text) {
      field = std::move(*text);
    }
  };
  read("model", route.rewrite_model);
  read("version", route.rewrite_version);
}

}  // namespace

std::optional<RouteConfig> readRoute(YamlReader& reader, const YamlValue& value,
                                     RouteMarks& marks) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"name", "match", "upstream", "split", "rewrite", "timeout_ms", "mirror", "auth"});
  if (!map) return std::nullopt;
  RouteConfig route;
  route.where = map->where;
  bool match_ok = false;
  if (const YamlValue* match = reader.require(*map, "match", "e.g. match: { model: \"*\" }")) {
    match_ok = readMatch(reader, *match, route.match, marks);
  }
  readTargets(reader, *map, route, marks);
  if (const YamlValue* rewrite = map->find("rewrite")) readRewrite(reader, *rewrite, route);
  if (const YamlValue* timeout = map->find("timeout_ms")) {
    // 0 is refused rather than read as "none": leaving the key out already means that.
    if (auto n = reader.unsignedInteger(*timeout, 1, kMaxTimeoutMs)) route.timeout_ms = *n;
  }
  if (const YamlValue* name = map->find("name")) {
    std::optional<std::string> text = reader.string(*name);
    if (text && text->empty()) {
      reader.error(*name, "a route's name must not be empty (leave the key out for routes[N])");
    } else if (text) {
      route.name = std::move(*text);
      marks.name = name->where;
    }
  }
  if (const YamlValue* mirror = map->find("mirror")) {
    std::optional<std::string> name = reader.string(*mirror);
    if (name && name->empty()) {
      reader.error(*mirror, "a mirror must name an upstream");
    } else if (name) {
      route.mirror = std::move(*name);
      marks.mirror = mirror->where;
    }
  }
  if (const YamlValue* auth = map->find("auth")) route.auth = readAccessRule(reader, *auth);
  if (!match_ok || route.targets.empty()) return std::nullopt;
  return route;
}

}  // namespace infergate::config
