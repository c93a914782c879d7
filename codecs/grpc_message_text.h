#pragma once

// grpc-message's encoding (gRPC over HTTP/2): the status message travels percent-encoded,
// every byte outside printable ASCII and '%' itself as %XX, so that UTF-8 and control
// bytes survive a header field.

#include <string>
#include <string_view>

namespace infergate::codecs {

std::string grpcMessageEncoded(std::string_view message);
// Lenient, as grpc: a '%' not followed by two hex digits stays as it is.
std::string grpcMessageDecoded(std::string_view text);

}  // namespace infergate::codecs
