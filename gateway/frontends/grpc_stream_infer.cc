// ModelStreamInfer (PROTOCOL.md 11.5): one bidi reactor per stream, each message routed
// on its own peeked model (grpc_infer_common.h has the threading rule both reactors
// follow).
//
//   OnReadDone: peek + route (+ decode unless gRPC) -> loop: onRequest
//     builtin  infer + runExecution; non-decoupled answers in request order (ordered
//              slots), decoupled as produced
//     grpc     written to that upstream's stream (one per upstream endpoint, opened on
//              first use, half-closed with the client's); its answers relayed as they
//              come, in its own order
//     http     one /infer exchange per request, answered as it comes
//     a message naming client shm regions, toward gRPC: decoded, one ModelInfer of its
//              own on the decoded path (decoded_forward.h), answered as it comes
//   pump(): one StartWrite at a time from out_; a terminal status (triton_grpc_error) or
//   the end of the stream -> Finish
//
// Telemetry: each message is a request of its own (its series, access line and id), from
// its read to its final answer (an error, a leg failing, the stream ending: CANCELLED);
// the stream itself is one gRPC API call, counted when it finishes.

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codecs/grpc_byte_buffer.h"
#include "codecs/stream_response_peek.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/decoded_forward.h"
#include "gateway/frontends/grpc_infer_common.h"
#include "gateway/handoff_request.h"
#include "gateway/shm_binding.h"
#include "gateway/upstream/model_rename.h"
#include "gateway/upstream/fleet_call.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using ::grpc::ByteBuffer;

// One message to send, or the status that ends the stream (triton_grpc_error).
struct Outgoing {
  ByteBuffer message;
  std::optional<::grpc::Status> terminal;
};

// One stream request's telemetry; null when nothing records.
using InfoPtr = std::shared_ptr<telemetry::RequestInfo>;

// A request read from the stream, decoded on grpc's thread.
struct Incoming {
  codecs::StatusOr<codecs::InferRequest> request;  // decoded: every path but a stream leg
  std::string id_on_error;
  std::optional<Decision> decision;  // unset when the request could not be routed
  ByteBuffer raw;                    // a stream leg's: the message to send as is
  bool leg = false;                  // goes on the stream to a gRPC upstream
  InfoPtr info;
  size_t bytes = 0;                  // the message's, as it came
};

// What an in-band error names: Triton copies these from the request.
struct RequestTag {
  std::string id, model_name, model_version;
  std::optional<uint64_t> slot;  // ordered position (non-decoupled), none when decoupled
  // The outputs to write into client regions (and the regions held until the request is
  // done); null when the request names none.
  std::shared_ptr<const ShmBinding> shm;
  InfoPtr info;
  size_t bytes = 0;  // the request message's: counted in flight until its final answer
};

class StreamInferReactor final : public ::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  StreamInferReactor(std::shared_ptr<Shared> shared, ::grpc::CallbackServerContext* context)
      : shared_(std::move(shared)), loop_(shared_->nextLoop()), context_(context), call_context_(*context, shared_->relayed) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("triton_grpc_error");
    strict_ =
        it != metadata.end() && std::string_view(it->second.data(), it->second.size()) == "true";
    if (shared_->recorder && shared_->recorder->active()) {
      recorder_ = shared_->recorder.get();
      shared_->startInfo(call_context_, per_request_);  // each message sets its own start
    }
    Shared::Admission admitted = shared_->admit(call_context_, "inference", "ModelStreamInfer", &per_request_);
    if (!admitted.status.ok()) {  // finished before any read, as Triton
      finish_called_ = true;
      reading_ = false;
      if (shared_->recorder) shared_->recorder->grpcCall(kMethod, admitted.status.error_code(), start_);
      Finish(admitted.status);
      return;
    }
    principal_ = std::move(admitted.principal);
    StartRead(&read_buf_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      loop_.post([this] {
        reading_ = false;
        half_closed_ = true;
        for (auto& [key, leg] : legs_) leg.stream->writesDone();
        pump();
      });
      return;
    }
    Incoming in = route(read_buf_);
    read_buf_.Clear();
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
      maybeRead();  // reading may have waited for the client to take its answers
    });
  }

  void OnCancel() override {
    cancelled_->store(true);
    loop_.post([this] {
      abandon();
      pump();
    });
  }

  void OnDone() override { loop_.post([this] { release(); }); }

 private:
  // Whether the access log needs a stream leg's request id from the message itself (no
  // x-request-id came with the stream); only then is a passthrough message flattened.
  bool wantsRequestId(const Incoming& in) const {
    return in.info && recorder_->accessLog() && in.info->request_id.empty();
  }

  // grpc thread: route each message on its peeked model; decode it unless it goes to a
  // gRPC upstream, which gets the bytes as they came.
  Incoming route(const ByteBuffer& message) {
    Incoming in{codecs::InferRequest(), {}, std::nullopt, {}, false, nullptr, message.Length()};
    if (recorder_) {
      in.info = std::make_shared<telemetry::RequestInfo>(per_request_);
      in.info->start = telemetry::Clock::now();
      in.info->request_bytes = message.Length();
    }
    bool names_regions = false;
    codecs::StatusOr<Decision> decision = routeMessage(*shared_, message, call_context_, caller(), &names_regions);
    // A stream leg to a gRPC upstream relays messages as they are; a message naming client
    // regions never goes there (the upstream would resolve the name in its own table): it
    // is decoded, its regions read by the gateway, and sent as a ModelInfer of its own.
    const bool leg = decision.ok() &&
                     decision->upstream->protocol() == upstream::Upstream::Protocol::kGrpc &&
                     !names_regions;
    if (in.info && decision.ok()) {
      recorder_->routed(*in.info, seriesKeyOf(telemetry::Protocol::kGrpc, *decision));
      if (!leg && decision->upstream->protocol() != upstream::Upstream::Protocol::kBuiltin) {
        decision->pick.stats = in.info->callStats();
      }
    }
    bool passthrough = leg && !decision->rewrites() && !wantsRequestId(in);
    codecs::StatusOr<codecs::Buffer> bytes =
        passthrough ? codecs::StatusOr<codecs::Buffer>(codecs::Buffer())
                    : codecs::fromByteBuffer(message);
    if (!decision.ok() || !bytes.ok()) {
      in.request = decision.ok() ? bytes.status() : decision.status();
      if (bytes.ok() && !passthrough) in.id_on_error = peekRequestId(*bytes);
      return in;
    }
    in.leg = leg;
    if (leg) {
      if (wantsRequestId(in)) in.info->request_id = peekRequestId(*bytes);
      in.raw = message;
      if (decision->rewrites()) {
        auto rewritten = upstream::rewriteModelFields(*bytes, decision->upstream_model,
                                                      decision->upstream_version);
        if (!rewritten.ok()) {
          in.request = rewritten.status();
          in.id_on_error = peekRequestId(*bytes);
          return in;
        }
        in.raw = codecs::toByteBuffer(*rewritten);
      }
    } else {
      in.request = shared_->decoder.decode(*bytes);
      if (!in.request.ok()) {
        in.id_on_error = peekRequestId(*bytes);
      } else {
        in.request->model_name = decision->upstream_model;
        in.request->model_version = decision->upstream_version;
      }
    }
    in.decision = std::move(*decision);
    return in;
  }

  // ---- loop thread from here on ----

  // The reactor is deleted once grpc is done with it and every upstream stream has ended
  // (their callbacks name it). Loop thread.
  void hold() { ++refs_; }
  void release() {
    if (--refs_ != 0) return;
    // What never reached the client (normally nothing: finish or abandon cleared it).
    shared_->stream_answer_bytes.fetch_sub(static_cast<int64_t>(unsent_bytes_), std::memory_order_relaxed);
    if (legs_stalled_.exchange(false)) shared_->paused_streams.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

  // Answers waiting for this stream's client change by `delta` bytes; the frontend's total
  // (GrpcFrontend::streamAnswerBytes) with them, and the legs' pause.
  void changeUnsent(int64_t delta) {
    unsent_bytes_ = static_cast<size_t>(static_cast<int64_t>(unsent_bytes_) + delta);
    answers_pending_.fetch_add(delta);
    shared_->stream_answer_bytes.fetch_add(delta, std::memory_order_relaxed);
    resumeLegsOnceDrained();
  }

  // One stream per gRPC upstream endpoint, opened by the first request placed there,
  // carrying all later ones; the client's triton_grpc_error choice travels with it so
  // errors end streams the same way on both legs. Each request is placed by the fleet
  // (a sequence stays on its endpoint) and holds its slot until its final answer.
  struct LegRequest {
    upstream::EndpointLease lease;
    InfoPtr info;
    telemetry::Clock::time_point written;
  };
  struct UpstreamLeg {
    std::shared_ptr<upstream::GrpcStream> stream;
    std::shared_ptr<upstream::Endpoint> endpoint;
    Decision decision;  // of the request that opened it
    // Upstream model name -> the name the client used, for every rewritten request sent
    // on this leg: answers carry the upstream's name in their model_name. (Two public
    // names aliasing one upstream model on one stream: the latest wins.)
    std::map<std::string, std::string, std::less<>> renames;
    // The requests written whose final answer has not come back, oldest first: each gets
    // its in-band error if the leg fails.
    std::deque<LegRequest> outstanding;
  };
  using LegKey = const upstream::Endpoint*;

  UpstreamLeg& legFor(const Decision& d, const std::shared_ptr<upstream::Endpoint>& endpoint) {
    LegKey key = endpoint.get();
    auto it = legs_.find(key);
    if (it != legs_.end()) return it->second;
    upstream::GrpcCallOptions options;
    options.metadata = shared_->router->forwardedMetadata(context_->client_metadata(), true);
    if (strict_) options.metadata.emplace_back("triton_grpc_error", "true");
    if (context_->deadline() != std::chrono::system_clock::time_point::max()) {
      options.deadline = context_->deadline();
    }
    upstream::GrpcStreamCallbacks callbacks;
    callbacks.on_message = [this, key](ByteBuffer message) {
      // Counted before it is posted: the stall it may cause is undone by the loop, which
      // looks after this message's task at the latest (changeUnsent).
      const auto bytes = static_cast<int64_t>(message.Length());
      if (answers_pending_.fetch_add(bytes) + bytes >= static_cast<int64_t>(kMaxUnsentBytes) &&
          !legs_stalled_.exchange(true)) {
        shared_->paused_streams.fetch_add(1, std::memory_order_relaxed);
      }
      loop_.post([this, key, bytes, message = std::move(message)]() mutable {
        answers_pending_.fetch_sub(bytes);
        onUpstreamMessage(key, std::move(message));
      });
    };
    callbacks.keep_reading = [this] { return !legs_stalled_.load(); };
    callbacks.on_written = [this] {
      // Only when reading waits for a leg's upstream: no task per message otherwise.
      if (waiting_on_leg_.exchange(false)) loop_.post([this] { maybeRead(); });
    };
    callbacks.on_done = [this, key](::grpc::Status status) {
      loop_.post([this, key, status = std::move(status)] {
        onUpstreamDone(key, status);
        release();
      });
    };
    hold();
    auto& leg = legs_[key];
    leg.stream = endpoint->grpc()->stream(kStreamMethod, std::move(options), std::move(callbacks));
    leg.endpoint = endpoint;
    leg.decision = d;
    return leg;
  }

  void onUpstreamMessage(LegKey key, ByteBuffer message) {
    if (finish_called_ || abandoned_) return;
    auto it = legs_.find(key);
    bool counting = it != legs_.end() && !it->second.outstanding.empty();
    bool renaming = it != legs_.end() && !it->second.renames.empty();
    // One contiguous view of the answer serves both reads (joined only when multi-slice).
    codecs::StatusOr<codecs::Buffer> flat =
        counting || renaming ? codecs::fromByteBuffer(message) : codecs::Buffer();
    if (counting) {
      // A decoupled model's answers count toward its oldest open request.
      LegRequest& oldest = it->second.outstanding.front();
      if (oldest.info) oldest.info->response_bytes += message.Length();
      const codecs::StreamAnswer answer = flat.ok() ? codecs::peekStreamAnswer(flat->span()) : codecs::StreamAnswer{false, false};
      if (answer.final) {
        oldest.lease.finish(upstream::Outcome::kSuccess);
        if (oldest.info) oldest.info->callStats()->upstream = telemetry::Clock::now() - oldest.written;
        closeRequest(oldest.info, answer.error ? kInBandErrorCode : ::grpc::StatusCode::OK);
        it->second.outstanding.pop_front();
      }
    }
    if (renaming) {
      std::optional<std::string> upstream_model = flat.ok() ? codecs::peekStreamResponseModel(flat->span()) : std::nullopt;
      auto hit = upstream_model ? it->second.renames.find(*upstream_model) : it->second.renames.end();
      if (hit != it->second.renames.end()) {
        auto renamed = upstream::rewriteStreamModelFields(*flat, hit->second, std::nullopt);
        if (renamed.ok()) message = codecs::toByteBuffer(*renamed);
      }
    }
    queueOut(Outgoing{std::move(message), std::nullopt});
    pump();
  }

  // An upstream stream ended: after the client's half-close that is its normal end; any
  // other end is reported (in-band, or as the stream's status with triton_grpc_error).
  void onUpstreamDone(LegKey key, const ::grpc::Status& status) {
    auto it = legs_.find(key);
    if (it == legs_.end()) return pump();
    UpstreamLeg leg = std::move(it->second);
    legs_.erase(it);
    const size_t unanswered = leg.outstanding.size();
    for (LegRequest& request : leg.outstanding) {
      request.lease.finish(upstream::outcomeOfGrpc(status.error_code()));
      // Ended without its answer: an error even when the leg itself ended OK.
      closeRequest(request.info, status.ok() ? kInBandErrorCode : status.error_code());
    }
    if (finish_called_ || abandoned_) return pump();
    if (!status.ok()) {
      codecs::Status error =
          upstream::toUpstreamStatus(status, leg.decision.upstream->name(), leg.endpoint->key());
      if (strict_) {
        terminal_queued_ = true;
        queueOut(Outgoing{ByteBuffer(), publicGrpcStatus(error, leg.decision)});
      } else {
        // One in-band error per request the leg took and never finished answering.
        codecs::InferResponse response;
        auto chain = shared_->encoder.encodeStream(&response, codecs::messageOf(error));
        for (size_t i = 0; chain.ok() && i < unanswered; ++i) {
          queueOut(Outgoing{codecs::toByteBuffer(*chain), std::nullopt});
        }
      }
    }
    pump();
    maybeRead();
  }

  // An HTTP upstream answers each stream request as one /infer exchange.
  // A stream's requests reach Triton in order, and a sequence's state depends on it;
  // separate HTTP exchanges on a connection pool do not keep order. So requests carrying
  // a sequence_id go one at a time (per stream, in arrival order); the others at once.
  struct QueuedHttp {
    RequestTag tag;
    upstream::HttpUpstreamRequest out;
    Decision decision;
  };

  void sendOverHttp(const RequestTag& tag, codecs::InferRequest& request, const Decision& d) {
    auto out = httpInferRequest(*shared_, request, d, *d.upstream, call_context_);
    if (!out.ok()) return onEmission(tag, Emission{out.status(), true, false, false});
    bool ordered = request.parameters.find(codecs::param::kSequenceId) != nullptr;
    if (ordered && sequence_busy_) {
      sequence_queue_.push_back(QueuedHttp{tag, std::move(*out), d});
      return;
    }
    startHttp(tag, std::move(*out), d, ordered);
  }

  void startHttp(const RequestTag& tag, upstream::HttpUpstreamRequest out, const Decision& d,
                 bool ordered) {
    if (ordered) sequence_busy_ = true;
    uint64_t id = next_http_id_++;
    upstream::HttpUpstreamCallbacks callbacks;
    // A 200 is read before passive health hears of the attempt (garbage counts against its
    // endpoint); on_complete follows at once and takes what was read.
    upstream::HttpAnswerCheck answer_ok = [this, target = d.upstream](const upstream::HttpUpstreamResponse& r) {
      return http_read_.emplace(httpInferAnswer(*shared_, r, target->name())).ok();
    };
    callbacks.on_complete = [this, tag, id, d, ordered](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      // Taken first: the next sequence request, started below, may complete at once.
      std::optional<codecs::StatusOr<codecs::InferResponse>> read = std::exchange(http_read_, std::nullopt);
      http_calls_.erase(id);
      if (ordered) {
        sequence_busy_ = false;
        if (!sequence_queue_.empty()) {
          QueuedHttp next = std::move(sequence_queue_.front());
          sequence_queue_.pop_front();
          startHttp(next.tag, std::move(next.out), next.decision, true);
        }
      }
      codecs::StatusOr<codecs::InferResponse> answer =
          !r.ok() ? codecs::StatusOr<codecs::InferResponse>(r.status())
          : read  ? std::move(*read)
                  : httpInferAnswer(*shared_, *r, d.upstream->name());
      if (answer.ok()) {
        answer->model_name = d.client_model;
        if (!d.versionShown().empty()) answer->model_version = d.versionShown();
        // Triton marks every streamed response of a model (PROTOCOL 9.5).
        answer->parameters.set(std::string(codecs::param::kFinalResponse), true);
      }
      onEmission(tag, Emission{std::move(answer), true, true, false});
    };
    http_calls_[id] = upstream::fleetHttp(d.upstream->fleet(), d.upstream->http(loop_), loop_,
                                          std::move(out), d.pick, std::move(callbacks), std::move(answer_ok));
  }

  // A message that names client regions, toward a gRPC upstream: it goes the way a
  // ModelInfer naming them goes (decoded_forward.h: regions read or handed over by the
  // gateway, outputs written back), as a call of its own rather than on the stream leg,
  // which relays messages untouched; its answer (or error: a decoupled model refuses
  // ModelInfer) comes back in-band as it comes.
  void sendOverGrpc(const RequestTag& tag, codecs::InferRequest request, const Decision& d) {
    auto handoff = HandoffRequest::create(shared_->router->regions(), std::move(request));
    if (!handoff.ok()) return onEmission(tag, Emission{handoff.status(), true, false, false});
    DecodedForwardOptions options;
    options.metadata = shared_->router->forwardedMetadata(context_->client_metadata(), true);
    options.deadline = upstreamDeadline(call_context_, d.timeout);
    options.limits = shared_->options.limits;
    options.loop = &loop_;
    const uint64_t id = next_http_id_++;
    hold();  // released by the answer, on the loop
    grpc_calls_[id] = forwardDecoded(
        d, std::move(*handoff), std::move(options),
        [this, tag, id, d](codecs::StatusOr<codecs::InferResponse> response) {
          loop_.post([this, tag, id, d, response = std::move(response)]() mutable {
            grpc_calls_.erase(id);
            if (!response.ok()) {
              response = publicStatus(response.status(), d.upstream_model, d.client_model);
            } else {
              response->model_name = d.client_model;
              if (!d.versionShown().empty()) response->model_version = d.versionShown();
              // Triton marks every streamed response of a model (PROTOCOL 9.5).
              response->parameters.set(std::string(codecs::param::kFinalResponse), true);
            }
            onEmission(tag, Emission{std::move(response), true, true, false});
            release();
          });
        });
  }

  void cancelUpstreams() {
    for (auto& [id, call] : grpc_calls_) call->cancel();  // each still answers (released there)
    for (auto& [key, leg] : legs_) leg.stream->cancel();
    for (auto& [id, call] : http_calls_) call->cancel();
    http_calls_.clear();
    sequence_queue_.clear();
  }

  void onRequest(Incoming in) {
    if (in.info) open_.insert(in.info);
    if (finish_called_ || abandoned_ || terminal_queued_) {  // the stream is ending
      return closeRequest(in.info, ::grpc::StatusCode::CANCELLED);
    }
    if (in.decision && in.leg) {
      // Placed without waiting: a stream's requests keep their order, so none may sit in
      // the fleet's queue while later ones go ahead. At the cap it is refused in-band.
      codecs::StatusOr<upstream::EndpointLease> lease =
          in.decision->upstream->fleet()->tryAcquire(in.decision->pick, nullptr);
      if (lease.ok()) {
        UpstreamLeg& leg = legFor(*in.decision, lease->sharedEndpoint());
        if (in.decision->rewrites()) {
          leg.renames[in.decision->upstream_model] = in.decision->client_model;
        }
        if (in.info) {
          telemetry::CallStats& call = *in.info->callStats();
          call.endpoint = lease->endpoint().key();
          call.attempts = 1;
        }
        leg.outstanding.push_back(LegRequest{std::move(*lease), in.info, telemetry::Clock::now()});
        leg.stream->write(std::move(in.raw));
        maybeRead();
        return;
      }
      codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(in.raw);
      if (flat.ok()) in.id_on_error = peekRequestId(*flat);
      in.request = publicStatus(lease.status(), in.decision->upstream_model, in.decision->client_model);
    }
    ++in_flight_;
    RequestTag tag;
    tag.info = in.info;
    tag.bytes = in.bytes;
    in_flight_bytes_ += tag.bytes;
    bool decoupled = false;
    builtin::ModelRepository* repository =
        in.decision ? in.decision->upstream->repository().get() : nullptr;
    if (in.request.ok()) {
      tag.id = in.request->id;
      if (tag.info && tag.info->request_id.empty()) tag.info->request_id = tag.id;
      tag.model_name = in.decision->client_model;
      tag.model_version = in.decision->client_version;
      if (repository != nullptr) {
        auto model = repository->find(in.request->model_name, in.request->model_version);
        decoupled = model.ok() && (*model)->spec().decoupled;
      } else {
        decoupled = true;  // a remote upstream's decoded answers go out as they come
      }
    } else {
      tag.id = std::move(in.id_on_error);
      if (tag.info && tag.info->request_id.empty()) tag.info->request_id = tag.id;
    }
    if (!decoupled) {
      tag.slot = next_slot_++;
      ordered_.push_back(Slot{*tag.slot, false, {}});
    }
    codecs::Status refused = in.request.status();
    const bool remote_grpc =
        in.decision && in.decision->upstream->protocol() == upstream::Upstream::Protocol::kGrpc;
    if (refused.ok() && !remote_grpc) {  // toward gRPC, sendOverGrpc's HandoffRequest binds
      codecs::StatusOr<ShmBinding> bound = ShmBinding::bind(shared_->router->regions(), *in.request);
      if (!bound.ok()) {
        refused = bound.status();
      } else if (bound->hasOutputs()) {
        tag.shm = std::make_shared<const ShmBinding>(std::move(*bound));
      }
    }
    if (!refused.ok()) {
      onEmission(tag, Emission{std::move(refused), true, false, false});
    } else if (remote_grpc) {
      sendOverGrpc(tag, std::move(*in.request), *in.decision);
    } else if (repository == nullptr) {
      sendOverHttp(tag, *in.request, *in.decision);
    } else {
      builtin::Execution execution = repository->infer(*in.request, /*streaming=*/true);
      runExecution(loop_, std::move(execution), cancelled_,
                   [this, tag](Emission emission) {
                     if (emission.response.ok()) emission.response->model_name = tag.model_name;
                     onEmission(tag, std::move(emission));
                   });
    }
    maybeRead();
  }

  void onEmission(const RequestTag& tag, Emission emission) {
    if (finish_called_ || abandoned_) return;
    if (tag.shm && emission.response.ok() && !emission.empty) {
      if (codecs::Status delivered = tag.shm->deliver(*emission.response); !delivered.ok()) {
        emission.response = delivered;
      }
    }
    std::optional<Outgoing> item = toOutgoing(tag, emission);
    if (tag.info) {
      if (item && !item->terminal) tag.info->response_bytes += item->message.Length();
      if (emission.final) {
        closeRequest(tag.info, emission.response.ok()
                                   ? ::grpc::StatusCode::OK
                                   : grpcStatusFor(emission.response.status()).error_code());
      }
    }
    if (emission.final && in_flight_ > 0) {
      --in_flight_;
      in_flight_bytes_ -= std::min(in_flight_bytes_, tag.bytes);
    }
    if (tag.slot) {
      Slot& slot = ordered_[*tag.slot - ordered_.front().seq];
      if (item) {
        changeUnsent(static_cast<int64_t>(item->message.Length()));  // counted from here: it waits for the client too
        slot.items.push_back(std::move(*item));
      }
      slot.done = slot.done || emission.final;
      while (!ordered_.empty() && ordered_.front().done) {
        for (Outgoing& o : ordered_.front().items) out_.push_back(std::move(o));  // counted already
        ordered_.pop_front();
      }
    } else if (item) {
      queueOut(std::move(*item));
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
      changeUnsent(-static_cast<int64_t>(write_buf_.Length()));
      writing_ = true;
      StartWrite(&write_buf_);
      return;
    }
    if (abandoned_) return finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled"));
    if (half_closed_ && in_flight_ == 0 && ordered_.empty() && legs_.empty()) {
      finish(::grpc::Status::OK);
    }
  }

  // The legs' answers (a decoupled model may send any number for one request) stop being
  // read, on grpc's thread as they arrive (keep_reading), once kMaxUnsentBytes wait for the
  // client or for the loop; they go on once half of that is written: a client that does
  // not read leaves them in grpc's transport and the upstream, not in the gateway.
  void resumeLegsOnceDrained() {
    if (unsent_bytes_ >= kMaxUnsentBytes / 2 || finish_called_ || abandoned_) return;
    if (!legs_stalled_.load() || !legs_stalled_.exchange(false)) return;
    shared_->paused_streams.fetch_sub(1, std::memory_order_relaxed);
    for (auto& [key, leg] : legs_) leg.stream->setReadPaused(false);
  }

  // A message for the client, behind the others.
  void queueOut(Outgoing o) {
    changeUnsent(static_cast<int64_t>(o.message.Length()));
    out_.push_back(std::move(o));
  }

  // The next request is read while the stream's requests in flight here (or answered and
  // waiting in order behind an earlier one) are under the cap in number and under
  // kMaxInFlightBytes in size, while what waits for the
  // client is under kMaxUnsentBytes, and while no leg holds kMaxUnsentBytes that its
  // upstream has not taken: a client that writes faster than its requests are served, or
  // reads slower than they are answered, waits in its own transport. (A leg's requests are
  // not counted one by one: a decoupled model may end one without any answer.)
  void maybeRead() {
    if (reading_ || half_closed_ || finish_called_ || abandoned_ || terminal_queued_) return;
    if (std::max(in_flight_, ordered_.size()) >= shared_->options.max_stream_requests_in_flight) return;
    if (in_flight_ > 0 && in_flight_bytes_ >= kMaxInFlightBytes) return;
    if (unsent_bytes_ >= kMaxUnsentBytes) return;
    // Flagged before the check: a write done between the two then sees the flag.
    waiting_on_leg_.store(true);
    for (const auto& [key, leg] : legs_) {
      if (leg.stream->unwrittenBytes() >= kMaxUnsentBytes) return;  // on_written reads on
    }
    waiting_on_leg_.store(false);
    reading_ = true;
    StartRead(&read_buf_);
  }

  // A stream request's end, recorded once (later calls for it do nothing).
  void closeRequest(const InfoPtr& info, int code) {
    if (!info || open_.erase(info) == 0) return;
    recorder_->finishStreamed(*info, code, kMethod);
  }

  // The stream ends: every request still open ends with it.
  void closeAll(int code) {
    for (const InfoPtr& info : open_) recorder_->finishStreamed(*info, code, kMethod);
    open_.clear();
  }

  // Cancelled, or a write failed: nothing more will reach the client.
  void abandon() {
    closeAll(::grpc::StatusCode::CANCELLED);
    abandoned_ = true;
    cancelled_->store(true);
    cancelUpstreams();
    out_.clear();
    changeUnsent(-static_cast<int64_t>(unsent_bytes_));
    ordered_.clear();
  }

  void finish(::grpc::Status status) {  // by value: it may come from out_, cleared here
    finish_called_ = true;
    cancelled_->store(true);  // stops the runners still playing
    cancelUpstreams();
    out_.clear();
    changeUnsent(-static_cast<int64_t>(unsent_bytes_));
    ordered_.clear();
    closeAll(status.ok() ? ::grpc::StatusCode::CANCELLED : status.error_code());
    if (shared_->recorder) shared_->recorder->grpcCall(kMethod, status.error_code(), start_);
    Finish(status);
  }

  struct Slot {
    uint64_t seq;
    bool done;
    std::vector<Outgoing> items;
  };

  static constexpr const char* kStreamMethod = "/inference.GRPCInferenceService/ModelStreamInfer";
  static constexpr std::string_view kMethod = "ModelStreamInfer";  // telemetry's name
  // Requests in flight (their messages' bytes as they came) past which no new one is read,
  // unless none is in flight (maybeRead).
  static constexpr size_t kMaxInFlightBytes = 64 * 1024 * 1024;
  // Answers waiting for the client (or a leg's messages for its upstream) past which no
  // new request is read (maybeRead).
  static constexpr size_t kMaxUnsentBytes = 4 * 1024 * 1024;
  // A leg's in-band error carries a message and no code: counted as UNKNOWN.
  static constexpr int kInBandErrorCode = ::grpc::StatusCode::UNKNOWN;

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  ::grpc::CallbackServerContext* context_;  // grpc's, valid until OnDone
  GrpcppCallContext call_context_;          // the same, as the handlers read it
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  bool strict_ = false;  // triton_grpc_error: true
  int refs_ = 1;         // grpc's (OnDone) + one per upstream stream not yet done; loop thread
  std::map<LegKey, UpstreamLeg> legs_;
  std::map<uint64_t, std::shared_ptr<upstream::HttpCallHandle>> http_calls_;
  std::map<uint64_t, std::shared_ptr<DecodedCall>> grpc_calls_;  // sendOverGrpc
  // An HTTP call's 200 answer, read for passive health (answer_ok) until that call's
  // on_complete, which follows at once on this loop, takes it.
  std::optional<codecs::StatusOr<codecs::InferResponse>> http_read_;
  uint64_t next_http_id_ = 0;
  bool sequence_busy_ = false;  // a sequence request is out to an HTTP upstream
  std::deque<QueuedHttp> sequence_queue_;

  ByteBuffer read_buf_;  // grpc thread between StartRead and OnReadDone, else the loop's
  ByteBuffer write_buf_;
  bool reading_ = true;  // a read is outstanding
  bool writing_ = false;
  bool half_closed_ = false;
  bool abandoned_ = false;
  bool terminal_queued_ = false;
  bool finish_called_ = false;
  size_t in_flight_ = 0;  // requests not yet complete
  size_t in_flight_bytes_ = 0;  // their messages' bytes
  size_t unsent_bytes_ = 0;   // of the messages in out_
  std::atomic<bool> waiting_on_leg_{false};  // maybeRead stopped for a leg's backlog (any thread)
  // Leg answers posted to the loop and answers waiting for the client, in bytes (grpc's
  // threads add, the loop moves and takes away), and whether the legs stop reading for
  // them (resumeLegsOnceDrained).
  std::atomic<int64_t> answers_pending_{0};
  std::atomic<bool> legs_stalled_{false};
  uint64_t next_slot_ = 0;
  std::deque<Slot> ordered_;  // non-decoupled requests not yet flushed, in request order
  std::deque<Outgoing> out_;  // ready to write, in order

  // Telemetry (recorder_ null: nothing records).
  const telemetry::Clock::time_point start_ = telemetry::Clock::now();
  telemetry::Recorder* recorder_ = nullptr;  // shared_'s, when active
  telemetry::RequestInfo per_request_;       // what every request of the stream starts with
  std::optional<tls::Principal> principal_;  // the stream's credentials, checked when it opened
  Caller caller() const { return Caller{principal_ ? &*principal_ : nullptr, tls::Listener::kGrpc}; }
  std::set<InfoPtr> open_;                   // requests read and not yet recorded; loop thread
};

}  // namespace

::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer>* InferenceService::ModelStreamInfer(
    Ctx* context) {
  return new StreamInferReactor(shared_, context);
}

}  // namespace infergate::gateway::frontends::grpc_detail
