// HeaderList: names compare case-insensitively (ASCII letters folded, nothing else);
// the views it hands out stay valid across moves and copies and growth.

#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "gateway/http/http_message.h"

namespace infergate::gateway::http {
namespace {

TEST(HeaderListTest, FindsKnownAndOtherNamesInAnyCase) {
  HeaderList h;
  h.add("Content-Type", "application/json");
  h.add("X-Tenant", "blue");
  h.add("INFERENCE-HEADER-CONTENT-LENGTH", "42");
  h.add("content-type", "second");  // a repeat: the first one is found
  ASSERT_NE(h.find("content-type"), nullptr);
  EXPECT_EQ(*h.find("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(*h.find("Inference-Header-Content-Length"), "42");
  EXPECT_EQ(*h.find("x-tenant"), "blue");
  EXPECT_EQ(h.find("Content-Encoding"), nullptr);  // known, absent
  EXPECT_EQ(h.find("X-Other"), nullptr);           // unknown, absent
  EXPECT_EQ(h.find("Content-Typ"), nullptr);
  EXPECT_EQ(h.find(""), nullptr);
  EXPECT_EQ(h.size(), 4u);
}

TEST(HeaderListTest, ManyFieldsAreAllFound) {
  HeaderList h;
  for (int i = 0; i < 40; ++i) h.add("X-Field-" + std::to_string(i), std::to_string(i));
  h.add("Accept-Encoding", "gzip");  // the 41st
  h.add("Authorization", "Bearer t");
  ASSERT_NE(h.find("accept-encoding"), nullptr);
  EXPECT_EQ(*h.find("accept-encoding"), "gzip");
  EXPECT_EQ(*h.find("AUTHORIZATION"), "Bearer t");
  EXPECT_EQ(*h.find("x-field-39"), "39");
  EXPECT_EQ(h.find("Host"), nullptr);
}

TEST(HeaderListTest, ViewsSurviveGrowthMovesAndTheOriginalsEnd) {
  HeaderList h;
  std::string long_value(3000, 'v');  // larger than a block: a block of its own
  {
    std::string name = "X-Before";
    std::string value = "kept";
    h.add(name, value);
    name.assign(name.size(), '?');  // the list keeps its own bytes
    value.assign(value.size(), '?');
  }
  const std::string_view* before = h.find("x-before");
  ASSERT_NE(before, nullptr);
  const char* before_bytes = before->data();
  h.add("X-Long", long_value);
  for (int i = 0; i < 100; ++i) h.add("X-Many-" + std::to_string(i), "value number " + std::to_string(i));
  EXPECT_EQ(*h.find("X-Before"), "kept");
  EXPECT_EQ(h.find("X-Before")->data(), before_bytes);  // never moved
  EXPECT_EQ(*h.find("X-Long"), long_value);

  HeaderList moved = std::move(h);
  EXPECT_EQ(moved.find("X-Before")->data(), before_bytes);  // moved with its block
  EXPECT_EQ(*moved.find("x-many-99"), "value number 99");
  // The moved-from list is empty and takes new fields of its own.
  EXPECT_EQ(h.size(), 0u);  // NOLINT(bugprone-use-after-move): specified above
  h.add("Host", "other");
  EXPECT_EQ(*h.find("host"), "other");
  EXPECT_EQ(*moved.find("X-Before"), "kept");

  HeaderList copy;
  {
    HeaderList source = moved;  // copies own their bytes
    copy = source;
  }
  EXPECT_EQ(copy.size(), moved.size());
  EXPECT_EQ(*copy.find("X-Long"), long_value);
  EXPECT_NE(copy.find("X-Before")->data(), before_bytes);
  EXPECT_EQ(*copy.find("x-before"), "kept");
}

TEST(HeaderListTest, EmptyValuesAndReservedRoom) {
  HeaderList h;
  h.reserve(3, 64);
  h.add("X-Empty", "");
  h.add("Expect", "100-continue");
  h.add("Host", "");
  ASSERT_NE(h.find("x-empty"), nullptr);
  EXPECT_TRUE(h.find("x-empty")->empty());
  ASSERT_NE(h.find("host"), nullptr);
  EXPECT_TRUE(h.find("HOST")->empty());
  EXPECT_EQ(*h.find("expect"), "100-continue");
  // Iteration gives every field in order, as added.
  std::string order;
  for (const auto& [name, value] : h) order.append(name).append("=").append(value).append(";");
  EXPECT_EQ(order, "X-Empty=;Expect=100-continue;Host=;");
}

}  // namespace
}  // namespace infergate::gateway::http
