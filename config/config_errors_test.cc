#include "config/config_errors.h"

#include <gtest/gtest.h>

namespace infergate::config {
namespace {

TEST(ConfigErrors, EmptyIsOk) { EXPECT_TRUE(ConfigErrors().toStatus().ok()); }

TEST(ConfigErrors, FormatsFileLineColumnKeyAndMessage) {
  EXPECT_EQ(formatError({{"a.yaml", 3, 7}, "limits.max_header_bytes", "too big"}),
            "a.yaml:3:7: limits.max_header_bytes: too big");
  EXPECT_EQ(formatError({{"a.yaml", 1, 1}, "", "YAML syntax error: x"}),
            "a.yaml:1:1: YAML syntax error: x");
}

// Found by the config fuzzer: a NUL in a key split its error over two lines.
TEST(ConfigErrors, QuotedControlBytesAndBrokenUtf8StayOnOneLine) {
  std::string key("upstreams[0].endp\0ts\n", 21);
  EXPECT_EQ(formatError({{"a.yaml", 2, 3}, key, "unknown key \"\x1b[2J\xff\""}),
            "a.yaml:2:3: upstreams[0].endp\\x00ts\\x0a: unknown key \"\\x1b[2J\xef\xbf\xbd\"");
  // UTF-8 text is kept as it is.
  EXPECT_EQ(formatError({{"a.yaml", 1, 1}, "routes[0].name", "caf\xc3\xa9"}),
            "a.yaml:1:1: routes[0].name: caf\xc3\xa9");
}

TEST(ConfigErrors, JoinsAllErrorsOnePerLineInFileOrder) {
  ConfigErrors errors;
  errors.add({"f", 9, 1}, "routes", "third");
  errors.add({"f", 2, 5}, "b", "second");
  errors.add({"f", 2, 1}, "a", "first");
  errors.add({"f", 9, 1}, "routes", "fourth (same place, kept after third)");
  codecs::Status s = errors.toStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(s),
            "f:2:1: a: first\nf:2:5: b: second\nf:9:1: routes: third\n"
            "f:9:1: routes: fourth (same place, kept after third)");
  EXPECT_EQ(errors.size(), 4u);
}

}  // namespace
}  // namespace infergate::config
