#include "gateway/frontends/grpc_frontend.h"

#include <grpc/compression.h>
#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "codecs/protobuf_wire.h"
#include "config/listen_address.h"
#include "gateway/error_mapping.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/frontends/grpc_native_server.h"

namespace infergate::gateway::frontends {
namespace grpc_detail {

Shared::Shared(std::shared_ptr<Router> router_in,
               std::shared_ptr<SettingsStore> settings_in, ServerInfo info_in,
               std::shared_ptr<ServerHealth> health_in, http::WorkerPool& pool_in,
               GrpcFrontendOptions options_in)
    : router(std::move(router_in)),
      settings(std::move(settings_in)),
      info(std::move(info_in)),
      health(std::move(health_in)),
      pool(pool_in),
      options(std::move(options_in)),
      decoder(options.limits) {
  if (!options.security) options.security = Security::open();
}

http::EventLoop& Shared::nextLoop() {
  size_t i = next_loop.fetch_add(1, std::memory_order_relaxed);
  return pool.loop(i % pool.size());
}

const tls::PeerIdentity* GrpcppCallContext::peerIdentity() const {
  if (identity_read_) return identity_ ? &*identity_ : nullptr;
  identity_read_ = true;
  std::string_view pem;
  std::shared_ptr<const ::grpc::AuthContext> auth;
  if (relayed_) {
    auto it = context_.client_metadata().find(
        ::grpc::string_ref(kNativePeerCertificateKey.data(), kNativePeerCertificateKey.size()));
    if (it != context_.client_metadata().end()) pem = std::string_view(it->second.data(), it->second.size());
  } else {
    // grpc verified the certificate (client_auth optional or require) and hands it over as PEM.
    auth = context_.auth_context();
    if (auth && auth->IsPeerAuthenticated()) {
      std::vector<::grpc::string_ref> certs = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
      if (!certs.empty()) pem = std::string_view(certs.front().data(), certs.front().size());
    }
  }
  if (!pem.empty()) identity_ = tls::identityOfPem(pem);
  return identity_ ? &*identity_ : nullptr;
}

std::string GrpcppCallContext::peer() const {
  if (relayed_) {
    auto it = context_.client_metadata().find(::grpc::string_ref(kNativePeerKey.data(), kNativePeerKey.size()));
    if (it != context_.client_metadata().end()) return std::string(it->second.data(), it->second.size());
  }
  return context_.peer();
}

void Shared::startInfo(const CallContext& context, telemetry::RequestInfo& info) const {
  info.protocol = telemetry::Protocol::kGrpc;
  info.start = telemetry::Clock::now();
  readTraceMetadata(context.clientMetadata(), info);
  if (recorder && recorder->accessLog()) info.client_address = context.peer();
}

Shared::Admission Shared::admit(const CallContext& context, std::string_view category,
                                std::string_view method, telemetry::RequestInfo* info) const {
  const ClientMetadata& metadata = context.clientMetadata();
  auto value = [&](std::string_view key) -> std::string_view {
    auto found = metadata.find(::grpc::string_ref(key.data(), key.size()));
    return found == metadata.end() ? std::string_view() : std::string_view(found->second.data(), found->second.size());
  };
  if (auto it = options.restricted.find(category); it != options.restricted.end()) {
    const std::string header = "triton-grpc-protocol-" + it->second.first;
    auto found = metadata.find(::grpc::string_ref(header));
    if (found == metadata.end() ||
        std::string_view(found->second.data(), found->second.size()) != it->second.second) {
      return {::grpc::Status(::grpc::StatusCode::UNAVAILABLE,
                             "This protocol is restricted, expecting header '" + header + "'"),
              std::nullopt};
    }
  }
  const bool write = method.ends_with("Load") || method.ends_with("Unload") || method.ends_with("Register") ||
                     method.ends_with("Unregister") || method == "TraceSetting" || method == "LogSettings";
  const std::optional<config::ApiGroup> group = config::apiGroupNamed(category);
  codecs::StatusOr<std::optional<tls::Principal>> admitted =
      options.security->admit(value, context.peerIdentity(), group.value_or(config::ApiGroup::kInference), write,
                              tls::Listener::kGrpc);
  if (!admitted.ok()) return {grpcStatusFor(admitted.status()), std::nullopt};
  if (info != nullptr && *admitted) info->principal = (*admitted)->name;
  return {::grpc::Status::OK, std::move(*admitted)};
}

std::string peekRequestId(const codecs::Buffer& message) {
  std::string id;
  codecs::Status walked = codecs::forEachField(
      message.span(), [&](codecs::FieldTag tag, codecs::WireReader& reader) -> codecs::Status {
        if (tag.number != 3 || tag.type != codecs::WireType::kLen) return reader.skip(tag);
        INFERGATE_ASSIGN_OR_RETURN(auto bytes, reader.readLengthDelimited());
        id.assign(codecs::asChars(bytes));
        return absl::OkStatus();
      });
  (void)walked;  // best effort: the id read before a malformed field is kept
  return id;
}

}  // namespace grpc_detail

namespace {

// "127.0.0.1:0" + 40123 -> "127.0.0.1:40123"; unix addresses unchanged.
std::string boundAddress(const std::string& address, int port) {
  if (address.rfind("unix:", 0) == 0 || address.rfind("unix-abstract:", 0) == 0) return address;
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return address + ":" + std::to_string(port);
  return address.substr(0, colon + 1) + std::to_string(port);
}

// The native engine's listening spec for `address` (the config's own parser reads it);
// nullopt where only grpc++ listens (unix-abstract, which that parser does not take).
std::optional<http::ListenSpec> nativeSpecOf(const std::string& address) {
  codecs::StatusOr<config::ListenAddress> parsed = config::parseListenAddress(address);
  if (!parsed.ok()) return std::nullopt;
  if (parsed->kind == config::ListenAddress::Kind::kUnix) return http::ListenSpec::unixPath(parsed->path);
  return http::ListenSpec::tcp(parsed->host, parsed->port);
}

}  // namespace

GrpcFrontend::GrpcFrontend(std::shared_ptr<Router> router,
                           std::shared_ptr<SettingsStore> settings, ServerInfo info,
                           std::shared_ptr<ServerHealth> health, http::WorkerPool& pool,
                           GrpcFrontendOptions options,
                           std::shared_ptr<telemetry::Recorder> recorder)
    : shared_(std::make_shared<grpc_detail::Shared>(std::move(router), std::move(settings),
                                                    std::move(info), std::move(health), pool,
                                                    std::move(options))),
      service_(std::make_unique<grpc_detail::InferenceService>(shared_)),
      health_service_(std::make_unique<grpc_detail::HealthService>(shared_)) {
  shared_->recorder = std::move(recorder);
}

GrpcFrontend::~GrpcFrontend() { shutdown(std::chrono::milliseconds(0)); }

codecs::StatusOr<std::string> GrpcFrontend::start(std::string address) {
  if (started_) return absl::FailedPreconditionError("the gRPC frontend is already started");
  const GrpcFrontendOptions& o = shared_->options;
  const std::optional<http::ListenSpec> native_spec =
      o.engine == GrpcServerEngine::kNative && !o.credentials ? nativeSpecOf(address) : std::nullopt;
  ::grpc::ServerBuilder builder;
  auto credentials = o.credentials ? o.credentials : ::grpc::InsecureServerCredentials();
  int selected_port = 0;
  // With the native engine, grpc++ listens on no port: the native server relays to it in
  // process.
  if (!native_spec && o.tls && !o.credentials) {
    return absl::InvalidArgumentError(codecs::strCat(
        "gRPC frontend on ", address, ": TLS contexts are the native server's, and it cannot listen there"));
  }
  if (!native_spec) builder.AddListeningPort(address, credentials, &selected_port);
  shared_->relayed = native_spec.has_value();
  builder.RegisterService(service_.get());
  builder.RegisterService(health_service_.get());
  builder.SetMaxReceiveMessageSize(o.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(o.max_send_message_bytes);
  // Clients may compress requests with gzip or deflate (grpc decompresses them); replies
  // are not compressed unless the client asks, as Triton's default.
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, true);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, true);
  // A second process on the same port must fail to bind, not share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, o.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, o.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             o.keepalive_permit_without_calls ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, o.http2_max_pings_without_data);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             o.http2_min_recv_ping_interval_without_data_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, o.http2_max_ping_strikes);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, o.handshake_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, o.max_metadata_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, o.idle_timeout_ms);

  server_ = builder.BuildAndStart();
  if (native_spec) {
    if (server_ == nullptr) return absl::UnavailableError("the gRPC frontend's in-process server did not start");
    ::grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    native_ = std::make_unique<grpc_detail::NativeGrpcServer>(shared_, server_->InProcessChannel(args));
    codecs::StatusOr<std::string> bound = native_->start(*native_spec);
    if (!bound.ok()) {
      native_.reset();
      server_->Shutdown();
      server_->Wait();
      server_.reset();
      return absl::UnavailableError(codecs::strCat("gRPC frontend cannot listen on ", address, ": ",
                                                   codecs::messageOf(bound.status())));
    }
    started_ = true;
    port_ = native_->port();
    return bound;
  }
  const bool is_unix = address.rfind("unix", 0) == 0;
  if (server_ == nullptr || (!is_unix && selected_port == 0)) {
    if (server_ != nullptr) {
      server_->Shutdown();
      server_->Wait();
      server_.reset();
    }
    return absl::UnavailableError(codecs::strCat("gRPC frontend cannot listen on ", address));
  }
  started_ = true;
  port_ = is_unix ? 0 : selected_port;
  return boundAddress(address, port_);
}

const http::ConnectionCaps* GrpcFrontend::connections() const {
  return native_ ? &native_->caps() : nullptr;
}

uint64_t GrpcFrontend::pausedStreams() const {
  return static_cast<uint64_t>(std::max<int64_t>(0, shared_->paused_streams.load(std::memory_order_relaxed)));
}

uint64_t GrpcFrontend::streamAnswerBytes() const {
  return static_cast<uint64_t>(std::max<int64_t>(0, shared_->stream_answer_bytes.load(std::memory_order_relaxed)));
}

void GrpcFrontend::shutdown(std::chrono::milliseconds grace) {
  if (!started_ || stopped_) return;
  stopped_ = true;
  // The native server first: its calls relayed to grpc++ end with it. One grace for both.
  const auto deadline = std::chrono::system_clock::now() + grace;
  if (native_) native_->shutdown(grace);
  // Calls still running at the deadline are cancelled; Shutdown returns once every
  // reactor has finished (their loops must still run), Wait once grpc's threads are done.
  server_->Shutdown(deadline);
  server_->Wait();
  // The relayed calls' client side (their contexts, the in-process channel) goes before
  // the server does.
  if (native_) native_->awaitRelays();
}

}  // namespace infergate::gateway::frontends
