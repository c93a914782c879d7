// ModelInfer and ModelStreamInfer on the raw byte path (PROTOCOL.md 11.4, 11.5).
//
// Both reactors follow one rule: after the constructor, the reactor's state is touched,
// and StartRead / StartWrite / Finish are called, only on the call's event loop. grpc's
// reactions (OnReadDone, OnWriteDone, OnCancel, OnDone) run on grpc's threads and only
// post to that loop (OnCancel also sets the atomic flag that stops the call's runners at
// once). OnDone posts the delete, so it runs after every task posted before it, and the
// runners of the call never emit once the flag is set (they check it on the same loop
// before each emission), so nothing names a deleted reactor.
//
//   ModelInfer:        decode (grpc thread) -> loop: refuse shm, repository.infer(),
//                      runExecution -> encode, toByteBuffer -> Finish
//
//   ModelStreamInfer:  OnReadDone: decode -> loop: onRequest: infer + runExecution,
//                                                 StartRead (the next request)
//                      emission -> Outgoing -> ordered slot (non-decoupled: request order)
//                                              or out_ directly (decoupled: as produced)
//                      pump(): one StartWrite at a time from out_; a terminal status
//                      (triton_grpc_error) or the end of the stream -> Finish

#include <deque>
#include <optional>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/shared_memory_refusal.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using ::grpc::ByteBuffer;
using Flag = std::shared_ptr<std::atomic<bool>>;

codecs::Status fromGrpc(const ::grpc::Status& status) {
  return codecs::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// An encoder failure on a response the gateway built itself is the gateway's fault
// (INTERNAL), except a response past the 2 GiB message limit (RESOURCE_EXHAUSTED).
codecs::Status encodeFailure(codecs::Status status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) return status;
  return codecs::internalError("cannot encode the response: ", codecs::messageOf(status));
}

codecs::StatusOr<codecs::InferRequest> decodeRequest(const Shared& shared,
                                                     const ByteBuffer& message,
                                                     std::string* id_on_error) {
  codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(message);
  if (!bytes.ok()) return bytes.status();
  codecs::StatusOr<codecs::InferRequest> request = shared.decoder.decode(*bytes);
  if (!request.ok() && id_on_error != nullptr) *id_on_error = peekRequestId(*bytes);
  return request;
}

// ---- ModelInfer -----------------------------------------------------------------------

class ModelInferReactor final : public ::grpc::ServerUnaryReactor {
 public:
  ModelInferReactor(std::shared_ptr<Shared> shared, ByteBuffer* response)
      : shared_(std::move(shared)), loop_(shared_->nextLoop()), response_(response) {}

  // grpc thread, before the reactor is returned: decode and run the model here (pure
  // CPU, never blocking); a response due at once is finished right here, without a hop
  // to the loop. Anything timed, and every error, continues on the loop.
  void start(const ::grpc::CallbackServerContext& context, const ByteBuffer& request) {
    ::grpc::Status restricted = shared_->checkRestricted(context, "inference");
    codecs::StatusOr<codecs::InferRequest> decoded =
        restricted.ok() ? decodeRequest(*shared_, request, nullptr) : fromGrpc(restricted);
    if (decoded.ok() && refuseSharedMemory(*decoded).ok()) {
      builtin::Execution execution = shared_->repository->infer(*decoded, /*streaming=*/false);
      if (isImmediate(execution)) {
        builtin::TimedResponse& only = execution.responses.front();
        return onEmission(Emission{std::move(only.response), true, only.from_model, false});
      }
      loop_.post([this, execution = std::move(execution)]() mutable { play(std::move(execution)); });
      return;
    }
    loop_.post([this, decoded = std::move(decoded)]() mutable { run(std::move(decoded)); });
  }

  void OnCancel() override {
    cancelled_->store(true);
    loop_.post([this] { finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled")); });
  }

  void OnDone() override {
    loop_.post([this] { delete this; });
  }

 private:
  void run(codecs::StatusOr<codecs::InferRequest> request) {
    if (cancelled_->load()) return;  // OnCancel's task finishes the call
    if (!request.ok()) return finish(grpcStatusFor(request.status()));
    codecs::Status shm = refuseSharedMemory(*request);
    if (!shm.ok()) return finish(grpcStatusFor(shm));
    play(shared_->repository->infer(*request, /*streaming=*/false));
  }

  static bool isImmediate(const builtin::Execution& execution) {
    return execution.responses.size() == 1 && execution.responses[0].delay.count() == 0 &&
           execution.complete_after.count() == 0;
  }

  // Loop thread.
  void play(builtin::Execution execution) {
    if (cancelled_->load()) return;  // OnCancel's task finishes the call
    runExecution(loop_, std::move(execution), cancelled_,
                 [this](Emission emission) { onEmission(std::move(emission)); });
  }

  // The loop thread, or grpc's thread on the immediate path.
  void onEmission(Emission emission) {
    if (finished_.load()) return;
    if (emission.empty) {  // not for a non-decoupled model; refuse rather than hang
      return finish(grpcStatusFor(codecs::internalError("the model completed without a response")));
    }
    if (!emission.response.ok()) return finish(grpcStatusFor(emission.response.status()));
    codecs::StatusOr<codecs::BufferChain> chain = shared_->encoder.encode(*emission.response);
    if (!chain.ok()) return finish(grpcStatusFor(encodeFailure(chain.status())));
    *response_ = codecs::toByteBuffer(*chain);
    finish(::grpc::Status::OK);
  }

  // Once, from whichever thread gets there first (the immediate path or the loop).
  void finish(const ::grpc::Status& status) {
    if (finished_.exchange(true)) return;
    Finish(status);
  }

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  ByteBuffer* response_;  // grpc's, valid until OnDone
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> finished_{false};
};

// ---- ModelStreamInfer -----------------------------------------------------------------

// One message to send, or the status that ends the stream (triton_grpc_error).
struct Outgoing {
  ByteBuffer message;
  std::optional<::grpc::Status> terminal;
};

// A request read from the stream, decoded on grpc's thread.
struct Incoming {
  codecs::StatusOr<codecs::InferRequest> request;
  std::string id_on_error;
};

// What an in-band error names: Triton copies these from the request.
struct RequestTag {
  std::string id, model_name, model_version;
  std::optional<uint64_t> slot;  // ordered position (non-decoupled), none when decoupled
};

class StreamInferReactor final : public ::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  StreamInferReactor(std::shared_ptr<Shared> shared, ::grpc::CallbackServerContext* context)
      : shared_(std::move(shared)), loop_(shared_->nextLoop()) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("triton_grpc_error");
    strict_ =
        it != metadata.end() && std::string_view(it->second.data(), it->second.size()) == "true";
    ::grpc::Status restricted = shared_->checkRestricted(*context, "inference");
    if (!restricted.ok()) {  // finished before any read, as Triton
      finish_called_ = true;
      reading_ = false;
      Finish(restricted);
      return;
    }
    StartRead(&read_buf_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      loop_.post([this] {
        reading_ = false;
        half_closed_ = true;
        pump();
      });
      return;
    }
    std::string id_on_error;
    codecs::StatusOr<codecs::InferRequest> request =
        decodeRequest(*shared_, read_buf_, &id_on_error);
    read_buf_.Clear();
    Incoming in{std::move(request), std::move(id_on_error)};
    loop_.post([this, in = std::move(in)]() mutable {
      reading_ = false;
      onRequest(std::move(in));
    });
  }

  void OnWriteDone(bool ok) override {
    loop_.post([this, ok] {
      writing_ = false;
      if (!ok) abandon();  // the client is gone
      pump();
    });
  }

  void OnCancel() override {
    cancelled_->store(true);
    loop_.post([this] {
      abandon();
      pump();
    });
  }

  void OnDone() override {
    loop_.post([this] { delete this; });
  }

 private:
  // ---- loop thread from here on ----

  void onRequest(Incoming in) {
    if (finish_called_ || abandoned_ || terminal_queued_) return;  // the stream is ending
    ++in_flight_;
    RequestTag tag;
    bool decoupled = false;
    if (in.request.ok()) {
      tag.id = in.request->id;
      tag.model_name = in.request->model_name;
      tag.model_version = in.request->model_version;
      auto model = shared_->repository->find(tag.model_name, tag.model_version);
      decoupled = model.ok() && (*model)->spec().decoupled;
    } else {
      tag.id = std::move(in.id_on_error);
    }
    if (!decoupled) {
      tag.slot = next_slot_++;
      ordered_.push_back(Slot{*tag.slot, false, {}});
    }
    codecs::Status refused =
        in.request.ok() ? refuseSharedMemory(*in.request) : in.request.status();
    if (!refused.ok()) {
      onEmission(tag, Emission{std::move(refused), true, false, false});
    } else {
      builtin::Execution execution = shared_->repository->infer(*in.request, /*streaming=*/true);
      runExecution(loop_, std::move(execution), cancelled_,
                   [this, tag](Emission emission) { onEmission(tag, std::move(emission)); });
    }
    maybeRead();
  }

  void onEmission(const RequestTag& tag, Emission emission) {
    if (finish_called_ || abandoned_) return;
    std::optional<Outgoing> item = toOutgoing(tag, emission);
    if (emission.final && in_flight_ > 0) --in_flight_;
    if (tag.slot) {
      Slot& slot = ordered_[*tag.slot - ordered_.front().seq];
      if (item) slot.items.push_back(std::move(*item));
      slot.done = slot.done || emission.final;
      while (!ordered_.empty() && ordered_.front().done) {
        for (Outgoing& o : ordered_.front().items) out_.push_back(std::move(o));
        ordered_.pop_front();
      }
    } else if (item) {
      out_.push_back(std::move(*item));
    }
    pump();
    maybeRead();
  }

  // The message for one emission: a response, an in-band error, or (triton_grpc_error)
  // the status that ends the stream. A bare completion sends nothing.
  std::optional<Outgoing> toOutgoing(const RequestTag& tag, const Emission& emission) {
    if (emission.empty) return std::nullopt;
    codecs::Status error;
    if (emission.response.ok()) {
      auto chain = shared_->encoder.encodeStream(&*emission.response, "");
      if (chain.ok()) return Outgoing{codecs::toByteBuffer(*chain), std::nullopt};
      error = encodeFailure(chain.status());
    } else {
      error = emission.response.status();
    }
    if (strict_) {
      terminal_queued_ = true;
      return Outgoing{ByteBuffer(), grpcStatusFor(error)};
    }
    // In-band: infer_response carries the id; an error raised by the model also the
    // request's model name and version and triton_final_response (PROTOCOL 11.5).
    codecs::InferResponse response;
    response.id = tag.id;
    if (emission.from_model) {
      response.model_name = tag.model_name;
      response.model_version = tag.model_version;
      response.parameters.set(std::string(codecs::param::kFinalResponse), true);
    }
    std::string_view message = codecs::messageOf(error);
    auto chain =
        shared_->encoder.encodeStream(&response, message.empty() ? "unknown error" : message);
    if (!chain.ok()) return Outgoing{ByteBuffer(), grpcStatusFor(encodeFailure(chain.status()))};
    return Outgoing{codecs::toByteBuffer(*chain), std::nullopt};
  }

  // One write at a time; then, with nothing left to write, the end of the stream.
  void pump() {
    if (finish_called_ || writing_) return;
    if (!out_.empty()) {
      if (out_.front().terminal) return finish(*out_.front().terminal);
      write_buf_ = std::move(out_.front().message);
      out_.pop_front();
      writing_ = true;
      StartWrite(&write_buf_);
      return;
    }
    if (abandoned_) return finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled"));
    if (half_closed_ && in_flight_ == 0 && ordered_.empty()) finish(::grpc::Status::OK);
  }

  void maybeRead() {
    if (reading_ || half_closed_ || finish_called_ || abandoned_ || terminal_queued_) return;
    if (in_flight_ >= shared_->options.max_stream_requests_in_flight) return;
    reading_ = true;
    StartRead(&read_buf_);
  }

  // Cancelled, or a write failed: nothing more will reach the client.
  void abandon() {
    abandoned_ = true;
    cancelled_->store(true);
    out_.clear();
    ordered_.clear();
  }

  void finish(::grpc::Status status) {  // by value: it may come from out_, cleared here
    finish_called_ = true;
    cancelled_->store(true);  // stops the runners still playing
    out_.clear();
    ordered_.clear();
    Finish(status);
  }

  struct Slot {
    uint64_t seq;
    bool done;
    std::vector<Outgoing> items;
  };

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  bool strict_ = false;  // triton_grpc_error: true

  ByteBuffer read_buf_;  // grpc thread between StartRead and OnReadDone, else the loop's
  ByteBuffer write_buf_;
  bool reading_ = true;  // a read is outstanding
  bool writing_ = false;
  bool half_closed_ = false;
  bool abandoned_ = false;
  bool terminal_queued_ = false;
  bool finish_called_ = false;
  size_t in_flight_ = 0;  // requests not yet complete
  uint64_t next_slot_ = 0;
  std::deque<Slot> ordered_;  // non-decoupled requests not yet flushed, in request order
  std::deque<Outgoing> out_;  // ready to write, in order
};

}  // namespace

::grpc::ServerUnaryReactor* InferenceService::ModelInfer(Ctx* context, const ByteBuffer* request,
                                                         ByteBuffer* response) {
  auto* reactor = new ModelInferReactor(shared_, response);
  reactor->start(*context, *request);
  return reactor;
}

::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer>* InferenceService::ModelStreamInfer(
    Ctx* context) {
  return new StreamInferReactor(shared_, context);
}

}  // namespace infergate::gateway::frontends::grpc_detail
