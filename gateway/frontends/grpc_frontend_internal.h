#pragma once

// Pieces of the gRPC frontend shared by its three .cc files; not a public header.
//
//   grpc_frontend.cc        GrpcFrontend (server build, start, shutdown), Shared helpers
//   grpc_admin_rpcs.cc      the 18 typed RPCs and Health/Check
//   grpc_infer_common.*     what the two infer reactors share (routing, HTTP requests)
//   grpc_model_infer.cc     the ModelInfer (unary) reactor
//   grpc_stream_infer.cc    the ModelStreamInfer (bidi) reactor

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <memory>
#include <string_view>

#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_response_encoder.h"
#include "gateway/frontends/grpc_frontend.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tls/peer_identity.h"

namespace infergate::gateway::frontends::grpc_detail {

using ClientMetadata = std::multimap<::grpc::string_ref, ::grpc::string_ref>;

// The metadata keys that carry the client's address, and the client certificate its TLS
// handshake verified (PEM), to a call the native server relays to grpc++ in process
// (grpc_native_server.h); a client's own are dropped.
inline constexpr std::string_view kNativePeerKey = "infergate-peer";
inline constexpr std::string_view kNativePeerCertificateKey = "infergate-peer-certificate-bin";

// What the handlers read of a call, whichever server carries it: grpc++'s
// (GrpcppCallContext) or the gateway's own HTTP/2 server (grpc_native_server.h).
class CallContext {
 public:
  virtual ~CallContext() = default;
  // Keys lowercase, as on the wire; -bin values decoded.
  virtual const ClientMetadata& clientMetadata() const = 0;
  // system_clock::time_point::max() when the client set none.
  virtual std::chrono::system_clock::time_point deadline() const = 0;
  // "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/path" (grpc's form).
  virtual std::string peer() const = 0;
  // Who the client certificate that the TLS handshake verified names; null without one.
  // Valid as long as the context.
  virtual const tls::PeerIdentity* peerIdentity() const = 0;
};

class GrpcppCallContext final : public CallContext {
 public:
  // `relayed`: grpc++ listens on no socket; every call came through the native server.
  GrpcppCallContext(const ::grpc::CallbackServerContext& context, bool relayed)
      : context_(context), relayed_(relayed) {}
  const ClientMetadata& clientMetadata() const override { return context_.client_metadata(); }
  std::chrono::system_clock::time_point deadline() const override { return context_.deadline(); }
  // A call relayed by the native server names the client's address in kNativePeerKey, and
  // its certificate in kNativePeerCertificateKey.
  std::string peer() const override;
  const tls::PeerIdentity* peerIdentity() const override;

 private:
  const ::grpc::CallbackServerContext& context_;
  const bool relayed_;
  mutable std::optional<tls::PeerIdentity> identity_;  // read on the first ask
  mutable bool identity_read_ = false;
};

// Everything a call needs; lives as long as the GrpcFrontend (calls hold a reference).
struct Shared {
  Shared(std::shared_ptr<Router> router,
         std::shared_ptr<SettingsStore> settings, ServerInfo info,
         std::shared_ptr<ServerHealth> health, http::WorkerPool& pool,
         GrpcFrontendOptions options);

  // The loop for a new call (round robin). Any thread.
  http::EventLoop& nextLoop();
  // The security stage of a call: Triton's restricted-API header for `category` (else
  // UNAVAILABLE, as Triton), then the credentials and the API group's access rule
  // (Security::admit: UNAUTHENTICATED / PERMISSION_DENIED). `method` ("RepositoryModelLoad")
  // tells whether the call changes state. The principal goes into `info` when given.
  struct Admission {
    ::grpc::Status status;
    std::optional<tls::Principal> principal;
    Caller caller() const { return Caller{principal ? &*principal : nullptr, tls::Listener::kGrpc}; }
  };
  Admission admit(const CallContext& context, std::string_view category,
                  std::string_view method, telemetry::RequestInfo* info = nullptr) const;

  // What every call's telemetry starts from: gRPC, now, its x-request-id and trace
  // context (read even when nothing records: they are forwarded), and the peer's address
  // when the access log is on.
  void startInfo(const CallContext& context, telemetry::RequestInfo& info) const;


  std::shared_ptr<Router> router;
  std::shared_ptr<SettingsStore> settings;
  ServerInfo info;
  std::shared_ptr<ServerHealth> health;
  http::WorkerPool& pool;
  GrpcFrontendOptions options;
  std::shared_ptr<telemetry::Recorder> recorder;  // null: no request metrics, no access log
  // grpc++ listens on no socket: the native server relays every call it carries (set by
  // GrpcFrontend::start before any call).
  bool relayed = false;
  codecs::ProtobufRequestDecoder decoder;
  codecs::ProtobufResponseEncoder encoder;
  std::atomic<size_t> next_loop{0};
  // Answers of ModelStreamInfer streams waiting for their clients, in bytes, all streams.
  std::atomic<int64_t> stream_answer_bytes{0};
  // ModelStreamInfer streams whose upstream legs are paused now.
  std::atomic<int64_t> paused_streams{0};
};

// gRPC metadata as routing::RequestHeaders (keys are lowercase on the wire).
class GrpcMetadataHeaders final : public routing::RequestHeaders {
 public:
  explicit GrpcMetadataHeaders(const ClientMetadata& m)
      : metadata_(m) {}
  std::optional<std::string_view> find(std::string_view name) const override {
    auto it = metadata_.find(::grpc::string_ref(name.data(), name.size()));
    if (it == metadata_.end()) return std::nullopt;
    return std::string_view(it->second.data(), it->second.size());
  }

 private:
  const ClientMetadata& metadata_;
};

// The `id` field of a serialized ModelInferRequest, best effort ("" when unreadable), for
// the in-band error of a request that did not decode.
std::string peekRequestId(const codecs::Buffer& message);

// The generated service with ModelInfer and ModelStreamInfer raw (grpc::ByteBuffer) and
// the other 18 typed, all on the callback API. Built from the plain Service: wrapping the
// generated CallbackService does not compile with grpc 1.51's codegen, whose typed and raw
// ModelStreamInfer(CallbackServerContext*) differ only in their return type.
using svc = inference::GRPCInferenceService;
using InferenceServiceBase =
    svc::WithRawCallbackMethod_ModelInfer<svc::WithRawCallbackMethod_ModelStreamInfer<
    svc::WithCallbackMethod_ServerLive<svc::WithCallbackMethod_ServerReady<
    svc::WithCallbackMethod_ModelReady<svc::WithCallbackMethod_ServerMetadata<
    svc::WithCallbackMethod_ModelMetadata<svc::WithCallbackMethod_ModelConfig<
    svc::WithCallbackMethod_ModelStatistics<svc::WithCallbackMethod_RepositoryIndex<
    svc::WithCallbackMethod_RepositoryModelLoad<svc::WithCallbackMethod_RepositoryModelUnload<
    svc::WithCallbackMethod_SystemSharedMemoryStatus<
    svc::WithCallbackMethod_SystemSharedMemoryRegister<
    svc::WithCallbackMethod_SystemSharedMemoryUnregister<
    svc::WithCallbackMethod_CudaSharedMemoryStatus<
    svc::WithCallbackMethod_CudaSharedMemoryRegister<
    svc::WithCallbackMethod_CudaSharedMemoryUnregister<svc::WithCallbackMethod_TraceSetting<
    svc::WithCallbackMethod_LogSettings<svc::Service>>>>>>>>>>>>>>>>>>>>;

class InferenceService final : public InferenceServiceBase {
 public:
  explicit InferenceService(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  using Ctx = ::grpc::CallbackServerContext;
  using Unary = ::grpc::ServerUnaryReactor;

  // grpc_model_infer.cc, grpc_stream_infer.cc
  Unary* ModelInfer(Ctx* context, const ::grpc::ByteBuffer* request,
                    ::grpc::ByteBuffer* response) override;
  ::grpc::ServerBidiReactor<::grpc::ByteBuffer, ::grpc::ByteBuffer>* ModelStreamInfer(
      Ctx* context) override;

  // grpc_admin_rpcs.cc
  Unary* ServerLive(Ctx*, const inference::ServerLiveRequest*,
                    inference::ServerLiveResponse*) override;
  Unary* ServerReady(Ctx*, const inference::ServerReadyRequest*,
                     inference::ServerReadyResponse*) override;
  Unary* ModelReady(Ctx*, const inference::ModelReadyRequest*,
                    inference::ModelReadyResponse*) override;
  Unary* ServerMetadata(Ctx*, const inference::ServerMetadataRequest*,
                        inference::ServerMetadataResponse*) override;
  Unary* ModelMetadata(Ctx*, const inference::ModelMetadataRequest*,
                       inference::ModelMetadataResponse*) override;
  Unary* ModelConfig(Ctx*, const inference::ModelConfigRequest*,
                     inference::ModelConfigResponse*) override;
  Unary* ModelStatistics(Ctx*, const inference::ModelStatisticsRequest*,
                         inference::ModelStatisticsResponse*) override;
  Unary* RepositoryIndex(Ctx*, const inference::RepositoryIndexRequest*,
                         inference::RepositoryIndexResponse*) override;
  Unary* RepositoryModelLoad(Ctx*, const inference::RepositoryModelLoadRequest*,
                             inference::RepositoryModelLoadResponse*) override;
  Unary* RepositoryModelUnload(Ctx*, const inference::RepositoryModelUnloadRequest*,
                               inference::RepositoryModelUnloadResponse*) override;
  Unary* SystemSharedMemoryStatus(Ctx*, const inference::SystemSharedMemoryStatusRequest*,
                                  inference::SystemSharedMemoryStatusResponse*) override;
  Unary* SystemSharedMemoryRegister(Ctx*, const inference::SystemSharedMemoryRegisterRequest*,
                                    inference::SystemSharedMemoryRegisterResponse*) override;
  Unary* SystemSharedMemoryUnregister(Ctx*,
                                      const inference::SystemSharedMemoryUnregisterRequest*,
                                      inference::SystemSharedMemoryUnregisterResponse*) override;
  Unary* CudaSharedMemoryStatus(Ctx*, const inference::CudaSharedMemoryStatusRequest*,
                                inference::CudaSharedMemoryStatusResponse*) override;
  Unary* CudaSharedMemoryRegister(Ctx*, const inference::CudaSharedMemoryRegisterRequest*,
                                  inference::CudaSharedMemoryRegisterResponse*) override;
  Unary* CudaSharedMemoryUnregister(Ctx*, const inference::CudaSharedMemoryUnregisterRequest*,
                                    inference::CudaSharedMemoryUnregisterResponse*) override;
  Unary* TraceSetting(Ctx*, const inference::TraceSettingRequest*,
                      inference::TraceSettingResponse*) override;
  Unary* LogSettings(Ctx*, const inference::LogSettingsRequest*,
                     inference::LogSettingsResponse*) override;

 private:
  std::shared_ptr<Shared> shared_;
};

class HealthService final : public ::grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  // SERVING when the server is ready, NOT_SERVING otherwise; the service name is ignored.
  // Watch is left to the generated default (UNIMPLEMENTED), as Triton.
  ::grpc::ServerUnaryReactor* Check(::grpc::CallbackServerContext* context,
                                    const ::grpc::health::v1::HealthCheckRequest* request,
                                    ::grpc::health::v1::HealthCheckResponse* response) override;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace infergate::gateway::frontends::grpc_detail
