#include "gateway/telemetry/request_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <thread>
#include <vector>

namespace infergate::gateway::telemetry {
namespace {

using namespace std::chrono_literals;

SeriesKey key(std::string_view model, Protocol p = Protocol::kHttp) {
  return SeriesKey{p, UpstreamProtocol::kGrpc, model, "1", "routes[0]", "triton"};
}

const prometheus::MetricFamily* family(const std::vector<prometheus::MetricFamily>& all,
                                       std::string_view name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string label(const prometheus::ClientMetric& m, std::string_view name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "<absent>";
}

// The value of the one sample of `name` whose labels include every pair of `want`.
double sample(const std::vector<prometheus::MetricFamily>& all, std::string_view name,
              const std::vector<std::pair<std::string, std::string>>& want) {
  const prometheus::MetricFamily* f = family(all, name);
  if (!f) ADD_FAILURE() << "no family " << name;
  double found = -1;
  int matches = 0;
  for (const auto& m : f ? f->metric : std::vector<prometheus::ClientMetric>{}) {
    bool all_match = true;
    for (const auto& [k, v] : want) all_match = all_match && label(m, k) == v;
    if (!all_match) continue;
    ++matches;
    found = f->type == prometheus::MetricType::Gauge ? m.gauge.value : m.counter.value;
  }
  EXPECT_EQ(matches, 1) << name;
  return found;
}

TEST(Outcomes, NameTheStatusOrCode) {
  EXPECT_EQ(outcomeLabel(Protocol::kHttp, httpOutcome(200)), "200");
  EXPECT_EQ(outcomeLabel(Protocol::kHttp, httpOutcome(404)), "404");
  EXPECT_EQ(outcomeLabel(Protocol::kHttp, httpOutcome(418)), "other");
  // Every status the gateway answers with has its own label: 503 overload, 504 timeout.
  for (int status : {400, 401, 403, 404, 413, 429, 499, 500, 501, 502, 503, 504}) {
    EXPECT_EQ(outcomeLabel(Protocol::kHttp, httpOutcome(status)), std::to_string(status));
  }
  EXPECT_EQ(outcomeLabel(Protocol::kGrpc, grpcOutcome(5)), "NOT_FOUND");
  EXPECT_EQ(outcomeLabel(Protocol::kGrpc, grpcOutcome(16)), "UNAUTHENTICATED");
  EXPECT_EQ(outcomeLabel(Protocol::kGrpc, grpcOutcome(99)), "other");
  EXPECT_TRUE(outcomeSucceeded(Protocol::kHttp, httpOutcome(204)));
  EXPECT_FALSE(outcomeSucceeded(Protocol::kHttp, httpOutcome(400)));
  EXPECT_EQ(outcomeLabel(Protocol::kHttp, cutOutcome()), "cut");
  EXPECT_FALSE(outcomeSucceeded(Protocol::kHttp, cutOutcome()));
  EXPECT_TRUE(outcomeSucceeded(Protocol::kGrpc, grpcOutcome(0)));
  EXPECT_FALSE(outcomeSucceeded(Protocol::kGrpc, grpcOutcome(14)));
}

TEST(RequestMetrics, OneLabelSetIsOneSeriesWhateverTheThread) {
  RequestMetrics metrics;
  RequestSeries* a = metrics.series(key("resnet"));
  EXPECT_EQ(metrics.series(key("resnet")), a);
  EXPECT_NE(metrics.series(key("resnet", Protocol::kGrpc)), a);
  RequestSeries* from_other = nullptr;
  std::thread([&] { from_other = metrics.series(key("resnet")); }).join();
  EXPECT_EQ(from_other, a);
  EXPECT_EQ(metrics.seriesCount(), 2u);
  EXPECT_EQ(a->labels().model, "resnet");
  EXPECT_EQ(a->labels().route, "routes[0]");
}

TEST(RequestMetrics, PastTheCapNewModelsShareAnOverflowSeries) {
  RequestMetrics metrics(3);
  metrics.series(key("m0"));
  metrics.series(key("m1"));
  metrics.series(key("m2"));
  RequestSeries* x = metrics.series(key("invented-1"));
  RequestSeries* y = metrics.series(key("invented-2"));
  EXPECT_EQ(x, y);
  EXPECT_EQ(x->labels().model, "_overflow");
  EXPECT_EQ(x->labels().upstream, "triton");  // route and upstream labels stay
  EXPECT_EQ(metrics.seriesCount(), 4u);
  EXPECT_EQ(metrics.series(key("m1"))->labels().model, "m1");  // known ones keep theirs
}

// An answer that began 200 and ended short (a relay whose upstream failed after the head):
// neither a 200 nor a success, and in Triton's families a failure of the backend.
TEST(RequestMetrics, ACutAnswerCountsAsAFailureNotAsItsHeadsStatus) {
  RequestMetrics metrics;
  RequestSeries* s = metrics.series(key("simple"));
  RequestInfo cut;
  cut.start = Clock::now();
  metrics.started(cut, s);
  RequestMetrics::finish(cut, cutOutcome(), cut.start + 1ms);
  auto all = metrics.Collect();
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"model", "simple"}, {"code", "cut"}}), 1);
  EXPECT_EQ(family(all, "infergate_requests_total")->metric.size(), 1u);  // no code="200"
  EXPECT_EQ(sample(all, "nv_inference_request_success", {{"model", "simple"}}), 0);
  EXPECT_EQ(sample(all, "nv_inference_request_failure", {{"model", "simple"}, {"reason", "BACKEND"}}), 1);
}

TEST(RequestMetrics, FinishCountsOutcomeDurationsAndBytes) {
  RequestMetrics metrics;
  RequestSeries* s = metrics.series(key("simple"));
  RequestInfo ok;
  ok.start = Clock::now() - 3ms;
  metrics.started(ok, s);
  ok.request_bytes = 100;
  ok.response_bytes = 40;
  ok.callStats()->attempts = 1;
  ok.call->upstream = 2ms;
  ok.call->queue_wait = 500us;
  ok.transcode = 100us;
  RequestInfo failed;
  failed.start = Clock::now();
  metrics.started(failed, s);
  RequestInfo pending;
  pending.start = Clock::now();
  metrics.started(pending, s);

  auto mid = metrics.Collect();
  EXPECT_EQ(sample(mid, "infergate_requests_in_flight", {{"model", "simple"}}), 3);

  RequestMetrics::finish(ok, httpOutcome(200), ok.start + 3ms);
  RequestMetrics::finish(failed, httpOutcome(502), failed.start + 1ms);
  auto all = metrics.Collect();
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"model", "simple"}, {"code", "200"}}), 1);
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"model", "simple"}, {"code", "502"}}), 1);
  EXPECT_EQ(sample(all, "infergate_requests_in_flight", {{"model", "simple"}}), 1);
  EXPECT_EQ(sample(all, "infergate_request_bytes_total", {{"model", "simple"}}), 100);
  EXPECT_EQ(sample(all, "infergate_response_bytes_total", {{"model", "simple"}}), 40);

  const auto* total = family(all, "infergate_request_duration_seconds");
  ASSERT_NE(total, nullptr);
  ASSERT_EQ(total->metric.size(), 1u);
  const auto& h = total->metric[0].histogram;
  EXPECT_EQ(h.sample_count, 2u);
  EXPECT_NEAR(h.sample_sum, 0.004, 1e-9);
  EXPECT_EQ(h.bucket.back().cumulative_count, 2u);
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));

  const auto& upstream = family(all, "infergate_upstream_duration_seconds")->metric[0].histogram;
  EXPECT_EQ(upstream.sample_count, 1u);  // the failed one never reached an upstream
  EXPECT_NEAR(upstream.sample_sum, 0.002, 1e-9);
  const auto& overhead = family(all, "infergate_gateway_overhead_seconds")->metric[0].histogram;
  EXPECT_NEAR(overhead.sample_sum, 0.001, 1e-9);
  const auto& transcode = family(all, "infergate_transcode_duration_seconds")->metric[0].histogram;
  EXPECT_EQ(transcode.sample_count, 1u);

  // Triton's families: per (model, version), durations of successes only.
  EXPECT_EQ(sample(all, "nv_inference_request_success", {{"model", "simple"}, {"version", "1"}}), 1);
  EXPECT_EQ(sample(all, "nv_inference_request_failure", {{"model", "simple"}, {"reason", "BACKEND"}}), 1);
  EXPECT_EQ(sample(all, "nv_inference_count", {{"model", "simple"}}), 1);
  EXPECT_EQ(sample(all, "nv_inference_request_duration_us", {{"model", "simple"}}), 3000);
  EXPECT_EQ(sample(all, "nv_inference_queue_duration_us", {{"model", "simple"}}), 500);
  EXPECT_EQ(sample(all, "nv_inference_pending_request_count", {{"model", "simple"}}), 1);
}

TEST(RequestMetrics, TritonFamiliesAddUpEveryRouteOfAModel) {
  RequestMetrics metrics;
  for (Protocol p : {Protocol::kHttp, Protocol::kGrpc}) {
    RequestSeries* s = metrics.series(key("bert", p));
    for (int i = 0; i < 3; ++i) {
      RequestInfo info;
      info.start = Clock::now();
      metrics.started(info, s);
      RequestMetrics::finish(info, p == Protocol::kGrpc ? grpcOutcome(0) : httpOutcome(200),
                             info.start);
    }
    RequestInfo bad;
    bad.start = Clock::now();
    metrics.started(bad, s);
    RequestMetrics::finish(bad, p == Protocol::kGrpc ? grpcOutcome(3) : httpOutcome(400), bad.start);
  }
  auto all = metrics.Collect();
  EXPECT_EQ(sample(all, "nv_inference_request_success", {{"model", "bert"}}), 6);
  EXPECT_EQ(sample(all, "nv_inference_request_failure", {{"model", "bert"}, {"reason", "REJECTED"}}), 2);
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"protocol", "grpc"}, {"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"protocol", "http"}, {"code", "400"}}), 1);
}

TEST(RequestMetrics, ManyThreadsRecordWithoutLosingACount) {
  RequestMetrics metrics;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        RequestInfo info;
        info.start = Clock::now();
        metrics.started(info, metrics.series(key(i % 2 ? "a" : "b")));
        RequestMetrics::finish(info, httpOutcome(200), Clock::now());
        metrics.apiCall(Protocol::kHttp, "infer", httpOutcome(t % 2 ? 200 : 404), 10us);
      }
    });
  }
  // Scrapes while the writers run: each sees some consistent-enough state, never a crash.
  for (int i = 0; i < 20; ++i) metrics.Collect();
  for (auto& t : threads) t.join();
  auto all = metrics.Collect();
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"model", "a"}}), 6000);
  EXPECT_EQ(sample(all, "infergate_requests_total", {{"model", "b"}}), 6000);
  EXPECT_EQ(sample(all, "infergate_requests_in_flight", {{"model", "a"}}), 0);
  EXPECT_EQ(sample(all, "infergate_http_requests_total", {{"endpoint", "infer"}, {"code", "200"}}), 6000);
  EXPECT_EQ(sample(all, "infergate_http_requests_total", {{"endpoint", "infer"}, {"code", "404"}}), 6000);
}

TEST(RequestMetrics, SerializesAsPrometheusText) {
  RequestMetrics metrics;
  RequestInfo info;
  info.start = Clock::now();
  metrics.started(info, metrics.series(key("simple")));
  RequestMetrics::finish(info, httpOutcome(200), info.start + 30us);
  metrics.apiCall(Protocol::kGrpc, "ModelInfer", grpcOutcome(0), 30us);
  std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  EXPECT_NE(text.find("# TYPE infergate_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("infergate_requests_total{model=\"simple\",version=\"1\",route=\"routes[0]\","
                      "upstream=\"triton\",protocol=\"http\",upstream_protocol=\"grpc\",code=\"200\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("infergate_request_duration_seconds_bucket{model=\"simple\",version=\"1\","
                      "route=\"routes[0]\",upstream=\"triton\",protocol=\"http\","
                      "upstream_protocol=\"grpc\",le=\"5e-05\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("infergate_grpc_requests_total{method=\"ModelInfer\",code=\"OK\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace infergate::gateway::telemetry
