#include "gateway/upstream/builtin/demo_models.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "codecs/bytes_tensor.h"
#include "gateway/upstream/builtin/tensor_access.h"

namespace infergate::gateway::builtin {

using codecs::DataType;
using codecs::InferOutput;
using codecs::InferRequest;
using codecs::InferResponse;

const TensorSpec* ModelSpec::findInput(std::string_view name) const {
  for (const TensorSpec& t : inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorSpec* ModelSpec::findOutput(std::string_view name) const {
  for (const TensorSpec& t : outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

Execution single(codecs::StatusOr<InferResponse> response,
                 std::chrono::microseconds delay = std::chrono::microseconds(0)) {
  Execution e;
  TimedResponse r;
  r.from_model = !response.ok();
  r.response = std::move(response);
  r.delay = delay;
  e.responses.push_back(std::move(r));
  return e;
}

Execution respondWith(std::vector<InferOutput> outputs,
                      std::chrono::microseconds delay = std::chrono::microseconds(0)) {
  InferResponse response;
  response.outputs = std::move(outputs);
  return single(std::move(response), delay);
}

int32_t wrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t wrapSub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}

// A model whose behaviour is one function of the request.
class FunctionModel : public Model {
 public:
  using Fn = Execution (*)(const ModelSpec&, const InferRequest&);
  FunctionModel(ModelSpec spec, Fn fn) : spec_(std::move(spec)), fn_(fn) {}
  const ModelSpec& spec() const override { return spec_; }
  Execution execute(const InferRequest& request) override { return fn_(spec_, request); }

 private:
  const ModelSpec spec_;
  const Fn fn_;
};

ModelSpec addSubSpec(std::string name, DataType type) {
  ModelSpec spec;
  spec.name = std::move(name);
  spec.max_batch_size = 8;
  spec.inputs = {{"INPUT0", type, {16}}, {"INPUT1", type, {16}}};
  spec.outputs = {{"OUTPUT0", type, {16}}, {"OUTPUT1", type, {16}}};
  return spec;
}

// simple: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32, wrapping).
Execution runSimple(const ModelSpec&, const InferRequest& request) {
  const codecs::InferInput* in0 = request.findInput("INPUT0");
  const codecs::InferInput* in1 = request.findInput("INPUT1");
  std::vector<int32_t> a = loadElements<int32_t>(in0->data);
  std::vector<int32_t> b = loadElements<int32_t>(in1->data);
  std::vector<int32_t> sum(a.size()), diff(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    sum[i] = wrapAdd(a[i], b[i]);
    diff[i] = wrapSub(a[i], b[i]);
  }
  std::vector<InferOutput> outputs;
  outputs.push_back(makeOutput("OUTPUT0", DataType::kInt32, in0->shape, bufferOf(sum)));
  outputs.push_back(makeOutput("OUTPUT1", DataType::kInt32, in0->shape, bufferOf(diff)));
  return respondWith(std::move(outputs));
}

codecs::StatusOr<std::vector<int32_t>> parseDecimals(const codecs::InferInput& input) {
  std::vector<int32_t> values;
  codecs::Status bad;
  size_t index = 0;
  codecs::Status walk =
      codecs::forEachBytesElement(input.data.span(), input.name, [&](std::string_view element) {
        int32_t value = 0;
        const char* first = element.data();
        const char* last = element.data() + element.size();
        auto [ptr, ec] = std::from_chars(first, last, value);
        if (bad.ok() && (element.empty() || ec != std::errc() || ptr != last)) {
          bad = codecs::invalidArgument("simple_string: element ", index, " of input '", input.name,
                                        "' ('", element, "') is not a decimal int32");
        }
        values.push_back(value);
        ++index;
      });
  if (!walk.ok()) return walk;
  if (!bad.ok()) return bad;
  return values;
}

codecs::Buffer decimalsOf(const std::vector<int32_t>& values) {
  std::string out;
  for (int32_t v : values) codecs::appendBytesElement(out, std::to_string(v));
  return codecs::Buffer::fromString(std::move(out));
}

// simple_string: simple on BYTES elements holding decimal integers.
Execution runSimpleString(const ModelSpec&, const InferRequest& request) {
  const codecs::InferInput* in0 = request.findInput("INPUT0");
  const codecs::InferInput* in1 = request.findInput("INPUT1");
  auto a = parseDecimals(*in0);
  if (!a.ok()) return single(a.status());
  auto b = parseDecimals(*in1);
  if (!b.ok()) return single(b.status());
  std::vector<int32_t> sum(a->size()), diff(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    sum[i] = wrapAdd((*a)[i], (*b)[i]);
    diff[i] = wrapSub((*a)[i], (*b)[i]);
  }
  std::vector<InferOutput> outputs;
  outputs.push_back(makeOutput("OUTPUT0", DataType::kBytes, in0->shape, decimalsOf(sum)));
  outputs.push_back(makeOutput("OUTPUT1", DataType::kBytes, in0->shape, decimalsOf(diff)));
  return respondWith(std::move(outputs));
}

// identity_<type>: OUTPUT0 is INPUT0, sharing its Buffer (no byte is copied).
Execution runIdentity(const ModelSpec& spec, const InferRequest& request) {
  const codecs::InferInput* in = request.findInput("INPUT0");
  std::vector<InferOutput> outputs;
  outputs.push_back(makeOutput("OUTPUT0", spec.outputs[0].datatype, in->shape, in->data));
  return respondWith(std::move(outputs));
}

// sleep: OUTPUT0 = INPUT0, due INPUT0 milliseconds (at most kMaxSleep) after arrival.
Execution runSleep(const ModelSpec&, const InferRequest& request) {
  const codecs::InferInput* in = request.findInput("INPUT0");
  const int32_t ms = loadElement<int32_t>(in->data, 0);
  if (ms < 0) {
    return single(codecs::invalidArgument(
        "sleep: INPUT0 must be a non-negative number of milliseconds, got ", ms));
  }
  const auto delay = std::min<std::chrono::microseconds>(std::chrono::milliseconds(ms), kMaxSleep);
  std::vector<InferOutput> outputs;
  outputs.push_back(makeOutput("OUTPUT0", DataType::kInt32, in->shape, in->data));
  return respondWith(std::move(outputs), delay);
}

}  // namespace

std::shared_ptr<Model> makeSimpleModel() {
  return std::make_shared<FunctionModel>(addSubSpec("simple", DataType::kInt32), runSimple);
}

std::shared_ptr<Model> makeSimpleStringModel() {
  return std::make_shared<FunctionModel>(addSubSpec("simple_string", DataType::kBytes),
                                         runSimpleString);
}

std::string identityModelName(DataType datatype) {
  std::string name = "identity_";
  for (char c : codecs::dataTypeName(datatype)) {
    name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return name;
}

std::shared_ptr<Model> makeIdentityModel(DataType datatype) {
  ModelSpec spec;
  spec.name = identityModelName(datatype);
  spec.max_batch_size = 8;
  spec.inputs = {{"INPUT0", datatype, {-1}}};
  spec.outputs = {{"OUTPUT0", datatype, {-1}}};
  return std::make_shared<FunctionModel>(std::move(spec), runIdentity);
}

std::shared_ptr<Model> makeSleepModel() {
  ModelSpec spec;
  spec.name = "sleep";
  spec.max_batch_size = 0;
  spec.inputs = {{"INPUT0", DataType::kInt32, {1}}};
  spec.outputs = {{"OUTPUT0", DataType::kInt32, {1}}};
  return std::make_shared<FunctionModel>(std::move(spec), runSleep);
}

std::vector<std::string> demoModelNames() {
  std::vector<std::string> names = {"simple", "simple_string", "simple_sequence", "repeat_int32",
                                    "sleep"};
  for (DataType type : codecs::kAllDataTypes) names.push_back(identityModelName(type));
  return names;
}

std::shared_ptr<Model> makeDemoModel(std::string_view name, const DemoOptions& options) {
  if (name == "simple") return makeSimpleModel();
  if (name == "simple_string") return makeSimpleStringModel();
  if (name == "simple_sequence") return makeSequenceModel(options);
  if (name == "repeat_int32") return makeRepeatModel();
  if (name == "sleep") return makeSleepModel();
  for (DataType type : codecs::kAllDataTypes) {
    if (name == identityModelName(type)) return makeIdentityModel(type);
  }
  return nullptr;
}

}  // namespace infergate::gateway::builtin
