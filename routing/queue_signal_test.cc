#include "routing/queue_signal.h"

#include <gtest/gtest.h>

#include <string>

namespace infergate::routing {
namespace {

// As Triton 24.x exposes it, trimmed.
constexpr std::string_view kTriton = R"(# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="resnet50",version="1"} 812
nv_inference_request_success{model="bert",version="2"} 77
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="resnet50",version="1"} 3
nv_inference_pending_request_count{model="bert",version="2"} 4
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-0d7e"} 0.42
)";

uint64_t parse(std::string_view text) {
  codecs::StatusOr<uint64_t> pending = pendingRequestsFromMetrics(text);
  EXPECT_TRUE(pending.ok()) << pending.status();
  return pending.ok() ? *pending : UINT64_MAX;
}

codecs::Status error(std::string_view text) {
  codecs::StatusOr<uint64_t> pending = pendingRequestsFromMetrics(text);
  EXPECT_FALSE(pending.ok()) << "parsed as " << *pending;
  return pending.status();
}

TEST(PendingRequestsFromMetrics, SumsEverySampleWhateverItsLabels) {
  EXPECT_EQ(parse(kTriton), 7u);
}

TEST(PendingRequestsFromMetrics, SampleWithoutLabels) {
  EXPECT_EQ(parse("nv_inference_pending_request_count 12\n"), 12u);
}

TEST(PendingRequestsFromMetrics, ZeroIsAnAnswer) {
  EXPECT_EQ(parse("nv_inference_pending_request_count{model=\"a\"} 0\n"), 0u);
}

TEST(PendingRequestsFromMetrics, IgnoresLongerNamesThatStartWithIt) {
  EXPECT_EQ(parse("nv_inference_pending_request_count_foo 100\n"
                  "nv_inference_pending_request_countx{model=\"a\"} 100\n"
                  "nv_inference_pending_request_count:rate 100\n"
                  "nv_inference_pending_request_count{model=\"a\"} 2\n"),
            2u);
}

TEST(PendingRequestsFromMetrics, IgnoresCommentsHelpTypeAndOtherMetrics) {
  EXPECT_EQ(parse("# nv_inference_pending_request_count 100\n"
                  "# HELP nv_inference_pending_request_count 100 pending\n"
                  "# TYPE nv_inference_pending_request_count gauge\n"
                  "\n"
                  "   \n"
                  "other_metric{name=\"nv_inference_pending_request_count\"} 100\n"
                  "nv_inference_pending_request_count 5\n"
                  "# EOF\n"),
            5u);
}

TEST(PendingRequestsFromMetrics, LabelValuesMayHoldBracesQuotesAndSpaces) {
  EXPECT_EQ(parse("nv_inference_pending_request_count{model=\"a} 9\",v=\"q\\\"}\"} 4\n"
                  "nv_inference_pending_request_count{model=\"b\\\\\"} 1\n"),
            5u);
}

TEST(PendingRequestsFromMetrics, AcceptsFloatsTimestampsCrlfAndNoFinalNewline) {
  EXPECT_EQ(parse("nv_inference_pending_request_count{model=\"a\"} 3.0 1712345678000\r\n"
                  "nv_inference_pending_request_count{model=\"b\"} 2e1\r\n"
                  "nv_inference_pending_request_count{model=\"c\"} +1\t\n"
                  "\tnv_inference_pending_request_count{model=\"d\"}   1.6"),
            3u + 20 + 1 + 2);
}

TEST(PendingRequestsFromMetrics, HugeValuesSaturate) {
  EXPECT_EQ(parse("nv_inference_pending_request_count{model=\"a\"} 1e30\n"
                  "nv_inference_pending_request_count{model=\"b\"} 5\n"),
            UINT64_MAX);
  EXPECT_EQ(parse("nv_inference_pending_request_count{model=\"a\"} 18446744073709551615\n"
                  "nv_inference_pending_request_count{model=\"b\"} 18446744073709551615\n"),
            UINT64_MAX);
}

TEST(PendingRequestsFromMetrics, MissingMetricIsNotFound) {
  EXPECT_EQ(error("").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(error("nv_gpu_utilization 0.5\n").code(), absl::StatusCode::kNotFound);
  // Declared but with no sample (no model loaded) is absent too.
  EXPECT_EQ(error("# HELP nv_inference_pending_request_count x\n"
                  "# TYPE nv_inference_pending_request_count gauge\n"
                  "nv_inference_pending_request_count_total 3\n")
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(PendingRequestsFromMetrics, NanIsRejectedNamingTheLine) {
  codecs::Status status = error("# TYPE nv_inference_pending_request_count gauge\n"
                                "nv_inference_pending_request_count{model=\"a\"} 1\n"
                                "nv_inference_pending_request_count{model=\"b\"} NaN\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(codecs::messageOf(status).find("line 3"), std::string_view::npos) << status;
  EXPECT_NE(codecs::messageOf(status).find("{model=\"b\"} NaN"), std::string_view::npos)
      << status;
}

TEST(PendingRequestsFromMetrics, NegativeInfiniteAndGarbageValuesAreRejected) {
  for (std::string_view value : {"-1", "-0.5", "+Inf", "-Inf", "Inf", "nan", "x", "3x", "0x10",
                                 "1,5", "--1", "+", "."}) {
    std::string text = "nv_inference_pending_request_count " + std::string(value) + "\n";
    codecs::Status status = error(text);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_NE(codecs::messageOf(status).find("line 1"), std::string_view::npos) << status;
  }
}

TEST(PendingRequestsFromMetrics, MissingValueOrOpenLabelsAreRejected) {
  EXPECT_EQ(error("nv_inference_pending_request_count{model=\"a\"}\n").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error("nv_inference_pending_request_count\n").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error("nv_inference_pending_request_count{model=\"a} 3\n").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error("nv_inference_pending_request_count{model=\"a\" 3\n").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PendingRequestsFromMetrics, ErrorQuotesALongLineCut) {
  std::string line = "nv_inference_pending_request_count{model=\"" + std::string(1000, 'm') +
                     "\"} bad\n";
  codecs::Status status = error(line);
  EXPECT_LT(codecs::messageOf(status).size(), 300u) << status;
  EXPECT_NE(codecs::messageOf(status).find("..."), std::string_view::npos) << status;
}

TEST(PendingRequestsFromMetrics, OneBadSampleFailsTheWholeAnswer) {
  // A half-trusted sum would steer load to an endpoint reporting garbage.
  EXPECT_EQ(error("nv_inference_pending_request_count{model=\"a\"} 100\n"
                  "nv_inference_pending_request_count{model=\"b\"} -3\n")
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infergate::routing
