#pragma once

// Shared by config/'s loader tests: parse YAML text as "test.yaml" and look at the
// error lines it produces.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "codecs/text.h"
#include "config/config_loader.h"

namespace infergate::config {

inline codecs::StatusOr<GatewayConfig> parse(std::string_view yaml) {
  return parseConfig(yaml, "test.yaml");
}

// The error lines of a file that must not load.
inline std::vector<std::string> errorLines(std::string_view yaml) {
  auto r = parse(yaml);
  EXPECT_FALSE(r.ok()) << "expected errors in:\n" << yaml;
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> lines;
  for (std::string_view line : codecs::splitOn(codecs::messageOf(r.status()), '\n')) {
    lines.emplace_back(line);
  }
  return lines;
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The file has exactly one error: it starts with `prefix` ("test.yaml:L:C: key: ") and
// its message contains `fragment`.
inline void expectOnlyError(std::string_view yaml, std::string_view prefix,
                            std::string_view fragment) {
  std::vector<std::string> lines = errorLines(yaml);
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_EQ(lines[0].substr(0, prefix.size()), prefix) << lines[0];
  EXPECT_NE(lines[0].find(fragment), std::string::npos)
      << lines[0] << "\nexpected to contain: " << fragment;
}

// The file has exactly these errors, whole lines, in this order.
inline void expectErrors(std::string_view yaml, const std::vector<std::string>& expected) {
  EXPECT_EQ(joined(errorLines(yaml)), joined(expected)) << yaml;
}

}  // namespace infergate::config
