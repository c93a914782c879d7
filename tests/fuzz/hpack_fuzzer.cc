// Property: the HPACK decoder (gateway/http2/hpack.h) reads any bytes as a sequence of
// header blocks without crashing: each block decodes or fails with a clean COMPRESSION
// error, and once one fails the connection would end, so the rest is not read. Every
// block that decodes is written again by the encoder (each field's indexing drawn from the
// input) and read back by a second decoder that follows that encoder: the same fields,
// and the two tables agree in size after every block.
//
// Input: a byte of limits (the decoder's announced table size: 0, 256 or 4096; the list
// limit), then blocks, each a length byte and that many bytes.

#include <string>
#include <utility>
#include <vector>

#include "gateway/http2/hpack.h"
#include "tests/fuzz/fuzz_util.h"

using infergate::gateway::http2::HpackDecoder;
using infergate::gateway::http2::HpackEncoder;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader in(data, size);
  const uint8_t limits = in.byte();
  static constexpr size_t kTables[] = {0, 256, 4096};
  const size_t table_bytes = kTables[limits % 3];
  const size_t list_limit = (limits & 0x80) ? 300 : SIZE_MAX;
  HpackDecoder decoder(table_bytes);
  HpackEncoder encoder;
  HpackDecoder mirror;
  while (in.remaining() > 0) {
    const size_t length = in.byte();
    std::vector<uint8_t> block;
    while (block.size() < length && in.remaining() > 0) block.push_back(in.byte());
    std::vector<std::pair<std::string, std::string>> fields;
    const auto r = decoder.decode(block, list_limit, [&](std::string_view n, std::string_view v) {
      fields.emplace_back(std::string(n), std::string(v));
    });
    if (!r.status.ok()) {
      checkIsCleanError(r.status);
      FUZZ_CHECK(r.status.code() == absl::StatusCode::kInvalidArgument);
      FUZZ_CHECK(std::string_view(r.status.message().data(), r.status.message().size()).starts_with("HPACK: "));
      break;
    }
    FUZZ_CHECK(decoder.table().bytes() <= decoder.table().maxBytes());
    FUZZ_CHECK(decoder.table().maxBytes() <= table_bytes);
    FUZZ_CHECK(r.too_large == (r.list_bytes > list_limit));
    std::string again;
    encoder.beginBlock(again);
    for (size_t i = 0; i < fields.size(); ++i) {
      const auto how = static_cast<HpackEncoder::Indexing>((block.empty() ? 0 : block[i % block.size()]) % 3);
      encoder.encode(fields[i].first, fields[i].second, how, again);
    }
    std::vector<std::pair<std::string, std::string>> back;
    const auto m = mirror.decode({reinterpret_cast<const uint8_t*>(again.data()), again.size()}, SIZE_MAX,
                                 [&](std::string_view n, std::string_view v) {
                                   back.emplace_back(std::string(n), std::string(v));
                                 });
    FUZZ_CHECK(m.status.ok());
    FUZZ_CHECK(back == fields);
    FUZZ_CHECK(mirror.table().bytes() == encoder.table().bytes());
  }
  return 0;
}
