#include "routing/queue_signal.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

namespace infergate::routing {
namespace {

constexpr size_t kQuotedLineMax = 160;  // longer lines are cut in error messages

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == ':';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
  return s;
}

// The position of the '}' closing the label set that opens at labels[0] == '{', or npos.
// Label values are quoted and may hold '}', '"' and '\' escaped with a backslash.
size_t closeOfLabels(std::string_view labels) {
  bool quoted = false;
  for (size_t i = 1; i < labels.size(); ++i) {
    char c = labels[i];
    if (quoted) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == '}') {
      return i;
    }
  }
  return std::string_view::npos;
}

// A sample's value as a count: a finite, non-negative Prometheus float, rounded.
std::optional<uint64_t> parseCount(std::string_view text) {
  if (text.size() > 1 && text.front() == '+') text.remove_prefix(1);  // "+3", "+Inf"
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (!std::isfinite(value) || !(value >= 0)) return std::nullopt;
  // 2^64 is exact as a double; anything at or past it saturates.
  constexpr double kTwo64 = 18446744073709551616.0;
  double rounded = std::round(value);
  if (rounded >= kTwo64) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(rounded);
}

codecs::Status badSample(size_t line_number, std::string_view line, std::string_view why) {
  bool cut = line.size() > kQuotedLineMax;
  return codecs::invalidArgument("metrics line ", line_number, ": ", why, ": \"",
                                 line.substr(0, kQuotedLineMax), cut ? "...\"" : "\"");
}

}  // namespace

codecs::StatusOr<uint64_t> pendingRequestsFromMetrics(std::string_view prometheus_text) {
  uint64_t sum = 0;
  bool found = false;
  size_t line_number = 0;
  std::string_view rest = prometheus_text;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = trim(rest.substr(0, eol));
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (!line.starts_with(kPendingRequestMetric)) continue;
    std::string_view after = line.substr(kPendingRequestMetric.size());
    if (!after.empty() && isNameChar(after.front())) continue;  // a longer name
    if (!after.empty() && after.front() == '{') {
      size_t close = closeOfLabels(after);
      if (close == std::string_view::npos) {
        return badSample(line_number, line, "unterminated label set");
      }
      after.remove_prefix(close + 1);
    } else if (!after.empty() && !isBlank(after.front())) {
      return badSample(line_number, line, "malformed sample");
    }
    after = trim(after);
    std::string_view value = after.substr(0, after.find_first_of(" \t"));
    if (value.empty()) return badSample(line_number, line, "sample has no value");
    std::optional<uint64_t> count = parseCount(value);
    if (!count) {
      return badSample(line_number, line,
                       codecs::strCat("value \"", value, "\" is not a non-negative number"));
    }
    sum = *count > std::numeric_limits<uint64_t>::max() - sum
              ? std::numeric_limits<uint64_t>::max()
              : sum + *count;
    found = true;
  }
  if (!found) {
    return absl::NotFoundError(
        codecs::strCat("no sample of ", kPendingRequestMetric, " in the metrics"));
  }
  return sum;
}

}  // namespace infergate::routing
