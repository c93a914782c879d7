#include "gateway/telemetry/request_info.h"

namespace infergate::gateway::telemetry {

std::string TraceContext::traceparent() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(55);
  out += "00-";
  out += trace_id;
  out += '-';
  out += span_id;
  out += '-';
  out += kHex[flags >> 4];
  out += kHex[flags & 0xf];
  return out;
}

}  // namespace infergate::gateway::telemetry
