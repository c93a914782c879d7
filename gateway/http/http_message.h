#pragma once

// One HTTP/1.1 request as the connection layer hands it to a handler, and the response the
// handler gives back. Plain values: no socket, no loop.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "gateway/http/body_arrival.h"

namespace infergate::gateway::http {

// Spare bytes a request body's storage keeps readable after the body (JSON is parsed in
// place, simdjson reads a little past the end).
inline constexpr size_t kRequestBodyPadding = 64;

// Memory a request's body is read into in place of the connection's own storage: owned
// elsewhere (a handoff pool slot, whose tensors then go on by reference without a copy)
// and kept alive by `owner` while any Buffer of the body lives.
struct BodyPlace {
  std::shared_ptr<void> owner;
  uint8_t* data = nullptr;
  size_t capacity = 0;  // room for the body and kRequestBodyPadding bytes after it
};

// Header names compare case-insensitively; values are kept as sent (trimmed). Names and
// values are views into the list's own storage: blocks that never move (a moved list keeps
// them), so a view stays valid while the list lives. A parser that knows the head's size
// reserves it once: one allocation for every name and value.
class HeaderList {
 public:
  using Entry = std::pair<std::string_view, std::string_view>;

  HeaderList() = default;
  HeaderList(const HeaderList& other) { *this = other; }
  HeaderList& operator=(const HeaderList& other);
  // A moved-from list is empty (its blocks went with the views), and may be added to.
  HeaderList(HeaderList&& other) noexcept = default;
  HeaderList& operator=(HeaderList&& other) noexcept = default;

  // Copies `name` and `value` into the list.
  void add(std::string_view name, std::string_view value);
  // Where one field lies in a head: its name's and its value's offsets and sizes from the
  // head's first byte.
  struct FieldSpan {
    uint32_t name_at, name_size, value_at, value_size;
  };
  // Adds `fields`, all within `head` (a parser's head, whole in one buffer), with one copy
  // of the head's bytes instead of one per name and value.
  void addFromHead(std::string_view head, std::span<const FieldSpan> fields);
  // Room for `count` entries and `bytes` of names and values.
  void reserve(size_t count, size_t bytes = 0);
  // The first value of `name`, or nullptr.
  const std::string_view* find(std::string_view name) const;
  size_t size() const { return entries_.size(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  size_t room() const { return first_ == nullptr ? 0 : last_size_ - last_used_; }
  char* lastBlock() const { return more_.empty() ? first_.get() : more_.back().get(); }
  void newBlock(size_t size);

  std::vector<Entry> entries_;
  // Bit (n % 64) set when a name of n bytes was added: most lookups are for names a
  // request lacks, and most of those are answered by this bit alone. Only ever set (a
  // stale bit costs a scan, never a wrong answer).
  uint64_t name_sizes_ = 0;
  static uint64_t sizeBit(size_t n) { return uint64_t{1} << (n % 64); }
  // The first block, and any after it (a head that outgrew its first: rare).
  std::unique_ptr<char[]> first_;
  std::vector<std::unique_ptr<char[]>> more_;
  // The last block's size and bytes taken; read only while there is a block (a moved-from
  // list has none, whatever these say).
  size_t last_size_ = 0;
  size_t last_used_ = 0;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as on the wire
  std::string target;  // the raw request target, never percent-decoded
  std::string_view path() const;   // target up to '?'
  std::string_view query() const;  // after '?', or empty
  int http_minor = 1;  // HTTP/1.x
  HeaderList headers;
  // The body, de-chunked. `body_readable` bytes may be read from body.data() (>= its size:
  // the storage keeps spare room so JSON can be parsed in place).
  codecs::Buffer body;
  size_t body_readable = 0;
  // Set by the handler for the response observer (metrics, access logs): what the request
  // was, e.g. the route's name. Must point to static storage.
  std::string_view tag;
  // What the server's headers gate (HeadersGate) decided at headers-complete, handed on
  // to the handler; opaque to this layer. Null when there is no gate.
  std::shared_ptr<const void> gate_state;
  // The body's length as its Content-Length declared it (none: chunked or no body), set
  // before the headers gate runs.
  std::optional<uint64_t> content_length;
  // Where the headers gate asks the body to be read (no data: the connection's storage).
  // Taken for a Content-Length body that fits it; handed over (emptied) either way.
  BodyPlace body_place;
  // Set by the headers gate for a Content-Length body the handler can send on as it
  // arrives (body_arrival.h): the request goes to the handler once this many body bytes are
  // in (at least 1), with `body` its whole length and `arrival` saying how much of it is
  // there. 0: the handler gets the request once the body is whole, as usual.
  uint64_t early_dispatch_bytes = 0;
  // Null, or what of the body has arrived, while it is still arriving.
  std::shared_ptr<BodyArrival> arrival;
  // Whether the handler may read all of `body` now.
  bool bodyWhole() const { return arrival == nullptr || arrival->complete(); }
};

struct HttpResponse {
  int status = 200;
  // Content-Length and Connection are written by the connection layer; everything else
  // (Content-Type, Inference-Header-Content-Length, ...) is the handler's.
  std::vector<std::pair<std::string, std::string>> headers;
  // Another message's fields relayed as they came, without a copy of each: those of
  // `relayed` named in `relayed_names` (case-insensitive; the first of each name), written
  // after `headers`. The names are a static list (at most 32).
  HeaderList relayed;
  std::span<const std::string_view> relayed_names;
  codecs::BufferChain body;

  HttpResponse& header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  // A response with `{"error": message}` as Triton sends errors.
  static HttpResponse jsonError(int status, std::string_view message);
  static HttpResponse json(int status, std::string body);
};

// "OK", "Not Found", ... ("Unknown" for codes without a phrase).
std::string_view reasonPhrase(int status);

}  // namespace infergate::gateway::http
