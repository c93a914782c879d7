#pragma once

// gzip / deflate bodies (PROTOCOL.md section 6.1), with zlib.
//
// Requests: Content-Encoding gzip or deflate (zlib-wrapped; the gzip or zlib header is
// auto-detected either way, as Triton does) or identity; anything else is UNIMPLEMENTED
// (HTTP 501, with `Accept-Encoding: gzip, deflate`). The inflated size is capped; past the
// cap the error is RESOURCE_EXHAUSTED. Truncated or corrupt streams are INVALID_ARGUMENT.
// Responses: the client's Accept-Encoding picks identity, gzip or deflate by q-weight.

#include <cstdint>
#include <string_view>

#include "codecs/buffer.h"
#include "codecs/status.h"

namespace infergate::codecs {

enum class ContentEncoding { kIdentity, kGzip, kDeflate };

std::string_view contentEncodingName(ContentEncoding encoding);

// The Content-Encoding header's value (empty = identity); case-insensitive.
StatusOr<ContentEncoding> parseContentEncoding(std::string_view header);

// Triton's choice for an Accept-Encoding header: a comma list with optional ";q=" weights,
// of which only identity, gzip and deflate count; the highest weight wins, ties go to the
// first listed; q=0 refuses. Nothing acceptable, or no header: identity.
ContentEncoding negotiateAcceptEncoding(std::string_view header);

StatusOr<Buffer> decompress(ContentEncoding encoding, const BufferChain& body,
                            uint64_t max_size);

// gzip: a gzip wrapper; deflate: the zlib format. Identity returns the body flattened.
StatusOr<Buffer> compress(ContentEncoding encoding, const BufferChain& body, int level = 6);

}  // namespace infergate::codecs
