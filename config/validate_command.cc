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

template <typename T, typename Describe>
std::string list(const std::vector<T>& items, Describe describe) {
  std::string out = strCat(items.size(), " (");
  for (size_t i = 0; i < items.size() && i < kMaxListed; ++i) {
    out += strCat(i ? ", " : "", describe(items[i]));
  }
  return out + (items.size() > kMaxListed ? ", ...)" : ")");
}

std::string summary(const GatewayConfig& c) {
  std::string upstreams = list(c.upstreams, [](const UpstreamConfig& u) {
    return strCat(u.name, ": ", protocolName(u.protocol));
  });
  std::string routes = list(c.routes, [](const RouteConfig& r) {
    return strCat(r.model, " -> ", r.upstream);
  });
  std::string workers = c.workers ? strCat(c.workers) : std::string("one per core");
  return strCat("listeners: ", listeners(c), "; workers: ", workers, "; upstreams: ",
                upstreams, "; routes: ", routes);
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
