#pragma once

// An HTTP client's /infer answered by a gRPC upstream, sent on in the binary-tensor form
// while the upstream's ModelInferResponse is still arriving. Internal to the HTTP frontend
// (http_decoded.cc's inferDecoded).
//
// Without it the gateway reads the whole message, transcodes it, and only then starts the
// client's transfer: for a 64 MiB output, one loopback transfer after the other. With it:
//
//   the message's head is in          the JSON header is built as for a whole answer (the
//   (GrpcCallOptions::answer_progress, same encoder, the client's model name), the
//   codecs/protobuf_response_layout.h) response starts with its Content-Length and
//                                     Inference-Header-Content-Length, then the JSON
//   every 256 KiB that lands          that much of the tensors, as slices of the message's
//                                     own buffer (no copy), each entry's framing checked
//                                     before its first byte goes
//   the call ends OK                  the rest, and the response is complete
//   the call fails, or the whole      the connection closes after what was sent: HTTP/1.1's
//   message is not what its head said only way to tell an answer ended short; an entry
//                                     found framed otherwise on the way also cancels the
//                                     upstream call (its holder does, told by onProgress)
//
// The last tensor byte is never sent before the call's status, so a grpc-status error
// after a whole message still reaches the client as a cut answer, never as a complete one.
//
// It applies only where the client's answer is a JSON header and the tensors as they are:
// every output binary (asked per output, or by binary_data_output), none into a client
// region or a pool slot, no classification, no compression; and only to a message the
// layout can read ahead (fixed-size outputs, raw contents, a head within 1 MiB, at least
// one tensor byte, within the body limit). Every other answer is read whole and answered as
// before (finish() says false).
//
// The holder (http_decoded.cc's DecodedInferAnswer, one object per request) is the call's
// upstream::AnswerProgress and hands each progress on; the relay itself holds nothing.
//
// Threads: the exchange's loop (the worker's own gRPC client tells progress there).

#include <optional>
#include <string_view>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/protobuf_response_layout.h"
#include "gateway/http/http_connection.h"

namespace infergate::gateway::frontends {

class BinaryAnswerRelay {
 public:
  // Nothing when this request's answer can never go on this way (see the top).
  // `request`, `client_model` and `client_version` (what the answer shows; "" keeps the
  // upstream's version) are the holder's, kept as long as the relay.
  static std::optional<BinaryAnswerRelay> forRequest(const http::HttpExchange& exchange,
                                                     const codecs::InferRequest& request,
                                                     std::string_view client_model, std::string_view client_version,
                                                     const codecs::DecodeLimits& limits);

  // The call's upstream::AnswerProgress, told to its holder, for the client of `exchange`.
  // True when this progress cut the client's answer (an entry not framed as the layout
  // said): the rest of the upstream's message is wanted no more, and its call should go.
  bool onProgress(http::HttpExchange& exchange, const codecs::MutableBuffer& message, size_t have, size_t size);

  // The call ended: `response` is the whole message decoded, or why there is none. True
  // when the relay had begun and so ended the client's answer here (complete, or cut);
  // false: nothing was sent, answer as usual.
  bool finish(http::HttpExchange& exchange, const codecs::StatusOr<codecs::InferResponse>& response);

 private:
  enum class State { kWaiting, kDeclined, kStreaming, kEnded };

  BinaryAnswerRelay(const codecs::InferRequest& request, std::string_view client_model,
                    std::string_view client_version, const codecs::DecodeLimits& limits)
      : request_(&request), client_model_(client_model), client_version_(client_version), limits_(limits) {}

  // Sends the tensor bytes before `limit` (a message offset) not sent yet; piece(i, offset,
  // length) gives bytes of entry i. False: an entry is not framed as the layout said.
  template <typename Piece>
  bool sendBefore(http::HttpExchange& exchange, size_t limit, Piece piece);
  void cut(http::HttpExchange& exchange);

  const codecs::InferRequest* request_;
  std::string_view client_model_, client_version_;
  codecs::DecodeLimits limits_;
  State state_ = State::kWaiting;
  // Once streaming: the message (its storage lives as long as the call or its answer) and
  // where its tensors lie; `next_` is the first entry not sent whole, `sent_` the message
  // offset sent up to within it.
  const uint8_t* message_ = nullptr;
  std::vector<codecs::ResponseLayout::Entry> entries_;
  size_t next_ = 0;
  size_t sent_ = 0;
  // Where the last tensor byte lies: it waits for the call's status (the message's own last
  // bytes may be framing of empty outputs, which the client does not get).
  size_t last_byte_ = 0;
  bool next_framed_ = false;  // entries_[next_]'s framing was checked
};

}  // namespace infergate::gateway::frontends
