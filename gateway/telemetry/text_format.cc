#include "gateway/telemetry/text_format.h"

#include <cstdio>
#include <ctime>

namespace infergate::gateway::telemetry {

std::string utcTime(std::chrono::system_clock::time_point t, bool with_micros) {
  using namespace std::chrono;
  const std::time_t secs = system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char out[40];
  if (with_micros) {
    const long us = static_cast<long>(duration_cast<microseconds>(t.time_since_epoch()).count() % 1000000);
    std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
  } else {
    std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return out;
}

void appendTextValue(std::string& out, std::string_view value) {
  bool plain = !value.empty();
  for (char c : value) plain = plain && c > ' ' && c != '"' && c != '=' && c != '\\' && c < 0x7f;
  if (plain) {
    out += value;
    return;
  }
  out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  out += '"';
}

}  // namespace infergate::gateway::telemetry
