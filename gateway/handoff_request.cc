#include "gateway/handoff_request.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "codecs/sequence_peek.h"
#include "gateway/shm_binding.h"

namespace infergate::gateway {
namespace {

// The serialized length of `count` length-prefixed BYTES elements at the start of `data`,
// or nullopt when they do not fit.
std::optional<uint64_t> bytesTensorLength(const uint8_t* data, uint64_t size, uint64_t count) {
  uint64_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (size - at < 4) return std::nullopt;
    uint32_t n;
    std::memcpy(&n, data + at, 4);  // little-endian on every supported host
    at += 4;
    if (size - at < n) return std::nullopt;
    at += n;
  }
  return at;
}

// The bytes of an output the upstream wrote into a pool slot, from its shape and
// datatype: a view of the slot (which stays allocated while the view lives) for a system
// pool, a host copy for a CUDA one.
codecs::StatusOr<codecs::Buffer> outputFromSlot(const codecs::InferOutput& output,
                                                const std::shared_ptr<shm::HandoffPool::Slot>& slot) {
  uint64_t length = 0;
  if (codecs::isFixedSize(output.datatype)) {
    INFERGATE_ASSIGN_OR_RETURN(length,
                               output.shape.byteSize(codecs::elementSize(output.datatype), output.name));
    if (length > slot->size()) {
      return codecs::internalError("output '", output.name, "' of ", length,
                                   " bytes does not fit its handoff slot of ", slot->size());
    }
  } else {
    INFERGATE_ASSIGN_OR_RETURN(int64_t count, output.shape.elementCount(output.name));
    codecs::MutableBuffer scratch;
    const uint8_t* base = slot->data();
    if (base == nullptr) {  // CUDA: the whole slot comes over first
      scratch = codecs::MutableBuffer::allocate(slot->size());
      INFERGATE_RETURN_IF_ERROR(slot->read(0, std::span<uint8_t>(scratch.data(), scratch.size())));
      base = scratch.data();
    }
    std::optional<uint64_t> n = bytesTensorLength(base, slot->size(), static_cast<uint64_t>(count));
    if (!n) {
      return codecs::internalError("BYTES output '", output.name,
                                   "' written by the upstream does not fit its handoff slot");
    }
    length = *n;
  }
  if (uint8_t* data = slot->data()) {
    return codecs::Buffer(std::shared_ptr<const void>(slot, data), data, length);
  }
  codecs::MutableBuffer copy = codecs::MutableBuffer::allocate(length);
  INFERGATE_RETURN_IF_ERROR(slot->read(0, std::span<uint8_t>(copy.data(), copy.size())));
  return std::move(copy).freeze();
}

// "... output 'NAME' (X bytes) should be at least N bytes ..." -> (NAME, N).
std::optional<std::pair<std::string, uint64_t>> neededOutputSize(std::string_view message) {
  constexpr std::string_view kOutput = "output '";
  constexpr std::string_view kAtLeast = "should be at least ";
  size_t o = message.find(kOutput);
  size_t a = message.find(kAtLeast);
  if (o == std::string_view::npos || a == std::string_view::npos) return std::nullopt;
  size_t name_start = o + kOutput.size();
  size_t name_end = message.find('\'', name_start);
  if (name_end == std::string_view::npos) return std::nullopt;
  uint64_t n = 0;
  const char* from = message.data() + a + kAtLeast.size();
  auto [end, ec] = std::from_chars(from, message.data() + message.size(), n);
  if (ec != std::errc() || end == from) return std::nullopt;
  return std::make_pair(std::string(message.substr(name_start, name_end - name_start)), n);
}

}  // namespace

codecs::StatusOr<std::shared_ptr<HandoffRequest>> HandoffRequest::create(
    const shm::RegionRegistry& registry, codecs::InferRequest request) {
  auto out = std::shared_ptr<HandoffRequest>(new HandoffRequest());
  out->input_regions_.resize(request.inputs.size());
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const codecs::InferInput& input = request.inputs[i];
    if (!input.shared_memory) continue;
    if (!registry.enabled()) {
      return shm_detail::disabled("input", input.name, input.shared_memory->region);
    }
    INFERGATE_RETURN_IF_ERROR(shm_detail::checkInputSize(input, *input.shared_memory));
    INFERGATE_ASSIGN_OR_RETURN(out->input_regions_[i],
                               shm_detail::resolve(registry, *input.shared_memory));
  }
  for (const codecs::RequestedOutput& output : request.outputs) {
    if (!output.shared_memory) continue;
    if (!registry.enabled()) {
      return shm_detail::disabled("output", output.name, output.shared_memory->region);
    }
    INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const shm::Region> region,
                               shm_detail::resolve(registry, *output.shared_memory));
    out->client_outputs_.push_back(ClientOutput{output.name, *output.shared_memory, std::move(region)});
  }
  out->request_ = std::move(request);
  return out;
}

codecs::Status HandoffRequest::placeInput(codecs::InferInput& input, size_t index) {
  const std::shared_ptr<const shm::Region>& region = input_regions_[index];
  if (region) {
    const codecs::SharedMemoryRef ref = *input.shared_memory;
    if (handoff_ != nullptr && !force_inline_) {
      if (std::optional<std::string> name = handoff_->passthroughName(region)) {
        input.shared_memory->region = *name;  // same object, same offsets: zero copies
        handoff_->countPassthrough(ref.byte_size);
        used_references_ = true;
        return absl::OkStatus();
      }
    }
    INFERGATE_ASSIGN_OR_RETURN(input.data, shm_detail::readInput(input, region, ref));
    input.shared_memory.reset();
  }
  if (pool_ == nullptr || input.data.size() < handoff_->config().min_bytes) {
    if (handoff_ != nullptr) handoff_->countInline(input.data.size());
    return absl::OkStatus();
  }
  const uint64_t size = input.data.size();
  // Read into this pool with the body (handoffBodyPlace): it goes from where it lies, and
  // request_ keeps the body, with it the slot, until the response is sent. Else it is
  // copied into a slot of its own.
  std::optional<uint64_t> offset = pool_->offsetOf(input.data.span());
  if (offset) {
    handoff_->countPoolInPlace(size);
  } else {
    std::shared_ptr<shm::HandoffPool::Slot> slot = pool_->allocate(size);
    if (!slot) {  // a full pool is never an error: this tensor goes inline
      handoff_->countPoolFull();
      handoff_->countInline(size);
      return absl::OkStatus();
    }
    if (uint8_t* at = slot->data()) {
      std::memcpy(at, input.data.data(), size);
    } else {
      INFERGATE_RETURN_IF_ERROR(slot->write(0, input.data.span()));
    }
    offset = slot->offset();
    input_slots_.push_back(std::move(slot));
  }
  handoff_->countPoolIn(size);
  input.shared_memory = codecs::SharedMemoryRef{handoff_->poolName(), *offset, size};
  input.data = codecs::Buffer();
  used_references_ = true;
  return absl::OkStatus();
}

void HandoffRequest::placeOutputs(codecs::InferRequest& out) {
  // Outputs asked into client regions: by reference where the upstream has the region,
  // else inline (written by finish()).
  for (ClientOutput& c : client_outputs_) {
    c.by_reference = false;
    for (codecs::RequestedOutput& o : out.outputs) {
      if (o.name != c.name || !o.shared_memory) continue;
      std::optional<std::string> name = handoff_ != nullptr && !force_inline_
                                            ? handoff_->passthroughName(c.region)
                                            : std::nullopt;
      if (name) {
        o.shared_memory->region = *name;
        c.by_reference = true;
        used_references_ = true;
      } else {
        o.shared_memory.reset();
      }
    }
  }
  if (pool_ == nullptr) return;
  // The others into pool slots, sized by what they were last time (an output never seen
  // comes back inline and is learned). A client that asked for no output in particular
  // gets every output: they are asked for by name once all of them are known.
  if (out.outputs.empty()) {
    for (const std::string& name : handoff_->outputsOf(out.model_name)) {
      codecs::RequestedOutput o;
      o.name = name;
      out.outputs.push_back(std::move(o));
    }
  }
  // An output seen before gets at least its last size, and at least the biggest input of
  // this request: element-wise and identity-like models answer with their input's size,
  // so a request bigger than the last one does not outgrow its slot (which would cost an
  // inline retry). A slot too big only holds pool space until the response is sent.
  uint64_t biggest_input = 0;
  for (const codecs::InferInput& in : request_.inputs) {
    biggest_input = std::max<uint64_t>(
        biggest_input, in.shared_memory ? in.shared_memory->byte_size : in.data.size());
  }
  for (codecs::RequestedOutput& o : out.outputs) {
    if (o.shared_memory || o.classification != 0) continue;
    std::optional<uint64_t> learned = handoff_->outputSize(out.model_name, o.name);
    if (!learned) continue;
    const uint64_t size = std::max(*learned, biggest_input);
    if (size < handoff_->config().min_bytes) continue;
    std::shared_ptr<shm::HandoffPool::Slot> slot = pool_->allocate(size);
    if (!slot) {
      handoff_->countPoolFull();
      continue;
    }
    o.shared_memory = codecs::SharedMemoryRef{handoff_->poolName(), slot->offset(), size};
    // Triton refuses an output asked both binary and into shared memory; the client's own
    // choice still shapes its response (encoded from request_, not this attempt).
    o.binary_data.reset();
    output_slots_.push_back(Slotted{o.name, std::move(slot)});
    used_references_ = true;
  }
}

codecs::StatusOr<codecs::InferRequest*> HandoffRequest::forEndpoint(upstream::Endpoint& endpoint) {
  // The previous attempt's slots go back to the pool first.
  input_slots_.clear();
  output_slots_.clear();
  used_references_ = false;
  // An inline retry still counts its bytes at the endpoint; it only takes no reference.
  handoff_ = endpoint.handoff();
  pool_ = handoff_ != nullptr && !force_inline_ ? handoff_->readyPool() : nullptr;
  attempt_ = request_;
  for (size_t i = 0; i < attempt_.inputs.size(); ++i) {
    INFERGATE_RETURN_IF_ERROR(placeInput(attempt_.inputs[i], i));
  }
  placeOutputs(attempt_);
  return &attempt_;
}

codecs::Status HandoffRequest::finish(codecs::InferResponse& response) {
  if (handoff_ != nullptr && request_.outputs.empty()) {
    std::vector<std::string> names;
    for (const codecs::InferOutput& output : response.outputs) names.push_back(output.name);
    handoff_->learnOutputsOf(request_.model_name, std::move(names));
  }
  for (codecs::InferOutput& output : response.outputs) {
    bool done = false;
    for (const Slotted& s : output_slots_) {
      if (s.name != output.name) continue;
      INFERGATE_ASSIGN_OR_RETURN(output.data, outputFromSlot(output, s.slot));
      output.shared_memory.reset();
      handoff_->countPoolOut(output.data.size());
      done = true;
    }
    for (const ClientOutput& c : client_outputs_) {
      if (c.name != output.name) continue;
      if (c.by_reference) {  // the upstream wrote it into the client's region itself
        output.data = codecs::Buffer();
        output.shared_memory = c.ref;
        if (handoff_ != nullptr) handoff_->countPassthrough(c.ref.byte_size);
      } else {
        if (handoff_ != nullptr) handoff_->countInline(output.data.size());
        INFERGATE_RETURN_IF_ERROR(shm_detail::writeOutput(output, c.ref, *c.region));
      }
      done = true;
    }
    if (!done && handoff_ != nullptr) handoff_->countInline(output.data.size());
    // Sizes for the next requests' slots: what this output took now.
    if (handoff_ != nullptr && !output.shared_memory) {
      handoff_->learnOutputSize(request_.model_name, output.name, output.data.size());
    }
  }
  return absl::OkStatus();
}

bool HandoffRequest::retryInline(const codecs::Status& error) {
  if (!used_references_ || force_inline_ || handoff_ == nullptr) return false;  // once
  std::string_view message = codecs::messageOf(error);
  if (message.find("shared memory") == std::string_view::npos) return false;
  if (std::optional<std::pair<std::string, uint64_t>> needed = neededOutputSize(message)) {
    handoff_->learnOutputSize(request_.model_name, needed->first, needed->second);
  } else {
    handoff_->lostRegistrations();
  }
  // A sequence's state may have moved with the failed attempt: no second try.
  if (codecs::sequenceOf(request_.parameters).present()) return false;
  handoff_->countInlineRetry();
  force_inline_ = true;
  return true;
}

bool takesHandoff(const upstream::Upstream& upstream, uint64_t message_bytes) {
  const config::UpstreamConfig& c = upstream.config();
  if (!c.colocated || !c.handoff.enabled || message_bytes < c.handoff.min_bytes) return false;
  if (!upstream.fleet()) return false;
  // Held by name: discovery may swap the list meanwhile.
  std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = upstream.fleet()->endpoints();
  for (const std::shared_ptr<upstream::Endpoint>& e : *endpoints) {
    if (const upstream::EndpointHandoff* h = e->handoff()) return !h->refused();
  }
  return false;
}

std::optional<http::BodyPlace> handoffBodyPlace(const upstream::Upstream& upstream,
                                                uint64_t body_bytes, uint64_t header_bytes) {
  if (header_bytes > body_bytes || !takesHandoff(upstream, body_bytes - header_bytes)) {
    return std::nullopt;
  }
  std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = upstream.fleet()->endpoints();
  for (const std::shared_ptr<upstream::Endpoint>& e : *endpoints) {
    const upstream::EndpointHandoff* h = e->handoff();
    if (h == nullptr) continue;
    std::shared_ptr<shm::HandoffPool> pool = h->readyPool();
    if (pool == nullptr || pool->hostData() == nullptr) return std::nullopt;
    // Slots start 64-byte aligned; the body starts `lead` bytes in, so that the bytes
    // after its JSON header (the first tensor) do too.
    constexpr uint64_t kAlign = 64;
    std::shared_ptr<shm::HandoffPool::Slot> slot =
        pool->allocate(body_bytes + kAlign + http::kRequestBodyPadding);
    if (slot == nullptr) return std::nullopt;
    const uint64_t lead = (kAlign - (slot->offset() + header_bytes) % kAlign) % kAlign;
    uint8_t* data = slot->data() + lead;
    const size_t capacity = static_cast<size_t>(slot->size() - lead);
    return http::BodyPlace{std::move(slot), data, capacity};
  }
  return std::nullopt;
}

}  // namespace infergate::gateway
