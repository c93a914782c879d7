#include "gateway/shm_binding.h"

#include "shm/region.h"

namespace infergate::gateway {

namespace shm_detail {

codecs::Status disabled(std::string_view what, const std::string& tensor,
                        const std::string& region) {
  return codecs::unimplemented(
      what, " '", tensor, "' refers to shared-memory region '", region,
      "', but client shared memory is disabled: set `shm.enabled: true` in the gateway's "
      "configuration");
}

codecs::StatusOr<std::shared_ptr<const shm::Region>> resolve(const shm::RegionRegistry& registry,
                                                             const codecs::SharedMemoryRef& ref) {
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const shm::Region> region, registry.find(ref.region));
  INFERGATE_RETURN_IF_ERROR(shm::checkReference(*region, ref.offset, ref.byte_size));
  INFERGATE_RETURN_IF_ERROR(region->stillBacked());
  return region;
}

codecs::Status checkInputSize(const codecs::InferInput& input, const codecs::SharedMemoryRef& ref) {
  // A fixed-size tensor's size is known from its shape: checked before any byte is read
  // (or copied off a GPU).
  if (!codecs::isFixedSize(input.datatype)) return absl::OkStatus();
  INFERGATE_ASSIGN_OR_RETURN(uint64_t expected,
                             input.shape.byteSize(codecs::elementSize(input.datatype), input.name));
  if (expected != ref.byte_size) {
    return codecs::invalidArgument(
        "input '", input.name, "' of datatype ", codecs::dataTypeName(input.datatype),
        " and shape ", input.shape.toString(), " needs ", expected, " bytes, but ",
        ref.byte_size, " bytes of shared memory region '", ref.region, "' were given");
  }
  return absl::OkStatus();
}

codecs::StatusOr<codecs::Buffer> readInput(const codecs::InferInput& input,
                                           std::shared_ptr<const shm::Region> region,
                                           const codecs::SharedMemoryRef& ref) {
  codecs::Buffer data;
  if (region->hostData() != nullptr) {
    data = shm::viewOf(std::move(region), ref.offset, ref.byte_size);
  } else {
    codecs::MutableBuffer copy = codecs::MutableBuffer::allocate(ref.byte_size);
    INFERGATE_RETURN_IF_ERROR(
        region->read(ref.offset, std::span<uint8_t>(copy.data(), copy.size())));
    data = std::move(copy).freeze();
  }
  // BYTES elements are length-prefixed: their count is only known by walking them.
  INFERGATE_RETURN_IF_ERROR(
      codecs::validateTensorData(input.name, input.datatype, input.shape, data));
  return data;
}

codecs::Status writeOutput(codecs::InferOutput& output, const codecs::SharedMemoryRef& ref,
                           const shm::Region& region) {
  if (output.data.size() > ref.byte_size) {
    return codecs::internalError(
        "shared memory size specified with the request for output '", output.name, "' (",
        ref.byte_size, " bytes) should be at least ", output.data.size(),
        " bytes to hold the results");
  }
  INFERGATE_RETURN_IF_ERROR(region.write(ref.offset, output.data.span()));
  output.data = codecs::Buffer();
  output.shared_memory = ref;
  return absl::OkStatus();
}

}  // namespace shm_detail

codecs::Status shmChangeAllowed(const shm::RegionRegistry& registry, bool listener_allowed,
                                std::string_view listener) {
  if (!registry.enabled()) {
    return codecs::unimplemented(
        "Client shared memory is disabled. Enable it with `shm.enabled: true` in the gateway's "
        "configuration");
  }
  if (!listener_allowed) {
    return absl::PermissionDeniedError(codecs::strCat(
        "shared-memory registration is not allowed on the gateway's ", listener,
        " listener (shm.listeners)"));
  }
  return absl::OkStatus();
}

bool referencesSharedMemory(const codecs::InferRequest& request) {
  for (const codecs::InferInput& in : request.inputs) {
    if (in.shared_memory) return true;
  }
  for (const codecs::RequestedOutput& out : request.outputs) {
    if (out.shared_memory) return true;
  }
  return false;
}

codecs::StatusOr<ShmBinding> ShmBinding::bind(const shm::RegionRegistry& registry,
                                              codecs::InferRequest& request) {
  ShmBinding binding;
  if (!referencesSharedMemory(request)) return binding;
  const bool enabled = registry.enabled();
  for (codecs::InferInput& input : request.inputs) {
    if (!input.shared_memory) continue;
    if (!enabled) return shm_detail::disabled("input", input.name, input.shared_memory->region);
    const codecs::SharedMemoryRef& ref = *input.shared_memory;
    INFERGATE_RETURN_IF_ERROR(shm_detail::checkInputSize(input, ref));
    INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const shm::Region> region,
                               shm_detail::resolve(registry, ref));
    INFERGATE_ASSIGN_OR_RETURN(input.data, shm_detail::readInput(input, std::move(region), ref));
    input.shared_memory.reset();
  }
  for (codecs::RequestedOutput& output : request.outputs) {
    if (!output.shared_memory) continue;
    if (!enabled) return shm_detail::disabled("output", output.name, output.shared_memory->region);
    INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const shm::Region> region,
                               shm_detail::resolve(registry, *output.shared_memory));
    binding.outputs_.push_back(OutputTarget{output.name, *output.shared_memory, std::move(region)});
    output.shared_memory.reset();
  }
  return binding;
}

codecs::Status ShmBinding::deliver(codecs::InferResponse& response) const {
  for (const OutputTarget& target : outputs_) {
    for (codecs::InferOutput& output : response.outputs) {
      if (output.name != target.name || output.shared_memory) continue;
      INFERGATE_RETURN_IF_ERROR(shm_detail::writeOutput(output, target.ref, *target.region));
    }
  }
  return absl::OkStatus();
}

}  // namespace infergate::gateway
