// /v2/systemsharedmemory and /v2/cudasharedmemory (PROTOCOL.md 8.2) on the gateway's own
// region table (Router::regions(); shm/region_registry.h has the rules):
//
//   GET  .../[region/<r>/]status       JSON array: system {name, key, offset, byte_size},
//                                      cuda {name, device_id, byte_size}
//   POST .../region/<r>/register       system {key, offset?, byte_size};
//                                      cuda {raw_handle: {b64}, device_id, byte_size}
//   POST .../[region/<r>/]unregister   one region, or every region of the kind
//
// Register and unregister are refused (501) while `shm.enabled` is off, as Triton refuses
// them without --allow-client-shm, and (403) when `shm.listeners` leaves the HTTP
// listener out. Unknown body members are ignored, as Triton ignores them.

#include "codecs/base64.h"
#include "codecs/json_value.h"
#include "codecs/json_writer.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/shm_binding.h"
#include "shm/region_registry.h"

namespace infergate::gateway::frontends {

using http::HttpResponse;

namespace {

HttpResponse ok() {
  HttpResponse r;
  r.status = 200;
  return r;
}

std::string statusJson(const std::vector<shm::RegionStatus>& rows) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginArray();
  for (const shm::RegionStatus& row : rows) {
    w.beginObject().key("name").string(row.name);
    if (row.kind == shm::RegionKind::kSystem) {
      w.key("key").string(row.key).key("offset").uint64(row.offset);
    } else {
      w.key("device_id").int64(row.device_id);
    }
    w.key("byte_size").uint64(row.byte_size).endObject();
  }
  w.endArray();
  return out;
}

// A member that must be a non-negative integer; `fallback` when absent and optional.
codecs::StatusOr<uint64_t> uintMember(const codecs::JsonValue& body, std::string_view key,
                                      std::string_view what, std::optional<uint64_t> fallback) {
  const codecs::JsonValue* v = body.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return codecs::invalidArgument(what, " needs '", key, "' (a non-negative integer)");
  }
  std::optional<uint64_t> n = v->isInteger() ? v->asUint() : std::nullopt;
  if (!n) return codecs::invalidArgument(what, ": '", key, "' must be a non-negative integer");
  return *n;
}

codecs::Status registerFromJson(shm::RegionRegistry& regions, shm::RegionKind kind,
                                const std::string& name, std::string_view text) {
  const std::string what = codecs::strCat(shm::kindName(kind),
                                          " shared memory register request for region '", name, "'");
  codecs::StatusOr<codecs::JsonValue> body = codecs::parseJson(text);
  if (!body.ok()) return body.status();
  if (!body->isObject()) return codecs::invalidArgument(what, " must be a JSON object");
  INFERGATE_ASSIGN_OR_RETURN(uint64_t byte_size, uintMember(*body, "byte_size", what, std::nullopt));
  if (kind == shm::RegionKind::kSystem) {
    const codecs::JsonValue* key = body->find("key");
    if (key == nullptr || !key->isString()) {
      return codecs::invalidArgument(what, " needs 'key' (a string)");
    }
    INFERGATE_ASSIGN_OR_RETURN(uint64_t offset, uintMember(*body, "offset", what, 0));
    return regions.registerSystem(name, key->asString(), offset, byte_size);
  }
  const codecs::JsonValue* handle = body->find("raw_handle");
  const codecs::JsonValue* b64 = handle != nullptr ? handle->find("b64") : nullptr;
  if (b64 == nullptr || !b64->isString()) {
    return codecs::invalidArgument(what, " needs 'raw_handle' as {\"b64\": \"<base64>\"}");
  }
  std::optional<std::string> raw = codecs::base64Decode(b64->asString());
  if (!raw) return codecs::invalidArgument(what, ": 'raw_handle.b64' is not valid base64");
  INFERGATE_ASSIGN_OR_RETURN(uint64_t device, uintMember(*body, "device_id", what, std::nullopt));
  if (device > INT32_MAX) return codecs::invalidArgument(what, ": 'device_id' ", device, " is out of range");
  return regions.registerCuda(name, *raw, static_cast<int64_t>(device), byte_size);
}

}  // namespace

void HttpFrontend::sharedMemory(const Exchange& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  const bool cuda = m.endpoint == HttpEndpoint::kCudaShmStatus ||
                    m.endpoint == HttpEndpoint::kCudaShmRegister ||
                    m.endpoint == HttpEndpoint::kCudaShmUnregister;
  const shm::RegionKind kind = cuda ? shm::RegionKind::kCuda : shm::RegionKind::kSystem;
  shm::RegionRegistry& regions = router_->regions();
  if (m.endpoint == HttpEndpoint::kSystemShmStatus || m.endpoint == HttpEndpoint::kCudaShmStatus) {
    auto rows = regions.status(kind, m.region.empty() ? std::nullopt
                                                      : std::optional<std::string_view>(m.region));
    if (!rows.ok()) return exchange->respond(errorResponse(rows.status()));
    return exchange->respond(HttpResponse::json(200, statusJson(*rows)));
  }
  if (codecs::Status allowed =
          shmChangeAllowed(regions, router_->snapshot()->config->shm.http, "HTTP");
      !allowed.ok()) {
    return exchange->respond(errorResponse(allowed));
  }
  codecs::Status status;
  if (m.endpoint == HttpEndpoint::kSystemShmRegister || m.endpoint == HttpEndpoint::kCudaShmRegister) {
    if (m.region.empty()) {
      status = codecs::invalidArgument("'region name' is necessary to register ",
                                       shm::kindName(kind), " shared memory region");
    } else {
      status = registerFromJson(regions, kind, m.region, exchange->request().body.view());
    }
  } else {
    status = m.region.empty() ? regions.unregisterAll(kind) : regions.unregister(kind, m.region);
  }
  exchange->respond(status.ok() ? ok() : errorResponse(status));
}

}  // namespace infergate::gateway::frontends
