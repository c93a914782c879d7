#pragma once

// ModelInfer, whichever server carries the call (not a public header): ModelInferCall is
// the whole of the RPC's logic (grpc_model_infer.cc tells the paths); a server derives
// from it and supplies the call's context and the way its reply goes out:
//
//   grpc++              InferenceService::ModelInfer's reactor (grpc_model_infer.cc)
//   the native server   NativeModelInfer (grpc_native_server.cc)
//
// Lifetime: a reference count, the server's own reference (released by engineDone())
// plus one per upstream call in flight; the object is deleted on its loop, after every
// task naming it, when the last one goes.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/decoded_forward.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/grpc_answer_relay.h"
#include "gateway/frontends/grpc_infer_common.h"
#include "gateway/shm_binding.h"

namespace infergate::gateway::frontends::grpc_detail {

// What a finished call sends: its status, its message (when OK) and the metadata that
// goes with them.
struct Reply {
  ::grpc::Status status;
  codecs::MovableByteBuffer message;
  // The message went ahead (ModelInferCall::sendAhead) and `message` is empty: only the
  // status is left to send. A status other than OK then cuts it short.
  bool sent_ahead = false;
  std::vector<std::pair<std::string, std::string>> initial_metadata;
  std::vector<std::pair<std::string, std::string>> trailing_metadata;
};

class ModelInferCall : private GrpcAnswerRelay::Sink {
 public:
  ModelInferCall(const ModelInferCall&) = delete;
  ModelInferCall& operator=(const ModelInferCall&) = delete;

  // The server's thread, once, before anything else: routes on the peeked model; a
  // builtin upstream decodes and runs here (pure CPU, never blocking) and a response due
  // at once is replied right here; a gRPC upstream gets the message as it came.
  void start(codecs::MovableByteBuffer request);
  // The same for a message still arriving (the server's thread, which is the loop's):
  // `request` references its storage, of which `arrival` says how much is in, and `head`
  // is its first bytes, every field before the tensors (codecs::findModelInferHead). The
  // call is admitted and routed on the head at once (a head that does not route waits for
  // the whole message, which routes the call). Toward a gRPC upstream configured
  // `stream_requests` that takes the message as it is, the upstream call starts now and
  // sends the bytes as they come; every other path waits for the whole message. The
  // server checks that the whole message routes as its head did, and fails the arrival
  // (the upstream call is then cancelled) when the rest never comes.
  void startArriving(codecs::MovableByteBuffer request, codecs::Buffer head,
                     std::shared_ptr<http::BodyArrival> arrival);
  // The client went away or its deadline passed (any thread): stops the upstream call
  // and replies CANCELLED unless a reply was made.
  void cancel();
  // The server is done with the call (any thread): no reply() after this one.
  void engineDone() { release(); }

 protected:
  // `context` must outlive the server's reference; `loop` runs the call's tasks.
  ModelInferCall(std::shared_ptr<Shared> shared, http::EventLoop& loop, const CallContext& context);
  virtual ~ModelInferCall() = default;

  // Once per call, from whichever thread finished it (the server's, the loop's, an
  // upstream client's).
  virtual void reply(Reply reply) = 0;
  // A server that can send a message while its bytes still arrive (the native one) says so,
  // and then gets, on the loop, at most once and before reply(): the message, which
  // references bytes `arrival` says are not all in yet, with the reply's initial metadata.
  // Its reply() then has Reply::sent_ahead (grpc_answer_relay.h).
  virtual bool sendsAhead() const { return false; }
  virtual void startAhead(std::vector<std::pair<std::string, std::string>> initial_metadata,
                          codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival) {}
  // The same for a message of `length` bytes whose Buffers follow (growAhead), in order:
  // a passthrough answer relayed in blocks.
  virtual void startGrowing(std::vector<std::pair<std::string, std::string>> initial_metadata, size_t length) {}
  virtual void growAhead(codecs::Buffer piece) {}

  http::EventLoop& loop() const { return loop_; }

 private:
  bool admit(size_t length);
  codecs::Status route(const codecs::MovableByteBuffer& peeked);
  bool passesThrough(size_t length) const;
  void proceed(codecs::MovableByteBuffer& request);
  void passthrough(codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival = nullptr);
  void onGrpcAnswer(codecs::Status status, codecs::MovableByteBuffer answer);
  // The upstream's answer with the client's model name and version, for a renaming route.
  codecs::StatusOr<codecs::BufferChain> renameAnswer(const codecs::MovableByteBuffer& answer) const;
  std::shared_ptr<upstream::AnswerProgress> passthroughRelay();
  void mirror(const codecs::MovableByteBuffer& message);
  void forwardDecodedMessage(const codecs::Buffer& bytes);
  void onDecodedAnswer(codecs::StatusOr<codecs::InferResponse> response);
  // GrpcAnswerRelay::Sink: the relay's message, to the server (loop thread).
  void sendAhead(codecs::BufferChain message, std::shared_ptr<http::BodyArrival> arrival) override;
  void sendGrowing(size_t length) override;
  void sendPiece(codecs::Buffer piece) override;
  std::vector<std::pair<std::string, std::string>> aheadMetadata() const;
  std::shared_ptr<DecodedAnswerRelay> relayFor(const HandoffRequest& request);
  codecs::StatusOr<codecs::InferRequest> decodeBound(const codecs::Buffer& bytes);
  void run(codecs::StatusOr<codecs::InferRequest> request);
  void play(builtin::Execution execution);
  void onEmission(Emission emission);
  void finishUpstreamError(const codecs::Status& status);
  void finish(const ::grpc::Status& status, codecs::MovableByteBuffer message = {});

  void hold() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release();
  void setUpstreamCall(std::function<void()> cancel);
  void cancelUpstream();

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  const CallContext& context_;
  Decision decision_;
  std::optional<tls::Principal> principal_;  // who the call is from, once admitted
  bool names_regions_ = false;  // the message names client shared-memory regions
  telemetry::RequestInfo info_;  // written in the call's order (start, answer, finish)
  ShmBinding binding_;  // set before any upstream call or execution starts; read after
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> finished_{false};
  std::atomic<int> refs_{1};  // the server's + one per upstream call in flight
  std::vector<std::pair<std::string, std::string>> trailing_;  // before finish, on its thread
  std::mutex upstream_mu_;
  std::function<void()> cancel_upstream_;
  std::shared_ptr<DecodedCall> decoded_call_;  // toward HTTP; loop thread
  bool decoded_answered_ = false;             // loop thread
  // Toward HTTP, an answer that may go on as it arrives (grpc_answer_relay.h); loop thread.
  std::optional<GrpcAnswerRelay> relay_;
  // Toward gRPC, passed through: an answer that may go on as it arrives; loop thread.
  std::optional<PassthroughAnswerRelay> passthrough_relay_;
  bool sent_ahead_ = false;
  // Toward gRPC, a renaming route's answer renamed for passive health (answer_ok) before
  // onGrpcAnswer, which follows at once on the same thread, takes it.
  std::optional<codecs::StatusOr<codecs::BufferChain>> renamed_;
};

}  // namespace infergate::gateway::frontends::grpc_detail
