#pragma once

// What the frontends call at the two ends of a request: routed() once an inference
// request has its route and upstream (its metrics series, counted in flight), finish*()
// once it is answered (the metrics, the access log). Either part may be off: request
// metrics (`observability.request_metrics`) and the access log (`access_log.enabled`).
//
// Threads: every method from any thread; a request's own calls in its order.

#include <memory>
#include <string_view>

#include "gateway/telemetry/access_log.h"
#include "gateway/telemetry/request_metrics.h"

namespace infergate::gateway::telemetry {

class Recorder {
 public:
  // Either may be null. With only the access log, the label sets its lines name (model,
  // route, upstream) are still interned in a table of series that no scrape reads.
  Recorder(std::shared_ptr<RequestMetrics> metrics, std::unique_ptr<AccessLog> access_log)
      : metrics_(std::move(metrics)),
        access_log_(std::move(access_log)),
        series_(metrics_ ? metrics_ : access_log_ ? std::make_shared<RequestMetrics>() : nullptr) {}

  RequestMetrics* metrics() const { return metrics_.get(); }
  AccessLog* accessLog() const { return access_log_.get(); }
  // Whether anything reads what a request records (else the frontends skip the upstream
  // call's stats).
  bool active() const { return metrics_ || access_log_; }

  void routed(RequestInfo& info, const SeriesKey& key) {
    if (series_) series_->started(info, series_->series(key));
  }

  // `endpoint`: the HTTP endpoint's name (static storage); `target` the request target.
  void finishHttp(const RequestInfo& info, int status, std::string_view endpoint,
                  std::string_view target) {
    const Outcome outcome = info.cut ? cutOutcome() : httpOutcome(status);
    const Clock::time_point now = Clock::now();
    if (metrics_) {
      metrics_->apiCall(Protocol::kHttp, endpoint, outcome, now - info.start);
      RequestMetrics::finish(info, outcome, now);
    }
    if (access_log_) access_log_->record(AccessEntry{&info, endpoint, target, status});
  }

  // `method`: the gRPC method's short name (static storage), e.g. "ModelInfer".
  void finishGrpc(const RequestInfo& info, int code, std::string_view method) {
    const Outcome outcome = grpcOutcome(code);
    const Clock::time_point now = Clock::now();
    if (metrics_) {
      metrics_->apiCall(Protocol::kGrpc, method, outcome, now - info.start);
      RequestMetrics::finish(info, outcome, now);
    }
    if (access_log_) access_log_->record(AccessEntry{&info, method, "", code});
  }

  // One request carried by a stream (a ModelStreamInfer message): its series and access
  // line, as finishGrpc, but no API call; the stream itself is one (grpcCall).
  void finishStreamed(const RequestInfo& info, int code, std::string_view method) {
    if (metrics_) RequestMetrics::finish(info, grpcOutcome(code), Clock::now());
    if (access_log_) access_log_->record(AccessEntry{&info, method, "", code});
  }

  // A gRPC call that is not a request of its own (a whole stream, whose messages are):
  // only the API call counter and its duration.
  void grpcCall(std::string_view method, int code, Clock::time_point start) {
    if (!metrics_) return;
    metrics_->apiCall(Protocol::kGrpc, method, grpcOutcome(code), Clock::now() - start);
  }

 private:
  std::shared_ptr<RequestMetrics> metrics_;
  std::unique_ptr<AccessLog> access_log_;
  std::shared_ptr<RequestMetrics> series_;  // metrics_, or the access log's own labels
};

}  // namespace infergate::gateway::telemetry
