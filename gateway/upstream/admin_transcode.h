#pragma once

// The non-infer endpoints across protocols. (The model-name rewrite in answers is in
// model_rename.h.)
//
// A client that speaks one protocol may be routed to an upstream that speaks the other;
// its metadata, config, statistics, repository and trace calls are then converted:
//
//   HTTP client -> gRPC upstream:  the HTTP request (path + JSON body) -> the typed
//                                  request message; the typed answer -> Triton's JSON
//   gRPC client -> HTTP upstream:  the typed request -> method, path and JSON body; the
//                                  JSON answer -> the typed response message
//
// JSON forms are Triton's (PROTOCOL.md sections 2 and 11): key order, int64 as JSON
// numbers where Triton writes numbers, the model config as Triton's /config prints it
// (builtin::modelConfigJson). Parsing accepts what Triton and KServe servers send
// (unknown keys ignored, int64 given as number or string).
//
// Errors: INVALID_ARGUMENT naming what was wrong; callers stamp ErrorOrigin::kUpstream on
// failures to parse an upstream's answer (-> 502). Pure; thread-safe.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "grpc_service.pb.h"

namespace infergate::gateway::upstream {

// ---- answers: protobuf -> Triton JSON ----
std::string modelMetadataToJson(const inference::ModelMetadataResponse& response);
codecs::StatusOr<std::string> modelConfigToJson(const inference::ModelConfigResponse& response);
std::string modelStatisticsToJson(const inference::ModelStatisticsResponse& response);
std::string repositoryIndexToJson(const inference::RepositoryIndexResponse& response);
std::string traceSettingToJson(const inference::TraceSettingResponse& response);

// ---- answers: Triton JSON -> protobuf ----
codecs::StatusOr<inference::ModelMetadataResponse> modelMetadataFromJson(std::string_view json);
codecs::StatusOr<inference::ModelConfigResponse> modelConfigFromJson(std::string_view json);
codecs::StatusOr<inference::ModelStatisticsResponse> modelStatisticsFromJson(std::string_view json);
codecs::StatusOr<inference::RepositoryIndexResponse> repositoryIndexFromJson(std::string_view json);
codecs::StatusOr<inference::TraceSettingResponse> traceSettingFromJson(std::string_view json);

// ---- requests: HTTP body (may be empty) -> protobuf, for a gRPC upstream ----
codecs::StatusOr<inference::RepositoryIndexRequest> indexRequestFromJson(std::string_view body);
codecs::StatusOr<inference::RepositoryModelLoadRequest> loadRequestFromJson(
    std::string_view model, std::string_view body);
codecs::StatusOr<inference::RepositoryModelUnloadRequest> unloadRequestFromJson(
    std::string_view model, std::string_view body);
// `model` empty: the global settings. Values are strings or arrays of strings; null (clear
// the key) becomes an entry without values. An empty body is a request without settings
// (a read: the GET form).
codecs::StatusOr<inference::TraceSettingRequest> traceSettingRequestFromJson(
    std::string_view model, std::string_view body);

// ---- requests: protobuf -> HTTP body, for an HTTP upstream ----
std::string indexRequestToJson(const inference::RepositoryIndexRequest& request);
// `file:` parameters (bytes) are base64-encoded, as Triton's HTTP API takes them.
std::string loadRequestToJson(const inference::RepositoryModelLoadRequest& request);
std::string unloadRequestToJson(const inference::RepositoryModelUnloadRequest& request);
std::string traceSettingRequestToJson(const inference::TraceSettingRequest& request);

// ---- merging the answers of several upstreams ----
// One index: entries of every answer, in answer order (duplicates kept: two upstreams
// may serve the same name). An answer that is not an index array is left out.
std::string mergeRepositoryIndexJson(const std::vector<std::string>& answers);
// /v2/models/stats of every upstream: one {"model_stats": [...]} with all entries.
codecs::StatusOr<std::string> mergeModelStatisticsJson(const std::vector<std::string>& answers);

}  // namespace infergate::gateway::upstream
