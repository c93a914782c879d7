#include "config/validate_command.h"

#include <ostream>
#include <string>

#include "codecs/text.h"
#include "config/config_loader.h"

namespace infergate::config {
namespace {

using codecs::strCat;

constexpr std::string_view kUsage =
    "usage: infergate validate FILE\n"
    "Loads and checks a configuration file without starting the gateway. Prints\n"
    "'FILE: OK' and a summary, or every error as file:line:column: key: message.\n"
    "Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.\n";

constexpr size_t kMaxListed = 4;  // entries named per list in the summary

std::string listeners(const GatewayConfig& c) {
  std::string out;
  auto add = [&out](const char* name, const std::optional<ListenerConfig>& l) {
    if (l) out += strCat(out.empty() ? "" : ", ", name, " ", l->address.text);
  };
  add("http", c.http);
  add("grpc", c.grpc);
  add("metrics", c.metrics);
  return out;
}

// "3 (a, b, c, ...)": the count, then the first few entries.
template <typename T, typename Describe>
std::string list(const std::vector<T>& items, std::string_view separator, Describe describe) {
  std::string out = strCat(items.size(), " (");
  for (size_t i = 0; i < items.size() && i < kMaxListed; ++i) {
    out += strCat(i ? separator : "", describe(items[i]));
  }
  return out + (items.size() > kMaxListed ? strCat(separator, "...)") : ")");
}

// "a: grpc 127.0.0.1:9001 +1", "b: http 10.0.0.2:8000 (json)", "demo: builtin".
std::string describeUpstream(const UpstreamConfig& u) {
  std::string out = strCat(u.name, ": ", protocolName(u.protocol));
  if (!u.endpoints.empty()) out += strCat(" ", u.endpoints[0].text);
  if (u.endpoints.size() > 1) out += strCat(" +", u.endpoints.size() - 1);
  if (u.protocol == UpstreamConfig::Protocol::kHttp &&
      u.http_format == UpstreamConfig::HttpFormat::kJson) {
    out += " (json)";
  }
  return out;
}

// "llm-* v2 [x-tenant=beta] -> a 90%, b 10% rewrite llm-v2 mirror c timeout 5000ms".
std::string describeRoute(const RouteConfig& r) {
  const RouteMatch& m = r.match;
  std::string out = m.kind == RouteMatch::Model::kAny      ? std::string("*")
                    : m.kind == RouteMatch::Model::kPrefix ? strCat(m.model, "*")
                                                           : m.model;
  if (!m.version.empty()) out += strCat(" v", m.version);
  for (size_t i = 0; i < m.headers.size(); ++i) {
    out += strCat(i ? ", " : " [", m.headers[i].name, "=", m.headers[i].value);
  }
  if (!m.headers.empty()) out += "]";
  out += " ->";
  for (size_t i = 0; i < r.targets.size(); ++i) {
    out += strCat(i ? ", " : " ", r.targets[i].upstream);
    if (r.targets.size() > 1) out += strCat(" ", r.targets[i].weight, "%");
  }
  if (!r.rewrite_model.empty() || !r.rewrite_version.empty()) out += " rewrite";
  if (!r.rewrite_model.empty()) out += strCat(" ", r.rewrite_model);
  if (!r.rewrite_version.empty()) out += strCat(" v", r.rewrite_version);
  if (!r.mirror.empty()) out += strCat(" mirror ", r.mirror);
  if (r.timeout_ms) out += strCat(" timeout ", r.timeout_ms, "ms");
  return out;
}

const char* policyName(ReadinessConfig::Policy policy) {
  switch (policy) {
    case ReadinessConfig::Policy::kAllRoutes: return "all_routes";
    case ReadinessConfig::Policy::kAnyRoute: return "any_route";
    case ReadinessConfig::Policy::kAlways: return "always";
  }
  return "unknown";
}

std::string summary(const GatewayConfig& c) {
  std::string workers = c.workers ? strCat(c.workers) : std::string("one per usable CPU");
  if (c.busy_poll_us > 0) workers += strCat(", polling ", c.busy_poll_us, " us after work");
  std::string forward;
  for (const std::string& h : c.forward.headers) forward += strCat(forward.empty() ? "" : ", ", h);
  // Routes are separated by "; ": a split lists its targets with ", ".
  return strCat("listeners: ", listeners(c), "; workers: ", workers,
                "; upstreams: ", list(c.upstreams, ", ", describeUpstream),
                "; routes: ", list(c.routes, "; ", describeRoute),
                "; readiness: ", policyName(c.readiness.policy), "; forward: ",
                forward.empty() ? std::string("none") : forward);
}

}  // namespace

int runValidateCommand(std::span<const std::string_view> args, std::ostream& out,
                       std::ostream& err) {
  std::string_view file;
  int files = 0;
  for (std::string_view a : args) {
    if (a == "-h" || a == "--help") {
      out << kUsage;
      return 0;
    }
    if (a.size() > 1 && a.front() == '-') {
      err << "infergate validate: unknown option '" << a << "'\n" << kUsage;
      return 2;
    }
    file = a;
    ++files;
  }
  if (files != 1) {
    err << "infergate validate: expected one FILE, got " << files << "\n" << kUsage;
    return 2;
  }
  codecs::StatusOr<GatewayConfig> config = loadConfigFile(std::string(file));
  if (!config.ok()) {
    for (std::string_view line : codecs::splitOn(codecs::messageOf(config.status()), '\n')) {
      err << line << "\n";
    }
    return 1;
  }
  out << file << ": OK\n" << summary(*config) << "\n";
  return 0;
}

}  // namespace infergate::config
