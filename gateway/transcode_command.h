#pragma once

// `infergate transcode`: converts one inference request or response body between the
// three wire forms (JSON, JSON + binary tensors, protobuf) with the gateway's own codecs.
// A debugging tool for operators, and the codecs' smoke demo.

#include <iosfwd>
#include <span>
#include <string_view>

namespace infergate::gateway {

// Runs the command on `args` (after the word "transcode"); reads the body from `in`,
// writes the converted body to `out` and messages to `err`. Returns the exit code.
int runTranscodeCommand(std::span<const std::string_view> args, std::istream& in,
                        std::ostream& out, std::ostream& err);

}  // namespace infergate::gateway
