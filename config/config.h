#pragma once

// The gateway's configuration as plain structs: what config_loader.h builds from YAML
// and every other folder reads. No YAML type appears here (YAML never leaves config/).
//
// Ownership and threads: a GatewayConfig is built once by loadConfigFile()/parseConfig(),
// already validated, and never changed afterwards; share it as
// `std::shared_ptr<const GatewayConfig>` and read it from any thread.
//
// The schema, with every key's default, is in config/README.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infergate::config {

// Where a value was written: 1-based line and column, as an editor shows them.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

// "file:line:column".
std::string formatLocation(const SourceLocation& where);

// A listener's `address`: "host:port", "[ipv6]:port" or "unix:/path/to.sock".
//
// Upstream endpoints may also be "dns:NAME:PORT" (kDns): every address NAME resolves to,
// re-resolved every discovery.dns_refresh_ms (a Kubernetes headless service gives one
// address per pod). Listeners refuse that form.
struct ListenAddress {
  enum class Kind { kTcp, kUnix, kDns };
  Kind kind = Kind::kTcp;
  std::string host;   // kTcp: IPv4 literal, IPv6 literal without brackets, or a name;
                      // kDns: the name to resolve
  uint16_t port = 0;  // kTcp: 0 = any free port; kDns: 1-65535
  std::string path;   // kUnix: the socket's path (fits sockaddr_un::sun_path)
  std::string text;   // as written in the file, for messages and logs
  SourceLocation where;
};

enum class TlsVersion { k12, k13 };  // "1.2", "1.3"

// TLS on a listener (`listeners.http.tls`, `listeners.grpc.tls`). Paths are resolved
// against the directory of the config file when relative. The files are read by tls/
// when the listener starts, on a config reload, and when they change on disk.
struct ServerTlsConfig {
  enum class ClientAuth { kNone, kOptional, kRequire };
  std::string cert;       // PEM certificate chain, the server's own first
  std::string key;        // PEM private key of the first certificate
  std::string client_ca;  // PEM CA bundle verifying client certificates; "" = none
  // kOptional: a certificate is asked for and verified when sent; kRequire: the handshake
  // fails without a valid one. Both need client_ca.
  ClientAuth client_auth = ClientAuth::kNone;
  // HTTP listener only (grpc offers no per-server setting for them): the oldest protocol
  // version, the TLS 1.2 cipher list and the TLS 1.3 suites (OpenSSL's syntax; "" = the
  // built-in defaults), the key-exchange groups ("" = OpenSSL's default).
  TlsVersion min_version = TlsVersion::k12;
  std::string ciphers;
  std::string ciphersuites;
  std::string groups;
  uint64_t watch_interval_ms = 5000;  // how often the files are checked for changes
  SourceLocation where;               // the tls mapping
};

struct ListenerConfig {
  ListenAddress address;
  std::optional<ServerTlsConfig> tls;  // http and grpc listeners; absent = plaintext
  // `public`: whether clients from the network reach it (the default access rules refuse
  // the sensitive API groups there). nullopt = decided by the address (publicByDefault).
  std::optional<bool> is_public;
  SourceLocation where;  // the listener's mapping
  // gRPC listener only (`server`): true = the gateway's own HTTP/2 server carries a
  // plaintext listener's calls ("native", the default); false = grpc++ alone ("grpc++").
  // A TLS listener is always grpc++'s.
  bool native_grpc_server = true;

  // Written, else: a unix socket or a loopback host (127.0.0.0/8, ::1, localhost) is
  // private; every other address is public.
  bool isPublic() const { return is_public.value_or(publicByDefault(address)); }
  static bool publicByDefault(const ListenAddress& address);
};

// TLS toward an upstream (`upstreams[].tls`, grpc and http upstreams). Paths as above.
struct UpstreamTlsConfig {
  std::string ca;           // PEM CA bundle; "" = the system's trust store
  std::string server_name;  // the name sent (SNI) and verified; "" = each endpoint's host
  std::string cert, key;    // client certificate and key (mTLS to the upstream): both or none
  // Skips verifying the upstream's certificate and name: for tests only, logged as a
  // warning when the upstream is set up.
  bool insecure_skip_verify = false;
  SourceLocation where;  // the tls mapping
};

// Defaults are Triton's where Triton has one (codecs/limits.h).
struct LimitsConfig {
  uint64_t max_header_bytes = 65536;               // request line + headers
  uint32_t max_header_count = 100;
  uint64_t max_input_bytes = 67108864;             // JSON header, JSON tensor, decompressed body
  uint64_t max_binary_body_bytes = 2147483647;     // binary-extension body (int32 on Triton)
  uint64_t max_grpc_message_bytes = 2147483647;
  uint64_t header_timeout_ms = 10000;              // request line + headers must arrive in
  uint64_t body_timeout_ms = 60000;                // the body must arrive in
  uint64_t idle_timeout_ms = 300000;               // keep-alive connection idle
  uint64_t send_timeout_ms = 60000;                // a client takes none of its answer's bytes
  uint32_t max_connections = 10000;                // open HTTP client connections
  uint32_t max_connections_per_client = 10000;     // of them from one client address
  uint32_t max_tensors = 65536;                    // inputs or outputs in one message
  uint32_t max_tensor_rank = 64;                   // dimensions of one tensor's shape
  uint64_t max_tensor_elements = 2147483647;       // elements of one tensor
  uint32_t max_json_depth = 100;                   // nesting of a JSON body
  // gRPC listener: streams a connection's client may reset (its RST_STREAM, or a stream
  // fault of its making) in a burst, refilled at a rate per second; past it the connection
  // is closed (rapid reset, CVE-2023-44487). nghttp2's defaults.
  uint32_t grpc_reset_burst = 1000;
  uint32_t grpc_resets_per_second = 33;

  bool operator==(const LimitsConfig&) const = default;
};

// A header (HTTP) or metadata entry (gRPC) with its value, as written in the file.
// Names are stored lowercase (HTTP names are case-insensitive, gRPC keys lowercase).
struct HeaderValue {
  std::string name;
  std::string value;
  SourceLocation where;
};

// How requests are spread over an upstream's endpoints (routing/load_balancer.h).
struct LoadBalancingConfig {
  enum class Policy {
    kRoundRobin,    // in turn
    kLeastRequest,  // power of two choices on the gateway's outstanding requests (default)
    kLoadAware,     // the least loaded by the endpoint's queue signal (below)
  };
  Policy policy = Policy::kLeastRequest;
  // Lowercase header (HTTP) / metadata (gRPC) name; a request carrying it goes to the
  // endpoint chosen by consistent (rendezvous) hashing of its value. "" = none.
  std::string hash_header;
  // kLoadAware: the port of each endpoint's Prometheus metrics (Triton: 8002), read every
  // metrics_interval_ms; the queue signal is nv_inference_pending_request_count summed
  // over models plus the gateway's own outstanding count. 0 = the outstanding count alone.
  uint16_t metrics_port = 0;
  uint64_t metrics_interval_ms = 1000;
};

// Active health checks: each endpoint asked on an interval (gRPC ServerReady / HTTP GET
// /v2/health/ready, and ModelReady of `model` when set).
struct HealthCheckConfig {
  bool enabled = true;
  uint64_t interval_ms = 0;          // 0 = readiness.probe_interval_ms
  uint64_t timeout_ms = 1000;        // one probe
  uint32_t healthy_threshold = 2;    // consecutive good probes to admit an endpoint again
  uint32_t unhealthy_threshold = 2;  // consecutive failed probes to mark it unhealthy
  std::string model;                 // also require this model ready; "" = server only
  std::string version;               // of `model`; "" = any
};

// Passive health (outlier ejection): consecutive failures of real requests (connect
// errors, UNAVAILABLE, HTTP 5xx) eject an endpoint for a time that doubles with each
// ejection in a row, up to max_ejection_ms; then one request is let through (half open)
// and its success readmits the endpoint.
struct OutlierConfig {
  uint32_t consecutive_failures = 3;  // 0 = passive ejection off
  uint64_t base_ejection_ms = 1000;
  uint64_t max_ejection_ms = 30000;
};

// Retries of requests that never reached an upstream (connect refused, reset before a
// byte was sent, UNAVAILABLE before processing), each to another endpoint, within the
// request's deadline; never for a sequence request.
struct RetryConfig {
  uint32_t max_retries = 2;              // extra attempts per request; 0 = none
  uint32_t budget_percent = 20;          // retries at most this % of recent requests ...
  uint32_t min_retries_per_second = 10;  // ... but this many per second are always allowed
};

// Overload: caps on requests in flight and a bounded wait for a free slot; past it, 503 /
// UNAVAILABLE with Retry-After at once.
struct OverloadConfig {
  uint32_t max_in_flight = 0;               // the whole upstream; 0 = no cap
  uint32_t max_in_flight_per_endpoint = 0;  // each endpoint; 0 = no cap
  uint32_t max_queue = 1024;                // requests waiting for a slot (0 = none wait)
  uint64_t queue_timeout_ms = 1000;         // the longest a request waits for one
  uint32_t retry_after_s = 1;               // the Retry-After of a shed answer
};

// Sequence affinity: the requests of one sequence (sequence_id, int or string) go to the
// endpoint that got its first request, until sequence_end or idle_timeout_ms without a
// request. If that endpoint is gone or unhealthy, the request fails (the state is lost).
struct AffinityConfig {
  bool sequences = true;
  uint64_t idle_timeout_ms = 300000;
};

// Shared-memory handoff to a colocated upstream (`upstreams[].handoff`): tensors reach
// the upstream's memory instead of being copied through the socket.
struct HandoffConfig {
  enum class Kind { kSystem, kCuda };
  bool enabled = false;             // true when the section is given, unless `enabled: false`
  bool passthrough = true;          // client regions registered with the upstream and passed
                                    // by reference
  uint64_t min_bytes = 65536;       // inline tensors at least this big go through the pool
  uint64_t pool_bytes = 268435456;  // 0 = no pool (pass-through only); else >= min_bytes
  Kind kind = Kind::kSystem;
  int device = 0;                   // kCuda: the upstream's GPU
  std::string key_prefix = "/infergate_pool_";  // kSystem: the pool object's name prefix
  SourceLocation where;             // the handoff mapping (empty when not given)
};

struct UpstreamConfig {
  enum class Protocol { kBuiltin, kGrpc, kHttp };
  // How an HTTP upstream is sent requests the gateway encodes itself (transcoded from
  // gRPC): the binary-tensor extension, or plain JSON for servers without it.
  enum class HttpFormat { kBinary, kJson };
  std::string name;
  Protocol protocol = Protocol::kBuiltin;
  std::vector<std::string> models;  // kBuiltin: demo models to serve; empty = all
  // kGrpc / kHttp: where the upstream listens, at least one ("host:port", "[v6]:port",
  // "unix:/path", "dns:NAME:PORT"; port 0 is refused). Requests are spread as
  // load_balancing says.
  std::vector<ListenAddress> endpoints;
  HttpFormat http_format = HttpFormat::kBinary;  // kHttp only
  uint64_t timeout_ms = 0;                       // per request; 0 = no upstream limit
  uint64_t connect_timeout_ms = 5000;            // kGrpc / kHttp
  uint32_t channels = 2;                         // kGrpc: channels per endpoint
  uint32_t max_connections = 64;                 // kHttp: open connections per endpoint, per worker
  // Added to every request toward this upstream (e.g. authorization), replacing a
  // forwarded client header of the same name.
  std::vector<HeaderValue> headers;
  // kGrpc / kHttp: the first endpoint is colocated (same pod or host); the others are
  // spill-over, used only while it is unhealthy or at its in-flight cap.
  bool colocated = false;
  // kGrpc / kHttp: a large binary-tensor body from an HTTP client goes on toward the
  // upstream as it arrives (the upstream call starts once its JSON header is in). Off by
  // default: read whole first, as nginx's proxy_request_buffering does, so that a slow
  // upload holds no upstream connection or stream (and on two shared cores streaming
  // measured no faster: bench/README.md).
  bool stream_requests = false;
  LoadBalancingConfig load_balancing;  // kGrpc / kHttp, as the five below
  HealthCheckConfig health_check;
  OutlierConfig outlier;
  RetryConfig retry;
  OverloadConfig overload;
  AffinityConfig affinity;
  HandoffConfig handoff;  // only on a colocated grpc / http upstream
  std::optional<UpstreamTlsConfig> tls;  // kGrpc / kHttp; absent = plaintext
  SourceLocation where;  // the upstream's mapping

  bool isRemote() const { return protocol != Protocol::kBuiltin; }
};

// "builtin", "grpc", "http".
const char* protocolName(UpstreamConfig::Protocol protocol);

// The API groups of Triton's restricted-API feature (PROTOCOL.md), which access rules
// name: "health", "metadata", "inference", "shared-memory", "model-config",
// "model-repository", "statistics", "trace", "logging".
// kAdmin: the gateway's own admin API (/admin/ on the metrics listener), not Triton's.
enum class ApiGroup {
  kHealth, kMetadata, kInference, kSharedMemory, kModelConfig, kModelRepository,
  kStatistics, kTrace, kLogging, kAdmin,
};
inline constexpr size_t kApiGroupCount = 10;
const char* apiGroupName(ApiGroup group);
std::optional<ApiGroup> apiGroupNamed(std::string_view name);

// Who may call an API group (auth.api_groups) or use a route (routes[].auth).
struct AccessRule {
  enum class Allow {
    kAnyone,         // `public`: no credentials needed
    kAuthenticated,  // `authenticated`: any principal
    kPrincipals,     // a list of principal names
    kNobody,         // `deny`
  };
  Allow allow = Allow::kAnyone;
  std::vector<std::string> principals;  // kPrincipals
  bool http = true, grpc = true;        // the listeners it is served on (`listeners:`)
  SourceLocation where;
};

// What a route matches. Every condition given must hold.
struct RouteMatch {
  enum class Model { kAny, kExact, kPrefix };
  Model kind = Model::kAny;
  std::string model;    // kExact: the name; kPrefix: the prefix (non-empty); kAny: ""
  std::string version;  // "" = any version (including none)
  // Each must be present on the request with exactly this value (HTTP header or gRPC
  // metadata; names lowercase).
  std::vector<HeaderValue> headers;
};

// One upstream of a route, with its share of the traffic.
struct RouteTarget {
  std::string upstream;
  uint32_t weight = 100;  // `upstream: x` is one target of weight 100; a split's add to 100
  SourceLocation where;
};

struct RouteConfig {
  std::string name;  // the `route` label of metrics and logs; "" = "routes[N]"
  RouteMatch match;
  std::vector<RouteTarget> targets;  // at least one
  // Rewrite toward the upstream; the client keeps seeing the names it asked for.
  std::string rewrite_model;    // "" = keep the client's model name
  std::string rewrite_version;  // "" = keep the client's version
  uint64_t timeout_ms = 0;      // 0 = the upstream's timeout_ms (then none)
  std::string mirror;           // an upstream sent a copy of each request, answer dropped; "" = none
  std::optional<AccessRule> auth;  // who may use the route (any API group); nullopt = anyone
  SourceLocation where;         // the route's mapping
};

// Which client headers (HTTP) / metadata (gRPC) travel to the upstream. Hop-by-hop
// headers (Connection, Keep-Alive, TE, Transfer-Encoding, Upgrade, Proxy-*, Host,
// Content-Length) are never forwarded, whatever this says.
struct ForwardConfig {
  // Lowercase names; a trailing '*' makes a prefix ("triton-grpc-protocol-*").
  std::vector<std::string> headers = {"traceparent", "tracestate", "triton-grpc-protocol-*"};
};

// When the gateway answers ready (/v2/health/ready, ServerReady, grpc health).
struct ReadinessConfig {
  enum class Policy {
    kAllRoutes,  // every route has at least one reachable upstream (default)
    kAnyRoute,   // at least one route has
    kAlways,     // once listening
  };
  Policy policy = Policy::kAllRoutes;
  // The default interval of the upstreams' health checks (health_check.interval_ms).
  uint64_t probe_interval_ms = 1000;
};

// Endpoint discovery for "dns:NAME:PORT" endpoints.
struct DiscoveryConfig {
  uint64_t dns_refresh_ms = 5000;
  // When set, names are looked up in this file (hosts(5) format: "ADDRESS NAME...", one
  // line per address; every matching line counts) instead of the system resolver: for
  // tests and static environments. Re-read on every refresh.
  std::string hosts_file;
};

// Reload and shutdown.
struct LifecycleConfig {
  // Reload when the config file changes (checked every watch_interval_ms), besides
  // SIGHUP and POST /admin/reload.
  bool watch_config = true;
  uint64_t watch_interval_ms = 1000;
  // SIGTERM / SIGINT: requests in flight get this long to finish.
  uint64_t drain_timeout_ms = 10000;
};

// Metrics and logs (gateway/telemetry/). Changes take effect on a restart only.
struct ObservabilityConfig {
  // Per-request metrics (infergate_requests_total, latency histograms, nv_inference_*);
  // off leaves only the state read at scrape time (upstreams, shm, config, build).
  bool request_metrics = true;
  uint64_t max_series = 2000;  // label sets of the request metrics; past it "_overflow"
  struct AccessLog {
    enum class Format { kJson, kText };
    bool enabled = false;
    Format format = Format::kJson;
    std::string path = "-";        // "-" = standard output; a file is appended to
    uint32_t sample_percent = 100;  // of successful requests; failures are always logged
  };
  AccessLog access_log;
  struct Log {
    enum class Level { kError, kWarning, kInfo, kVerbose };
    enum class Format { kText, kJson };
    Level level = Level::kInfo;
    Format format = Format::kJson;
  };
  Log log;
};

// Client shared memory (PROTOCOL.md section 8) at the gateway.
struct ShmConfig {
  bool enabled = false;                           // register/unregister refused unless true
  std::vector<std::string> allowed_key_prefixes;  // system keys must start with one
                                                  // ("/infergate_"); none = no system region
  bool cuda = true;                               // CUDA regions (still need a GPU)
  uint32_t max_regions = 1024;
  bool http = true;                               // which frontends may register /
  bool grpc = true;                               // unregister: `listeners: [http, grpc]`
  SourceLocation where;                           // the shm mapping (empty when not given)
};

// ---- security: who may call what (auth) and how often (rate_limits) ----

// A verified client certificate that names a principal: every field given must match.
struct ClientCertMatch {
  std::string subject;      // the whole subject as OpenSSL prints it, RFC 2253 ("CN=ops,O=Example")
  std::string common_name;  // the subject's CN
  std::string dns;          // one of its DNS subject alternative names
  std::string uri;          // one of its URI SANs (a SPIFFE ID)
};

// A named principal and the credentials that prove it.
struct PrincipalConfig {
  std::string name;
  std::string api_keys_file;  // one key per line (blank and '#' lines skipped); re-read on change
  std::string api_key_env;    // an environment variable holding one key (read at start and reload)
  std::optional<ClientCertMatch> client_cert;
  SourceLocation where;
};

// Bearer tokens that are JWTs (three base64url parts): verified with OpenSSL against
// `keys_file`, a JWKS document (RSA keys for RS256, P-256 keys for ES256, "oct" keys for
// HS256) or one PEM public key; the principal is the `principal_claim` claim.
struct JwtConfig {
  std::string keys_file;
  std::string issuer;                  // `iss` must equal it; "" = not checked
  std::vector<std::string> audiences;  // `aud` must name one of them; empty = not checked
  std::string principal_claim = "sub";
  uint64_t leeway_s = 60;  // clock skew allowed on exp / nbf
  SourceLocation where;
};

struct AuthConfig {
  std::vector<PrincipalConfig> principals;
  std::optional<JwtConfig> jwt;
  // A header (gRPC: metadata key) carrying an API key as it is, besides
  // "Authorization: Bearer <key>"; lowercase; "" = none.
  std::string api_key_header;
  // Per ApiGroup (by its enum value); nullopt = the default rule (tls/access_policy.h).
  std::vector<std::optional<AccessRule>> api_groups = std::vector<std::optional<AccessRule>>(kApiGroupCount);
  uint64_t watch_interval_ms = 5000;  // how often key files and JWKS files are checked
  SourceLocation where;               // the auth mapping (empty when not given)

  const std::optional<AccessRule>& rule(ApiGroup group) const {
    return api_groups[static_cast<size_t>(group)];
  }
};

// One token bucket rule. A request matching `principal` and `model` (empty = any) takes
// a token from the rule's bucket: one bucket for the rule, or one per principal and/or
// per model (`per`). Inference requests only (ModelInfer, each stream message, generate).
struct RateLimitConfig {
  std::string principal;  // "" = any, "anonymous" = requests without credentials
  std::string model;      // the client's model name; "" = any
  bool per_principal = false;
  bool per_model = false;
  double requests_per_second = 0;  // the refill rate, > 0
  uint32_t burst = 0;              // the bucket's size; 0 = max(1, ceil(requests_per_second))
  SourceLocation where;
};

struct GatewayConfig {
  std::string source;  // the file (or name) it was read from
  std::string text;    // its text as read (the admin API's config hash)
  std::optional<ListenerConfig> http, grpc, metrics;
  unsigned workers = 0;  // HTTP event-loop threads; 0 = number of cores
  // How long a worker keeps polling without sleeping after it last had work; 0 = never.
  uint32_t busy_poll_us = 0;
  LimitsConfig limits;
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;  // in file order; the first match wins
  ForwardConfig forward;
  ReadinessConfig readiness;
  DiscoveryConfig discovery;
  LifecycleConfig lifecycle;
  ShmConfig shm;
  ObservabilityConfig observability;
  AuthConfig auth;
  std::vector<RateLimitConfig> rate_limits;

  // The upstream named `name`, or nullptr.
  const UpstreamConfig* findUpstream(std::string_view name) const;
};

}  // namespace infergate::config
