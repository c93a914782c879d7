#pragma once

// Checks an InferRequest against a ModelSpec the way Triton's core does before a request
// reaches a model (core src/infer_request.cc Normalize / ValidateRequestInputs), in the
// same order and with the same messages, all INVALID_ARGUMENT:
//
//   duplicate input                "input 'X' already exists in request"
//   unknown requested output       "unexpected inference output 'X' for model 'M'"
//   input count                    "expected 2 inputs but got 1 inputs for model 'M'. Got
//                                   inputs ['INPUT0'], but missing required inputs
//                                   ['INPUT1']. Please provide all required inputs."
//   unknown input                  "unexpected inference input 'X' for model 'M'"
//   batching model, rank-0 input   "input 'X' has no shape but model requires batch
//                                   dimension for 'M'"
//   batch dims differ              "input 'X' batch size does not match other inputs for 'M'"
//   batch > max_batch_size         "inference request batch-size must be <= 8 for 'M'"
//   datatype                       "inference input 'X' data-type is 'FP32', but model 'M'
//                                   expects 'INT32'"
//   shape                          "unexpected shape for input 'X' for model 'M'. Expected
//                                   [-1,16], got [1,15]. NOTE: Setting a non-zero ..."
//   fixed-size byte count          "input byte size mismatch for input 'X' for model 'M'.
//                                   Expected 64, got 60"
//   BYTES element count / framing  "expected 16 string elements for inference input 'X' for
//                                   model 'M', got 14" and the other ValidateBytesInputs texts
//
// Messages from the Normalize steps start with "[request id: <id>] " when the request has
// an id, as Triton's LogRequest() prefix does. Pure; thread-safe.

#include <cstdint>

#include "codecs/infer.h"
#include "codecs/status.h"
#include "gateway/upstream/builtin/model.h"

namespace infergate::gateway::builtin {

// The request's batch size (the shared first dim) when spec.max_batch_size > 0, else 0.
codecs::StatusOr<int64_t> validateRequest(const ModelSpec& spec,
                                          const codecs::InferRequest& request);

// Which unary path a decoupled model was called on; the two refuse with different texts.
enum class UnaryPath { kHttp, kGrpc };

// OK for a non-decoupled model. For a decoupled one, Triton's UNIMPLEMENTED refusal (HTTP
// 501): "HTTP end point doesn't support models with decoupled transaction policy" or
// "ModelInfer RPC doesn't support models with decoupled transaction policy".
codecs::Status decoupledUnaryError(const ModelSpec& spec, UnaryPath path);

}  // namespace infergate::gateway::builtin
