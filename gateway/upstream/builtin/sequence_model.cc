#include "gateway/upstream/builtin/sequence_model.h"

#include <variant>

#include "gateway/upstream/builtin/tensor_access.h"

namespace infergate::gateway::builtin {

std::string CorrelationId::key() const {
  return is_string ? "s" + text : "u" + std::to_string(number);
}

std::string CorrelationId::display() const { return is_string ? text : std::to_string(number); }

CorrelationId correlationIdOf(const codecs::Parameters& parameters) {
  CorrelationId id;
  const codecs::ParamValue* value = parameters.find(codecs::param::kSequenceId);
  if (value == nullptr) return id;
  if (const auto* s = std::get_if<std::string>(value)) {
    id.is_string = true;
    id.text = *s;
  } else if (const auto* u = std::get_if<uint64_t>(value)) {
    id.number = *u;
  } else if (const auto* i = std::get_if<int64_t>(value)) {
    id.number = static_cast<uint64_t>(*i);  // as Triton stores a gRPC int64_param
  }
  return id;
}

SequenceStore::SequenceStore(std::chrono::microseconds idle, size_t max_sequences,
                             SteadyClock clock)
    : idle_(idle),
      max_sequences_(max_sequences == 0 ? 1 : max_sequences),
      clock_(clock ? std::move(clock)
                   : SteadyClock([] { return std::chrono::steady_clock::now(); })) {}

codecs::StatusOr<int32_t> SequenceStore::apply(const CorrelationId& id, bool start, bool end,
                                               int32_t value, std::string_view model) {
  const TimePoint now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  evictLocked(now);
  const std::string key = id.key();
  auto it = states_.find(key);
  if (it == states_.end()) {
    if (!start) {
      return codecs::invalidArgument("inference request for sequence ", id.display(), " to model '",
                                     model,
                                     "' must specify the START flag on the first request of "
                                     "the sequence");
    }
    if (states_.size() >= max_sequences_) dropLocked(states_.find(lru_.back()));
    lru_.push_front(key);
    it = states_.emplace(key, State{0, now, lru_.begin()}).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  State& state = it->second;
  // A start on a live sequence restarts it, as Triton does (with a warning there).
  state.total =
      start
          ? value
          : static_cast<int32_t>(static_cast<uint32_t>(state.total) + static_cast<uint32_t>(value));
  state.last_used = now;
  const int32_t total = state.total;
  if (end) dropLocked(it);
  return total;
}

void SequenceStore::evictLocked(TimePoint now) {
  while (!lru_.empty()) {
    auto it = states_.find(lru_.back());
    if (now - it->second.last_used <= idle_) break;
    dropLocked(it);
  }
}

void SequenceStore::dropLocked(std::unordered_map<std::string, State>::iterator it) {
  lru_.erase(it->second.lru);
  states_.erase(it);
}

size_t SequenceStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_.size();
}

void SequenceStore::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  states_.clear();
  lru_.clear();
}

namespace {

bool flagOf(const codecs::Parameters& parameters, std::string_view key) {
  const codecs::ParamValue* value = parameters.find(key);
  const bool* b = value ? std::get_if<bool>(value) : nullptr;
  return b != nullptr && *b;
}

Execution refuse(codecs::Status status) {
  Execution e;
  TimedResponse r;
  r.response = std::move(status);
  r.final = true;
  e.responses.push_back(std::move(r));  // from_model stays false: the batcher refused it
  return e;
}

class SequenceModel : public Model {
 public:
  explicit SequenceModel(const DemoOptions& options)
      : store_(options.sequence_idle, options.max_sequences, options.clock) {
    spec_.name = "simple_sequence";
    spec_.max_batch_size = 8;
    spec_.inputs = {{"INPUT", codecs::DataType::kInt32, {1}}};
    spec_.outputs = {{"OUTPUT", codecs::DataType::kInt32, {1}}};
    spec_.sequence = true;
    spec_.sequence_idle = options.sequence_idle;
  }

  const ModelSpec& spec() const override { return spec_; }

  Execution execute(const codecs::InferRequest& request) override {
    const codecs::InferInput* in = request.findInput("INPUT");
    if (in->shape.rank() == 0 || in->shape[0] != 1) {
      return refuse(codecs::invalidArgument(
          "inference request to model '", spec_.name,
          "' must specify batch-size 1 due to requirements of sequence batcher"));
    }
    const CorrelationId id = correlationIdOf(request.parameters);
    if (!id.inSequence()) {
      return refuse(
          codecs::invalidArgument("inference request to model '", spec_.name,
                                  "' must specify a non-zero or non-empty correlation ID"));
    }
    auto total = store_.apply(id, flagOf(request.parameters, codecs::param::kSequenceStart),
                              flagOf(request.parameters, codecs::param::kSequenceEnd),
                              loadElement<int32_t>(in->data, 0), spec_.name);
    if (!total.ok()) return refuse(total.status());

    codecs::InferResponse response;
    response.outputs.push_back(makeOutput("OUTPUT", codecs::DataType::kInt32, in->shape,
                                          bufferOf(std::vector<int32_t>{*total})));
    Execution e;
    TimedResponse r;
    r.response = std::move(response);
    e.responses.push_back(std::move(r));
    return e;
  }

  void reset() override { store_.clear(); }

 private:
  ModelSpec spec_;
  SequenceStore store_;
};

}  // namespace

std::shared_ptr<Model> makeSequenceModel(const DemoOptions& options) {
  return std::make_shared<SequenceModel>(options);
}

}  // namespace infergate::gateway::builtin
