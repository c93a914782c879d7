#include "routing/route_table.h"

#include <span>
#include <unordered_map>

namespace infergate::routing {
namespace {

using codecs::strCat;
using Model = config::RouteMatch::Model;

// "routes[2] (model_prefix llm- version 2 x-tenant=beta)": the route as logs name it.
std::string describe(size_t index, const config::RouteMatch& match) {
  std::string out = strCat("routes[", index, "] (");
  switch (match.kind) {
    case Model::kAny: out += "model *"; break;
    case Model::kExact: out += strCat("model ", match.model); break;
    case Model::kPrefix: out += strCat("model_prefix ", match.model); break;
  }
  if (!match.version.empty()) out += strCat(" version ", match.version);
  for (const config::HeaderValue& h : match.headers) out += strCat(" ", h.name, "=", h.value);
  return out + ")";
}

}  // namespace

bool Route::matches(const RouteRequest& request) const {
  switch (match.kind) {
    case Model::kAny: break;
    case Model::kExact:
      if (request.model != match.model) return false;
      break;
    case Model::kPrefix:
      if (!request.model.starts_with(match.model)) return false;
      break;
  }
  if (!match.version.empty() && request.version != match.version) return false;
  for (const config::HeaderValue& condition : match.headers) {
    if (request.headers == nullptr) return false;
    std::optional<std::string_view> value = request.headers->find(condition.name);
    if (!value || *value != condition.value) return false;
  }
  return true;
}

size_t Route::pick(uint64_t draw) const {
  // A point in [0, 100) from the draw's high 32 bits by multiply-and-shift (Lemire): no
  // division, and each point gets 2^32 / 100 draws give or take one, a bias of 2.3e-8.
  // (`draw % 100` would read the low bits, the weakest of some generators.)
  uint32_t point = static_cast<uint32_t>(((draw >> 32) * 100) >> 32);
  uint32_t below = 0;
  for (const Target& target : targets) {
    below += target.weight;
    if (point < below) return target.upstream;
  }
  return targets.back().upstream;  // unreachable: build() checked the weights make 100
}

codecs::StatusOr<std::shared_ptr<const RouteTable>> RouteTable::build(
    const config::GatewayConfig& config) {
  auto table = std::make_shared<RouteTable>();
  std::unordered_map<std::string_view, size_t> upstream_index;
  for (const config::UpstreamConfig& upstream : config.upstreams) {
    if (!upstream_index.emplace(upstream.name, table->upstream_names_.size()).second) {
      return codecs::invalidArgument("upstream \"", upstream.name, "\" is defined twice");
    }
    table->upstream_names_.push_back(upstream.name);
  }
  auto find = [&upstream_index](std::string_view name) -> std::optional<size_t> {
    auto it = upstream_index.find(name);
    if (it == upstream_index.end()) return std::nullopt;
    return it->second;
  };

  table->routes_.reserve(config.routes.size());
  for (size_t i = 0; i < config.routes.size(); ++i) {
    const config::RouteConfig& source = config.routes[i];
    Route route;
    route.index = i;
    route.match = source.match;
    route.description = describe(i, source.match);
    route.name = source.name.empty() ? codecs::strCat("routes[", i, "]") : source.name;
    route.rewrite_model = source.rewrite_model;
    route.rewrite_version = source.rewrite_version;
    route.timeout = std::chrono::milliseconds(source.timeout_ms);
    uint64_t total = 0;  // 64 bits: hand-built weights must not wrap around to 100
    for (const config::RouteTarget& target : source.targets) {
      std::optional<size_t> upstream = find(target.upstream);
      if (!upstream) {
        return codecs::invalidArgument(route.description, ": upstream \"", target.upstream,
                                       "\" is not defined");
      }
      route.targets.push_back({*upstream, target.weight});
      total += target.weight;
    }
    if (route.targets.empty() || total != 100) {
      return codecs::invalidArgument(route.description, ": target weights add up to ", total,
                                     ", not 100");
    }
    if (!source.mirror.empty()) {
      route.mirror = find(source.mirror);
      if (!route.mirror) {
        return codecs::invalidArgument(route.description, ": mirror upstream \"",
                                       source.mirror, "\" is not defined");
      }
    }
    if (route.match.kind == Model::kExact) {
      table->exact_[route.match.model].push_back(i);
    } else {
      table->general_.push_back(i);
    }
    table->routes_.push_back(std::move(route));
  }
  return std::shared_ptr<const RouteTable>(std::move(table));
}

const Route* RouteTable::match(const RouteRequest& request) const {
  // Two lists of route indices, each ascending: the exact routes for this name and the
  // general ones. Walking them merged tries candidates in file order, so the first that
  // matches is the route a plain walk over every route would find.
  std::span<const size_t> exact;
  if (auto it = exact_.find(request.model); it != exact_.end()) exact = it->second;
  std::span<const size_t> general = general_;
  while (!exact.empty() || !general.empty()) {
    bool take_exact = general.empty() || (!exact.empty() && exact.front() < general.front());
    std::span<const size_t>& from = take_exact ? exact : general;
    const Route& route = routes_[from.front()];
    from = from.subspan(1);
    if (route.matches(request)) return &route;
  }
  return nullptr;
}

}  // namespace infergate::routing
