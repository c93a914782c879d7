#pragma once

// The classification extension (PROTOCOL.md 9.1), as Triton's frontends apply it to an
// output whose requested `classification` is N > 0: the output is replaced by a BYTES
// tensor of the top k = min(N, elements per batch item) classes of each batch item,
// each "<value>:<index>" with <value> formatted by std::to_string (floats with six
// decimals: "3.300000:1"; integers without: "10:2"), sorted by descending value.
// Shape [batch, k] for a batching model, [k] otherwise.
//
// Ties keep ascending index order (Triton's std::sort leaves them unspecified) and NaN
// sorts below every number, so the result is deterministic. No labels: the demo models
// have no label files. Pure; thread-safe.

#include <cstdint>
#include <string>

#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::gateway::builtin {

// Classification is refused past this many elements in one output (PROTOCOL 9.1).
inline constexpr int64_t kMaxClassificationElements = 1000000;

// INVALID_ARGUMENT for BOOL, FP16, BF16 and BYTES ("class result not available for output
// due to unsupported type 'BYTES'") and for outputs past kMaxClassificationElements.
codecs::StatusOr<codecs::InferOutput> classify(const codecs::InferOutput& output, uint64_t count,
                                               bool batched);

}  // namespace infergate::gateway::builtin
