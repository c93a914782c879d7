#include "gateway/server_info.h"

#include "codecs/json_writer.h"

namespace infergate::gateway {

std::string serverMetadataJson(const ServerInfo& info) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject().key("name").string(info.name).key("version").string(info.version);
  w.key("extensions").beginArray();
  for (const std::string& e : info.extensions) w.string(e);
  w.endArray().endObject();
  return out;
}

}  // namespace infergate::gateway
