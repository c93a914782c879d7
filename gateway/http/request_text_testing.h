#pragma once

// Tests and fuzz drivers only: a request as text (method, target, version, headers as
// parsed, body), so that every field the connection parsed reaches a comparison.

#include <string>

#include "gateway/http/http_message.h"

namespace infergate::gateway::http {

inline std::string requestText(const HttpRequest& request) {
  std::string out = request.method + " " + request.target + " 1." +
                    std::to_string(request.http_minor) + "\n";
  for (const auto& [name, value] : request.headers) out.append(name).append(": ").append(value).append("\n");
  out += "\n";
  out.append(reinterpret_cast<const char*>(request.body.data()), request.body.size());
  return out;
}

}  // namespace infergate::gateway::http
