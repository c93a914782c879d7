#pragma once

// What the gateway learns about one request on its way through the pipeline, read once
// when the request finishes by the request metrics (request_metrics.h) and the access log
// (access_log.h). Plain data: the stage that knows a fact writes it.
//
//   frontend   start, protocol, the series (once routed), request id, trace context,
//              its own decode/encode time, bytes in and out, the outcome
//   fleet call (upstream/fleet_call.h) the CallStats: endpoint, queue wait, upstream
//              time, attempts, the upstream side's transcoding, shared-memory handoff
//
// Threads: a RequestInfo belongs to its request; the stages write it in the order the
// request moves through them (each hand-over between threads is a post or a completion,
// which orders the writes before the reads).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace infergate::gateway::telemetry {

using Clock = std::chrono::steady_clock;

enum class Protocol : uint8_t { kHttp, kGrpc };
enum class UpstreamProtocol : uint8_t { kBuiltin, kHttp, kGrpc };
const char* protocolName(Protocol protocol);
const char* upstreamProtocolName(UpstreamProtocol protocol);

// What a call toward an upstream reports of itself. The fleet call writes it before its
// completion runs; the frontend reads it after.
struct CallStats {
  std::string endpoint;            // the last attempt's endpoint; "" = none was reached
  Clock::duration queue_wait{};    // waiting for a slot in the upstream's queue
  Clock::duration upstream{};      // the last attempt, from send to answer
  Clock::duration transcode{};     // encoding toward the upstream, decoding its answer
  uint32_t attempts = 0;
  bool shm_handoff = false;        // some tensor went through shared memory
};

// The W3C trace context of a request (https://www.w3.org/TR/trace-context/), as the
// gateway forwards it: the client's trace id, the gateway's own span id.
struct TraceContext {
  std::string trace_id;        // 32 lowercase hex digits; "" = no valid traceparent came
  std::string parent_span_id;  // the client's span (16 hex digits)
  std::string span_id;         // the gateway's span, the upstream's parent
  uint8_t flags = 0;
  std::string tracestate;      // forwarded as it came
  bool valid() const { return !trace_id.empty(); }
  // "00-<trace id>-<span id>-<flags>" for the upstream.
  std::string traceparent() const;
};

// The trace context of a request from its `traceparent` / `tracestate` values (either may
// be empty): valid when traceparent is a well-formed version-00 value (or a later version
// whose first four fields are well formed, as the W3C text asks), its trace id and parent
// id not all zeros; the gateway's own span id is drawn then. Invalid or absent: an empty
// context (the gateway starts no trace of its own and forwards nothing).
TraceContext parseTraceContext(std::string_view traceparent, std::string_view tracestate);
// 16 random lowercase hex digits, never all zeros.
std::string newSpanId();
// A request id for requests that bring none: 16 hex digits, unique per process run.
std::string newRequestId();

class RequestSeries;  // request_metrics.h

struct RequestInfo {
  Protocol protocol = Protocol::kHttp;
  Clock::time_point start{};
  // The request's series: set once an inference request is routed; null for the other
  // endpoints and for requests refused before routing (no model, no route).
  RequestSeries* series = nullptr;
  std::shared_ptr<CallStats> call;  // set when the request went to a remote upstream
  Clock::duration transcode{};      // the frontend's own decode and encode
  uint64_t request_bytes = 0, response_bytes = 0;
  // An answer that began and then ended short of what its head announced (a relay whose
  // upstream failed after the head): counted as `code="cut"`, not as its head's status.
  bool cut = false;
  std::string request_id;           // x-request-id, else the request's `id`
  TraceContext trace;
  std::string client_address;
  std::string principal;  // who the credentials proved (auth); "" = anonymous

  // Creates `call` (once) and returns it, for the fleet call to fill.
  const std::shared_ptr<CallStats>& callStats() {
    if (!call) call = std::make_shared<CallStats>();
    return call;
  }
};

}  // namespace infergate::gateway::telemetry
