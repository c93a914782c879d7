#include "gateway/http2/hpack.h"

#include <nghttp2/nghttp2.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace infergate::gateway::http2 {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

std::vector<uint8_t> fromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string toHex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::span<const uint8_t> bytesOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

HpackDecoder::Result decodeAll(HpackDecoder& d, std::span<const uint8_t> block, Fields& out,
                               size_t max_list_bytes = SIZE_MAX) {
  out.clear();
  return d.decode(block, max_list_bytes,
                  [&](std::string_view n, std::string_view v) { out.emplace_back(std::string(n), std::string(v)); });
}

// ---- Huffman ----

TEST(Huffman, TheRfcStringsCodeBothWays) {
  // RFC 7541 C.4 and C.6.
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"},
      {"no-cache", "a8eb10649cbf"},
      {"custom-key", "25a849e95ba97d7f"},
      {"custom-value", "25a849e95bb8e8b4bf"},
      {"302", "6402"},
      {"private", "aec3771a4b"},
      {"Mon, 21 Oct 2013 20:13:21 GMT", "d07abe941054d444a8200595040b8166e082a62d1bff"},
      {"https://www.example.com", "9d29ad171863c78f0b97c8e9ae82ae43d3"},
  };
  for (const auto& [text, hex] : cases) {
    std::string coded;
    huffmanEncode(text, coded);
    EXPECT_EQ(toHex(coded), hex) << text;
    EXPECT_EQ(huffmanEncodedLength(text), hex.size() / 2) << text;
    std::string decoded = "kept:";
    ASSERT_TRUE(huffmanDecode(fromHex(hex), decoded)) << text;
    EXPECT_EQ(decoded, std::string("kept:") + std::string(text));
  }
}

TEST(Huffman, EveryByteValueRoundTrips) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (size_t start = 0; start < all.size(); start += 7) {
    const std::string text = all.substr(start) + all.substr(0, start);
    std::string coded, decoded;
    huffmanEncode(text, coded);
    ASSERT_TRUE(huffmanDecode(bytesOf(coded), decoded));
    EXPECT_EQ(decoded, text);
  }
}

TEST(Huffman, RefusesEosLongPaddingAndPaddingThatIsNotOnes) {
  std::string out;
  // The 30-bit EOS code, then two bits of padding.
  EXPECT_FALSE(huffmanDecode(fromHex("ffffffff"), out));
  // "www.example.com" with a whole extra byte of ones: 8 bits of padding or more.
  EXPECT_FALSE(huffmanDecode(fromHex("f1e3c2e5f23a6ba0ab90f4ffff"), out));
  // Its last byte's padding with a zero bit in it.
  EXPECT_FALSE(huffmanDecode(fromHex("f1e3c2e5f23a6ba0ab90f4fe"), out));
  // A lone byte of ones is 8 bits of padding; seven (after a 5-bit '0' = 00000) is fine.
  EXPECT_FALSE(huffmanDecode(fromHex("ff"), out));
  out.clear();
  EXPECT_TRUE(huffmanDecode(fromHex("07"), out));
  EXPECT_EQ(out, "0");
  out.clear();
  EXPECT_TRUE(huffmanDecode({}, out));
  EXPECT_EQ(out, "");
}

// ---- the decoder ----

const Fields kRequest1 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Fields kRequest2 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"},
                          {":authority", "www.example.com"}, {"cache-control", "no-cache"}};
const Fields kRequest3 = {{":method", "GET"}, {":scheme", "https"}, {":path", "/index.html"},
                          {":authority", "www.example.com"}, {"custom-key", "custom-value"}};

void expectRfcRequests(const char* hex1, const char* hex2, const char* hex3) {
  HpackDecoder d;
  Fields got;
  ASSERT_TRUE(decodeAll(d, fromHex(hex1), got).status.ok());
  EXPECT_EQ(got, kRequest1);
  EXPECT_EQ(d.table().bytes(), 57u);
  ASSERT_TRUE(decodeAll(d, fromHex(hex2), got).status.ok());
  EXPECT_EQ(got, kRequest2);
  EXPECT_EQ(d.table().bytes(), 110u);
  const auto r = decodeAll(d, fromHex(hex3), got);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(got, kRequest3);
  EXPECT_EQ(d.table().bytes(), 164u);
  ASSERT_EQ(d.table().size(), 3u);
  EXPECT_EQ(d.table().at(0).name, "custom-key");
  EXPECT_EQ(d.table().at(0).value, "custom-value");
  EXPECT_EQ(d.table().at(1).name, "cache-control");
  EXPECT_EQ(d.table().at(2).name, ":authority");
  EXPECT_EQ(r.list_bytes, 5 * 32 + 7 + 3 + 7 + 5 + 5 + 11 + 10 + 15 + 10 + 12);
  EXPECT_FALSE(r.too_large);
}

TEST(HpackDecoder, TheRfcRequestsWithoutHuffman) {  // RFC 7541 C.3
  expectRfcRequests("828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
                    "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565");
}

TEST(HpackDecoder, TheRfcRequestsWithHuffman) {  // RFC 7541 C.4
  expectRfcRequests("828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
                    "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf");
}

TEST(HpackDecoder, EachMalformedBlockNamesItsFaultAndWhere) {
  const std::pair<const char*, const char*> cases[] = {
      {"80", "HPACK: index 0 is in neither table at byte 0"},
      {"82be", "HPACK: index 62 is in neither table at byte 1"},
      {"82ff", "HPACK: a malformed index at byte 1"},  // the integer runs past the end
      {"ffffffffffffff7f", "HPACK: a malformed index at byte 0"},  // past 2^28
      {"ff80808080808001", "HPACK: a malformed index at byte 0"},  // continuation bytes past any range
      {"410f7777", "HPACK: a malformed value string at byte 0"},  // the value runs past the end
      {"7f", "HPACK: a malformed name index at byte 0"},
      {"7f00", "HPACK: name index 63 is in neither table at byte 0"},
      {"400a637573", "HPACK: a malformed name string at byte 0"},
      {"0081ff0161", "HPACK: a malformed name string at byte 0"},  // Huffman EOS-ish padding
      {"823f00", "HPACK: a table size update after a field at byte 1"},
      {"3fe21f", "HPACK: a table size of 4097 bytes, over the 4096 announced at byte 0"},
  };
  for (const auto& [hex, message] : cases) {
    HpackDecoder d;
    Fields got;
    const auto r = decodeAll(d, fromHex(hex), got);
    EXPECT_FALSE(r.status.ok()) << hex;
    EXPECT_NE(std::string(codecs::messageOf(r.status)).find(message), std::string::npos)
        << hex << ": " << r.status;
  }
}

TEST(HpackDecoder, ALoweredLimitRequiresASizeUpdateFirst) {
  HpackDecoder d;
  Fields got;
  ASSERT_TRUE(decodeAll(d, fromHex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), got).status.ok());
  d.setMaxTableBytes(100);
  // A field first: refused, the table is out of step.
  auto r = decodeAll(d, fromHex("82"), got);
  EXPECT_EQ(codecs::messageOf(r.status), "HPACK: a field before the required table size update at byte 0 of the header block");
  HpackDecoder e;
  ASSERT_TRUE(decodeAll(e, fromHex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), got).status.ok());
  e.setMaxTableBytes(100);
  // An empty block cannot skip it either.
  r = decodeAll(e, {}, got);
  EXPECT_FALSE(r.status.ok());
  // An update to 0 then to 100 (two in a row are allowed) evicts, then the block goes on.
  HpackDecoder f;
  ASSERT_TRUE(decodeAll(f, fromHex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), got).status.ok());
  f.setMaxTableBytes(100);
  r = decodeAll(f, fromHex("203f4582"), got);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(got, (Fields{{":method", "GET"}}));
  EXPECT_EQ(f.table().size(), 0u);
  EXPECT_EQ(f.table().maxBytes(), 100u);
}

TEST(HpackDecoder, AListPastTheLimitIsReadToTheEndButNotHandedOn) {
  HpackDecoder d;
  Fields got;
  // The 4 fields of C.4.1: 42 + 43 + 38 + 57 bytes by RFC 7540's measure.
  const auto r = decodeAll(d, fromHex("828684418cf1e3c2e5f23a6ba0ab90f4ff"), got, 100);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.too_large);
  EXPECT_EQ(r.list_bytes, 42u + 43 + 38 + 57);
  EXPECT_EQ(got, (Fields{{":method", "GET"}, {":scheme", "http"}}));
  // The :authority entry still went into the table: the next block refers to it.
  ASSERT_TRUE(decodeAll(d, fromHex("be"), got).status.ok());
  EXPECT_EQ(got, (Fields{{":authority", "www.example.com"}}));
}

// ---- the table ----

TEST(HpackTable, EvictsOldestFirstAndAnOversizedEntryEmptiesIt) {
  HpackTable t(100);
  t.insert("a", std::string(10, 'x'));  // 43
  t.insert("b", std::string(10, 'y'));  // 43
  EXPECT_EQ(t.bytes(), 86u);
  t.insert("c", "z");  // 34: "a" goes
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at(0).name, "c");
  EXPECT_EQ(t.at(1).name, "b");
  EXPECT_EQ(t.bytes(), 77u);
  // An entry whose name is the oldest entry's own (evicted by this very insert).
  const auto oldest = t.at(1);
  t.insert(oldest.name, std::string(40, 'w'));  // 73: both go
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.at(0).name, "b");
  EXPECT_EQ(t.at(0).value, std::string(40, 'w'));
  t.insert("big", std::string(70, 'q'));  // 105 > 100
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.bytes(), 0u);
}

TEST(HpackTable, GrowingTheLimitKeepsEveryEntryInOrder) {
  HpackTable t(70);
  t.insert("a", "1");
  t.insert("b", "2");
  t.setMaxBytes(4096);
  for (int i = 0; i < 100; ++i) t.insert("k", std::to_string(i));
  ASSERT_EQ(t.size(), 102u);
  EXPECT_EQ(t.at(0).value, "99");
  EXPECT_EQ(t.at(100).name, "b");
  EXPECT_EQ(t.at(101).name, "a");
  t.setMaxBytes(70);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at(1).value, "98");
}

// ---- the encoder ----

TEST(HpackEncoder, TableHitsAreOneByteAndLiteralsAreRaw) {
  HpackEncoder e;
  std::string out;
  e.beginBlock(out);
  e.encode(":method", "POST", HpackEncoder::Indexing::kIndex, out);
  EXPECT_EQ(toHex(out), "83");
  out.clear();
  e.encode("content-type", "application/grpc", HpackEncoder::Indexing::kIndex, out);
  EXPECT_EQ(toHex(out), "5f10" + toHex("application/grpc"));  // name 31 in the 6-bit prefix
  out.clear();
  e.encode("content-type", "application/grpc", HpackEncoder::Indexing::kIndex, out);
  EXPECT_EQ(toHex(out), "be");  // index 62
  out.clear();
  e.encode("grpc-timeout", "1S", HpackEncoder::Indexing::kNoIndex, out);
  EXPECT_EQ(toHex(out), "000c" + toHex("grpc-timeout") + "02" + toHex("1S"));
  out.clear();
  e.encode("authorization", "secret", HpackEncoder::Indexing::kNeverIndex, out);
  EXPECT_EQ(toHex(out), "1f08" + std::string("06") + toHex("secret"));  // name 23 = 15 + 8
  EXPECT_EQ(e.table().size(), 1u);
}

TEST(HpackEncoder, ASmallerThenLargerPeerLimitIsAnnouncedAsBoth) {
  HpackEncoder e;
  std::string out;
  e.encode("x-a", "1", HpackEncoder::Indexing::kIndex, out);
  e.setPeerMaxTableBytes(0);
  e.setPeerMaxTableBytes(2048);
  out.clear();
  e.beginBlock(out);
  EXPECT_EQ(toHex(out), "203fe10f");  // 0, then 2048 = 31 + 2017 (0xe1 0x0f)
  EXPECT_EQ(e.table().size(), 0u);
  out.clear();
  e.beginBlock(out);
  EXPECT_EQ(out, "");
  // Larger than its own limit: held to its own.
  e.setPeerMaxTableBytes(1 << 20);
  e.beginBlock(out);
  EXPECT_EQ(toHex(out), "3fe11f");  // 4096
}

// ---- against nghttp2, both ways ----

struct Deflater {
  nghttp2_hd_deflater* d = nullptr;
  explicit Deflater(size_t max) { nghttp2_hd_deflate_new(&d, max); }
  ~Deflater() { nghttp2_hd_deflate_del(d); }
};
struct Inflater {
  nghttp2_hd_inflater* i = nullptr;
  Inflater() { nghttp2_hd_inflate_new(&i); }
  ~Inflater() { nghttp2_hd_inflate_del(i); }
};

Fields randomFields(std::mt19937& rng) {
  static const char* names[] = {":method", ":path", ":authority", ":scheme", "content-type", "te", "user-agent",
                                "grpc-timeout", "grpc-encoding", "x-request-id", "authorization", "cookie",
                                ":status", "grpc-status", "grpc-message", "accept-encoding"};
  static const char* values[] = {"POST", "GET", "/", "http", "application/grpc", "trailers", "200", "0",
                                 "gzip, deflate", "/inference.GRPCInferenceService/ModelInfer"};
  Fields f;
  const int n = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < n; ++i) {
    std::string name = names[rng() % std::size(names)];
    if (rng() % 5 == 0) name = "x-custom-" + std::to_string(rng() % 40);
    std::string value;
    switch (rng() % 4) {
      case 0: value = values[rng() % std::size(values)]; break;
      case 1: value = std::to_string(rng() % 1000); break;
      case 2: {  // any bytes, sometimes longer than a whole table
        const size_t len = rng() % 9 == 0 ? 5000 : rng() % 80;
        for (size_t k = 0; k < len; ++k) value.push_back(static_cast<char>(rng() % 256));
        break;
      }
      default: value = "value-" + std::to_string(rng() % 20); break;
    }
    f.emplace_back(std::move(name), std::move(value));
  }
  return f;
}

TEST(HpackAgainstNghttp2, EveryStaticEntryIsNghttp2s) {
  for (size_t i = 1; i <= kStaticTableSize; ++i) {
    const uint8_t block[] = {static_cast<uint8_t>(0x80 | i)};
    Inflater inflater;
    nghttp2_nv nv;
    int flags = 0;
    ASSERT_EQ(nghttp2_hd_inflate_hd2(inflater.i, &nv, &flags, block, 1, 1), 1);
    ASSERT_TRUE(flags & NGHTTP2_HD_INFLATE_EMIT);
    const HpackTable::Entry e = staticEntry(i);
    EXPECT_EQ(e.name, std::string_view(reinterpret_cast<char*>(nv.name), nv.namelen)) << i;
    EXPECT_EQ(e.value, std::string_view(reinterpret_cast<char*>(nv.value), nv.valuelen)) << i;
    HpackDecoder ours;
    Fields got;
    ASSERT_TRUE(decodeAll(ours, block, got).status.ok());
    EXPECT_EQ(got, (Fields{{std::string(e.name), std::string(e.value)}}));
  }
}

TEST(HpackAgainstNghttp2, WhatNghttp2EncodesDecodesTheSame) {
  std::mt19937 rng(20261128);
  Deflater deflater(4096);
  HpackDecoder ours;
  for (int block = 0; block < 3000; ++block) {
    if (block % 500 == 250) {
      // The table shrinks and grows again as SETTINGS would move it.
      const size_t size = rng() % 2 ? 0 : 512;
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater.d, size), 0);
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater.d, 4096), 0);
    }
    const Fields fields = randomFields(rng);
    std::vector<nghttp2_nv> nva;
    for (const auto& [n, v] : fields) {
      nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                     static_cast<uint8_t>(rng() % 7 == 0 ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE)});
    }
    std::vector<uint8_t> buf(nghttp2_hd_deflate_bound(deflater.d, nva.data(), nva.size()));
    const auto len = nghttp2_hd_deflate_hd(deflater.d, buf.data(), buf.size(), nva.data(), nva.size());
    ASSERT_GE(len, 0);
    Fields got;
    const auto r = decodeAll(ours, std::span<const uint8_t>(buf.data(), static_cast<size_t>(len)), got);
    ASSERT_TRUE(r.status.ok()) << "block " << block << ": " << r.status;
    ASSERT_EQ(got, fields) << "block " << block;
    ASSERT_EQ(ours.table().bytes(), nghttp2_hd_deflate_get_dynamic_table_size(deflater.d)) << "block " << block;
  }
}

TEST(HpackAgainstNghttp2, WhatWeEncodeNghttp2DecodesTheSame) {
  std::mt19937 rng(1128);
  HpackEncoder ours;
  Inflater inflater;
  for (int block = 0; block < 3000; ++block) {
    if (block % 500 == 250) {
      ours.setPeerMaxTableBytes(rng() % 2 ? 0 : 700);
      ours.setPeerMaxTableBytes(4096);
    }
    const Fields fields = randomFields(rng);
    std::string out;
    ours.beginBlock(out);
    for (const auto& [n, v] : fields) {
      const auto how = static_cast<HpackEncoder::Indexing>(rng() % 3);
      ours.encode(n, v, how, out);
    }
    Fields got;
    const uint8_t* in = reinterpret_cast<const uint8_t*>(out.data());
    size_t left = out.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const auto used = nghttp2_hd_inflate_hd2(inflater.i, &nv, &flags, in, left, 1);
      ASSERT_GE(used, 0) << "block " << block;
      in += used;
      left -= static_cast<size_t>(used);
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        got.emplace_back(std::string(reinterpret_cast<char*>(nv.name), nv.namelen),
                         std::string(reinterpret_cast<char*>(nv.value), nv.valuelen));
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) break;
    }
    nghttp2_hd_inflate_end_headers(inflater.i);
    ASSERT_EQ(got, fields) << "block " << block;
    ASSERT_EQ(ours.table().bytes(), nghttp2_hd_inflate_get_dynamic_table_size(inflater.i)) << "block " << block;
  }
}

}  // namespace
}  // namespace infergate::gateway::http2
