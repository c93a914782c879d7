// Header names and values written in the file: routes[].match.headers and
// upstreams[].headers (forward.headers reuses the name check). Checked here so that a
// header the gateway could never receive, or could not send, fails `infergate validate`
// instead of silently never matching or breaking requests at run time.

#include <algorithm>

#include "codecs/text.h"
#include "config/section_readers.h"

namespace infergate::config {
namespace {

using codecs::strCat;

// gRPC metadata keys (PROTOCOL-HTTP2.md, Custom-Metadata): lowercase letters, digits,
// '-', '_' and '.'. grpc++ refuses anything else when the call starts.
bool isGrpcKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

// Headers the upstream clients write themselves to frame each request; a configured
// value would corrupt the framing or be dropped.
bool isFramingHeader(std::string_view lowercase_name) {
  static constexpr std::string_view kFraming[] = {
      "connection", "content-length", "content-type", "keep-alive", "te",
      "transfer-encoding", "upgrade"};
  return std::find(std::begin(kFraming), std::end(kFraming), lowercase_name) !=
         std::end(kFraming);
}

// Empty when `value` can be sent (and received) as given; otherwise the error.
std::string valueProblem(std::string_view value, HeaderUse use, std::string_view name) {
  const char* what = use == HeaderUse::kGrpcUpstream ? "metadata value" : "header value";
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    // gRPC ASCII values are printable only; HTTP allows tabs and obs-text (RFC 9110 5.5).
    bool refused = use == HeaderUse::kGrpcUpstream ? c < 0x20 || c > 0x7e
                                                   : (c < 0x20 && c != '\t') || c == 0x7f;
    if (refused) {
      return strCat(what, " of \"", name, "\" has a control character",
                    use == HeaderUse::kGrpcUpstream ? " or a non-ASCII one" : "");
    }
  }
  if (!value.empty() && (value.front() == ' ' || value.front() == '\t' ||
                         value.back() == ' ' || value.back() == '\t')) {
    // Receivers strip it, so a route would never see it and an upstream would not either.
    return strCat(what, " of \"", name, "\" starts or ends with whitespace");
  }
  return "";
}

std::string nameProblem(std::string_view name, std::string_view lowercase, HeaderUse use) {
  if (use == HeaderUse::kGrpcUpstream) {
    if (name.empty() || !std::all_of(lowercase.begin(), lowercase.end(), isGrpcKeyChar)) {
      return strCat("\"", name, "\" is not a gRPC metadata key (letters, digits, '-', '_', '.')");
    }
    if (lowercase.starts_with("grpc-")) {
      return strCat("metadata key \"", name, "\" is reserved by gRPC");
    }
  } else if (std::string problem = headerNameProblem(name); !problem.empty()) {
    return problem;
  }
  if (use != HeaderUse::kMatch && isFramingHeader(lowercase)) {
    return strCat("header \"", name, "\" is written by the gateway itself and cannot be set");
  }
  return "";
}

}  // namespace

std::string asciiLowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = codecs::asciiLower(c);
  return out;
}

std::string headerNameProblem(std::string_view name) {
  if (codecs::isHttpToken(name)) return "";
  return strCat("\"", name,
                "\" is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)");
}

std::vector<HeaderValue> readHeaderValues(YamlReader& reader, const YamlValue& value,
                                          HeaderUse use, bool* complete) {
  // Every path that leaves an entry out has recorded its error first.
  auto incomplete = [complete] {
    if (complete) *complete = false;
  };
  std::vector<HeaderValue> headers;
  std::optional<YamlMap> map = reader.anyMapping(value);
  if (!map) {
    incomplete();
    return headers;
  }
  if (map->entries.size() != value.node.size()) incomplete();  // keys refused by anyMapping
  for (const YamlMap::Entry& entry : map->entries) {
    std::string name = asciiLowercase(entry.key);
    std::string problem = nameProblem(entry.key, name, use);
    // The mapping refused exact repeats; names differing in case only are the same header.
    auto same = std::find_if(headers.begin(), headers.end(),
                             [&name](const HeaderValue& h) { return h.name == name; });
    if (problem.empty() && same != headers.end()) {
      problem = strCat("header \"", entry.key, "\" is given twice (also at line ",
                       same->where.line, ")");
    }
    if (!problem.empty()) {
      reader.error(entry.key_where, entry.value.path, std::move(problem));
      incomplete();
      continue;
    }
    std::optional<std::string> text = reader.string(entry.value);
    if (!text) {
      incomplete();
      continue;
    }
    if (std::string bad = valueProblem(*text, use, entry.key); !bad.empty()) {
      reader.error(entry.value, std::move(bad));
      incomplete();
      continue;
    }
    headers.push_back({std::move(name), std::move(*text), entry.key_where});
  }
  return headers;
}

}  // namespace infergate::config
