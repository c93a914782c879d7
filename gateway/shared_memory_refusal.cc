#include "gateway/shared_memory_refusal.h"

namespace infergate::gateway {

codecs::Status refuseSharedMemory(const codecs::InferRequest& request) {
  auto refuse = [](std::string_view what, const std::string& tensor, const std::string& region) {
    return codecs::invalidArgument(
        what, " '", tensor, "' refers to shared-memory region '", region,
        "', but client shared memory is disabled: enable shared memory in the gateway's "
        "configuration");
  };
  for (const codecs::InferInput& in : request.inputs) {
    if (in.shared_memory) return refuse("input", in.name, in.shared_memory->region);
  }
  for (const codecs::RequestedOutput& out : request.outputs) {
    if (out.shared_memory) return refuse("output", out.name, out.shared_memory->region);
  }
  return absl::OkStatus();
}

}  // namespace infergate::gateway
