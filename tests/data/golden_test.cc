// Golden wire fixtures (tests/data/README.md): the bytes Triton's clients send and Triton
// answers, built byte by byte by make_fixtures.py from PROTOCOL.md. Every client request
// must decode into exactly the InferRequest the client meant; every Triton response must
// come out of the gateway's encoders byte for byte.

#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "codecs/binary_tensor.h"
#include "codecs/bytes_tensor.h"
#include "codecs/compression.h"
#include "codecs/infer.h"
#include "codecs/json_response_encoder.h"
#include "codecs/limits.h"
#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_response_encoder.h"

namespace infergate::codecs {

// ---- gtest printers: a mismatch shows the fields, not a byte dump ----------------------

namespace {

std::string describeBytes(const Buffer& data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = std::to_string(data.size()) + " bytes";
  if (data.empty()) return out;
  out += " [";
  for (size_t i = 0; i < data.size() && i < 96; ++i) {
    if (i) out += ' ';
    out += kHex[data.data()[i] >> 4];
    out += kHex[data.data()[i] & 15];
  }
  if (data.size() > 96) out += " ...";
  return out + "]";
}

std::string describeParameters(const Parameters& params) {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto& [key, value] : params) {
    os << (first ? "" : ", ") << key << ": ";
    first = false;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            os << "bool " << (v ? "true" : "false");
          } else if constexpr (std::is_same_v<T, int64_t>) {
            os << "int64 " << v;
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            os << "uint64 " << v;
          } else if constexpr (std::is_same_v<T, double>) {
            os << "double " << v;
          } else {
            os << "string \"" << v << "\"";
          }
        },
        value);
  }
  os << "}";
  return os.str();
}

std::string describeShm(const std::optional<SharedMemoryRef>& shm) {
  if (!shm) return "none";
  return "{" + shm->region + " offset " + std::to_string(shm->offset) + " size " +
         std::to_string(shm->byte_size) + "}";
}

}  // namespace

void PrintTo(const InferRequest& r, std::ostream* os) {
  *os << "\n  model '" << r.model_name << "' version '" << r.model_version << "' id '" << r.id
      << "'\n  parameters " << describeParameters(r.parameters) << "\n  binary_data_output "
      << (r.binary_data_output ? (*r.binary_data_output ? "true" : "false") : "unset");
  for (const InferInput& in : r.inputs) {
    *os << "\n  input " << in.name << " " << dataTypeName(in.datatype) << " "
        << in.shape.toString() << " params " << describeParameters(in.parameters) << " shm "
        << describeShm(in.shared_memory) << " data " << describeBytes(in.data);
  }
  for (const RequestedOutput& out : r.outputs) {
    *os << "\n  output " << out.name << " binary_data "
        << (out.binary_data ? (*out.binary_data ? "true" : "false") : "unset")
        << " classification " << out.classification << " shm " << describeShm(out.shared_memory)
        << " params " << describeParameters(out.parameters);
  }
}

namespace {

static_assert(std::endian::native == std::endian::little,
              "the tensor helpers below write host order, which must be the wire's");

// ---- fixture files -------------------------------------------------------------------

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string fixturePath(std::string_view file) {
  return std::string(INFERGATE_SOURCE_DIR) + "/tests/data/" + std::string(file);
}

std::string readFixture(std::string_view file) {
  std::ifstream in(fixturePath(file), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << fixturePath(file)
                         << " (regenerate: /usr/bin/python3 tests/data/make_fixtures.py)";
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// "<name>.headers": one "Name: value" per line.
Headers parseHeaders(const std::string& text) {
  Headers headers;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(": ");
    EXPECT_NE(colon, std::string::npos) << "bad header line '" << line << "'";
    if (colon == std::string::npos) continue;
    headers.emplace_back(line.substr(0, colon), line.substr(colon + 2));
  }
  return headers;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> findHeader(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (equalsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

struct HttpMessage {
  Headers headers;
  std::string body;

  std::optional<std::string> header(std::string_view name) const {
    return findHeader(headers, name);
  }
};

// Reads <name>.headers and <name>.body; Content-Length must be the body's size.
HttpMessage readHttp(const std::string& name) {
  HttpMessage message{parseHeaders(readFixture(name + ".headers")), readFixture(name + ".body")};
  EXPECT_EQ(message.header("Content-Length"), std::to_string(message.body.size())) << name;
  return message;
}

// What the gateway's HTTP front does with a client's /infer request: inflate by
// Content-Encoding, split at Inference-Header-Content-Length, decode.
StatusOr<InferRequest> decodeHttpRequest(const HttpMessage& message) {
  Buffer body = Buffer::copyOf(message.body);
  if (std::optional<std::string> encoding = message.header("Content-Encoding")) {
    INFERGATE_ASSIGN_OR_RETURN(ContentEncoding kind, parseContentEncoding(*encoding));
    INFERGATE_ASSIGN_OR_RETURN(body, decompress(kind, BufferChain(body), 64 * kMiB));
  }
  std::optional<uint64_t> header_length;
  if (std::optional<std::string> value = message.header("Inference-Header-Content-Length")) {
    header_length = std::stoull(*value);
  }
  return BinaryTensorDecoder().decodeRequest(body, header_length);
}

StatusOr<InferRequest> decodeGrpcRequest(const std::string& message) {
  return ProtobufRequestDecoder().decode(Buffer::copyOf(message));
}

void expectPeekAgrees(const std::string& message, const InferRequest& decoded) {
  auto span = std::span(reinterpret_cast<const uint8_t*>(message.data()), message.size());
  StatusOr<ModelRef> ref = peekModelInferRequest(span);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->model_name, decoded.model_name);
  EXPECT_EQ(ref->model_version, decoded.model_version);
}

// P 13.1: geventhttpclient's User-Agent, no Content-Type, and
// Inference-Header-Content-Length exactly when a binary section follows.
void expectPythonHttpHeaders(const HttpMessage& message, bool binary) {
  std::optional<std::string> agent = message.header("User-Agent");
  ASSERT_TRUE(agent.has_value());
  EXPECT_TRUE(agent->starts_with("python/gevent-http-client-")) << *agent;
  EXPECT_TRUE(message.header("Host").has_value());
  EXPECT_FALSE(message.header("Content-Type").has_value());
  EXPECT_EQ(message.header("Inference-Header-Content-Length").has_value(), binary);
}

// P 13.4: libcurl's User-Agent, Inference-Header-Content-Length always, no Expect.
void expectCppHttpHeaders(const HttpMessage& message, std::string_view content_type) {
  EXPECT_EQ(message.header("User-Agent"), "libcurl-agent/1.0");
  EXPECT_TRUE(message.header("Inference-Header-Content-Length").has_value());
  EXPECT_EQ(message.header("Content-Type"), std::string(content_type));
  EXPECT_FALSE(message.header("Expect").has_value());
}

// ---- tensors and expected requests ---------------------------------------------------

template <typename T>
Buffer tensor(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return Buffer::fromString(std::move(bytes));
}

Buffer bytesTensor(const std::vector<std::string>& elements) {
  return Buffer::fromString(serializeBytesElements(elements));
}

std::vector<int32_t> simpleInput0() {
  std::vector<int32_t> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  return v;
}
std::vector<int32_t> simpleInput1() { return std::vector<int32_t>(16, -1); }
std::vector<int32_t> simpleOutput0() {
  std::vector<int32_t> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i - 1;
  return v;
}
std::vector<int32_t> simpleOutput1() {
  std::vector<int32_t> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i + 1;
  return v;
}

InferInput input(std::string name, DataType datatype, Shape shape, Buffer data) {
  InferInput in;
  in.name = std::move(name);
  in.datatype = datatype;
  in.shape = std::move(shape);
  in.data = std::move(data);
  return in;
}

std::vector<InferInput> simpleInputs() {
  return {input("INPUT0", DataType::kInt32, {1, 16}, tensor(simpleInput0())),
          input("INPUT1", DataType::kInt32, {1, 16}, tensor(simpleInput1()))};
}

RequestedOutput output(std::string name, std::optional<bool> binary_data) {
  RequestedOutput out;
  out.name = std::move(name);
  out.binary_data = binary_data;
  return out;
}

InferOutput inferOutput(std::string name, DataType datatype, Shape shape, Buffer data) {
  InferOutput out;
  out.name = std::move(name);
  out.datatype = datatype;
  out.shape = std::move(shape);
  out.data = std::move(data);
  return out;
}

InferResponse simpleResponse(std::string id) {
  InferResponse response;
  response.model_name = "simple";
  response.model_version = "1";
  response.id = std::move(id);
  response.outputs = {inferOutput("OUTPUT0", DataType::kInt32, {1, 16}, tensor(simpleOutput0())),
                      inferOutput("OUTPUT1", DataType::kInt32, {1, 16}, tensor(simpleOutput1()))};
  return response;
}

// The request of python_http_sequence (and of its gzip / deflate twins).
InferRequest pythonSequenceRequest() {
  InferRequest r;
  r.id = "seq-req-1";
  r.parameters.set("sequence_id", int64_t{1001});
  r.parameters.set("sequence_start", true);
  r.parameters.set("sequence_end", false);
  r.parameters.set("priority", int64_t{2});
  r.parameters.set("timeout", int64_t{5000});
  r.binary_data_output = true;
  r.inputs = simpleInputs();
  return r;
}

// Encodes `response` for `request` and compares body and headers with the fixture.
void expectHttpResponseFixture(const std::string& name, const InferResponse& response,
                               const InferRequest& request) {
  HttpMessage fixture = readHttp(name);
  StatusOr<HttpInferBody> encoded = JsonResponseEncoder().encode(response, request);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(encoded->body.toString(), fixture.body);
  EXPECT_EQ(std::string(encoded->contentType()), fixture.header("Content-Type"));
  std::optional<std::string> header_length;
  if (encoded->header_length) header_length = std::to_string(*encoded->header_length);
  EXPECT_EQ(header_length, fixture.header("Inference-Header-Content-Length"));
}

void expectGrpcResponseFixture(const std::string& file, const InferResponse& response) {
  std::string fixture = readFixture(file);
  StatusOr<BufferChain> encoded = ProtobufResponseEncoder().encode(response);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(std::string(encoded->flatten().view()), fixture)
      << "encoded: " << describeBytes(encoded->flatten())
      << "\nfixture: " << describeBytes(Buffer::copyOf(fixture));
}

// ---- client requests: HTTP -----------------------------------------------------------

TEST(GoldenFixtures, PythonHttpBinarySimpleDecodes) {
  HttpMessage message = readHttp("python_http_binary_simple");
  expectPythonHttpHeaders(message, /*binary=*/true);
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.inputs = simpleInputs();
  expected.outputs = {output("OUTPUT0", true), output("OUTPUT1", true)};
  EXPECT_EQ(*decoded, expected);
}

TEST(GoldenFixtures, PythonHttpSequenceWithoutOutputsDecodes) {
  HttpMessage message = readHttp("python_http_sequence");
  expectPythonHttpHeaders(message, /*binary=*/true);
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, pythonSequenceRequest());
}

TEST(GoldenFixtures, PythonHttpGzipBodyDecodesLikeTheUncompressedOne) {
  HttpMessage message = readHttp("python_http_sequence_gzip");
  EXPECT_EQ(message.header("Content-Encoding"), "gzip");
  // The header length counts the JSON before compression (P 6).
  EXPECT_EQ(message.header("Inference-Header-Content-Length"),
            readHttp("python_http_sequence").header("Inference-Header-Content-Length"));
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, pythonSequenceRequest());
}

TEST(GoldenFixtures, PythonHttpDeflateBodyDecodesLikeTheUncompressedOne) {
  HttpMessage message = readHttp("python_http_sequence_deflate");
  EXPECT_EQ(message.header("Content-Encoding"), "deflate");
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, pythonSequenceRequest());
}

TEST(GoldenFixtures, PythonHttpJsonInputsDecode) {
  HttpMessage message = readHttp("python_http_json_inputs");
  expectPythonHttpHeaders(message, /*binary=*/false);
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.parameters.set("temperature", 0.5);
  expected.parameters.set("mode", std::string("fast"));
  expected.inputs = {
      // "w\u00F6rld" unescapes to UTF-8; "\t" to a tab.
      input("TEXT", DataType::kBytes, {4}, bytesTensor({"hello", "w\xc3\xb6rld", "", "tab\there"})),
      input("SCALE", DataType::kFp32, {1, 3}, tensor(std::vector<float>{0.1f, 1.0f, -2.5f})),
      input("COUNT", DataType::kInt64, {2},
            tensor(std::vector<int64_t>{9007199254740993, std::numeric_limits<int64_t>::min()})),
      input("FLAGS", DataType::kBool, {2}, tensor(std::vector<uint8_t>{1, 0})),
  };
  RequestedOutput labels = output("LABELS", false);
  labels.classification = 2;
  expected.outputs = {labels, output("EMBEDDING", false)};
  EXPECT_EQ(*decoded, expected);
}

TEST(GoldenFixtures, PythonHttpSharedMemoryInputTakesNoBlob) {
  // P 6.2: blobs for A then T; S lives in a registered region.
  HttpMessage message = readHttp("python_http_shm_mixed");
  expectPythonHttpHeaders(message, /*binary=*/true);
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  InferInput s = input("S", DataType::kFp32, {2}, Buffer());
  s.shared_memory = SharedMemoryRef{"input_region", 16, 8};
  expected.inputs = {input("A", DataType::kInt32, {1, 4}, tensor(std::vector<int32_t>{1, 2, 3, 4})),
                     s, input("T", DataType::kBytes, {2}, bytesTensor({"ab", ""}))};
  expected.outputs = {output("OUT", true)};
  EXPECT_EQ(*decoded, expected);
}

TEST(GoldenFixtures, CppHttpAllJsonDecodesWithHeaderLengthEqualToBody) {
  HttpMessage message = readHttp("cpp_http_json");
  expectCppHttpHeaders(message, "application/json");
  EXPECT_EQ(message.header("Inference-Header-Content-Length"), std::to_string(message.body.size()));
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;  // "id":"" decodes to the empty id
  expected.binary_data_output = true;
  expected.inputs = simpleInputs();
  EXPECT_EQ(*decoded, expected);
}

TEST(GoldenFixtures, CppHttpBinaryDecodes) {
  HttpMessage message = readHttp("cpp_http_binary");
  expectCppHttpHeaders(message, "application/octet-stream");
  StatusOr<InferRequest> decoded = decodeHttpRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.id = "cpp-1";
  expected.parameters.set("sequence_id", int64_t{42});
  expected.parameters.set("sequence_start", true);
  expected.parameters.set("sequence_end", true);
  expected.parameters.set("priority", int64_t{1});
  expected.parameters.set("timeout", int64_t{100000});
  expected.inputs = simpleInputs();
  expected.outputs = {output("OUTPUT0", true), output("OUTPUT1", true)};
  EXPECT_EQ(*decoded, expected);
}

// ---- client requests: gRPC -----------------------------------------------------------

TEST(GoldenFixtures, PythonGrpcSimpleDecodesWithExactParameterKinds) {
  std::string message = readFixture("python_grpc_simple.pb");
  StatusOr<InferRequest> decoded = decodeGrpcRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.model_name = "simple";
  expected.id = "py-grpc-7";
  expected.parameters.set("sequence_id", int64_t{1001});  // int64_param
  expected.parameters.set("sequence_start", true);
  expected.parameters.set("sequence_end", false);         // bool_param false, still sent
  expected.parameters.set("priority", uint64_t{3});       // uint64_param (P 13.3)
  expected.inputs = simpleInputs();
  expected.outputs = {output("OUTPUT0", std::nullopt), output("OUTPUT1", std::nullopt)};
  EXPECT_EQ(*decoded, expected);
  expectPeekAgrees(message, *decoded);
}

TEST(GoldenFixtures, PythonGrpcRawEntriesSkipSharedMemoryInputs) {
  // P 6.2 / 11.4: raw_input_contents = [A, T]; raw entry 1 belongs to input 2.
  std::string message = readFixture("python_grpc_shm_mixed.pb");
  StatusOr<InferRequest> decoded = decodeGrpcRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.model_name = "mixed";
  expected.model_version = "2";
  InferInput s = input("S", DataType::kFp32, {2}, Buffer());
  s.shared_memory = SharedMemoryRef{"input_region", 16, 8};
  expected.inputs = {input("A", DataType::kInt32, {1, 4}, tensor(std::vector<int32_t>{1, 2, 3, 4})),
                     s, input("T", DataType::kBytes, {2}, bytesTensor({"ab", ""}))};
  RequestedOutput out = output("OUT", std::nullopt);
  out.shared_memory = SharedMemoryRef{"output_region", 0, 16};
  expected.outputs = {out};
  EXPECT_EQ(*decoded, expected);
  expectPeekAgrees(message, *decoded);
}

TEST(GoldenFixtures, CppGrpcKeepsEmptyFinalResponseParameter) {
  // perf_analyzer / C++ client: triton_enable_empty_final_response bool_param false on
  // every request (P 13.4); kept as sent (only the HTTP encoder drops it).
  std::string message = readFixture("cpp_grpc_simple.pb");
  StatusOr<InferRequest> decoded = decodeGrpcRequest(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  InferRequest expected;
  expected.model_name = "simple";
  expected.model_version = "1";
  expected.parameters.set("triton_enable_empty_final_response", false);
  expected.inputs = simpleInputs();
  EXPECT_EQ(*decoded, expected);
  expectPeekAgrees(message, *decoded);
}

// ---- Triton responses ----------------------------------------------------------------

TEST(GoldenFixtures, TritonHttpJsonSimpleEncodesByteForByte) {
  InferRequest request;  // tritonclient.http, request_id "json-1", outputs binary_data=False
  request.id = "json-1";
  request.inputs = simpleInputs();
  request.outputs = {output("OUTPUT0", false), output("OUTPUT1", false)};
  expectHttpResponseFixture("triton_http_json_simple", simpleResponse("json-1"), request);
}

TEST(GoldenFixtures, TritonHttpBinarySimpleEncodesByteForByte) {
  StatusOr<InferRequest> request = decodeHttpRequest(readHttp("python_http_binary_simple"));
  ASSERT_TRUE(request.ok()) << request.status();
  expectHttpResponseFixture("triton_http_binary_simple", simpleResponse(""), *request);
}

TEST(GoldenFixtures, TritonHttpBinaryByDefaultOutputEncodesByteForByte) {
  // No outputs listed, binary_data_output true: every output binary (P 6).
  StatusOr<InferRequest> request = decodeHttpRequest(readHttp("python_http_sequence"));
  ASSERT_TRUE(request.ok()) << request.status();
  expectHttpResponseFixture("triton_http_binary_sequence", simpleResponse("seq-req-1"), *request);
}

TEST(GoldenFixtures, TritonHttpJsonFp32WritesFloatsAsDoubles) {
  // 0.1f -> 0.10000000149011612, 1.0 -> 1.0, -0.0, 100.0, 1e-7f, FLT_MAX, 2^24, NaN, -inf.
  std::vector<float> values = {0.1f,
                               1.0f,
                               -2.5f,
                               -0.0f,
                               100.0f,
                               1e-7f,
                               std::numeric_limits<float>::max(),
                               16777216.0f,
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::infinity()};
  InferResponse response;
  response.model_name = "identity_fp32";
  response.model_version = "1";
  response.outputs = {inferOutput("OUTPUT0", DataType::kFp32, {1, 10}, tensor(values))};
  InferRequest request;
  request.outputs = {output("OUTPUT0", false)};
  expectHttpResponseFixture("triton_http_json_fp32", response, request);
}

TEST(GoldenFixtures, TritonGrpcSimpleEncodesByteForByte) {
  expectGrpcResponseFixture("triton_grpc_simple.pb", simpleResponse("py-grpc-7"));
}

TEST(GoldenFixtures, TritonGrpcSharedMemoryOutputGetsEmptyRawEntry) {
  // P 11.4: one raw entry per output at its index; OUTPUT0 (in shm) gets an empty one.
  InferResponse response = simpleResponse("");
  response.outputs[0].data = Buffer();
  response.outputs[0].shared_memory = SharedMemoryRef{"output_region", 0, 64};
  expectGrpcResponseFixture("triton_grpc_simple_shm_output.pb", response);
}

}  // namespace
}  // namespace infergate::codecs
