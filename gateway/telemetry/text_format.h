#pragma once

// The text pieces both logs write (log.h, access_log.h), written once.

#include <chrono>
#include <string>
#include <string_view>

namespace infergate::gateway::telemetry {

// "2026-11-22T10:00:00.123456Z" (with_micros) or "2026-11-22T10:00:00Z", in UTC.
std::string utcTime(std::chrono::system_clock::time_point t, bool with_micros);

// A key=value line's value: as it is when it is one plain printable word, else quoted
// with '"' and '\' escaped and line breaks turned into blanks (one event, one line).
void appendTextValue(std::string& out, std::string_view value);

}  // namespace infergate::gateway::telemetry
