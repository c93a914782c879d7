// The 18 typed RPCs of inference.GRPCInferenceService and grpc.health.v1.Health/Check
// (PROTOCOL.md 11.6), on the context's default reactor.
//
//   the gateway's own   ServerLive / Ready / Metadata, shared memory, LogSettings, global
//                       TraceSetting: answered from memory on grpc's thread
//   routed by model     ModelReady / Metadata / Config / Statistics, RepositoryModelLoad /
//                       Unload, a model's TraceSetting: Router::decide(), then
//                         builtin  answered from memory, as above
//                         grpc     the same RPC, the typed request re-serialized with the
//                                  upstream's names; the answer shown under the client's
//                         http     the HTTP endpoint (admin_transcode.h converts the JSON)
//   merged              RepositoryIndex and all-model ModelStatistics ask every upstream
//
// Remote answers finish the reactor from grpc's thread (gRPC upstream) or from a worker
// loop (HTTP upstream); `response` stays valid until Finish.

#include <map>

#include "codecs/grpc_byte_buffer.h"
#include "codecs/json_response_decoder.h"
#include "codecs/model_ref.h"
#include "gateway/error_mapping.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/shm_binding.h"
#include "gateway/upstream/admin_transcode.h"
#include "gateway/upstream/fleet_call.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using codecs::invalidArgument;
using codecs::Status;

// A unary call's reactor, finished once; the finish is recorded under the RPC's method
// (infergate_grpc_requests_total, an access log line). `method` has static storage.
class CountedCall {
 public:
  CountedCall(::grpc::CallbackServerContext* context, const Shared& shared, std::string_view method)
      : reactor_(context->DefaultReactor()), method_(method) {
    if (!shared.recorder || !shared.recorder->active()) return;
    recorder_ = shared.recorder;
    info_ = std::make_shared<telemetry::RequestInfo>();
    shared.startInfo(GrpcppCallContext(*context, shared.relayed), *info_);
  }

  ::grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  // Shared::admit for this call, its principal recorded for the access log.
  Shared::Admission admit(const Shared& shared, const ::grpc::CallbackServerContext& context,
                          std::string_view category) const {
    return shared.admit(GrpcppCallContext(context, shared.relayed), category, method_, info_.get());
  }
  void finish(const ::grpc::Status& status) const {
    if (recorder_) recorder_->finishGrpc(*info_, status.error_code(), method_);
    reactor_->Finish(status);
  }

 private:
  ::grpc::ServerUnaryReactor* reactor_;
  std::string_view method_;
  std::shared_ptr<telemetry::Recorder> recorder_;  // null: nothing records
  std::shared_ptr<telemetry::RequestInfo> info_;
};

// Finishes the call with what `fn` returns (a codecs::Status), unless `category` is
// restricted and the call lacks its header.
template <typename Fn>
::grpc::ServerUnaryReactor* answer(::grpc::CallbackServerContext* context, const Shared& shared,
                                   std::string_view category, std::string_view method, Fn&& fn) {
  CountedCall call(context, shared, method);
  Shared::Admission admitted = call.admit(shared, *context, category);
  call.finish(admitted.status.ok() ? grpcStatusFor(fn()) : admitted.status);
  return call.reactor();
}

bool modelKnown(const builtin::ModelRepository& repository, std::string_view name) {
  for (const builtin::IndexEntry& entry : repository.index(false)) {
    if (entry.name == name) return true;
  }
  return false;
}

std::optional<std::string_view> optionalName(const std::string& name) {
  if (name.empty()) return std::nullopt;
  return std::string_view(name);
}

// Whether `shm.listeners` lets the gRPC listener register and unregister regions.
bool grpcMayChangeShm(const Shared& shared) { return shared.router->snapshot()->config->shm.grpc; }
constexpr char kRepositoryNameUnsupported[] = "'repository_name' specification is not supported";
constexpr std::string_view kService = "/inference.GRPCInferenceService/";

// An HTTP upstream's answer: the body of a 200, else the error it stands for.
codecs::StatusOr<std::string> httpBody(const codecs::StatusOr<upstream::HttpUpstreamResponse>& r,
                                       std::string_view upstream_name) {
  if (!r.ok()) return r.status();
  if (r->status == 200) return std::string(r->body.view());
  return httpErrorAnswer(r->status, r->body.view(), upstream_name);
}

// How one model-scoped RPC is served by each kind of upstream.
template <typename Request, typename Response>
struct RoutedRpc {
  std::string_view category;  // restricted-API category
  std::string_view method;    // "ModelMetadata"
  std::string_view model, version;
  // builtin: fills the response from the repository (names already the upstream's).
  std::function<Status(builtin::ModelRepository&, const Decision&, Response*)> local;
  // http: the request toward the upstream, and the answer's body -> response.
  std::function<codecs::StatusOr<upstream::HttpUpstreamRequest>(const Decision&)> http_request;
  std::function<Status(codecs::StatusOr<std::string> body, Response*)> http_answer;
  // The client's names in the request sent upstream, and in the answer.
  std::function<void(Request&, const Decision&)> to_upstream = [](Request&, const Decision&) {};
  std::function<void(Response*, const Decision&)> to_client = [](Response*, const Decision&) {};
};

template <typename Request, typename Response>
::grpc::ServerUnaryReactor* routed(::grpc::CallbackServerContext* context, Shared& shared,
                                   const Request& request, Response* response,
                                   RoutedRpc<Request, Response> rpc) {
  CountedCall call(context, shared, rpc.method);
  Shared::Admission admitted = call.admit(shared, *context, rpc.category);
  if (!admitted.status.ok()) {
    call.finish(admitted.status);
    return call.reactor();
  }
  GrpcMetadataHeaders headers(context->client_metadata());
  codecs::StatusOr<Decision> decided = shared.router->decide(rpc.model, rpc.version, &headers, admitted.caller());
  if (!decided.ok()) {
    call.finish(grpcStatusFor(decided.status()));
    return call.reactor();
  }
  auto d = std::make_shared<Decision>(std::move(*decided));
  auto done = [call, response, d, to_client = rpc.to_client](Status status) {
    if (status.ok()) to_client(response, *d);
    call.finish(grpcStatusFor(publicStatus(status, d->upstream_model, d->client_model)));
  };
  std::optional<std::chrono::system_clock::time_point> deadline;
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = context->deadline();
  }
  if (d->timeout.count() > 0) {
    auto route_deadline = std::chrono::system_clock::now() + d->timeout;
    deadline = deadline ? std::min(*deadline, route_deadline) : route_deadline;
  }
  switch (d->upstream->protocol()) {
    case upstream::Upstream::Protocol::kBuiltin:
      done(rpc.local(*d->upstream->repository(), *d, response));
      break;
    case upstream::Upstream::Protocol::kGrpc: {
      Request copy = request;
      rpc.to_upstream(copy, *d);
      upstream::GrpcCallOptions options;
      options.deadline = deadline;
      options.metadata = shared.router->forwardedMetadata(context->client_metadata(), true);
      // A worker's own client, as for ModelInfer: the call starts on its loop, and grpc++
      // connects for streams alone.
      options.on_loop = d->upstream->grpcOnLoop(shared.nextLoop());
      grpc::ByteBuffer bytes = codecs::toByteBuffer(copy);
      upstream::fleetUnary(
          d->upstream->fleet(), codecs::strCat(kService, rpc.method), std::move(bytes),
          std::move(options), d->pick,
          [done, response, d, method = std::string(rpc.method)](
              Status status, codecs::MovableByteBuffer answer) {
            if (!status.ok()) return done(status);
            auto flat = codecs::fromByteBuffer(answer);
            if (!flat.ok() ||
                !response->ParseFromArray(flat->data(), static_cast<int>(flat->size()))) {
              return done(upstreamGarbage(d->upstream->name(), method,
                                          invalidArgument("not a ", method, " response")));
            }
            done(absl::OkStatus());
          });
      break;
    }
    case upstream::Upstream::Protocol::kHttp: {
      codecs::StatusOr<upstream::HttpUpstreamRequest> built = rpc.http_request(*d);
      if (!built.ok()) {
        done(built.status());
        break;
      }
      upstream::HttpUpstreamRequest out = std::move(*built);
      auto forwarded = shared.router->forwardedMetadata(context->client_metadata(), false);
      for (auto& h : metadataToHttpHeaders(std::move(forwarded))) out.headers.push_back(std::move(h));
      if (deadline) {
        out.timeout = std::max(std::chrono::milliseconds(1),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   *deadline - std::chrono::system_clock::now()));
      }
      http::EventLoop& loop = shared.nextLoop();
      loop.post([&loop, d, out = std::move(out), done, response,
                 http_answer = rpc.http_answer]() mutable {
        upstream::HttpUpstreamCallbacks callbacks;
        callbacks.on_complete = [d, done, response,
                                 http_answer](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
          done(http_answer(httpBody(r, d->upstream->name()), response));
        };
        upstream::fleetHttp(d->upstream->fleet(), d->upstream->http(loop), loop, std::move(out),
                            d->pick, std::move(callbacks));
      });
      break;
    }
  }
  return call.reactor();
}

upstream::HttpUpstreamRequest httpGet(std::string target) {
  upstream::HttpUpstreamRequest r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

// GET of a model-scoped endpoint on an HTTP upstream, the names placed as Triton reads them
// (httpModelPath).
codecs::StatusOr<upstream::HttpUpstreamRequest> httpGetModel(const Decision& d,
                                                             std::string_view suffix) {
  INFERGATE_ASSIGN_OR_RETURN(std::string path,
                             httpModelPath(d.upstream_model, d.upstream_version, suffix));
  return httpGet(std::move(path));
}

upstream::HttpUpstreamRequest httpPost(std::string target, std::string json) {
  upstream::HttpUpstreamRequest r;
  r.method = "POST";
  r.target = std::move(target);
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = codecs::BufferChain(codecs::Buffer::fromString(std::move(json)));
  return r;
}

// `parse(body)` into *response, an unparsable body as the upstream's fault.
template <typename Response, typename Parse>
auto parsedInto(std::string_view what, Parse parse) {
  return [what = std::string(what), parse](codecs::StatusOr<std::string> body,
                                           Response* response) -> Status {
    if (!body.ok()) return body.status();
    codecs::StatusOr<Response> parsed = parse(*body);
    if (!parsed.ok()) return upstreamGarbage("", what, parsed.status());
    *response = std::move(*parsed);
    return absl::OkStatus();
  };
}

// Asks every upstream the same all-models question; `merge` folds each answer into the
// response (in upstream order) once all are in; the first error fails the call.
template <typename Request, typename Response>
struct GatherRpc {
  std::string_view method;
  Request request;
  std::function<Status(builtin::ModelRepository&, Response*)> local;
  upstream::HttpUpstreamRequest http_request;
  std::function<codecs::StatusOr<Response>(const std::string&)> from_json;
  std::function<void(const Response&, Response*)> merge;
};

template <typename Request, typename Response>
void gather(const CountedCall& call, Shared& shared, Response* response,
            GatherRpc<Request, Response> rpc) {
  struct State {
    std::mutex mu;
    std::vector<Response> answers;
    Status error;
    size_t pending;
  };
  std::shared_ptr<const RouterSnapshot> snapshot = shared.router->snapshot();
  const upstream::UpstreamSet& set = *snapshot->upstreams;
  auto state = std::make_shared<State>();
  state->answers.resize(set.size());
  state->pending = set.size();
  auto merge = rpc.merge;
  auto done = [call, response, state, merge](size_t i, codecs::StatusOr<Response> answer) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (answer.ok()) {
        state->answers[i] = std::move(*answer);
      } else if (state->error.ok()) {
        state->error = answer.status();
      }
      if (--state->pending > 0) return;
    }
    if (!state->error.ok()) return call.finish(grpcStatusFor(state->error));
    for (const Response& a : state->answers) merge(a, response);
    call.finish(::grpc::Status::OK);
  };
  for (size_t i = 0; i < set.size(); ++i) {
    upstream::Upstream& u = set.at(i);
    switch (u.protocol()) {
      case upstream::Upstream::Protocol::kBuiltin: {
        Response local;
        Status status = rpc.local(*u.repository(), &local);
        done(i, status.ok() ? codecs::StatusOr<Response>(std::move(local)) : status);
        break;
      }
      case upstream::Upstream::Protocol::kGrpc: {
        upstream::GrpcCallOptions options;
        if (u.timeout().count()) options.deadline = std::chrono::system_clock::now() + u.timeout();
        options.on_loop = u.grpcOnLoop(shared.nextLoop());
        upstream::fleetUnary(u.fleet(), codecs::strCat(kService, rpc.method),
                        codecs::toByteBuffer(rpc.request),
                        std::move(options), upstream::PickContext{},
                        [done, i, name = u.name(), method = std::string(rpc.method)](
                            Status status, codecs::MovableByteBuffer answer) {
                          if (!status.ok()) return done(i, status);
                          Response typed;
                          auto flat = codecs::fromByteBuffer(answer);
                          if (!flat.ok() || !typed.ParseFromArray(flat->data(),
                                                                  static_cast<int>(flat->size()))) {
                            return done(i, upstreamGarbage(name, method,
                                                           invalidArgument("not a ", method)));
                          }
                          done(i, std::move(typed));
                        });
        break;
      }
      case upstream::Upstream::Protocol::kHttp: {
        http::EventLoop& loop = shared.nextLoop();
        upstream::HttpUpstreamRequest out = rpc.http_request;
        out.timeout = u.timeout();
        loop.post([&loop, &u, snapshot, out = std::move(out), done, i,
                   from_json = rpc.from_json]() mutable {
          upstream::HttpUpstreamCallbacks callbacks;
          callbacks.on_complete = [done, i, from_json, name = u.name()](
                                      codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
            codecs::StatusOr<std::string> body = httpBody(r, name);
            if (!body.ok()) return done(i, body.status());
            codecs::StatusOr<Response> parsed = from_json(*body);
            if (!parsed.ok()) return done(i, upstreamGarbage(name, "answer", parsed.status()));
            done(i, std::move(*parsed));
          };
          upstream::fleetHttp(u.fleet(), u.http(loop), loop, std::move(out), upstream::PickContext{},
                              std::move(callbacks));
        });
        break;
      }
    }
  }
}

}  // namespace

::grpc::ServerUnaryReactor* InferenceService::ServerLive(Ctx* context,
                                                         const inference::ServerLiveRequest*,
                                                         inference::ServerLiveResponse* response) {
  return answer(context, *shared_, "health", "ServerLive", [&] {
    response->set_live(shared_->health->live.load());
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ServerReady(
    Ctx* context, const inference::ServerReadyRequest*, inference::ServerReadyResponse* response) {
  return answer(context, *shared_, "health", "ServerReady", [&] {
    response->set_ready(shared_->health->isReady());
    return absl::OkStatus();
  });
}

// Ready: OK + true. A model the repository holds but cannot serve at that version: OK +
// false. An unknown model: NOT_FOUND; a malformed version: INVALID_ARGUMENT. Over HTTP:
// 200 ready, 400 not ready (Triton's codes), anything else the error it stands for.
::grpc::ServerUnaryReactor* InferenceService::ModelReady(
    Ctx* context, const inference::ModelReadyRequest* request,
    inference::ModelReadyResponse* response) {
  using Rpc = RoutedRpc<inference::ModelReadyRequest, inference::ModelReadyResponse>;
  Rpc rpc{"health", "ModelReady", request->name(), request->version()};
  rpc.local = [](builtin::ModelRepository& repo, const Decision& d,
                 inference::ModelReadyResponse* response) -> Status {
    auto found = repo.find(d.upstream_model, d.upstream_version);
    if (found.ok()) {
      response->set_ready(true);
      return absl::OkStatus();
    }
    if (found.status().code() == absl::StatusCode::kInvalidArgument ||
        !modelKnown(repo, d.upstream_model)) {
      return found.status();
    }
    response->set_ready(false);
    return absl::OkStatus();
  };
  rpc.http_request = [](const Decision& d) { return httpGetModel(d, "/ready"); };
  rpc.http_answer = [](codecs::StatusOr<std::string> body,
                       inference::ModelReadyResponse* response) -> Status {
    if (body.ok()) {
      response->set_ready(true);
    } else if (body.status().code() == absl::StatusCode::kInvalidArgument) {
      response->set_ready(false);
    } else {
      return body.status();
    }
    return absl::OkStatus();
  };
  rpc.to_upstream = [](inference::ModelReadyRequest& r, const Decision& d) {
    r.set_name(d.upstream_model);
    r.set_version(d.upstream_version);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

::grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    Ctx* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return answer(context, *shared_, "metadata", "ServerMetadata", [&] {
    response->set_name(shared_->info.name);
    response->set_version(shared_->info.version);
    for (const std::string& e : shared_->info.extensions) response->add_extensions(e);
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    Ctx* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  using Rpc = RoutedRpc<inference::ModelMetadataRequest, inference::ModelMetadataResponse>;
  Rpc rpc{"metadata", "ModelMetadata", request->name(), request->version()};
  rpc.local = [](builtin::ModelRepository& repo, const Decision& d,
                 inference::ModelMetadataResponse* response) -> Status {
    INFERGATE_ASSIGN_OR_RETURN(auto model, repo.find(d.upstream_model, d.upstream_version));
    *response = repo.metadataProto(model->spec(), d.upstream_version);
    return absl::OkStatus();
  };
  rpc.http_request = [](const Decision& d) { return httpGetModel(d, ""); };
  rpc.http_answer = parsedInto<inference::ModelMetadataResponse>(
      "ModelMetadata", [](const std::string& json) { return upstream::modelMetadataFromJson(json); });
  rpc.to_upstream = [](inference::ModelMetadataRequest& r, const Decision& d) {
    r.set_name(d.upstream_model);
    r.set_version(d.upstream_version);
  };
  rpc.to_client = [](inference::ModelMetadataResponse* r, const Decision& d) {
    r->set_name(d.client_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

::grpc::ServerUnaryReactor* InferenceService::ModelConfig(
    Ctx* context, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  using Rpc = RoutedRpc<inference::ModelConfigRequest, inference::ModelConfigResponse>;
  Rpc rpc{"model-config", "ModelConfig", request->name(), request->version()};
  rpc.local = [](builtin::ModelRepository& repo, const Decision& d,
                 inference::ModelConfigResponse* response) -> Status {
    INFERGATE_ASSIGN_OR_RETURN(auto model, repo.find(d.upstream_model, d.upstream_version));
    *response->mutable_config() = repo.configProto(model->spec());
    return absl::OkStatus();
  };
  rpc.http_request = [](const Decision& d) { return httpGetModel(d, "/config"); };
  rpc.http_answer = parsedInto<inference::ModelConfigResponse>(
      "ModelConfig", [](const std::string& json) { return upstream::modelConfigFromJson(json); });
  rpc.to_upstream = [](inference::ModelConfigRequest& r, const Decision& d) {
    r.set_name(d.upstream_model);
    r.set_version(d.upstream_version);
  };
  rpc.to_client = [](inference::ModelConfigResponse* r, const Decision& d) {
    r->mutable_config()->set_name(d.client_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

// A model's statistics are routed; all models' (empty name) gathered from every upstream.
::grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    Ctx* context, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  auto from_json = [](const std::string& json) { return upstream::modelStatisticsFromJson(json); };
  if (request->name().empty()) {
    CountedCall call(context, *shared_, "ModelStatistics");
    Shared::Admission admitted = call.admit(*shared_, *context, "statistics");
    if (!admitted.status.ok()) {
      call.finish(admitted.status);
      return call.reactor();
    }
    GatherRpc<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse> rpc;
    rpc.method = "ModelStatistics";
    rpc.request = *request;
    rpc.local = [](builtin::ModelRepository& repo, inference::ModelStatisticsResponse* r) -> Status {
      INFERGATE_ASSIGN_OR_RETURN(*r, repo.statisticsProto("", ""));
      return absl::OkStatus();
    };
    rpc.http_request = httpGet("/v2/models/stats");
    rpc.from_json = from_json;
    rpc.merge = [](const inference::ModelStatisticsResponse& a, inference::ModelStatisticsResponse* r) {
      for (const auto& row : a.model_stats()) *r->add_model_stats() = row;
    };
    gather(call, *shared_, response, std::move(rpc));
    return call.reactor();
  }
  using Rpc = RoutedRpc<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>;
  Rpc rpc{"statistics", "ModelStatistics", request->name(), request->version()};
  rpc.local = [](builtin::ModelRepository& repo, const Decision& d,
                 inference::ModelStatisticsResponse* response) -> Status {
    INFERGATE_ASSIGN_OR_RETURN(*response, repo.statisticsProto(d.upstream_model, d.upstream_version));
    return absl::OkStatus();
  };
  rpc.http_request = [](const Decision& d) -> codecs::StatusOr<upstream::HttpUpstreamRequest> {
    auto path = httpModelPath(d.upstream_model, d.upstream_version, "/stats");
    if (path.status().code() == absl::StatusCode::kNotFound) {  // Triton's text for statistics
      return invalidArgument("requested model '", d.upstream_model, "' is not available");
    }
    if (!path.ok()) return path.status();
    return httpGet(std::move(*path));
  };
  rpc.http_answer = parsedInto<inference::ModelStatisticsResponse>("ModelStatistics", from_json);
  rpc.to_upstream = [](inference::ModelStatisticsRequest& r, const Decision& d) {
    r.set_name(d.upstream_model);
    r.set_version(d.upstream_version);
  };
  rpc.to_client = [](inference::ModelStatisticsResponse* r, const Decision& d) {
    for (auto& row : *r->mutable_model_stats()) row.set_name(d.client_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

::grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    Ctx* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  CountedCall call(context, *shared_, "RepositoryIndex");
  Shared::Admission admitted = call.admit(*shared_, *context, "model-repository");
  if (!admitted.status.ok()) {
    call.finish(admitted.status);
    return call.reactor();
  }
  if (!request->repository_name().empty()) {
    call.finish(grpcStatusFor(codecs::unimplemented(kRepositoryNameUnsupported)));
    return call.reactor();
  }
  GatherRpc<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse> rpc;
  rpc.method = "RepositoryIndex";
  rpc.request = *request;
  bool ready_only = request->ready();
  rpc.local = [ready_only](builtin::ModelRepository& repo, inference::RepositoryIndexResponse* r) {
    *r = repo.indexProto(ready_only);
    return absl::OkStatus();
  };
  rpc.http_request = httpPost("/v2/repository/index", upstream::indexRequestToJson(*request));
  rpc.from_json = [](const std::string& json) { return upstream::repositoryIndexFromJson(json); };
  rpc.merge = [](const inference::RepositoryIndexResponse& a, inference::RepositoryIndexResponse* r) {
    for (const auto& row : a.models()) *r->add_models() = row;
  };
  gather(call, *shared_, response, std::move(rpc));
  return call.reactor();
}

// Parameters as Triton's gRPC handler takes them: `config` a string_param (a ModelConfig
// as JSON, checked then ignored by the builtin repository), `file:<version>/<path>`
// bytes_params (accepted with a config and ignored: builtin models have no files).
::grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(
    Ctx* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse* response) {
  if (!request->repository_name().empty()) {
    return answer(context, *shared_, "model-repository", "RepositoryModelLoad",
                  [] { return codecs::unimplemented(kRepositoryNameUnsupported); });
  }
  using Rpc = RoutedRpc<inference::RepositoryModelLoadRequest, inference::RepositoryModelLoadResponse>;
  Rpc rpc{"model-repository", "RepositoryModelLoad", request->model_name(), ""};
  rpc.local = [request](builtin::ModelRepository& repo, const Decision& d,
                        inference::RepositoryModelLoadResponse*) -> Status {
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
    if (config != nullptr) return repo.load(d.upstream_model, *config);
    return repo.load(d.upstream_model);
  };
  rpc.http_request = [request](const Decision& d) -> codecs::StatusOr<upstream::HttpUpstreamRequest> {
    if (!codecs::isVerbatimPathSegment(d.upstream_model)) {  // unreachable over HTTP: unknown
      return codecs::internalError("failed to load '", d.upstream_model,
                                   "', failed to poll from model repository");
    }
    inference::RepositoryModelLoadRequest copy = *request;
    copy.set_model_name(d.upstream_model);
    return httpPost(codecs::strCat("/v2/repository/models/", d.upstream_model, "/load"),
                    upstream::loadRequestToJson(copy));
  };
  rpc.http_answer = [](codecs::StatusOr<std::string> body, inference::RepositoryModelLoadResponse*) {
    return body.status();
  };
  rpc.to_upstream = [](inference::RepositoryModelLoadRequest& r, const Decision& d) {
    r.set_model_name(d.upstream_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

::grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    Ctx* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse* response) {
  if (!request->repository_name().empty()) {
    return answer(context, *shared_, "model-repository", "RepositoryModelUnload",
                  [] { return codecs::unimplemented(kRepositoryNameUnsupported); });
  }
  using Rpc =
      RoutedRpc<inference::RepositoryModelUnloadRequest, inference::RepositoryModelUnloadResponse>;
  Rpc rpc{"model-repository", "RepositoryModelUnload", request->model_name(), ""};
  rpc.local = [request](builtin::ModelRepository& repo, const Decision& d,
                        inference::RepositoryModelUnloadResponse*) -> Status {
    auto it = request->parameters().find("unload_dependents");
    if (it != request->parameters().end() &&
        it->second.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
      return invalidArgument(
          "invalid value type for 'unload_dependents' parameter, expected bool_param.");
    }
    // Builtin models have no dependents: unload_dependents changes nothing.
    return repo.unload(d.upstream_model);
  };
  rpc.http_request = [request](const Decision& d) -> codecs::StatusOr<upstream::HttpUpstreamRequest> {
    // Unreachable over HTTP, so unknown there; Triton unloads an unknown model with success,
    // which the gateway cannot give without asking: the unknown-model answer instead.
    if (!codecs::isVerbatimPathSegment(d.upstream_model)) return unknownModel(d.upstream_model);
    inference::RepositoryModelUnloadRequest copy = *request;
    copy.set_model_name(d.upstream_model);
    return httpPost(codecs::strCat("/v2/repository/models/", d.upstream_model, "/unload"),
                    upstream::unloadRequestToJson(copy));
  };
  rpc.http_answer = [](codecs::StatusOr<std::string> body, inference::RepositoryModelUnloadResponse*) {
    return body.status();
  };
  rpc.to_upstream = [](inference::RepositoryModelUnloadRequest& r, const Decision& d) {
    r.set_model_name(d.upstream_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

// Shared memory (PROTOCOL.md 8): the gateway's own region table (shm/region_registry.h);
// the HTTP frontend answers the same from the same table (http_shm.cc).
::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    Ctx* context, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  return answer(context, *shared_, "shared-memory", "SystemSharedMemoryStatus", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(std::vector<shm::RegionStatus> rows,
                               shared_->router->regions().status(shm::RegionKind::kSystem,
                                                                 optionalName(request->name())));
    for (const shm::RegionStatus& row : rows) {
      auto& out = (*response->mutable_regions())[row.name];
      out.set_name(row.name);
      out.set_key(row.key);
      out.set_offset(row.offset);
      out.set_byte_size(row.byte_size);
    }
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    Ctx* context, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  return answer(context, *shared_, "shared-memory", "SystemSharedMemoryRegister", [&]() -> Status {
    shm::RegionRegistry& regions = shared_->router->regions();
    INFERGATE_RETURN_IF_ERROR(shmChangeAllowed(regions, grpcMayChangeShm(*shared_), "gRPC"));
    if (request->name().empty()) {
      return codecs::invalidArgument("'region name' is necessary to register system shared memory region");
    }
    return regions.registerSystem(request->name(), request->key(), request->offset(),
                                  request->byte_size());
  });
}

::grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    Ctx* context, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return answer(context, *shared_, "shared-memory", "SystemSharedMemoryUnregister",
                [&]() -> Status {
    shm::RegionRegistry& regions = shared_->router->regions();
    INFERGATE_RETURN_IF_ERROR(shmChangeAllowed(regions, grpcMayChangeShm(*shared_), "gRPC"));
    return request->name().empty() ? regions.unregisterAll(shm::RegionKind::kSystem)
                                   : regions.unregister(shm::RegionKind::kSystem, request->name());
  });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(
    Ctx* context, const inference::CudaSharedMemoryStatusRequest* request,
    inference::CudaSharedMemoryStatusResponse* response) {
  return answer(context, *shared_, "shared-memory", "CudaSharedMemoryStatus", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(std::vector<shm::RegionStatus> rows,
                               shared_->router->regions().status(shm::RegionKind::kCuda,
                                                                 optionalName(request->name())));
    for (const shm::RegionStatus& row : rows) {
      auto& out = (*response->mutable_regions())[row.name];
      out.set_name(row.name);
      out.set_device_id(static_cast<uint64_t>(row.device_id));
      out.set_byte_size(row.byte_size);
    }
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(
    Ctx* context, const inference::CudaSharedMemoryRegisterRequest* request,
    inference::CudaSharedMemoryRegisterResponse*) {
  return answer(context, *shared_, "shared-memory", "CudaSharedMemoryRegister", [&]() -> Status {
    shm::RegionRegistry& regions = shared_->router->regions();
    INFERGATE_RETURN_IF_ERROR(shmChangeAllowed(regions, grpcMayChangeShm(*shared_), "gRPC"));
    if (request->name().empty()) {
      return codecs::invalidArgument("'region name' is necessary to register cuda shared memory region");
    }
    return regions.registerCuda(request->name(), request->raw_handle(), request->device_id(),
                                request->byte_size());
  });
}

::grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(
    Ctx* context, const inference::CudaSharedMemoryUnregisterRequest* request,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return answer(context, *shared_, "shared-memory", "CudaSharedMemoryUnregister", [&]() -> Status {
    shm::RegionRegistry& regions = shared_->router->regions();
    INFERGATE_RETURN_IF_ERROR(shmChangeAllowed(regions, grpcMayChangeShm(*shared_), "gRPC"));
    return request->name().empty() ? regions.unregisterAll(shm::RegionKind::kCuda)
                                   : regions.unregister(shm::RegionKind::kCuda, request->name());
  });
}

::grpc::ServerUnaryReactor* InferenceService::TraceSetting(
    Ctx* context, const inference::TraceSettingRequest* request,
    inference::TraceSettingResponse* response) {
  if (request->model_name().empty()) {  // the gateway's own settings
    return answer(context, *shared_, "trace", "TraceSetting", [&]() -> Status {
      INFERGATE_ASSIGN_OR_RETURN(*response, shared_->settings->traceSetting(*request));
      return absl::OkStatus();
    });
  }
  using Rpc = RoutedRpc<inference::TraceSettingRequest, inference::TraceSettingResponse>;
  Rpc rpc{"trace", "TraceSetting", request->model_name(), ""};
  SettingsStore* settings = shared_->settings.get();
  rpc.local = [request, settings](builtin::ModelRepository& repo, const Decision& d,
                                  inference::TraceSettingResponse* response) -> Status {
    INFERGATE_RETURN_IF_ERROR(repo.find(d.upstream_model, "").status());
    INFERGATE_ASSIGN_OR_RETURN(*response, settings->traceSetting(*request));
    return absl::OkStatus();
  };
  rpc.http_request = [request](const Decision& d) -> codecs::StatusOr<upstream::HttpUpstreamRequest> {
    INFERGATE_ASSIGN_OR_RETURN(std::string path, httpModelPath(d.upstream_model, "", "/trace/setting"));
    if (request->settings().empty()) return httpGet(std::move(path));
    return httpPost(std::move(path), upstream::traceSettingRequestToJson(*request));
  };
  rpc.http_answer = parsedInto<inference::TraceSettingResponse>(
      "TraceSetting", [](const std::string& json) { return upstream::traceSettingFromJson(json); });
  rpc.to_upstream = [](inference::TraceSettingRequest& r, const Decision& d) {
    r.set_model_name(d.upstream_model);
  };
  return routed(context, *shared_, *request, response, std::move(rpc));
}

::grpc::ServerUnaryReactor* InferenceService::LogSettings(
    Ctx* context, const inference::LogSettingsRequest* request,
    inference::LogSettingsResponse* response) {
  return answer(context, *shared_, "logging", "LogSettings", [&]() -> Status {
    INFERGATE_ASSIGN_OR_RETURN(*response, shared_->settings->logSettings(*request));
    return absl::OkStatus();
  });
}

::grpc::ServerUnaryReactor* HealthService::Check(
    ::grpc::CallbackServerContext* context, const ::grpc::health::v1::HealthCheckRequest*,
    ::grpc::health::v1::HealthCheckResponse* response) {
  return answer(context, *shared_, "health", "HealthCheck", [&] {
    response->set_status(shared_->health->isReady()
                             ? ::grpc::health::v1::HealthCheckResponse::SERVING
                             : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    return absl::OkStatus();
  });
}

}  // namespace infergate::gateway::frontends::grpc_detail
