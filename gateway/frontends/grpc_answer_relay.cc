#include "gateway/frontends/grpc_answer_relay.h"

#include <utility>

#include "codecs/binary_tensor.h"
#include "codecs/compression.h"
#include "codecs/protobuf_response_encoder.h"
#include "codecs/text.h"

namespace infergate::gateway::frontends::grpc_detail {

void GrpcAnswerRelay::onHead(int status, const http::HeaderList& headers, uint64_t length) {
  if (state_ != State::kIdle) return;
  length_ = length;
  state_ = State::kDeclined;
  if (status != 200) return;
  if (const std::string_view* encoding = headers.find("Content-Encoding")) {
    codecs::StatusOr<codecs::ContentEncoding> parsed = codecs::parseContentEncoding(*encoding);
    if (!parsed.ok() || *parsed != codecs::ContentEncoding::kIdentity) return;
  }
  const std::string_view* ihcl = headers.find("Inference-Header-Content-Length");
  if (ihcl == nullptr) return;  // a JSON answer
  std::optional<uint64_t> header_length = codecs::parseUint64(codecs::trimAscii(*ihcl));
  if (!header_length || *header_length == 0 || *header_length > length || *header_length > kMaxHeaderBytes) {
    return;  // the whole decode names what is wrong
  }
  header_length_ = *header_length;
  state_ = State::kHeader;
}

void GrpcAnswerRelay::onPiece(codecs::Buffer piece) {
  if (piece.empty()) return;
  if (!pieces_.empty()) {
    const codecs::Buffer& first = pieces_.segments().front();
    contiguous_ = contiguous_ && piece.owner() == first.owner() && piece.data() == first.data() + received_;
  }
  received_ += piece.size();
  pieces_.append(std::move(piece));
  switch (state_) {
    case State::kHeader:
      if (received_ >= header_length_) sendAhead();
      return;
    case State::kAhead:
      // Pieces that were not where the message references would leave it waiting for
      // bytes that never come: the arrival fails, and the call's end cuts the answer.
      if (!contiguous_) return arrival_->fail();
      arrival_->advance(received_);
      return;
    case State::kIdle:
    case State::kDeclined:
      return;
  }
}

void GrpcAnswerRelay::sendAhead() {
  state_ = State::kDeclined;
  if (sink_ == nullptr || !contiguous_) return;
  // The body's whole buffer, most of it still being written (the client's promise,
  // http_client.h's AnswerRelay): only the header is read now.
  const codecs::Buffer& first = pieces_.segments().front();
  const codecs::Buffer body(first.owner(), first.data(), static_cast<size_t>(length_));
  codecs::StatusOr<codecs::InferResponse> response =
      codecs::BinaryTensorDecoder(limits_).decodeResponseAhead(body, header_length_);
  if (!response.ok()) return;  // answered whole: its decode says what is wrong, or is right
  response->model_name = std::string(client_model_);
  if (!client_version_.empty()) response->model_version = std::string(client_version_);
  codecs::StatusOr<codecs::BufferChain> message = codecs::ProtobufResponseEncoder().encode(*response);
  if (!message.ok() || message->size() > max_message_bytes_) return;
  message_bytes_ = message->size();
  arrival_ = std::make_shared<http::BodyArrival>(body.data(), length_);
  arrival_->advance(received_);
  state_ = State::kAhead;
  sink_->sendAhead(std::move(*message), arrival_);
}

std::optional<codecs::Buffer> GrpcAnswerRelay::body() const {
  if (state_ == State::kIdle) return std::nullopt;
  if (pieces_.empty()) return codecs::Buffer();
  if (!contiguous_) return pieces_.flatten();
  const codecs::Buffer& first = pieces_.segments().front();
  return codecs::Buffer(first.owner(), first.data(), static_cast<size_t>(received_));
}

bool PassthroughAnswerRelay::takesBlocks(size_t size) {
  if (sink_ == nullptr || size > max_message_bytes_) return false;  // answered whole, as before
  length_ = size;
  return true;
}

void PassthroughAnswerRelay::onBlock(codecs::Buffer block) {
  if (sink_ == nullptr) return;  // dropped: its window goes back to the upstream
  if (!growing_) {
    growing_ = true;
    sink_->sendGrowing(length_);
  }
  sent_ += block.size();
  sink_->sendPiece(std::move(block));
}

bool PassthroughAnswerRelay::complete(const codecs::MovableByteBuffer& answer) const {
  return growing_ && sent_ == length_ && answer.length() == 0;
}

}  // namespace infergate::gateway::frontends::grpc_detail
