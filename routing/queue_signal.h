#pragma once

// The load-aware policy's signal: how many requests an endpoint holds, read from Triton's
// Prometheus text exposition (GET :8002/metrics).
//
//   # HELP nv_inference_pending_request_count Instantaneous number of pending requests ...
//   # TYPE nv_inference_pending_request_count gauge
//   nv_inference_pending_request_count{model="resnet50",version="1"} 3
//   nv_inference_pending_request_count{model="bert",version="2"} 0
//                                                      -> 3
//
// The answer is the sum of every sample of nv_inference_pending_request_count, whatever
// its labels (Triton exports one per model version). Comments (# HELP, # TYPE, any
// other), blank lines, other metrics and metrics whose name merely starts with this one
// (nv_inference_pending_request_count_foo) are ignored; a trailing timestamp is allowed.
// Values are Prometheus floats ("3", "3.0", "3e0"); a fraction is rounded to the nearest
// integer and the sum saturates at UINT64_MAX.
//
// Errors:
//   NOT_FOUND         no sample of the metric (a server that does not export it, or a
//                     Triton with no model loaded): the caller falls back to its own
//                     outstanding count; it says nothing about the endpoint's health.
//   INVALID_ARGUMENT  a sample of the metric whose value is not a finite non-negative
//                     number (NaN, -1, +Inf, "x", none) or whose label set is not closed;
//                     the message names the line by number and quotes it.
//
// Pure and thread-safe; one pass over the text, no allocation unless it fails.

#include <cstdint>
#include <string_view>

#include "codecs/status.h"

namespace infergate::routing {

inline constexpr std::string_view kPendingRequestMetric = "nv_inference_pending_request_count";

codecs::StatusOr<uint64_t> pendingRequestsFromMetrics(std::string_view prometheus_text);

}  // namespace infergate::routing
