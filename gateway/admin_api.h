#pragma once

// The operators' API, served on the metrics listener only (never on the public ones):
//
//   GET  /admin/routes     the active route table, its generation and config hash
//   GET  /admin/upstreams  every upstream and endpoint: health (active verdict, passive
//                          ejection), in flight, queue signal, counters, sequence bindings
//   POST /admin/reload     reads and validates the config file again and swaps it in:
//                          200 {"reloaded":true,"generation":N,"config_hash":"..."}, or
//                          400 {"error":"<every problem>"} with the old table serving
//
// Other /admin/ paths are 404; a wrong method is 405 with Allow.
//
// Who may call it: auth.api_groups.admin (the credentials as on the other listeners: API
// key, JWT, a client certificate when the metrics listener asks for one). Without a rule,
// anyone on a private metrics listener, and only loopback clients (127.0.0.0/8, ::1, a
// unix socket) on a public one. Checked before the path: a refused caller learns nothing
// of the API (401 with WWW-Authenticate, or 403).
//
// Threads: handle() on the exchange's loop; a reload runs on the caller's reload
// executor (it reads files and may resolve names) and answers back on the loop.

#include <functional>
#include <memory>
#include <string>

#include "codecs/status.h"
#include "gateway/http/http_connection.h"
#include "gateway/router.h"
#include "gateway/security.h"

namespace infergate::gateway {

class AdminApi {
 public:
  // Starts a reload somewhere else and calls `done` (any thread) with its outcome.
  using Reload = std::function<void(std::function<void(codecs::Status)> done)>;

  AdminApi(std::shared_ptr<Router> router, Reload reload, std::shared_ptr<const Security> security);

  // Whether `path` is the admin API's (then handle() answers it).
  static bool owns(std::string_view path) { return path.starts_with("/admin/"); }
  void handle(const std::shared_ptr<http::HttpExchange>& exchange);

  // The bodies, for tests and the log.
  static std::string routesJson(const RouterSnapshot& snapshot);
  static std::string upstreamsJson(const RouterSnapshot& snapshot);
  // Whether a client address as the access log writes it ("127.0.0.1:4711", "[::1]:80",
  // "unix") is on this host's loopback.
  static bool loopbackClient(std::string_view client_address);

 private:
  std::shared_ptr<Router> router_;
  Reload reload_;
  std::shared_ptr<const Security> security_;
};

}  // namespace infergate::gateway
