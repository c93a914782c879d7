#include "gateway/frontends/http_binary_relay.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "codecs/compression.h"
#include "codecs/json_response_encoder.h"
#include "gateway/telemetry/request_info.h"

namespace infergate::gateway::frontends {
namespace {

// A head (fields 1-5) still not all in after this many bytes is not worth waiting for: the
// answer is read whole.
constexpr size_t kMaxHeadBytes = 1 << 20;

}  // namespace

std::optional<BinaryAnswerRelay> BinaryAnswerRelay::forRequest(const http::HttpExchange& exchange,
                                                               const codecs::InferRequest& request,
                                                               std::string_view client_model,
                                                               std::string_view client_version,
                                                               const codecs::DecodeLimits& limits) {
  if (request.outputs.empty() && !request.binary_data_output.value_or(false)) return std::nullopt;  // all JSON
  for (const codecs::RequestedOutput& output : request.outputs) {
    if (output.shared_memory || output.classification > 0 || !codecs::wantsBinaryOutput(request, output.name)) {
      return std::nullopt;
    }
  }
  if (const std::string_view* accept = exchange.request().headers.find("Accept-Encoding");
      accept != nullptr && codecs::negotiateAcceptEncoding(*accept) != codecs::ContentEncoding::kIdentity) {
    return std::nullopt;  // the answer is compressed whole
  }
  return BinaryAnswerRelay(request, client_model, client_version, limits);
}

bool BinaryAnswerRelay::onProgress(http::HttpExchange& exchange, const codecs::MutableBuffer& message, size_t have,
                                   size_t size) {
  auto written = [&message](size_t, size_t offset, size_t length) { return message.shareWritten(offset, length); };
  if (state_ == State::kStreaming) {
    if (sendBefore(exchange, std::min(have, last_byte_), written)) return false;
    cut(exchange);
    return true;
  }
  if (state_ != State::kWaiting) return false;
  if (exchange.responded()) {
    state_ = State::kDeclined;
    return false;
  }
  codecs::ResponseLayoutScan scan = codecs::scanResponseLayout(message.shareWritten(0, have), size, limits_);
  switch (scan.result) {
    case codecs::ResponseLayoutScan::Result::kNeedMore:
      if (have >= kMaxHeadBytes) state_ = State::kDeclined;
      return false;
    case codecs::ResponseLayoutScan::Result::kUnknown:
      state_ = State::kDeclined;
      return false;
    case codecs::ResponseLayoutScan::Result::kLaidOut:
      break;
  }
  // The last tensor byte (the last of the last output that has any): none, nothing to relay.
  const auto last = std::find_if(scan.layout.entries.rbegin(), scan.layout.entries.rend(),
                                 [](const codecs::ResponseLayout::Entry& e) { return e.length > 0; });
  if (last == scan.layout.entries.rend()) {
    state_ = State::kDeclined;
    return false;
  }
  const auto encode_start = telemetry::Clock::now();
  codecs::InferResponse& response = scan.layout.head;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    codecs::InferOutput& output = response.outputs[i];
    if (!codecs::wantsBinaryOutput(*request_, output.name)) {
      state_ = State::kDeclined;  // an output the request did not name, and JSON by default
      return false;
    }
    // The bytes the tensor will have: the encoder takes only the size of a fixed-size
    // binary output, and the Buffer is dropped once the header is written.
    const codecs::ResponseLayout::Entry& e = scan.layout.entries[i];
    output.data = message.shareWritten(e.data_at, e.length);
  }
  response.model_name = std::string(client_model_);
  if (!client_version_.empty()) response.model_version = std::string(client_version_);
  codecs::StatusOr<codecs::HttpInferBody> body = codecs::JsonResponseEncoder().encode(response, *request_);
  exchange.info().transcode += telemetry::Clock::now() - encode_start;
  if (!body.ok() || !body->header_length || body->body.segments().empty()) {
    state_ = State::kDeclined;  // the whole answer's encode says why
    return false;
  }
  http::HttpResponse head;
  head.status = 200;
  head.header("Content-Type", std::string(body->contentType()));
  head.header("Inference-Header-Content-Length", std::to_string(*body->header_length));
  exchange.beginStream(std::move(head), body->body.size());
  exchange.sendChunk(body->body.segments().front());  // the JSON

  state_ = State::kStreaming;
  message_ = message.shareWritten(0, have).data();
  last_byte_ = last->data_at + last->length - 1;
  entries_ = std::move(scan.layout.entries);
  if (sendBefore(exchange, std::min(have, last_byte_), written)) return false;
  cut(exchange);
  return true;
}

bool BinaryAnswerRelay::finish(http::HttpExchange& exchange, const codecs::StatusOr<codecs::InferResponse>& response) {
  if (state_ != State::kStreaming) {
    const bool ended = state_ == State::kEnded;
    state_ = State::kEnded;
    return ended;
  }
  state_ = State::kEnded;
  // The whole message decoded to the tensors where the layout put them: the rest goes.
  bool whole = response.ok() && response->outputs.size() == entries_.size();
  for (size_t i = 0; whole && i < entries_.size(); ++i) {
    const codecs::Buffer& data = response->outputs[i].data;
    whole = data.data() == message_ + entries_[i].data_at && data.size() == entries_[i].length;
  }
  if (whole) {
    (void)sendBefore(exchange, SIZE_MAX, [&response, this](size_t i, size_t offset, size_t length) {
      return response->outputs[i].data.slice(offset - entries_[i].data_at, length);
    });
  }
  // Complete, or short of its Content-Length (failed, not laid out as begun, an entry
  // framed otherwise): then the connection closes after what was sent.
  exchange.endStream();
  return true;
}

template <typename Piece>
bool BinaryAnswerRelay::sendBefore(http::HttpExchange& exchange, size_t limit, Piece piece) {
  while (next_ < entries_.size()) {
    const codecs::ResponseLayout::Entry& e = entries_[next_];
    if (limit < e.data_at) return true;  // its tag and length are not all in yet
    if (!next_framed_) {
      if (!codecs::entryFramed(e, message_)) return false;
      next_framed_ = true;
      sent_ = e.data_at;
    }
    const size_t end = std::min(limit, e.data_at + e.length);
    if (end > sent_) {
      exchange.sendChunk(piece(next_, sent_, end - sent_));
      sent_ = end;
    }
    if (end < e.data_at + e.length) return true;
    ++next_;
    next_framed_ = false;
  }
  return true;
}

void BinaryAnswerRelay::cut(http::HttpExchange& exchange) {
  state_ = State::kEnded;
  exchange.endStream();  // short of its Content-Length: the connection closes
}

}  // namespace infergate::gateway::frontends
