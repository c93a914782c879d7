#pragma once

// The model-name rewrite: a route may alias a public model name to another name upstream,
// and the answers must show the client the name it asked for. renameInJson() replaces a
// top-level string member of a JSON text keeping every other byte (an /infer response
// header, metadata, ...); rewriteModelFields() does the same for fields 1 and 2 of a
// serialized ModelInferRequest / ModelInferResponse without copying the tensor bytes.
//
// Errors: INVALID_ARGUMENT naming what was wrong. Pure; thread-safe.

#include <optional>
#include <string>
#include <string_view>

#include "codecs/buffer.h"
#include "codecs/status.h"

namespace infergate::gateway::upstream {

// `json` with the top-level member `key` (a string) set to `value`, every other byte
// kept; a key given twice is replaced twice. nullopt when `json` is not exactly one
// well-formed object, has no such member, or has one whose value is not a string.
std::optional<std::string> renameInJson(std::string_view json, std::string_view key,
                                        std::string_view value);
// A serialized ModelInferRequest or ModelInferResponse (fields 1 = model_name,
// 2 = model_version) with those fields replaced: the new fields 1 and 2 first (omitted
// when empty, as proto3 writes them), then every other field as slices of `message`.
// `version` nullopt keeps the message's own version field. INVALID_ARGUMENT when the
// message is not well-formed wire format.
codecs::StatusOr<codecs::BufferChain> rewriteModelFields(const codecs::Buffer& message,
                                                         std::string_view model,
                                                         std::optional<std::string_view> version);
// The same inside a ModelStreamInferResponse (field 2 holds the ModelInferResponse).
codecs::StatusOr<codecs::BufferChain> rewriteStreamModelFields(
    const codecs::Buffer& message, std::string_view model,
    std::optional<std::string_view> version);

}  // namespace infergate::gateway::upstream
