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

// Names are told apart by their length first: lengths 64 apart share that first test,
// and must still be compared byte by byte.
TEST(HeaderListTest, NamesOfLengthsSixtyFourApartAreToldApart) {
  const std::string long_name = "X-" + std::string(68, 'n');  // 70 bytes: 6 modulo 64
  HeaderList h;
  h.add("X-Path", "short");  // 6 bytes
  h.add(long_name, "long");
  EXPECT_EQ(*h.find("x-path"), "short");
  EXPECT_EQ(*h.find(long_name), "long");
  EXPECT_EQ(h.find("X-Pat"), nullptr);
  EXPECT_EQ(h.find("X-" + std::string(132, 'n')), nullptr);  // 134 bytes: 6 modulo 64 too
  EXPECT_EQ(h.find("X-Other"), nullptr);
  HeaderList copy;
  copy = h;
  EXPECT_EQ(*copy.find(long_name), "long");
  HeaderList moved = std::move(copy);
  EXPECT_EQ(*moved.find("X-PATH"), "short");
  copy.add("Host", "h");  // NOLINT(bugprone-use-after-move): a moved-from list takes new fields
  EXPECT_EQ(*copy.find("host"), "h");
  EXPECT_EQ(copy.find("x-path"), nullptr);
}

TEST(HeaderListTest, FieldsOfAHeadAreCopiedWithItAndKeptInOrder) {
  std::string head = "POST /x HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nContent-Length: 12\r\n\r\n";
  auto spanOf = [&head](std::string_view name, std::string_view value) {
    const size_t n = head.find(name), v = head.find(value, n + name.size());
    return HeaderList::FieldSpan{static_cast<uint32_t>(n), static_cast<uint32_t>(name.size()),
                                 static_cast<uint32_t>(v), static_cast<uint32_t>(value.size())};
  };
  const HeaderList::FieldSpan fields[] = {spanOf("Host", "h"), spanOf("X-Empty", ""),
                                          spanOf("Content-Length", "12")};
  HeaderList h;
  h.add("Before", "1");  // what was added first stays first
  h.addFromHead(head, fields);
  head.assign(head.size(), '?');  // the list keeps its own copy
  h.add("After", std::string(600, 'a'));  // past the block: the views stay put
  std::string order;
  for (const auto& [name, value] : h) order.append(name).append("=").append(value.substr(0, 3)).append(";");
  EXPECT_EQ(order, "Before=1;Host=h;X-Empty=;Content-Length=12;After=aaa;");
  EXPECT_EQ(*h.find("content-length"), "12");

  HeaderList moved = std::move(h);
  EXPECT_EQ(*moved.find("HOST"), "h");
  HeaderList empty;
  empty.addFromHead("", {});  // nothing to copy: nothing allocated, nothing added
  EXPECT_EQ(empty.size(), 0u);
}

}  // namespace
}  // namespace infergate::gateway::http
