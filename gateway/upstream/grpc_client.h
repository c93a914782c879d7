#pragma once

// The gRPC client toward one upstream of `protocol: grpc`: raw grpc::ByteBuffer calls on
// the grpc++ callback API (GenericStub), so that a client's serialized message can be
// passed through untouched and a transcoded one sent without building protobuf objects.
//
//   GrpcUpstreamClient(config)   `channels` channels per endpoint, created at once
//                                (connections are made lazily by grpc), max message size
//                                INT32_MAX both ways, round robin over all of them;
//                                plaintext, or TLS as config.tls says (its files are read
//                                here: tls/client_credentials.h)
//   unary(method, bytes, ...)    one call; `done` runs once, on a grpc thread
//   stream(method, ...)          a bidi stream (ModelStreamInfer); messages and the end
//                                come back on grpc threads
//
// Methods are full names: "/inference.GRPCInferenceService/ModelInfer".
//
// Errors come back as the grpc::Status the upstream (or grpc) gave. toUpstreamStatus()
// turns one into the gateway's codes, naming the upstream: UNAVAILABLE (refused, reset,
// unreachable, a failed TLS handshake, a stream reset, a call the upstream cancelled),
// DEADLINE_EXCEEDED, a malformed answer (INVALID_ARGUMENT stamped kUpstream: 502) for a
// call that ended without a gRPC status or was answered by something else than gRPC, and
// the upstream's own code and message otherwise. When config.tls names files that no longer load, every call fails
// with UNAVAILABLE "upstream 'u': TLS is not set up: ..." (never sent in plaintext).
//
// Threads: every member is safe from any thread. Callbacks run on grpc's threads and
// must not block: post to an event loop.
// Lifetime: the client must outlive its calls; shutdown() cancels every call in flight
// and waits until their callbacks have run.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/body_arrival.h"

namespace infergate::codecs {
class MovableByteBuffer;  // codecs/grpc_byte_buffer.h
}  // namespace infergate::codecs

namespace infergate::gateway::upstream {

class GrpcLoopClient;  // grpc_client_native.h

// A unary call's answer message while it arrives (GrpcCallOptions::answer_progress), for a
// caller that transcodes it and starts its own client's answer before the message is whole.
// Loop thread.
class AnswerProgress {
 public:
  virtual ~AnswerProgress() = default;
  // The message's first `have` bytes (of `size`) are in `message`, which the call goes on
  // filling after them: slices of those bytes may be kept (MutableBuffer::shareWritten).
  // Told after a read that brought at least upstream::kRelayStepBytes since the last time,
  // only while the message is still incomplete (have < size: its last bytes, and so the
  // whole message, come with `done` and the call's status), never once the call ended.
  virtual void onProgress(const codecs::MutableBuffer& message, size_t have, size_t size) = 0;

  // Whether the message (`size` bytes, more than kRelayStepBytes) may come in blocks
  // instead of one buffer (onBlock, and no onProgress); asked once, when its length prefix
  // is in, from inside the client's read: answer from what is known, and call nothing.
  virtual bool takesBlocks(size_t size) {
    (void)size;
    return false;
  }
  // The message's next piece, in order: consecutive slices of blocks of kRelayBlockBytes
  // from the buffer pool (the last block less), one each time a block fills and every
  // kRelayStepBytes between; together they are the message when the call ends OK, whose
  // `done` then has an empty answer. Told before `done` (what arrived before a failure
  // too), never after it. A block's bytes count against the call's HTTP/2 stream window,
  // kRelayWindowBytes, until every piece of it is let go of (on the loop thread): a caller
  // that passes pieces on and drops them once written holds the upstream back to its pace.
  virtual void onBlock(codecs::Buffer block) { (void)block; }
};

struct GrpcCallOptions {
  // None by default. A deadline also bounds connecting.
  std::optional<std::chrono::system_clock::time_point> deadline;
  // Sent as the call's metadata (keys lowercase); the upstream's configured headers are
  // added by the client, replacing entries of the same key.
  std::vector<std::pair<std::string, std::string>> metadata;
  // Wait (up to the deadline) for a connection instead of failing at once while the
  // channel cannot connect: for health probes, which must see an upstream come back.
  bool wait_for_ready = false;
  // Fleet calls only (fleet_call.h): the calling worker's own client (grpc_client_native.h),
  // which then carries the call wherever it reaches the endpoint; its answer comes on that
  // loop. Null: grpc++ (this file).
  std::shared_ptr<GrpcLoopClient> on_loop;
  // Fleet calls only: the client's request body, when it is still arriving
  // (http/body_arrival.h) and the request's slices reference it. The worker's own client
  // sends the bytes as they come; any other waits for the whole body before it starts.
  std::shared_ptr<http::BodyArrival> arrival;
  // Fleet calls only: told of a large answer message as it arrives, by the worker's own
  // client (grpc_client_native.h); grpc++ delivers only whole answers.
  std::shared_ptr<AnswerProgress> answer_progress;
  // Fleet calls only (fleet_call.h): asked of an attempt's answer that ended OK before
  // passive health hears of it, on the thread that then delivers it. False (an answer the
  // caller cannot read: garbage behind a grpc-status 0) counts the attempt a failure of its
  // endpoint, as a broken frame would; the answer is delivered either way, and the caller
  // says what is wrong with it.
  std::function<bool(const codecs::MovableByteBuffer& answer)> answer_ok;
};

// A call in flight; cancel() from any thread, any number of times (after the end: nothing).
class GrpcCallHandle {
 public:
  virtual ~GrpcCallHandle() = default;
  virtual void cancel() = 0;
  // cancel(), because the answer, still arriving, was found unreadable: a fleet call
  // (fleet_call.h) counts the attempt a failure of its endpoint, as a broken answer would.
  virtual void refuseAnswer() { cancel(); }
};

// A bidi stream in flight. write() queues (one message on the wire at a time, in order);
// writesDone() half-closes after the queued messages; cancel() ends it (on_done follows
// with CANCELLED). All from any thread.
class GrpcStream : public GrpcCallHandle {
 public:
  virtual void write(grpc::ByteBuffer message) = 0;
  virtual void writesDone() = 0;
  // Bytes write() took that grpc has not yet taken (the upstream's flow control holds
  // them): what a caller bounds before writing more.
  virtual size_t unwrittenBytes() const = 0;
  // While paused, no message is read after the one in progress: the upstream's answers
  // wait in grpc's transport and, past its window, in the upstream. Any thread; cancel()
  // resumes (the call must be able to end).
  virtual void setReadPaused(bool paused) = 0;
};

struct GrpcStreamCallbacks {
  std::function<void(grpc::ByteBuffer message)> on_message;  // each message read
  std::function<void(grpc::Status status)> on_done;          // once, last
  std::function<void()> on_written;  // a message left the queue (optional; grpc's thread)
  // Asked on grpc's thread after each on_message (optional): false stalls the next read,
  // as setReadPaused(true) does, until setReadPaused(false). Deciding where the message
  // arrives stops the reads at once; a pause decided on another thread comes after
  // whatever grpc's thread read meanwhile.
  std::function<bool()> keep_reading;
};

class GrpcUpstreamClient {
 public:
  // config.protocol must be kGrpc with at least one endpoint.
  explicit GrpcUpstreamClient(const config::UpstreamConfig& config);
  ~GrpcUpstreamClient();  // shutdown()
  GrpcUpstreamClient(const GrpcUpstreamClient&) = delete;
  GrpcUpstreamClient& operator=(const GrpcUpstreamClient&) = delete;

  const std::string& name() const { return name_; }

  using UnaryDone = std::function<void(grpc::Status status, grpc::ByteBuffer response)>;
  std::shared_ptr<GrpcCallHandle> unary(std::string_view method, const grpc::ByteBuffer& request,
                                        GrpcCallOptions options, UnaryDone done);
  std::shared_ptr<GrpcStream> stream(std::string_view method, GrpcCallOptions options,
                                     GrpcStreamCallbacks callbacks);

  // Cancels every call in flight and waits for their callbacks. Later calls fail at once
  // with UNAVAILABLE. Idempotent.
  void shutdown();

  // Channels waiting out a reconnect backoff (up to 1 s) try again now: the health
  // checker's probe of an endpoint that is not healthy, so that one that came back is seen
  // at its first probe.
  void resetConnectBackoff();

 private:
  struct Impl;
  std::string name_;
  std::shared_ptr<Impl> impl_;
};

// The gateway's status for a failed upstream call (see above). `upstream` is its name;
// `endpoint`, when given, is named after it: "upstream 'u' (10.0.0.7:8001) is unavailable".
codecs::Status toUpstreamStatus(const grpc::Status& status, std::string_view upstream,
                                std::string_view endpoint = {});

// Null when grpc (and so any gRPC server) can carry this metadata entry; else what is wrong
// with it (grpc aborts the process on sending an illegal key or value).
const char* grpcMetadataProblem(const std::string& key, const std::string& value);

// A call's metadata as both clients send it: `add` is called for the forwarded entries
// whose key no configured entry has, then for the configured ones (the upstream's
// `headers`, which replace forwarded entries of the same key). When any entry is one grpc
// cannot carry, nothing is added and the refusal is returned: INVALID_ARGUMENT "cannot
// send metadata 'KEY' to upstream 'NAME': ...".
using GrpcMetadata = std::vector<std::pair<std::string, std::string>>;
codecs::Status forEachCallMetadata(
    const GrpcMetadata& forwarded, const GrpcMetadata& configured, std::string_view upstream,
    const std::function<void(const std::string& key, const std::string& value)>& add);

}  // namespace infergate::gateway::upstream
