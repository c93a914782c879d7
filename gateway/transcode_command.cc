#include "gateway/transcode_command.h"

#include <istream>
#include <iterator>
#include <optional>
#include <ostream>
#include <string>

#include "codecs/binary_tensor.h"
#include "codecs/json_request_encoder.h"
#include "codecs/json_response_encoder.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_response_encoder.h"
#include "codecs/text.h"

namespace infergate::gateway {
namespace {

using codecs::Buffer;
using codecs::BufferChain;
using codecs::InferRequest;
using codecs::InferResponse;
using codecs::Status;
using codecs::StatusOr;

constexpr std::string_view kUsage =
    "usage: infergate transcode --from json|protobuf --to json|binary|protobuf\n"
    "                           [--response] [--header-length N] [--model NAME]\n"
    "                           [--version V] [--binary-outputs]\n"
    "Reads one /infer body (or a ModelInferRequest) on stdin and writes it in the other\n"
    "form on stdout. 'json' input may carry binary tensors: give --header-length, the\n"
    "Inference-Header-Content-Length. --response converts responses instead of requests;\n"
    "--binary-outputs asks for binary outputs when writing a response as JSON.\n"
    "When the output has a binary section, its JSON length is printed on stderr as\n"
    "'Inference-Header-Content-Length: N'.\n";

struct Options {
  std::string from, to;
  bool response = false;
  bool binary_outputs = false;
  std::optional<uint64_t> header_length;
  std::string model, version;
};

StatusOr<Options> parseOptions(std::span<const std::string_view> args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    auto value = [&]() -> StatusOr<std::string_view> {
      if (i + 1 >= args.size()) return codecs::invalidArgument(a, " needs a value");
      return args[++i];
    };
    if (a == "--from") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, value());
      o.from = std::string(v);
    } else if (a == "--to") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, value());
      o.to = std::string(v);
    } else if (a == "--model") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, value());
      o.model = std::string(v);
    } else if (a == "--version") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, value());
      o.version = std::string(v);
    } else if (a == "--header-length") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, value());
      std::optional<uint64_t> n = codecs::parseUint64(v);
      if (!n) return codecs::invalidArgument("bad --header-length '", v, "'");
      o.header_length = *n;
    } else if (a == "--response") {
      o.response = true;
    } else if (a == "--binary-outputs") {
      o.binary_outputs = true;
    } else {
      return codecs::invalidArgument("unknown option '", a, "'");
    }
  }
  if (o.from != "json" && o.from != "protobuf") {
    return codecs::invalidArgument("--from must be json or protobuf");
  }
  if (o.to != "json" && o.to != "binary" && o.to != "protobuf") {
    return codecs::invalidArgument("--to must be json, binary or protobuf");
  }
  return o;
}

StatusOr<BufferChain> convertRequest(const Options& o, const Buffer& body, std::ostream& err) {
  InferRequest request;
  if (o.from == "json") {
    INFERGATE_ASSIGN_OR_RETURN(request,
                               codecs::BinaryTensorDecoder().decodeRequest(body, o.header_length));
  } else {
    INFERGATE_ASSIGN_OR_RETURN(request, codecs::ProtobufRequestDecoder().decode(body));
  }
  if (!o.model.empty()) request.model_name = o.model;
  if (!o.version.empty()) request.model_version = o.version;
  if (o.to == "protobuf") return codecs::ProtobufRequestEncoder().encode(request);
  codecs::JsonRequestEncoder::Options eo;
  eo.binary_inputs = o.to == "binary";
  INFERGATE_ASSIGN_OR_RETURN(codecs::HttpInferBody http, codecs::JsonRequestEncoder(eo).encode(request));
  if (http.header_length) err << "Inference-Header-Content-Length: " << *http.header_length << "\n";
  return http.body;
}

StatusOr<BufferChain> convertResponse(const Options& o, const Buffer& body, std::ostream& err) {
  InferResponse response;
  if (o.from == "json") {
    INFERGATE_ASSIGN_OR_RETURN(response,
                               codecs::BinaryTensorDecoder().decodeResponse(body, o.header_length));
  } else {
    INFERGATE_ASSIGN_OR_RETURN(response, codecs::ProtobufResponseDecoder().decode(body));
  }
  if (!o.model.empty()) response.model_name = o.model;
  if (!o.version.empty()) response.model_version = o.version;
  if (o.to == "protobuf") return codecs::ProtobufResponseEncoder().encode(response);
  InferRequest asked;  // what a client would have asked for: binary or JSON outputs
  asked.binary_data_output = o.to == "binary" || o.binary_outputs;
  INFERGATE_ASSIGN_OR_RETURN(codecs::HttpInferBody http,
                             codecs::JsonResponseEncoder().encode(response, asked));
  if (http.header_length) err << "Inference-Header-Content-Length: " << *http.header_length << "\n";
  return http.body;
}

}  // namespace

int runTranscodeCommand(std::span<const std::string_view> args, std::istream& in,
                        std::ostream& out, std::ostream& err) {
  StatusOr<Options> options = parseOptions(args);
  if (!options.ok()) {
    err << "infergate transcode: " << codecs::messageOf(options.status()) << "\n" << kUsage;
    return 2;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Buffer body = Buffer::fromString(std::move(bytes));
  StatusOr<BufferChain> converted = options->response ? convertResponse(*options, body, err)
                                                      : convertRequest(*options, body, err);
  if (!converted.ok()) {
    err << "infergate transcode: " << absl::StatusCodeToString(converted.status().code()) << ": "
        << codecs::messageOf(converted.status()) << "\n";
    return 1;
  }
  for (const Buffer& segment : converted->segments()) {
    out.write(segment.chars(), static_cast<std::streamsize>(segment.size()));
  }
  out.flush();
  return 0;
}

}  // namespace infergate::gateway
