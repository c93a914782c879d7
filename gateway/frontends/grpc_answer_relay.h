#pragma once

// A gRPC client's ModelInfer answered by an HTTP upstream (binary-tensor extension), sent on
// as a ModelInferResponse while the upstream's body is still arriving. Internal to the gRPC
// frontend (grpc_model_infer.cc); the mirror of http_binary_relay.h.
//
// Without it the gateway reads the upstream's whole body, decodes it, encodes the message,
// and only then starts the client's transfer: for a 64 MiB output, one loopback transfer
// after the other. With it:
//
//   the upstream's head is in          nothing yet (a status other than 200, a
//   (HttpUpstreamCallbacks::relay)     Content-Encoding, or no Inference-Header-Content-
//                                      Length declines: the body is gathered and answered
//                                      whole, as before)
//   its JSON header is in              decoded ahead of the tensors
//                                      (BinaryTensorDecoder::decodeResponseAhead): each
//                                      output's bytes are a slice of the body's buffer,
//                                      still being written. The message is encoded from
//                                      that by the same encoder as a whole answer, with the
//                                      client's model name, so its bytes are the same; the
//                                      server sends its HEADERS and the message's head
//   every 256 KiB that lands           the message's bytes up to there, as slices of the
//                                      body's buffer (no copy): the server frames DATA up to
//                                      the first byte not yet in (an http::BodyArrival the
//                                      relay advances)
//   the call ends well                 the rest, then grpc-status 0
//   the call fails                     the status follows what was sent, the message never
//                                      whole: no client takes a cut answer for a complete one
//
// It applies only where the message is exactly the body's tensors behind a head: a server
// that can send a message in pieces (the native one, not grpc++), an upstream of
// `http_format: binary`, no shared memory and no handoff, no classification; and only to an
// answer whose outputs are all binary and of fixed-size datatypes (BYTES would have to be
// read to be checked), a JSON header within 1 MiB, a message within the client's
// max_send_message_bytes. Every other answer is gathered whole and answered as before.
//
// Threads: the call's loop (the HTTP client's, and the stream's).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "codecs/buffer.h"
#include "codecs/limits.h"
#include "gateway/decoded_forward.h"
#include "gateway/http/body_arrival.h"

namespace infergate::gateway::frontends::grpc_detail {

class GrpcAnswerRelay final : public DecodedAnswerRelay {
 public:
  // Where the message goes: the call, which hands it to its server.
  class Sink {
   public:
    // `message` references bytes that `arrival` says are not all in yet. Once per call.
    virtual void sendAhead(codecs::BufferChain message, std::shared_ptr<http::BodyArrival> arrival) = 0;
    // Instead of sendAhead: a message of `length` bytes whose Buffers follow (sendPiece),
    // in order, each let go of once sent. Once per call.
    virtual void sendGrowing(size_t length) = 0;
    virtual void sendPiece(codecs::Buffer piece) = 0;

   protected:
    ~Sink() = default;
  };

  // The JSON header is read ahead only within this many bytes.
  static constexpr uint64_t kMaxHeaderBytes = 1024 * 1024;

  // `client_model` and `client_version` are what the answer shows ("" keeps the
  // upstream's version), viewed: the owner keeps them (the call, whose decision they are).
  GrpcAnswerRelay(Sink& sink, std::string_view client_model, std::string_view client_version,
                  const codecs::DecodeLimits& limits, uint64_t max_message_bytes)
      : sink_(&sink),
        client_model_(client_model),
        client_version_(client_version),
        limits_(limits),
        max_message_bytes_(max_message_bytes) {}

  // The call is done with it: nothing more goes to the sink.
  void detach() { sink_ = nullptr; }
  // Sent ahead, and every byte of the message arrived.
  bool arrivedWhole() const { return arrival_ != nullptr && arrival_->complete(); }
  uint64_t messageBytes() const { return message_bytes_; }

  // upstream::AnswerRelay
  void onHead(int status, const http::HeaderList& headers, uint64_t length) override;
  void onPiece(codecs::Buffer piece) override;
  // DecodedAnswerRelay
  bool sentOn() const override { return state_ == State::kAhead; }
  std::optional<codecs::Buffer> body() const override;

 private:
  enum class State {
    kIdle,      // no head yet
    kHeader,    // a 200 with a binary body: waiting for its JSON header
    kDeclined,  // gathered whole
    kAhead,     // the message went to the sink
  };

  void sendAhead();

  Sink* sink_;
  std::string_view client_model_, client_version_;
  codecs::DecodeLimits limits_;
  uint64_t max_message_bytes_;
  State state_ = State::kIdle;
  uint64_t length_ = 0;         // the body's
  uint64_t header_length_ = 0;  // Inference-Header-Content-Length
  uint64_t received_ = 0;
  uint64_t message_bytes_ = 0;
  // The pieces so far, and whether they lie end to end in one buffer from the first's start
  // (the client's promise; the body is then rebuilt without a copy).
  codecs::BufferChain pieces_;
  bool contiguous_ = true;
  std::shared_ptr<http::BodyArrival> arrival_;
};

// A gRPC client's ModelInfer passed through to a gRPC upstream, answered while the
// upstream's message still arrives: the message is the upstream's bytes, sent on from the
// blocks the worker's own gRPC client reads them into (upstream::AnswerProgress::
// takesBlocks), so that a large answer's two transfers, upstream to gateway and gateway to
// client, overlap instead of following one another, the gateway holds a window of it, not
// all of it, and a slow client makes the upstream wait:
//
//   the first block        the sink gets the message's length (sendGrowing), then the block
//   every block            goes to the sink (sendPiece), let go of once sent
//   the call's end         complete(answer): every block of the message went; any other
//                          end (an error, a message short) is the caller's to send as the
//                          status that cuts the message short
//
// A message it does not take in blocks is answered whole: its progress sends nothing.
//
// It applies only where the message goes on unchanged: a server that can send a message in
// pieces (the native one), a route without a model or version rewrite (the answer's
// model_name is the upstream's), the worker's own client (grpc++ delivers only whole
// answers: no progress comes), a message within the client's max_send_message_bytes (one
// past it is answered whole, with its limit error). A message of upstream::kRelayStepBytes
// or less is never offered in blocks and goes whole, as before.
//
// Threads: the call's loop (the client's, and the stream's).
class PassthroughAnswerRelay final : public upstream::AnswerProgress {
 public:
  PassthroughAnswerRelay(GrpcAnswerRelay::Sink& sink, uint64_t max_message_bytes)
      : sink_(&sink), max_message_bytes_(max_message_bytes) {}

  // The call is done with it: nothing more goes to the sink.
  void detach() { sink_ = nullptr; }
  bool sentAhead() const { return growing_; }
  // The call answered OK with `answer` after the message went ahead: true when every block
  // of it went (the client's own answer is then empty).
  bool complete(const codecs::MovableByteBuffer& answer) const;
  // The message's bytes that went.
  size_t messageBytes() const { return sent_; }

  // upstream::AnswerProgress
  void onProgress(const codecs::MutableBuffer&, size_t, size_t) override {}  // taken whole
  bool takesBlocks(size_t size) override;
  void onBlock(codecs::Buffer block) override;

 private:
  GrpcAnswerRelay::Sink* sink_;
  uint64_t max_message_bytes_;
  // The message's length (from takesBlocks), whether the sink has it, and the bytes sent
  // of it.
  size_t length_ = 0;
  bool growing_ = false;
  size_t sent_ = 0;
};

}  // namespace infergate::gateway::frontends::grpc_detail
