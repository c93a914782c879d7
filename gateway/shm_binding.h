#pragma once

// The client-shared-memory step of the pipeline (DESIGN.md "handoff"; PROTOCOL.md 8.3)
// for a decoded request: the tensors a client left in its registered regions are read
// from there, and the outputs it asked to have written there are written there, whatever
// the upstream (the builtin models, or a remote server that never sees the client's
// regions).
//
//   bind(registry, request)   before the request goes upstream. Each input naming a
//                             region: the region is found (NOT_FOUND "Unable to find
//                             shared memory region: 'r'"), the reference checked against
//                             it (overflow-safe), its size against the tensor's shape and
//                             datatype, and the input's data becomes the region's bytes (a
//                             view that keeps the mapping alive for system regions; a copy
//                             out of the GPU for CUDA ones). Each output asked into a
//                             region: the same lookup and check now (as Triton does), the
//                             reference taken off the request so that the upstream sends
//                             the bytes, and the region kept for deliver().
//   deliver(response)         before the answer is encoded for the client. Each such
//                             output is written into its region and leaves the response
//                             carrying no data, only its name, datatype and shape (the
//                             encoders list it so); an output bigger than the space the
//                             client gave is INTERNAL with Triton's words.
//
// A request that names no region costs one pass over its inputs and outputs. When client
// shared memory is disabled in the configuration, a request naming a region is refused
// with a message saying so. The regions a binding holds stay mapped until it is
// destroyed, even when the client unregisters them meanwhile.

#include <memory>
#include <string>
#include <vector>

#include "codecs/infer.h"
#include "codecs/status.h"
#include "shm/region_registry.h"

namespace infergate::gateway {

class ShmBinding {
 public:
  ShmBinding() = default;

  static codecs::StatusOr<ShmBinding> bind(const shm::RegionRegistry& registry,
                                           codecs::InferRequest& request);

  // Whether some output is to be written into a region.
  bool hasOutputs() const { return !outputs_.empty(); }

  codecs::Status deliver(codecs::InferResponse& response) const;

 private:
  struct OutputTarget {
    std::string name;
    codecs::SharedMemoryRef ref;
    std::shared_ptr<const shm::Region> region;
  };
  std::vector<OutputTarget> outputs_;
};

// Whether a register / unregister call may change the table: UNIMPLEMENTED while client
// shared memory is disabled (Triton's answer without --allow-client-shm), PERMISSION_DENIED
// when `shm.listeners` leaves out `listener` ("HTTP" / "gRPC", as the message names it).
codecs::Status shmChangeAllowed(const shm::RegionRegistry& registry, bool listener_allowed,
                                std::string_view listener);

// Whether `request` names any region (an input or an output).
bool referencesSharedMemory(const codecs::InferRequest& request);

// The steps bind() and HandoffRequest (handoff_request.h) share.
namespace shm_detail {
// UNIMPLEMENTED: `what` ("input" / "output") names a region while client shm is disabled.
codecs::Status disabled(std::string_view what, const std::string& tensor,
                        const std::string& region);
// The region `ref` names, checked to hold [offset, offset + byte_size) and to be still
// backed by its object (Region::stillBacked).
codecs::StatusOr<std::shared_ptr<const shm::Region>> resolve(const shm::RegionRegistry& registry,
                                                             const codecs::SharedMemoryRef& ref);
// A fixed-size input's byte size (from its shape and datatype) against `ref`'s.
codecs::Status checkInputSize(const codecs::InferInput& input, const codecs::SharedMemoryRef& ref);
// An input's bytes from its region: a view keeping a system mapping alive, a host copy of a
// CUDA region; BYTES elements checked against the shape.
codecs::StatusOr<codecs::Buffer> readInput(const codecs::InferInput& input,
                                           std::shared_ptr<const shm::Region> region,
                                           const codecs::SharedMemoryRef& ref);
// An output's bytes into `ref` of `region`; the output then carries `ref` and no data.
codecs::Status writeOutput(codecs::InferOutput& output, const codecs::SharedMemoryRef& ref,
                           const shm::Region& region);
}  // namespace shm_detail

}  // namespace infergate::gateway
