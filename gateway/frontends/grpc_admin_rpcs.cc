// The 18 typed RPCs of inference.GRPCInferenceService and grpc.health.v1.Health/Check
// (PROTOCOL.md 11.6). Each is answered on grpc's callback thread with the context's
// default reactor: the repository and the settings store answer from memory, without
// blocking.

#include <map>

#include "gateway/error_mapping.h"
#include "gateway/frontends/grpc_frontend_internal.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using codecs::invalidArgument;
using codecs::Status;

// Finishes the call with what `fn` returns (a codecs::Status), unless `category` is
// restricted and the call lacks its header.
template <typename Fn>
::grpc::ServerUnaryReactor* answer(::grpc::CallbackServerContext* context, const Shared& shared,
                                   std::string_view category, Fn&& fn) {
  ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ::grpc::Status restricted = shared.checkRestricted(*context, category);
  reactor->Finish(restricted.ok() ? grpcStatusFor(fn()) : restricted);
  return reactor;
}

bool modelKnown(const builtin::ModelRepository& repository, std::string_view name) {
  for (const builtin::IndexEntry& entry : repository.index(false)) {
    if (entry.name == name) return true;
  }
  return false;
}

Status shmDisabled() {
  return codecs::unimplemented(
      "Client shared memory is disabled. Enable shared memory in the gateway's configuration "
      "to use it.");
}

constexpr char kRepositoryNameUnsupported[] = "'repository_name' specification is not supported";

}  // namespace

::grpc::ServerUnaryReactor* InferenceService::ServerLive(Ctx* context,
                                                         const inference::ServerLiveRequest*,
                                                         inference::ServerLiveResponse* response) {
  return answer(context, *shared_, "health", [&] {
    response->set_live(shared_->health->live.load());
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ServerReady(
    Ctx* context, const inference::ServerReadyRequest*, inference::ServerReadyResponse* response) {
  return answer(context, *shared_, "health", [&] {
    response->set_ready(shared_->health->ready.load());
    return absl::OkStatus();
  });
}

// Ready: OK + true. A model the repository holds but cannot serve at that version: OK +
// false. An unknown model: NOT_FOUND; a malformed version: INVALID_ARGUMENT.
::grpc::ServerUnaryReactor* InferenceService::ModelReady(
    Ctx* context, const inference::ModelReadyRequest* request,
    inference::ModelReadyResponse* response) {
  return answer(context, *shared_, "health", [&]() -> Status {
    auto found = shared_->repository->find(request->name(), request->version());
    if (found.ok()) {
      response->set_ready(true);
      return absl::OkStatus();
    }
    if (found.status().code() == absl::StatusCode::kInvalidArgument ||
        !modelKnown(*shared_->repository, request->name())) {
      return found.status();
    }
    response->set_ready(false);
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    Ctx* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return answer(context, *shared_, "metadata", [&] {
    response->set_name(shared_->info.name);
    response->set_version(shared_->info.version);
    for (const std::string& e : shared_->info.extensions) response->add_extensions(e);
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    Ctx* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return answer(context, *shared_, "metadata", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(auto model,
                               shared_->repository->find(request->name(), request->version()));
    *response = shared_->repository->metadataProto(model->spec(), request->version());
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ModelConfig(
    Ctx* context, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  return answer(context, *shared_, "model-config", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(auto model,
                               shared_->repository->find(request->name(), request->version()));
    *response->mutable_config() = shared_->repository->configProto(model->spec());
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    Ctx* context, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  return answer(context, *shared_, "statistics", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(
        *response, shared_->repository->statisticsProto(request->name(), request->version()));
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    Ctx* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  return answer(context, *shared_, "model-repository", [&]() -> Status {
    if (!request->repository_name().empty())
      return codecs::unimplemented(kRepositoryNameUnsupported);
    *response = shared_->repository->indexProto(request->ready());
    return absl::OkStatus();
  });
}

// Parameters as Triton's gRPC handler takes them: `config` a string_param (a ModelConfig
// as JSON, checked then ignored by the builtin repository), `file:<version>/<path>`
// bytes_params (accepted with a config and ignored: builtin models have no files).
::grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(
    Ctx* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  return answer(context, *shared_, "model-repository", [&]() -> Status {
    if (!request->repository_name().empty())
      return codecs::unimplemented(kRepositoryNameUnsupported);
    using Param = inference::ModelRepositoryParameter;
    // Sorted, so that the first bad key reported does not depend on the map's order.
    std::map<std::string_view, const Param*> params;
    for (const auto& [key, value] : request->parameters()) params.emplace(key, &value);
    const std::string* config = nullptr;
    bool files = false;
    for (const auto& [key, value] : params) {
      if (key == "config") {
        if (value->parameter_choice_case() != Param::kStringParam) {
          return invalidArgument("invalid value type for load parameter '", key,
                                 "', expected string_param.");
        }
        config = &value->string_param();
      } else if (key.substr(0, 5) == "file:") {
        if (value->parameter_choice_case() != Param::kBytesParam) {
          return invalidArgument("invalid value type for load parameter '", key,
                                 "', expected bytes_param.");
        }
        files = true;
      } else {
        return invalidArgument("unrecognized load parameter '", key, "'.");
      }
    }
    if (files && config == nullptr) {
      return invalidArgument("failed to load '", request->model_name(),
                             "', 'file:' load parameters require a 'config' parameter");
    }
    if (config != nullptr) return shared_->repository->load(request->model_name(), *config);
    return shared_->repository->load(request->model_name());
  });
}

::grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    Ctx* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  return answer(context, *shared_, "model-repository", [&]() -> Status {
    if (!request->repository_name().empty())
      return codecs::unimplemented(kRepositoryNameUnsupported);
    auto it = request->parameters().find("unload_dependents");
    if (it != request->parameters().end() &&
        it->second.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
      return invalidArgument(
          "invalid value type for 'unload_dependents' parameter, expected bool_param.");
    }
    // Builtin models have no dependents: unload_dependents changes nothing.
    return shared_->repository->unload(request->model_name());
  });
}

// Client shared memory is disabled: no region is ever registered.
::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    Ctx* context, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse*) {
  return answer(context, *shared_, "shared-memory", [&]() -> Status {
    if (request->name().empty()) return absl::OkStatus();
    return absl::NotFoundError(
        codecs::strCat("Unable to find system shared memory region: '", request->name(), "'"));
  });
}

::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    Ctx* context, const inference::SystemSharedMemoryRegisterRequest*,
    inference::SystemSharedMemoryRegisterResponse*) {
  return answer(context, *shared_, "shared-memory", [] { return shmDisabled(); });
}

::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    Ctx* context, const inference::SystemSharedMemoryUnregisterRequest*,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return answer(context, *shared_, "shared-memory", [] { return shmDisabled(); });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(
    Ctx* context, const inference::CudaSharedMemoryStatusRequest* request,
    inference::CudaSharedMemoryStatusResponse*) {
  return answer(context, *shared_, "shared-memory", [&]() -> Status {
    if (request->name().empty()) return absl::OkStatus();
    return absl::NotFoundError(
        codecs::strCat("Unable to find cuda shared memory region: '", request->name(), "'"));
  });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(
    Ctx* context, const inference::CudaSharedMemoryRegisterRequest*,
    inference::CudaSharedMemoryRegisterResponse*) {
  return answer(context, *shared_, "shared-memory", [] { return shmDisabled(); });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(
    Ctx* context, const inference::CudaSharedMemoryUnregisterRequest*,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return answer(context, *shared_, "shared-memory", [] { return shmDisabled(); });
}

::grpc::ServerUnaryReactor* InferenceService::TraceSetting(
    Ctx* context, const inference::TraceSettingRequest* request,
    inference::TraceSettingResponse* response) {
  return answer(context, *shared_, "trace", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(*response, shared_->settings->traceSetting(*request));
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::LogSettings(
    Ctx* context, const inference::LogSettingsRequest* request,
    inference::LogSettingsResponse* response) {
  return answer(context, *shared_, "logging", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(*response, shared_->settings->logSettings(*request));
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* HealthService::Check(
    ::grpc::CallbackServerContext* context, const ::grpc::health::v1::HealthCheckRequest*,
    ::grpc::health::v1::HealthCheckResponse* response) {
  return answer(context, *shared_, "health", [&] {
    response->set_status(shared_->health->ready.load()
                             ? ::grpc::health::v1::HealthCheckResponse::SERVING
                             : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    return absl::OkStatus();
  });
}

}  // namespace infergate::gateway::frontends::grpc_detail
