#include "gateway/telemetry/request_metrics.h"

#include <map>
#include <tuple>

#include "gateway/telemetry/families.h"

namespace infergate::gateway::telemetry {
namespace {

// The HTTP statuses the gateway answers with (its own and relayed ones); the last two
// indexes are "cut" and "other".
constexpr std::array<int, kOutcomes - 2> kHttpStatuses = {
    200, 201, 204, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 499, 500, 501, 502, 503,
    504};

constexpr std::array<std::string_view, kOutcomes - 2> kHttpLabels = {
    "200", "201", "204", "400", "401", "403", "404", "405", "408", "409",
    "413", "415", "422", "429", "499", "500", "501", "502", "503", "504"};

constexpr std::array<std::string_view, 17> kGrpcCodes = {
    "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED"};

constexpr uint8_t kCut = kOutcomes - 2;
constexpr uint8_t kOther = kOutcomes - 1;

std::string joinedKey(const SeriesKey& k) {
  std::string s;
  s.reserve(4 + k.model.size() + k.version.size() + k.route.size() + k.upstream.size());
  s += static_cast<char>('0' + static_cast<int>(k.protocol));
  s += static_cast<char>('0' + static_cast<int>(k.upstream_protocol));
  for (std::string_view part : {k.model, k.version, k.route, k.upstream}) {
    s += '\x1f';
    s += part;
  }
  return s;
}

// Triton's failure reasons: refused before the model ran, cancelled, failed in the
// backend (here: the upstream), anything else.
std::string_view failureReason(Protocol protocol, uint8_t index) {
  if (protocol == Protocol::kGrpc) {
    switch (index) {
      case 1: return "CANCELED";
      case 3: case 5: case 6: case 7: case 8: case 9: case 11: case 12: case 16:
        return "REJECTED";
      case 2: case 4: case 13: case 14: case 15:
        return "BACKEND";
      default: return "OTHER";
    }
  }
  if (index == kOther) return "OTHER";
  if (index == kCut) return "BACKEND";  // the upstream failed after the answer began
  int status = kHttpStatuses[index];
  if (status == 499) return "CANCELED";
  if (status >= 400 && status < 500) return "REJECTED";
  if (status == 500 || status == 502 || status == 503) return "BACKEND";
  return "OTHER";
}

}  // namespace

const char* protocolName(Protocol protocol) {
  return protocol == Protocol::kGrpc ? "grpc" : "http";
}

const char* upstreamProtocolName(UpstreamProtocol protocol) {
  switch (protocol) {
    case UpstreamProtocol::kBuiltin: return "builtin";
    case UpstreamProtocol::kHttp: return "http";
    case UpstreamProtocol::kGrpc: return "grpc";
  }
  return "builtin";
}

Outcome httpOutcome(int status) {
  for (size_t i = 0; i < kHttpStatuses.size(); ++i) {
    if (kHttpStatuses[i] == status) return Outcome{static_cast<uint8_t>(i)};
  }
  return Outcome{kOther};
}

Outcome cutOutcome() { return Outcome{kCut}; }

Outcome grpcOutcome(int code) {
  if (code < 0 || code >= static_cast<int>(kGrpcCodes.size())) return Outcome{kOther};
  return Outcome{static_cast<uint8_t>(code)};
}

std::string_view outcomeLabel(Protocol protocol, Outcome outcome) {
  if (outcome.index == kOther) return "other";
  if (protocol == Protocol::kGrpc) {
    return outcome.index < kGrpcCodes.size() ? kGrpcCodes[outcome.index] : "other";
  }
  if (outcome.index == kCut) return "cut";
  return kHttpLabels[outcome.index];
}

bool outcomeSucceeded(Protocol protocol, Outcome outcome) {
  if (protocol == Protocol::kGrpc) return outcome.index == 0;
  if (outcome.index == kOther || outcome.index == kCut) return false;
  int status = kHttpStatuses[outcome.index];
  return status >= 200 && status < 300;
}

// ---- RequestSeries ----

void RequestSeries::finished(Outcome outcome, const RequestInfo& info, Clock::duration total) {
  Shard& s = shard();
  constexpr auto relaxed = std::memory_order_relaxed;
  s.outcomes[outcome.index].fetch_add(1, relaxed);
  s.in_flight.fetch_sub(1, relaxed);
  s.request_bytes.fetch_add(info.request_bytes, relaxed);
  s.response_bytes.fetch_add(info.response_bytes, relaxed);
  s.total.observe(total);
  Clock::duration transcode = info.transcode;
  if (const CallStats* call = info.call.get()) {
    transcode += call->transcode;
    if (call->attempts > 0) {
      s.upstream.observe(call->upstream);
      s.overhead.observe(total - call->upstream);
    }
  }
  if (transcode.count() > 0) s.transcode.observe(transcode);
  if (outcomeSucceeded(labels_.protocol, outcome)) {
    auto ns = [](Clock::duration d) {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    };
    s.success_ns.fetch_add(ns(total), relaxed);
    if (info.call) s.success_queue_ns.fetch_add(ns(info.call->queue_wait), relaxed);
  }
}

RequestSeries::Totals RequestSeries::totals() const {
  Totals t;
  constexpr auto relaxed = std::memory_order_relaxed;
  for (const Shard& s : shards_) {
    for (size_t i = 0; i < kOutcomes; ++i) t.outcomes[i] += s.outcomes[i].load(relaxed);
    t.in_flight += s.in_flight.load(relaxed);
    t.request_bytes += s.request_bytes.load(relaxed);
    t.response_bytes += s.response_bytes.load(relaxed);
    t.success_ns += s.success_ns.load(relaxed);
    t.success_queue_ns += s.success_queue_ns.load(relaxed);
    t.total.add(s.total);
    t.upstream.add(s.upstream);
    t.overhead.add(s.overhead);
    t.transcode.add(s.transcode);
  }
  return t;
}

// ---- RequestMetrics ----

struct RequestMetrics::ApiSeries {
  ApiSeries(Protocol p, std::string e) : protocol(p), endpoint(std::move(e)) {}
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kOutcomes> outcomes{};
    HistogramCells duration;
  };
  const Protocol protocol;
  const std::string endpoint;
  std::array<Shard, kShards> shards;
};

namespace {

struct OwnedKey {
  Protocol protocol;
  UpstreamProtocol upstream_protocol;
  std::string model, version, route, upstream;
  SeriesKey view() const { return SeriesKey{protocol, upstream_protocol, model, version, route, upstream}; }
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(const SeriesKey& k) const {
    std::hash<std::string_view> h;
    size_t v = static_cast<size_t>(k.protocol) * 3 + static_cast<size_t>(k.upstream_protocol);
    for (std::string_view part : {k.model, k.version, k.route, k.upstream}) {
      v = v * 1000003u ^ h(part);
    }
    return v;
  }
  size_t operator()(const OwnedKey& k) const { return (*this)(k.view()); }
};

struct KeyEq {
  using is_transparent = void;
  static auto tie(const SeriesKey& k) {
    return std::tie(k.protocol, k.upstream_protocol, k.model, k.version, k.route, k.upstream);
  }
  bool operator()(const SeriesKey& a, const SeriesKey& b) const { return tie(a) == tie(b); }
  bool operator()(const OwnedKey& a, const SeriesKey& b) const { return tie(a.view()) == tie(b); }
  bool operator()(const SeriesKey& a, const OwnedKey& b) const { return tie(a) == tie(b.view()); }
  bool operator()(const OwnedKey& a, const OwnedKey& b) const { return tie(a.view()) == tie(b.view()); }
};

std::atomic<uint64_t> next_instance{1};

}  // namespace

struct RequestMetrics::Cache {
  uint64_t owner = 0;
  std::unordered_map<OwnedKey, RequestSeries*, KeyHash, KeyEq> series;
  // The entry the last lookup found (a node of `series`: stable until it is cleared):
  // asked first, since one loop mostly serves one model after another of the same.
  const std::pair<const OwnedKey, RequestSeries*>* last = nullptr;
  std::map<std::pair<int, const char*>, ApiSeries*> api;
};

RequestMetrics::RequestMetrics(size_t max_series)
    : id_(next_instance.fetch_add(1, std::memory_order_relaxed)),
      max_series_(max_series == 0 ? 1 : max_series) {}

RequestMetrics::~RequestMetrics() = default;

RequestMetrics::Cache& RequestMetrics::cache() const {
  thread_local Cache c;
  if (c.owner != id_) {  // another instance used this thread last (tests build several)
    c.series.clear();
    c.last = nullptr;
    c.api.clear();
    c.owner = id_;
  }
  return c;
}

RequestSeries* RequestMetrics::series(const SeriesKey& key) {
  Cache& c = cache();
  if (c.last != nullptr && KeyEq()(c.last->first, key)) return c.last->second;
  if (auto it = c.series.find(key); it != c.series.end()) {
    c.last = &*it;
    return it->second;
  }
  RequestSeries* found = lookupShared(key);
  c.last = &*c.series
                .emplace(OwnedKey{key.protocol, key.upstream_protocol, std::string(key.model),
                                  std::string(key.version), std::string(key.route),
                                  std::string(key.upstream)},
                         found)
                .first;
  return found;
}

RequestSeries* RequestMetrics::lookupShared(const SeriesKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string joined = joinedKey(key);
  if (auto it = series_.find(joined); it != series_.end()) return it->second.get();
  SeriesKey use = key;
  if (series_.size() >= max_series_) {
    use.model = "_overflow";
    use.version = "";
    joined = joinedKey(use);
    if (auto it = series_.find(joined); it != series_.end()) return it->second.get();
  }
  auto created = std::make_unique<RequestSeries>(RequestSeries::Labels{
      use.protocol, use.upstream_protocol, std::string(use.model), std::string(use.version),
      std::string(use.route), std::string(use.upstream)});
  RequestSeries* raw = created.get();
  series_.emplace(std::move(joined), std::move(created));
  order_.push_back(raw);
  return raw;
}

size_t RequestMetrics::seriesCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_.size();
}

RequestMetrics::ApiSeries* RequestMetrics::apiSeries(Protocol protocol, std::string_view endpoint) {
  Cache& c = cache();
  auto cache_key = std::make_pair(static_cast<int>(protocol), endpoint.data());
  if (auto it = c.api.find(cache_key); it != c.api.end()) return it->second;
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = std::string(1, static_cast<char>('0' + static_cast<int>(protocol)));
  key += endpoint;
  auto it = api_.find(key);
  if (it == api_.end()) {
    it = api_.emplace(key, std::make_unique<ApiSeries>(protocol, std::string(endpoint))).first;
    api_order_.push_back(it->second.get());
  }
  c.api.emplace(cache_key, it->second.get());
  return it->second.get();
}

void RequestMetrics::apiCall(Protocol protocol, std::string_view endpoint, Outcome outcome,
                             std::chrono::nanoseconds elapsed) {
  ApiSeries::Shard& s = apiSeries(protocol, endpoint)->shards[shardIndex()];
  s.outcomes[outcome.index].fetch_add(1, std::memory_order_relaxed);
  s.duration.observe(elapsed);
}

std::vector<prometheus::MetricFamily> RequestMetrics::Collect() const {
  std::vector<RequestSeries*> all;
  std::vector<ApiSeries*> apis;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = order_;
    apis = api_order_;
  }
  FamilyBuilder requests("infergate_requests_total",
                         "Inference requests answered, by model, route, upstream, the "
                         "protocols on both sides and the answer's status code",
                         prometheus::MetricType::Counter);
  FamilyBuilder in_flight("infergate_requests_in_flight",
                          "Inference requests received and not yet answered",
                          prometheus::MetricType::Gauge);
  FamilyBuilder total("infergate_request_duration_seconds",
                      "Inference requests: time from the whole request read to the answer "
                      "queued for the client",
                      prometheus::MetricType::Histogram);
  FamilyBuilder upstream("infergate_upstream_duration_seconds",
                         "Inference requests to remote upstreams: time from the request sent "
                         "to the answer received (the last attempt)",
                         prometheus::MetricType::Histogram);
  FamilyBuilder overhead("infergate_gateway_overhead_seconds",
                         "Inference requests to remote upstreams: end-to-end time minus "
                         "upstream time (the gateway's share, queue wait included)",
                         prometheus::MetricType::Histogram);
  FamilyBuilder transcode("infergate_transcode_duration_seconds",
                          "Inference requests that were decoded: time spent decoding and "
                          "encoding bodies (both sides)",
                          prometheus::MetricType::Histogram);
  FamilyBuilder request_bytes("infergate_request_bytes_total",
                              "Bytes of inference request bodies received from clients",
                              prometheus::MetricType::Counter);
  FamilyBuilder response_bytes("infergate_response_bytes_total",
                               "Bytes of inference response bodies sent to clients",
                               prometheus::MetricType::Counter);

  // Triton's per-model counters: the series added up per (model, version).
  struct TritonModel {
    uint64_t success = 0;
    std::map<std::string_view, uint64_t> failures;
    int64_t pending = 0;
    uint64_t duration_ns = 0, queue_ns = 0;
  };
  std::map<std::pair<std::string, std::string>, TritonModel> triton;

  for (const RequestSeries* s : all) {
    const RequestSeries::Labels& l = s->labels();
    Labels labels = {{"model", l.model},
                     {"version", l.version},
                     {"route", l.route},
                     {"upstream", l.upstream},
                     {"protocol", protocolName(l.protocol)},
                     {"upstream_protocol", upstreamProtocolName(l.upstream_protocol)}};
    RequestSeries::Totals t = s->totals();
    TritonModel& tm = triton[{l.model, l.version}];
    for (size_t i = 0; i < kOutcomes; ++i) {
      if (t.outcomes[i] == 0) continue;
      Outcome o{static_cast<uint8_t>(i)};
      Labels with_code = labels;
      with_code.push_back({"code", std::string(outcomeLabel(l.protocol, o))});
      requests.counter(std::move(with_code), static_cast<double>(t.outcomes[i]));
      if (outcomeSucceeded(l.protocol, o)) {
        tm.success += t.outcomes[i];
      } else {
        tm.failures[failureReason(l.protocol, o.index)] += t.outcomes[i];
      }
    }
    tm.pending += t.in_flight;
    tm.duration_ns += t.success_ns;
    tm.queue_ns += t.success_queue_ns;
    in_flight.gauge(labels, static_cast<double>(t.in_flight));
    total.histogram(labels, t.total);
    upstream.histogram(labels, t.upstream);
    overhead.histogram(labels, t.overhead);
    transcode.histogram(labels, t.transcode);
    request_bytes.counter(labels, static_cast<double>(t.request_bytes));
    response_bytes.counter(std::move(labels), static_cast<double>(t.response_bytes));
  }

  FamilyBuilder nv_success("nv_inference_request_success",
                           "Number of successful inference requests, all batch sizes",
                           prometheus::MetricType::Counter);
  FamilyBuilder nv_failure("nv_inference_request_failure",
                           "Number of failed inference requests, all batch sizes",
                           prometheus::MetricType::Counter);
  FamilyBuilder nv_count("nv_inference_count",
                         "Number of inferences performed (the gateway counts one per "
                         "successful request: it does not see the batch size)",
                         prometheus::MetricType::Counter);
  FamilyBuilder nv_exec("nv_inference_exec_count",
                        "Number of model executions performed (one per successful request)",
                        prometheus::MetricType::Counter);
  FamilyBuilder nv_duration("nv_inference_request_duration_us",
                            "Cumulative inference request duration in microseconds, "
                            "successful requests, as the gateway measured them",
                            prometheus::MetricType::Counter);
  FamilyBuilder nv_queue("nv_inference_queue_duration_us",
                         "Cumulative time successful requests waited in the gateway's "
                         "upstream queue, in microseconds",
                         prometheus::MetricType::Counter);
  FamilyBuilder nv_pending("nv_inference_pending_request_count",
                           "Instantaneous number of inference requests in the gateway not yet "
                           "answered",
                           prometheus::MetricType::Gauge);
  for (const auto& [key, tm] : triton) {
    Labels labels = {{"model", key.first}, {"version", key.second}};
    nv_success.counter(labels, static_cast<double>(tm.success));
    for (const auto& [reason, n] : tm.failures) {
      Labels with_reason = labels;
      with_reason.push_back({"reason", std::string(reason)});
      nv_failure.counter(std::move(with_reason), static_cast<double>(n));
    }
    nv_count.counter(labels, static_cast<double>(tm.success));
    nv_exec.counter(labels, static_cast<double>(tm.success));
    nv_duration.counter(labels, static_cast<double>(tm.duration_ns / 1000));
    nv_queue.counter(labels, static_cast<double>(tm.queue_ns / 1000));
    nv_pending.gauge(std::move(labels), static_cast<double>(tm.pending));
  }

  FamilyBuilder http_calls("infergate_http_requests_total",
                           "HTTP requests answered, by endpoint and status code",
                           prometheus::MetricType::Counter);
  FamilyBuilder http_duration("infergate_http_request_duration_seconds",
                              "HTTP requests: time from the whole request read to the "
                              "response queued",
                              prometheus::MetricType::Histogram);
  FamilyBuilder grpc_calls("infergate_grpc_requests_total",
                           "gRPC calls finished, by method and status code",
                           prometheus::MetricType::Counter);
  FamilyBuilder grpc_duration("infergate_grpc_request_duration_seconds",
                              "gRPC calls: time from the call's start to its finish",
                              prometheus::MetricType::Histogram);
  for (const ApiSeries* a : apis) {
    const bool grpc = a->protocol == Protocol::kGrpc;
    Labels labels = {{grpc ? "method" : "endpoint", a->endpoint}};
    std::array<uint64_t, kOutcomes> outcomes{};
    HistogramSnapshot duration;
    for (const ApiSeries::Shard& s : a->shards) {
      for (size_t i = 0; i < kOutcomes; ++i) outcomes[i] += s.outcomes[i].load(std::memory_order_relaxed);
      duration.add(s.duration);
    }
    for (size_t i = 0; i < kOutcomes; ++i) {
      if (outcomes[i] == 0) continue;
      Labels with_code = labels;
      with_code.push_back(
          {"code", std::string(outcomeLabel(a->protocol, Outcome{static_cast<uint8_t>(i)}))});
      (grpc ? grpc_calls : http_calls).counter(std::move(with_code), static_cast<double>(outcomes[i]));
    }
    (grpc ? grpc_duration : http_duration).histogram(std::move(labels), duration);
  }

  std::vector<prometheus::MetricFamily> out;
  for (FamilyBuilder* f : {&requests, &in_flight, &total, &upstream, &overhead, &transcode,
                           &request_bytes, &response_bytes, &nv_success, &nv_failure, &nv_count,
                           &nv_exec, &nv_duration, &nv_queue, &nv_pending, &http_calls,
                           &http_duration, &grpc_calls, &grpc_duration}) {
    out.push_back(f->take());
  }
  return out;
}

}  // namespace infergate::gateway::telemetry
