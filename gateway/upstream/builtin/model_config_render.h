#pragma once

// Renderings of a model for the metadata and config endpoints, shared by both frontends:
//
//   model metadata  JSON in Triton's key order (name, versions, platform, inputs, outputs),
//                   shapes with a leading -1 when max_batch_size >= 1; and the same as
//                   inference::ModelMetadataResponse.
//   model config    a realistic inference::ModelConfig for a spec, and the JSON form
//                   Triton's HTTP /config serves for any ModelConfig (PROTOCOL 11.3b):
//                   protobuf's JSON printer with proto field names and default primitives
//                   printed, then the 64-bit paths Triton fixes up rewritten as numbers,
//                   compact.
//
// Pure; thread-safe.

#include <string>
#include <string_view>

#include "codecs/status.h"
#include "gateway/upstream/builtin/model.h"
#include "grpc_service.pb.h"
#include "model_config.pb.h"

namespace infergate::gateway::builtin {

// `version` empty: every version of the spec; otherwise just `version`.
std::string modelMetadataJson(const ModelSpec& spec, std::string_view version);
inference::ModelMetadataResponse modelMetadataProto(const ModelSpec& spec,
                                                    std::string_view version);

// name, platform and backend, version_policy latest 1, max_batch_size, input / output
// with TYPE_* and dims, instance_group [{<name>_0, KIND_CPU, 1}], pinned-memory
// optimization, sequence_batching (direct, START/READY controls, idle time) for a
// sequence model, model_transaction_policy, response_cache.
inference::ModelConfig modelConfigOf(const ModelSpec& spec);

// Triton's HTTP /config body for `config`. INTERNAL if protobuf cannot print it.
codecs::StatusOr<std::string> modelConfigJson(const inference::ModelConfig& config);

// The fix-up step alone: in compact protobuf JSON of a ModelConfig, the quoted values at
// the 64-bit paths Triton converts (input[].dims, sequence_batching
// .max_sequence_idle_microseconds, ... PROTOCOL 11.3b) become bare numbers; every other
// byte, including whitespace, is kept. Malformed input is returned unchanged.
std::string rewriteInt64PathsAsNumbers(std::string_view json);

}  // namespace infergate::gateway::builtin
