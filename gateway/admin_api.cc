#include "gateway/admin_api.h"

#include "codecs/json_writer.h"
#include "gateway/frontends/http_frontend.h"

namespace infergate::gateway {
namespace {

using http::HttpResponse;

const char* policyName(config::LoadBalancingConfig::Policy policy) {
  switch (policy) {
    case config::LoadBalancingConfig::Policy::kRoundRobin:
      return "round_robin";
    case config::LoadBalancingConfig::Policy::kLeastRequest:
      return "least_request";
    case config::LoadBalancingConfig::Policy::kLoadAware:
      return "load_aware";
  }
  return "least_request";
}

const char* matchKind(config::RouteMatch::Model kind) {
  switch (kind) {
    case config::RouteMatch::Model::kAny:
      return "any";
    case config::RouteMatch::Model::kExact:
      return "exact";
    case config::RouteMatch::Model::kPrefix:
      return "prefix";
  }
  return "any";
}

void writeHeader(codecs::JsonWriter& w, const RouterSnapshot& snapshot) {
  w.key("generation").uint64(snapshot.generation);
  w.key("config_hash").string(snapshot.config_hash);
  w.key("source").string(snapshot.config->source);
}

void writeEndpoint(codecs::JsonWriter& w, const upstream::Endpoint& e,
                   const std::map<std::string, size_t>& bindings) {
  const auto now = upstream::Endpoint::Clock::now();
  const upstream::Endpoint::Counters c = e.counters();
  w.beginObject();
  w.key("address").string(e.key());
  w.key("tier").uint64(e.tier());
  w.key("health").string(upstream::activeHealthName(e.activeHealth()));
  w.key("ejected").boolean(e.ejected(now));
  int64_t ejected_ms = 0;
  if (auto until = e.ejectedUntil(); until && *until > now) {
    ejected_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*until - now).count();
  }
  w.key("ejected_for_ms").int64(ejected_ms);
  w.key("routable").boolean(e.routable(now));
  w.key("in_flight").uint64(e.outstanding());
  w.key("queue").uint64(e.queueSignal());
  w.key("requests").uint64(c.requests);
  w.key("failures").uint64(c.failures);
  w.key("consecutive_failures").uint64(c.consecutive_failures);
  w.key("ejections").uint64(c.ejections);
  w.key("readmissions").uint64(c.readmissions);
  w.key("probes_good").uint64(c.probes_good);
  w.key("probes_bad").uint64(c.probes_bad);
  w.key("good_streak").uint64(c.good_streak);
  w.key("bad_streak").uint64(c.bad_streak);
  auto bound = bindings.find(e.key());
  w.key("sequences").uint64(bound == bindings.end() ? 0 : bound->second);
  if (const upstream::EndpointHandoff* h = e.handoff()) {
    const upstream::EndpointHandoff::Counters hc = h->counters();
    w.key("handoff").beginObject();
    w.key("pool").string(h->poolName());
    w.key("pool_ready").boolean(hc.pool_ready);
    w.key("refused").boolean(hc.refused);
    w.key("pool_registrations").uint64(hc.pool_registrations);
    w.key("region_registrations").uint64(hc.region_registrations);
    w.key("refusals").uint64(hc.refusals);
    w.key("pool_bytes_in").uint64(hc.pool_bytes_in);
    w.key("pool_bytes_in_place").uint64(hc.pool_bytes_in_place);
    w.key("pool_bytes_out").uint64(hc.pool_bytes_out);
    w.key("passthrough_bytes").uint64(hc.passthrough_bytes);
    w.key("inline_bytes").uint64(hc.inline_bytes);
    w.key("pool_full").uint64(hc.pool_full);
    w.key("inline_retries").uint64(hc.inline_retries);
    w.key("pool_bytes").uint64(hc.pool_bytes);
    w.key("pool_bytes_in_use").uint64(hc.pool_bytes_in_use);
    w.key("pool_slots_in_use").uint64(hc.pool_slots_in_use);
    w.endObject();
  }
  w.endObject();
}

}  // namespace

AdminApi::AdminApi(std::shared_ptr<Router> router, Reload reload, std::shared_ptr<const Security> security)
    : router_(std::move(router)), reload_(std::move(reload)), security_(std::move(security)) {}

bool AdminApi::loopbackClient(std::string_view client_address) {
  return client_address == "unix" || client_address.starts_with("127.") ||
         client_address.starts_with("[::1]:") || client_address.starts_with("[::ffff:127.");
}

std::string AdminApi::routesJson(const RouterSnapshot& snapshot) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject();
  writeHeader(w, snapshot);
  const std::vector<std::string>& names = snapshot.table->upstreams();
  w.key("routes").beginArray();
  for (const routing::Route& r : snapshot.table->routes()) {
    w.beginObject();
    w.key("index").uint64(r.index);
    w.key("description").string(r.description);
    w.key("match").beginObject();
    w.key("model_kind").string(matchKind(r.match.kind));
    w.key("model").string(r.match.model);
    w.key("version").string(r.match.version);
    w.key("headers").beginObject();
    for (const config::HeaderValue& h : r.match.headers) w.key(h.name).string(h.value);
    w.endObject();
    w.endObject();
    w.key("targets").beginArray();
    for (const routing::Route::Target& t : r.targets) {
      w.beginObject().key("upstream").string(names[t.upstream]).key("weight").uint64(t.weight).endObject();
    }
    w.endArray();
    w.key("mirror");
    if (r.mirror) {
      w.string(names[*r.mirror]);
    } else {
      w.null();
    }
    w.key("rewrite").beginObject();
    w.key("model").string(r.rewrite_model).key("version").string(r.rewrite_version);
    w.endObject();
    w.key("timeout_ms").int64(r.timeout.count());
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return out;
}

std::string AdminApi::upstreamsJson(const RouterSnapshot& snapshot) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject();
  writeHeader(w, snapshot);
  w.key("upstreams").beginArray();
  for (const auto& u : *snapshot.upstreams) {
    w.beginObject();
    w.key("name").string(u->name());
    w.key("protocol").string(config::protocolName(u->protocol()));
    w.key("reachable").boolean(u->reachable());
    if (const auto& fleet = u->fleet()) {
      const upstream::UpstreamFleet::Counters c = fleet->counters();
      std::map<std::string, size_t> bindings;
      for (auto& [endpoint, count] : fleet->affinity().countsByEndpoint()) bindings[endpoint] = count;
      w.key("policy").string(policyName(u->config().load_balancing.policy));
      w.key("in_flight").uint64(c.in_flight);
      w.key("queued").uint64(c.queued);
      w.key("shed").uint64(c.shed);
      w.key("retries").uint64(c.retries);
      w.key("retries_refused").uint64(c.retries_refused);
      w.key("affinity_lost").uint64(c.affinity_lost);
      w.key("sequences").uint64(fleet->affinity().size());
      w.key("endpoints").beginArray();
      std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = fleet->endpoints();
      for (const auto& e : *endpoints) writeEndpoint(w, *e, bindings);
      w.endArray();
    }
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return out;
}

void AdminApi::handle(const std::shared_ptr<http::HttpExchange>& exchange) {
  const http::HttpRequest& r = exchange->request();
  auto header = frontends::headerLookup(r);
  tls::ServerSession* session = exchange->tlsSession();
  codecs::StatusOr<std::optional<tls::Principal>> admitted = security_->admitAdmin(
      header, session != nullptr ? session->peer() : nullptr, /*write=*/r.method != "GET",
      loopbackClient(exchange->info().client_address));
  if (!admitted.ok()) return exchange->respond(frontends::refusalResponse(admitted.status()));
  if (*admitted) exchange->info().principal = (*admitted)->name;
  const std::string_view path = r.path();
  auto only = [&](std::string_view method) {
    if (r.method == method) return true;
    HttpResponse refused = HttpResponse::jsonError(405, "Method Not Allowed");
    refused.header("Allow", std::string(method));
    exchange->respond(std::move(refused));
    return false;
  };
  if (path == "/admin/routes") {
    if (only("GET")) exchange->respond(HttpResponse::json(200, routesJson(*router_->snapshot())));
    return;
  }
  if (path == "/admin/upstreams") {
    if (only("GET")) exchange->respond(HttpResponse::json(200, upstreamsJson(*router_->snapshot())));
    return;
  }
  if (path == "/admin/reload") {
    if (!only("POST")) return;
    reload_([exchange, router = router_](codecs::Status status) {
      exchange->loop().post([exchange, router, status] {
        if (!status.ok()) {
          return exchange->respond(HttpResponse::jsonError(400, codecs::messageOf(status)));
        }
        std::shared_ptr<const RouterSnapshot> now = router->snapshot();
        std::string body;
        codecs::JsonWriter w(body);
        w.beginObject().key("reloaded").boolean(true);
        w.key("generation").uint64(now->generation).key("config_hash").string(now->config_hash);
        w.endObject();
        exchange->respond(HttpResponse::json(200, std::move(body)));
      });
    });
    return;
  }
  exchange->respond(HttpResponse::jsonError(404, "Not Found"));
}

}  // namespace infergate::gateway
