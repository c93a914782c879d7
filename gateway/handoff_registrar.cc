#include "gateway/handoff_registrar.h"

#include "codecs/base64.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/json_writer.h"
#include "gateway/router.h"
#include "grpc_service.pb.h"

namespace infergate::gateway {
namespace {

using upstream::Endpoint;
using upstream::EndpointHandoff;
using upstream::Upstream;
using Work = EndpointHandoff::Work;

constexpr std::string_view kService = "/inference.GRPCInferenceService/";
constexpr std::chrono::seconds kTimeout{5};

// The typed gRPC call for `work`: method and request.
std::pair<std::string, grpc::ByteBuffer> grpcCall(const Work& work) {
  if (work.kind == Work::Kind::kUnregisterRegion && work.region_kind == shm::RegionKind::kCuda) {
    inference::CudaSharedMemoryUnregisterRequest r;
    r.set_name(work.name);
    return {codecs::strCat(kService, "CudaSharedMemoryUnregister"), codecs::toByteBuffer(r)};
  }
  if (work.kind == Work::Kind::kUnregisterRegion) {
    inference::SystemSharedMemoryUnregisterRequest r;
    r.set_name(work.name);
    return {codecs::strCat(kService, "SystemSharedMemoryUnregister"), codecs::toByteBuffer(r)};
  }
  if (work.region_kind == shm::RegionKind::kCuda) {
    inference::CudaSharedMemoryRegisterRequest r;
    r.set_name(work.name);
    r.set_raw_handle(work.cuda_handle);
    r.set_device_id(work.device);
    r.set_byte_size(work.byte_size);
    return {codecs::strCat(kService, "CudaSharedMemoryRegister"), codecs::toByteBuffer(r)};
  }
  inference::SystemSharedMemoryRegisterRequest r;
  r.set_name(work.name);
  r.set_key(work.key);
  r.set_offset(work.offset);
  r.set_byte_size(work.byte_size);
  return {codecs::strCat(kService, "SystemSharedMemoryRegister"), codecs::toByteBuffer(r)};
}

// The upstream still has a registration of this name. Names are this gateway's own and
// unique per endpoint and registration (endpoint_handoff.h), so it is the same region: the
// upstream kept it while the gateway thought it lost (the endpoint only looked down).
bool alreadyRegistered(grpc::StatusCode code, std::string_view message) {
  if (code == grpc::StatusCode::ALREADY_EXISTS) return true;
  return message.find("already in manager") != std::string_view::npos ||
         message.find("already exists") != std::string_view::npos;
}

upstream::HttpUpstreamRequest httpCall(const Work& work) {
  upstream::HttpUpstreamRequest out;
  out.method = "POST";
  const bool cuda = work.region_kind == shm::RegionKind::kCuda;
  const std::string base = codecs::strCat(cuda ? "/v2/cudasharedmemory" : "/v2/systemsharedmemory",
                                          "/region/", work.name);
  out.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kTimeout);
  if (work.kind == Work::Kind::kUnregisterRegion) {
    out.target = base + "/unregister";
    return out;
  }
  out.target = base + "/register";
  std::string body;
  codecs::JsonWriter w(body);
  w.beginObject();
  if (cuda) {
    w.key("raw_handle").beginObject().key("b64").string(codecs::base64Encode(work.cuda_handle)).endObject();
    w.key("device_id").int64(work.device);
  } else {
    w.key("key").string(work.key).key("offset").uint64(work.offset);
  }
  w.key("byte_size").uint64(work.byte_size).endObject();
  out.headers.emplace_back("Content-Type", "application/json");
  out.body = codecs::BufferChain(codecs::Buffer::fromString(std::move(body)));
  return out;
}

}  // namespace

void HandoffRegistrar::round(const upstream::UpstreamSet& upstreams) {
  if (stopped_) return;
  const auto now = Endpoint::Clock::now();
  for (const auto& u : upstreams) {
    if (!u->fleet()) continue;
    // Held by name: discovery may swap the list meanwhile.
    std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = u->fleet()->endpoints();
    for (const std::shared_ptr<Endpoint>& e : *endpoints) {
      EndpointHandoff* handoff = e->handoff();
      if (handoff == nullptr) continue;
      if (e->activeHealth() == upstream::ActiveHealth::kUnhealthy || e->ejected(now)) {
        handoff->endpointDown();
        continue;
      }
      for (Work& work : handoff->takeWork()) send(*u, e, std::move(work));
    }
  }
}

void HandoffRegistrar::send(const Upstream& u, const std::shared_ptr<Endpoint>& e, Work work) {
  if (u.protocol() == Upstream::Protocol::kGrpc) {
    auto [method, request] = grpcCall(work);
    upstream::GrpcCallOptions options;
    options.deadline = std::chrono::system_clock::now() + kTimeout;
    e->grpc()->unary(method, std::move(request), std::move(options),
                     [self = shared_from_this(), e, work](grpc::Status status, grpc::ByteBuffer) {
                       self->loop_.post([self, e, work, status] {
                         self->done(e, work,
                                    status.ok() || alreadyRegistered(status.error_code(),
                                                                     status.error_message()),
                                    status.error_code() == grpc::StatusCode::UNIMPLEMENTED,
                                    status.error_message());
                       });
                     });
    return;
  }
  upstream::HttpUpstreamCallbacks callbacks;
  callbacks.on_complete = [self = shared_from_this(), e, work](
                              codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
    if (!r.ok()) return self->done(e, work, false, false, std::string(codecs::messageOf(r.status())));
    std::string error;
    if (r->status != 200) {
      error = std::string(codecs::messageOf(httpErrorAnswer(r->status, r->body.view(), e->key())));
    }
    const bool ok = r->status == 200 ||
                    (r->status == 400 && alreadyRegistered(grpc::StatusCode::UNKNOWN, error));
    self->done(e, work, ok, r->status == 501, error);
  };
  u.http(loop_)->send(e->address(), httpCall(work), std::move(callbacks));
}

void HandoffRegistrar::done(const std::shared_ptr<Endpoint>& e, const Work& work, bool ok,
                            bool refused, const std::string& error) {
  EndpointHandoff* handoff = e->handoff();
  switch (work.kind) {
    case Work::Kind::kRegisterPool:
      handoff->poolRegistered(ok, refused, error);
      break;
    case Work::Kind::kRegisterRegion:
      handoff->regionRegistered(work.serial, ok, refused, error, work.region_kind);
      break;
    case Work::Kind::kUnregisterRegion:
      handoff->regionUnregistered(work.serial);
      break;
  }
}

}  // namespace infergate::gateway
