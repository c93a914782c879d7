#include "gateway/telemetry/request_info.h"

#include <atomic>
#include <random>

namespace infergate::gateway::telemetry {


namespace {

constexpr char kHex[] = "0123456789abcdef";

bool isLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool allZeros(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

uint64_t nextRandom() {
  thread_local std::mt19937_64 engine([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  return engine();
}

std::string hex16(uint64_t v) {
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kHex[v & 0xf];
  return out;
}

}  // namespace

std::string TraceContext::traceparent() const {
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

TraceContext parseTraceContext(std::string_view traceparent, std::string_view tracestate) {
  TraceContext out;
  std::string_view v = traceparent;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return out;
  std::string_view version = v.substr(0, 2), trace = v.substr(3, 32), parent = v.substr(36, 16),
                   flags = v.substr(53, 2);
  if (!isLowerHex(version) || version == "ff") return out;
  if (version == "00" && v.size() != 55) return out;
  if (version != "00" && v.size() > 55 && v[55] != '-') return out;
  if (!isLowerHex(trace) || !isLowerHex(parent) || !isLowerHex(flags)) return out;
  if (allZeros(trace) || allZeros(parent)) return out;
  out.trace_id = std::string(trace);
  out.parent_span_id = std::string(parent);
  out.flags = static_cast<uint8_t>(std::stoi(std::string(flags), nullptr, 16));
  // A later version's flags carry bits this version does not know: only "sampled" stays.
  if (version != "00") out.flags &= 0x01;
  out.span_id = newSpanId();
  out.tracestate = std::string(tracestate);
  return out;
}

std::string newSpanId() {
  uint64_t v = 0;
  while (v == 0) v = nextRandom();
  return hex16(v);
}

std::string newRequestId() {
  // A random process prefix and a counter: unique within the run, and across restarts
  // with overwhelming probability, without a random draw per request.
  static const uint64_t prefix = nextRandom() & 0xffffffff00000000ULL;
  static std::atomic<uint64_t> counter{0};
  return hex16(prefix | (counter.fetch_add(1, std::memory_order_relaxed) & 0xffffffffULL));
}

}  // namespace infergate::gateway::telemetry
