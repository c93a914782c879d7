// codec_bench: throughput of the codecs' hot paths, each next to the baseline its target
// is stated against (bench/README.md):
//
//   JSON decode    JsonRequestDecoder vs RapidJSON's DOM (Triton's library and parse flags)
//                  walking inputs[0].data into a warm typed buffer, as Triton's HTTP
//                  frontend does; bytes = JSON text.
//   JSON encode    JsonResponseEncoder, outputs as JSON `data`; bytes = JSON produced.
//   binary, gRPC   the binary-tensor extension and protobuf raw contents, 64 MiB tensor,
//                  vs memcpy of 64 MiB into a warm buffer; bytes = tensor.
//
// Inputs are built once, outside the timed loops; every destination the benchmark itself
// writes to is allocated and touched before timing. What the codecs allocate per call
// (decoded tensors, JSON output strings) is timed: that is their cost.

#include <benchmark/benchmark.h>
#include <grpc/grpc.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <rapidjson/document.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "codecs/binary_tensor.h"
#include "codecs/buffer.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/infer.h"
#include "codecs/json_request_decoder.h"
#include "codecs/json_request_encoder.h"
#include "codecs/json_response_encoder.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"

namespace {

namespace cd = infergate::codecs;

constexpr size_t kMiB = 1024 * 1024;
constexpr int64_t kJsonElements = 1 << 20;  // 1M elements per JSON tensor
constexpr size_t kLargeBytes = 64 * kMiB;   // binary / protobuf tensor
constexpr size_t kJsonPadding = 64;         // SIMDJSON_PADDING, as a receive buffer leaves

// ---- inputs --------------------------------------------------------------------------

float fp32Value(size_t i) { return static_cast<float>(i) * 0.001f - 500.0f; }
// Token ids in a GPT-2 sized vocabulary: the typical INT64 input of a text model.
int64_t int64Value(size_t i) { return static_cast<int64_t>((i * 2654435761u) % 50257); }

cd::Buffer fp32Data(size_t elements) {
  cd::MutableBuffer out = cd::MutableBuffer::allocate(elements * sizeof(float));
  for (size_t i = 0; i < elements; ++i) {
    float v = fp32Value(i);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof(float));
  }
  return std::move(out).freeze();
}

cd::Buffer int64Data(size_t elements) {
  cd::MutableBuffer out = cd::MutableBuffer::allocate(elements * sizeof(int64_t));
  for (size_t i = 0; i < elements; ++i) {
    int64_t v = int64Value(i);
    std::memcpy(out.data() + i * sizeof(int64_t), &v, sizeof(int64_t));
  }
  return std::move(out).freeze();
}

cd::InferRequest oneInputRequest(cd::DataType type, int64_t elements, cd::Buffer data) {
  cd::InferRequest request;
  request.model_name = "bench_model";
  request.id = "42";
  cd::InferInput input;
  input.name = "INPUT0";
  input.datatype = type;
  input.shape = cd::Shape{1, elements};
  input.data = std::move(data);
  request.inputs.push_back(std::move(input));
  cd::RequestedOutput output;
  output.name = "OUTPUT0";
  request.outputs.push_back(std::move(output));
  return request;
}

// JSON text as a client sends it (JsonRequestEncoder with JSON `data`: numbers in
// rapidjson's / Python's shortest round-trip form, FP32 widened to double), stored with
// simdjson's padding readable after it, as in a receive buffer.
struct PaddedText {
  std::string storage;  // text + kJsonPadding bytes
  size_t size = 0;
  std::string_view text() const { return {storage.data(), size}; }
};

PaddedText jsonRequestText(const cd::InferRequest& request) {
  cd::JsonRequestEncoder::Options options;
  options.binary_inputs = false;
  auto body = cd::JsonRequestEncoder(options).encode(request);
  if (!body.ok()) std::abort();
  PaddedText out;
  out.storage = body->body.toString();
  out.size = out.storage.size();
  out.storage.append(kJsonPadding, ' ');
  return out;
}

const PaddedText& fp32JsonRequest() {
  static const PaddedText text = jsonRequestText(
      oneInputRequest(cd::DataType::kFp32, kJsonElements, fp32Data(kJsonElements)));
  return text;
}

const PaddedText& int64JsonRequest() {
  static const PaddedText text = jsonRequestText(
      oneInputRequest(cd::DataType::kInt64, kJsonElements, int64Data(kJsonElements)));
  return text;
}

const cd::InferRequest& largeRequest() {
  static const cd::InferRequest request = oneInputRequest(
      cd::DataType::kFp32, static_cast<int64_t>(kLargeBytes / sizeof(float)),
      fp32Data(kLargeBytes / sizeof(float)));
  return request;
}

// A destination buffer of `size` bytes, every page touched (warm), reused across calls.
std::vector<uint8_t> warmBuffer(size_t size) { return std::vector<uint8_t>(size, 0x5a); }

void reportError(benchmark::State& state, const cd::Status& status) {
  state.SkipWithError(std::string(cd::messageOf(status)).c_str());
}

// Minor page faults per iteration (counter "faults"): a fresh large allocation per call
// shows here as ~size/4096, the cost DESIGN.md's zero-copy rules warn about.
long minorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

class FaultCounter {
 public:
  explicit FaultCounter(benchmark::State& state) : state_(state), start_(minorFaults()) {}
  ~FaultCounter() {
    if (state_.iterations() == 0) return;
    state_.counters["faults"] = benchmark::Counter(
        static_cast<double>(minorFaults() - start_) / static_cast<double>(state_.iterations()));
  }

 private:
  benchmark::State& state_;
  long start_;
};

// ---- reference: memcpy into a warm buffer ------------------------------------------------

void BM_Memcpy64MiB(benchmark::State& state) {
  std::vector<uint8_t> src = warmBuffer(kLargeBytes);
  std::vector<uint8_t> dst = warmBuffer(kLargeBytes);
  FaultCounter faults(state);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kLargeBytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_Memcpy64MiB)->Unit(benchmark::kMillisecond);

// ---- JSON decode: infergate --------------------------------------------------------------

void jsonDecodeInfergate(benchmark::State& state, const PaddedText& json) {
  cd::JsonRequestDecoder decoder;
  FaultCounter faults(state);
  for (auto _ : state) {
    auto header = decoder.decode(json.text(), json.storage.size());
    if (!header.ok()) {
      reportError(state, header.status());
      break;
    }
    benchmark::DoNotOptimize(header->request.inputs.front().data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size));
}

void BM_JsonDecodeFp32_Infergate(benchmark::State& state) {
  jsonDecodeInfergate(state, fp32JsonRequest());
}
BENCHMARK(BM_JsonDecodeFp32_Infergate)->Unit(benchmark::kMillisecond);

void BM_JsonDecodeInt64_Infergate(benchmark::State& state) {
  jsonDecodeInfergate(state, int64JsonRequest());
}
BENCHMARK(BM_JsonDecodeInt64_Infergate)->Unit(benchmark::kMillisecond);

// ---- JSON decode: the RapidJSON DOM baseline (what Triton does) --------------------------
//
// Triton's HTTP frontend parses the body with TritonJson (a rapidjson::Document, parsed with
// kParseNanAndInfFlag, a fresh Document per request), then walks each input's `data`
// recursively (nested arrays allowed), converting elements with GetDouble / GetInt64 into
// the tensor's buffer. Here the tensor buffer is preallocated and warm, which favours the
// baseline.

template <typename T>
bool convertElement(const rapidjson::Value& v, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (!v.IsNumber()) return false;
    *out = static_cast<float>(v.GetDouble());
  } else {
    if (!v.IsInt64()) return false;
    *out = v.GetInt64();
  }
  return true;
}

template <typename T>
bool walkData(const rapidjson::Value& array, T* out, size_t capacity, size_t& count) {
  for (const rapidjson::Value& v : array.GetArray()) {
    if (v.IsArray()) {
      if (!walkData(v, out, capacity, count)) return false;
      continue;
    }
    if (count == capacity || !convertElement(v, out + count)) return false;
    ++count;
  }
  return true;
}

template <typename Document, typename T>
bool parseAndWalk(Document& doc, const PaddedText& json, std::vector<T>& out) {
  doc.template Parse<rapidjson::kParseNanAndInfFlag>(json.storage.data(), json.size);
  if (doc.HasParseError() || !doc.IsObject()) return false;
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray() || inputs->value.Empty()) {
    return false;
  }
  const auto& input = *inputs->value.Begin();
  auto data = input.FindMember("data");
  if (data == input.MemberEnd() || !data->value.IsArray()) return false;
  size_t count = 0;
  return walkData(data->value, out.data(), out.size(), count) && count == out.size();
}

template <typename T>
void jsonDecodeRapidJsonDom(benchmark::State& state, const PaddedText& json) {
  std::vector<T> out(kJsonElements, T{1});  // warm
  FaultCounter faults(state);
  for (auto _ : state) {
    rapidjson::Document doc;
    if (!parseAndWalk(doc, json, out)) {
      state.SkipWithError("RapidJSON baseline failed to parse or walk the request");
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size));
}

// A stronger baseline than Triton itself: the DOM's value pool and parse stack live in
// warm, reused memory, so no allocation or first-touch page fault is timed.
template <typename T>
void jsonDecodeRapidJsonDomWarmPool(benchmark::State& state, const PaddedText& json) {
  using Pool = rapidjson::MemoryPoolAllocator<rapidjson::CrtAllocator>;
  using Document = rapidjson::GenericDocument<rapidjson::UTF8<>, Pool, Pool>;
  std::vector<uint8_t> value_memory = warmBuffer(4 * json.size + 64 * kMiB);
  std::vector<uint8_t> stack_memory = warmBuffer(4 * json.size + 64 * kMiB);
  Pool value_pool(value_memory.data(), value_memory.size());
  Pool stack_pool(stack_memory.data(), stack_memory.size());
  std::vector<T> out(kJsonElements, T{1});
  FaultCounter faults(state);
  for (auto _ : state) {
    {
      Document doc(&value_pool, 1024, &stack_pool);
      if (!parseAndWalk(doc, json, out)) {
        state.SkipWithError("RapidJSON baseline failed to parse or walk the request");
        break;
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    value_pool.Clear();
    stack_pool.Clear();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size));
}

void BM_JsonDecodeFp32_RapidJsonDom(benchmark::State& state) {
  jsonDecodeRapidJsonDom<float>(state, fp32JsonRequest());
}
BENCHMARK(BM_JsonDecodeFp32_RapidJsonDom)->Unit(benchmark::kMillisecond);

void BM_JsonDecodeFp32_RapidJsonDomWarmPool(benchmark::State& state) {
  jsonDecodeRapidJsonDomWarmPool<float>(state, fp32JsonRequest());
}
BENCHMARK(BM_JsonDecodeFp32_RapidJsonDomWarmPool)->Unit(benchmark::kMillisecond);

void BM_JsonDecodeInt64_RapidJsonDom(benchmark::State& state) {
  jsonDecodeRapidJsonDom<int64_t>(state, int64JsonRequest());
}
BENCHMARK(BM_JsonDecodeInt64_RapidJsonDom)->Unit(benchmark::kMillisecond);

void BM_JsonDecodeInt64_RapidJsonDomWarmPool(benchmark::State& state) {
  jsonDecodeRapidJsonDomWarmPool<int64_t>(state, int64JsonRequest());
}
BENCHMARK(BM_JsonDecodeInt64_RapidJsonDomWarmPool)->Unit(benchmark::kMillisecond);

// ---- JSON encode -------------------------------------------------------------------------

void BM_JsonEncodeFp32Int64Response_Infergate(benchmark::State& state) {
  cd::InferResponse response;
  response.model_name = "bench_model";
  response.model_version = "1";
  response.id = "42";
  cd::InferOutput fp32;
  fp32.name = "OUTPUT0";
  fp32.datatype = cd::DataType::kFp32;
  fp32.shape = cd::Shape{1, kJsonElements};
  fp32.data = fp32Data(kJsonElements);
  response.outputs.push_back(std::move(fp32));
  cd::InferOutput int64;
  int64.name = "OUTPUT1";
  int64.datatype = cd::DataType::kInt64;
  int64.shape = cd::Shape{1, kJsonElements};
  int64.data = int64Data(kJsonElements);
  response.outputs.push_back(std::move(int64));
  cd::InferRequest request;  // asks for nothing binary: every output as JSON `data`
  cd::JsonResponseEncoder encoder;
  size_t bytes = 0;
  FaultCounter faults(state);
  for (auto _ : state) {
    auto body = encoder.encode(response, request);
    if (!body.ok()) {
      reportError(state, body.status());
      break;
    }
    bytes = body->body.size();
    benchmark::DoNotOptimize(body->body.segments().front().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_JsonEncodeFp32Int64Response_Infergate)->Unit(benchmark::kMillisecond);

// ---- binary-tensor extension, 64 MiB -------------------------------------------------------

void BM_BinaryDecode64MiB_Infergate(benchmark::State& state) {
  auto encoded = cd::JsonRequestEncoder().encode(largeRequest());
  if (!encoded.ok()) std::abort();
  const cd::Buffer body = encoded->body.flatten();  // one contiguous body, as received
  const uint64_t header_length = *encoded->header_length;
  cd::BinaryTensorDecoder decoder;
  FaultCounter faults(state);
  for (auto _ : state) {
    auto request = decoder.decodeRequest(body, header_length);
    if (!request.ok()) {
      reportError(state, request.status());
      break;
    }
    benchmark::DoNotOptimize(request->inputs.front().data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_BinaryDecode64MiB_Infergate)->Unit(benchmark::kMillisecond);

// Encode, then copy the segments into a warm buffer, as writev copies them into the socket.
void BM_BinaryEncode64MiB_Infergate(benchmark::State& state) {
  const cd::InferRequest& request = largeRequest();
  cd::JsonRequestEncoder encoder;  // binary_inputs = true
  std::vector<uint8_t> socket = warmBuffer(kLargeBytes + kMiB);
  FaultCounter faults(state);
  for (auto _ : state) {
    auto body = encoder.encode(request);
    if (!body.ok()) {
      reportError(state, body.status());
      break;
    }
    if (body->body.size() > socket.size()) {
      state.SkipWithError("encoded body larger than the destination buffer");
      break;
    }
    uint8_t* p = socket.data();
    for (const cd::Buffer& segment : body->body.segments()) {
      std::memcpy(p, segment.data(), segment.size());
      p += segment.size();
    }
    benchmark::DoNotOptimize(socket.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_BinaryEncode64MiB_Infergate)->Unit(benchmark::kMillisecond);

// ---- protobuf (gRPC raw contents), 64 MiB ----------------------------------------------------

void BM_ProtobufEncode64MiB_Infergate(benchmark::State& state) {
  const cd::InferRequest& request = largeRequest();
  cd::ProtobufRequestEncoder encoder;
  FaultCounter faults(state);
  for (auto _ : state) {
    auto chain = encoder.encode(request);
    if (!chain.ok()) {
      reportError(state, chain.status());
      break;
    }
    grpc::ByteBuffer message = cd::toByteBuffer(*chain);
    benchmark::DoNotOptimize(message.Length());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_ProtobufEncode64MiB_Infergate)->Unit(benchmark::kMillisecond);

const cd::Buffer& largeProtobufMessage() {
  static const cd::Buffer message = [] {
    auto chain = cd::ProtobufRequestEncoder().encode(largeRequest());
    if (!chain.ok()) std::abort();
    return chain->flatten();
  }();
  return message;
}

void BM_ProtobufDecode64MiB_Infergate(benchmark::State& state) {
  const cd::Buffer& message = largeProtobufMessage();
  cd::ProtobufRequestDecoder decoder;
  FaultCounter faults(state);
  for (auto _ : state) {
    auto request = decoder.decode(message);
    if (!request.ok()) {
      reportError(state, request.status());
      break;
    }
    benchmark::DoNotOptimize(request->inputs.front().data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_ProtobufDecode64MiB_Infergate)->Unit(benchmark::kMillisecond);

void fromByteBuffer(benchmark::State& state, const grpc::ByteBuffer& message) {
  FaultCounter faults(state);
  for (auto _ : state) {
    auto buffer = cd::fromByteBuffer(message);
    if (!buffer.ok()) {
      reportError(state, buffer.status());
      break;
    }
    benchmark::DoNotOptimize(buffer->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}

void BM_ProtobufFromByteBuffer64MiB_SingleSlice(benchmark::State& state) {
  const cd::Buffer& bytes = largeProtobufMessage();
  grpc::Slice slice(bytes.data(), bytes.size());  // grpc's own copy
  grpc::ByteBuffer message(&slice, 1);
  fromByteBuffer(state, message);
}
BENCHMARK(BM_ProtobufFromByteBuffer64MiB_SingleSlice)->Unit(benchmark::kMillisecond);

// Not a target, for the record: a message that arrived in many slices (16 KiB each, as
// HTTP/2 DATA frames deliver it) is copied into one fresh buffer per message.
void BM_ProtobufFromByteBuffer64MiB_MultiSlice(benchmark::State& state) {
  const cd::Buffer& bytes = largeProtobufMessage();
  constexpr size_t kSlice = 16 * 1024;
  std::vector<grpc::Slice> slices;
  for (size_t offset = 0; offset < bytes.size(); offset += kSlice) {
    slices.emplace_back(bytes.data() + offset, std::min(kSlice, bytes.size() - offset));
  }
  grpc::ByteBuffer message(slices.data(), slices.size());
  fromByteBuffer(state, message);
}
BENCHMARK(BM_ProtobufFromByteBuffer64MiB_MultiSlice)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  grpc_init();  // grpc::Slice / ByteBuffer use grpc core
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  grpc_shutdown();
  return 0;
}
