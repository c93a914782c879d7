#pragma once

// A decoded request on its way to a remote upstream, with the shared-memory handoff
// applied per endpoint (DESIGN.md "handoff"; upstream/endpoint_handoff.h has the state).
//
//   create()        the client's region references are looked up and checked as
//                   ShmBinding::bind() checks them (same errors), but kept.
//   forEndpoint(e)  the request to send to endpoint `e`, made again for each attempt:
//                     e colocated, handoff ready        client regions the upstream has
//                                                       registered go by reference (their
//                                                       gateway-owned names); inline
//                                                       inputs of at least min_bytes go
//                                                       by reference: from where they lie
//                                                       when the body was read into the
//                                                       pool (handoffBodyPlace), else
//                                                       copied into a slot; outputs seen before
//                                                       are asked into a slot of their
//                                                       last size, at least the biggest
//                                                       input's (when >= min_bytes)
//                     otherwise (or for what did not    client regions are read by the
//                     fit: the pool full, a region not   gateway and sent inline, outputs
//                     registered yet)                    come back inline
//   finish(r)       the answer for the client: outputs read from their pool slots (a view
//                   of the slot, no copy, for system pools), outputs the upstream wrote
//                   into a client region by reference marked so, inline outputs asked
//                   into a client region written there (Triton's INTERNAL when too big).
//   retryInline(s)  whether an upstream error says a reference failed (it lost the
//                   registration, or a learned output size was too small): the request is
//                   then sent again with everything inline, once, unless it is part of a
//                   sequence (whose state the first attempt may have moved).
//
// Slots are freed when the plan is replaced (the next attempt) or destroyed (the response
// sent, the request failed or cancelled): the owner keeps the HandoffRequest until then.
//
// Threads: one request's calls follow one another (the fleet's attempts, then the answer);
// the object is not shared between requests.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codecs/infer.h"
#include "codecs/status.h"
#include "gateway/http/http_message.h"
#include "gateway/upstream/endpoint.h"
#include "gateway/upstream/upstream_set.h"
#include "shm/handoff_pool.h"
#include "shm/region_registry.h"

namespace infergate::gateway {

class HandoffRequest {
 public:
  static codecs::StatusOr<std::shared_ptr<HandoffRequest>> create(
      const shm::RegionRegistry& registry, codecs::InferRequest request);

  // The attempt's request, owned by this object until the next forEndpoint().
  codecs::StatusOr<codecs::InferRequest*> forEndpoint(upstream::Endpoint& endpoint);
  codecs::Status finish(codecs::InferResponse& response);
  bool retryInline(const codecs::Status& error);

  // The request as the client sent it (names already rewritten for the upstream).
  const codecs::InferRequest& request() const { return request_; }
  // Whether the current attempt hands some tensor over through shared memory (a client
  // region passed through, or a pool slot).
  bool attemptUsesSharedMemory() const { return used_references_; }

 private:
  struct Slotted {
    std::string name;
    std::shared_ptr<shm::HandoffPool::Slot> slot;
  };
  struct ClientOutput {
    std::string name;
    codecs::SharedMemoryRef ref;
    std::shared_ptr<const shm::Region> region;
    bool by_reference = false;  // this attempt: the upstream writes it itself
  };

  codecs::Status placeInput(codecs::InferInput& input, size_t index);
  void placeOutputs(codecs::InferRequest& out);

  codecs::InferRequest request_;
  std::vector<std::shared_ptr<const shm::Region>> input_regions_;  // by input index (or null)
  std::vector<ClientOutput> client_outputs_;

  // The current attempt.
  upstream::EndpointHandoff* handoff_ = nullptr;
  std::shared_ptr<shm::HandoffPool> pool_;
  codecs::InferRequest attempt_;
  std::vector<std::shared_ptr<shm::HandoffPool::Slot>> input_slots_;
  std::vector<Slotted> output_slots_;
  bool used_references_ = false;
  bool force_inline_ = false;
};

// Whether a request of `message_bytes` toward `upstream` is worth decoding for the
// handoff rather than passing through: the upstream's colocated endpoint takes tensors
// through shared memory (and has not refused it), and the message is at least
// handoff.min_bytes (no tensor is bigger than its message). Cheap: a config test for other
// upstreams.
bool takesHandoff(const upstream::Upstream& upstream, uint64_t message_bytes);

// Where to read a binary-tensor request body of `body_bytes` (its JSON header the first
// `header_bytes`) toward `upstream`: a slot of the handoff pool of its first endpoint that
// has one ready, so the tensors are in the pool from the socket on and go by reference
// with no copy (HandoffRequest finds them there). The tensors start 64-byte aligned in the
// pool. Nothing when the upstream takes no handoff for them (takesHandoff), the pool is a
// CUDA one or not ready, or it has no room (the body is read as usual: a full pool is
// never an error). The slot is held while the body lives.
std::optional<http::BodyPlace> handoffBodyPlace(const upstream::Upstream& upstream,
                                                uint64_t body_bytes, uint64_t header_bytes);

}  // namespace infergate::gateway
