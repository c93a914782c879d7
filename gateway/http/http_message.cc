#include "gateway/http/http_message.h"

#include <algorithm>
#include <cstring>

#include "codecs/json_response_encoder.h"
#include "codecs/text.h"

namespace infergate::gateway::http {

namespace {

// The smallest block a list allocates: a typical head's names and values fit one.
constexpr size_t kMinBlock = 512;

}  // namespace

HeaderList& HeaderList::operator=(const HeaderList& other) {
  if (this == &other) return *this;
  entries_.clear();
  first_.reset();
  more_.clear();
  size_t bytes = 0;
  for (const auto& [k, v] : other.entries_) bytes += k.size() + v.size();
  reserve(other.entries_.size(), bytes);
  for (const auto& [k, v] : other.entries_) add(k, v);
  return *this;
}

void HeaderList::newBlock(size_t size) {
  if (first_ == nullptr) {
    first_ = std::make_unique_for_overwrite<char[]>(size);
  } else {
    more_.push_back(std::make_unique_for_overwrite<char[]>(size));
  }
  last_size_ = size;
  last_used_ = 0;
}

void HeaderList::reserve(size_t count, size_t bytes) {
  entries_.reserve(count);
  if (bytes > room()) newBlock(bytes);
}

void HeaderList::add(std::string_view name, std::string_view value) {
  const size_t size = name.size() + value.size();
  if (size > room()) newBlock(std::max(kMinBlock, size));
  char* at = first_ == nullptr ? nullptr : lastBlock() + last_used_;
  if (!name.empty()) std::memcpy(at, name.data(), name.size());
  if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
  last_used_ += size;
  entries_.emplace_back(std::string_view(at, name.size()), std::string_view(at + name.size(), value.size()));
  name_sizes_ |= sizeBit(name.size());
}

void HeaderList::addFromHead(std::string_view head, std::span<const FieldSpan> fields) {
  if (head.size() > room()) newBlock(std::max(kMinBlock, head.size()));
  char* at = lastBlock() + last_used_;
  if (!head.empty()) std::memcpy(at, head.data(), head.size());
  last_used_ += head.size();
  entries_.reserve(entries_.size() + fields.size());
  for (const FieldSpan& f : fields) {
    entries_.emplace_back(std::string_view(at + f.name_at, f.name_size),
                          std::string_view(at + f.value_at, f.value_size));
    name_sizes_ |= sizeBit(f.name_size);
  }
}

const std::string_view* HeaderList::find(std::string_view name) const {
  if ((name_sizes_ & sizeBit(name.size())) == 0) return nullptr;
  for (const Entry& entry : entries_) {
    if (codecs::equalsIgnoreCase(entry.first, name)) return &entry.second;
  }
  return nullptr;
}

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::query() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

HttpResponse HttpResponse::jsonError(int status, std::string_view message) {
  return json(status, codecs::encodeJsonError(message));
}

HttpResponse HttpResponse::json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body.append(codecs::Buffer::fromString(std::move(body)));
  return r;
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace infergate::gateway::http
