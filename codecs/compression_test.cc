#include "codecs/compression.h"

#include <gtest/gtest.h>

#include <zlib.h>

namespace infergate::codecs {
namespace {

std::string payload() {
  std::string s;
  for (int i = 0; i < 10000; ++i) s += "tensor bytes " + std::to_string(i % 97) + ";";
  return s;
}

TEST(Compression, RoundTripsGzipAndDeflateOverSegments) {
  BufferChain chain;
  std::string p = payload();
  chain.append(Buffer::copyOf(std::string_view(p).substr(0, 1000)));
  chain.append(Buffer::copyOf(std::string_view(p).substr(1000)));
  for (ContentEncoding e : {ContentEncoding::kGzip, ContentEncoding::kDeflate}) {
    auto packed = compress(e, chain);
    ASSERT_TRUE(packed.ok());
    EXPECT_LT(packed->size(), p.size() / 4);
    auto unpacked = decompress(e, BufferChain(*packed), 1 << 30);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    EXPECT_EQ(unpacked->view(), p);
  }
}

TEST(Compression, WritesGzipAndZlibWrappers) {
  auto gz = compress(ContentEncoding::kGzip, BufferChain(Buffer::copyOf("x")));
  EXPECT_EQ(static_cast<uint8_t>(gz->data()[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(gz->data()[1]), 0x8b);
  auto zl = compress(ContentEncoding::kDeflate, BufferChain(Buffer::copyOf("x")));
  EXPECT_EQ(static_cast<uint8_t>(zl->data()[0]) & 0x0f, 8);  // zlib CM = deflate
  // Either wrapper inflates under either name, as Triton auto-detects.
  EXPECT_EQ(decompress(ContentEncoding::kDeflate, BufferChain(*gz), 10)->view(), "x");
}

TEST(Compression, CapsTheInflatedSize) {
  std::string zeros(1 << 20, '\0');
  auto packed = compress(ContentEncoding::kGzip, BufferChain(Buffer::copyOf(zeros)));
  auto r = decompress(ContentEncoding::kGzip, BufferChain(*packed), 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(decompress(ContentEncoding::kGzip, BufferChain(*packed), 1 << 20).ok());
}

TEST(Compression, RejectsCorruptTruncatedAndTrailingData) {
  auto packed = compress(ContentEncoding::kGzip, BufferChain(Buffer::copyOf(payload())));
  std::string bytes(packed->view());
  auto truncated = decompress(ContentEncoding::kGzip,
                              BufferChain(Buffer::copyOf(bytes.substr(0, bytes.size() / 2))), 1 << 30);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  auto junk = decompress(ContentEncoding::kGzip, BufferChain(Buffer::copyOf(bytes + "zz")), 1 << 30);
  EXPECT_FALSE(junk.ok());
  auto garbage = decompress(ContentEncoding::kDeflate, BufferChain(Buffer::copyOf("not zlib")), 100);
  EXPECT_FALSE(garbage.ok());
  auto empty = decompress(ContentEncoding::kGzip, BufferChain(), 100);
  EXPECT_FALSE(empty.ok());
}

TEST(Compression, ParsesContentEncoding) {
  EXPECT_EQ(*parseContentEncoding(""), ContentEncoding::kIdentity);
  EXPECT_EQ(*parseContentEncoding("identity"), ContentEncoding::kIdentity);
  EXPECT_EQ(*parseContentEncoding(" GZIP "), ContentEncoding::kGzip);
  EXPECT_EQ(*parseContentEncoding("deflate"), ContentEncoding::kDeflate);
  auto br = parseContentEncoding("br");
  ASSERT_FALSE(br.ok());
  EXPECT_EQ(br.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(Compression, NegotiatesAcceptEncodingLikeTriton) {
  EXPECT_EQ(negotiateAcceptEncoding(""), ContentEncoding::kIdentity);
  EXPECT_EQ(negotiateAcceptEncoding("gzip"), ContentEncoding::kGzip);
  EXPECT_EQ(negotiateAcceptEncoding("deflate, gzip"), ContentEncoding::kDeflate);
  EXPECT_EQ(negotiateAcceptEncoding("deflate;q=0.5, gzip;q=0.8"), ContentEncoding::kGzip);
  EXPECT_EQ(negotiateAcceptEncoding("br, gzip;q=0"), ContentEncoding::kIdentity);
  EXPECT_EQ(negotiateAcceptEncoding("gzip, deflate, br"), ContentEncoding::kGzip);
  EXPECT_EQ(negotiateAcceptEncoding("identity;q=1, gzip;q=0.9"), ContentEncoding::kIdentity);
}

}  // namespace
}  // namespace infergate::codecs
