#pragma once

// GrpcLoopClient's engine (grpc_client_native.h), shared by the two files that define it:
// grpc_client_native.cc (calls, their answers, endings) and grpc_client_native_session.cc
// (connections, their HTTP/2 state and socket events). Internal: no other file includes
// it. How it works is told at the top of grpc_client_native.cc.

#include <event2/event.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codecs/status.h"
#include "gateway/http/event_loop.h"
#include "gateway/http2/client_connection.h"
#include "gateway/upstream/grpc_client_native.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/socket_output.h"
#include "tls/client_session.h"

namespace infergate::gateway::upstream {
namespace native_grpc_detail {

inline constexpr size_t kReadBufferBytes = 256 * 1024;
inline constexpr size_t kMaxQueuedBytes = 4 * 1024 * 1024;  // unwritten (grpc_client_native.cc, "Output queue")
inline constexpr int32_t kWindow = INT32_MAX;                // HTTP/2's largest window
inline constexpr uint32_t kMaxHeaderListBytes = 1 << 20;     // as grpc_client.cc's metadata cap
inline constexpr size_t kMaxMessageBytes = INT32_MAX;  // Triton: INT32_MAX both ways

}  // namespace native_grpc_detail

class GrpcLoopClient::Engine {
 public:
  Engine(http::EventLoop& loop, GrpcLoopClientOptions options)
      : loop_(loop), options_(std::move(options)), read_buffer_(new uint8_t[native_grpc_detail::kReadBufferBytes]) {}
  ~Engine() { abandonAll(); }

  std::shared_ptr<GrpcCallHandle> unary(const config::ListenAddress& endpoint,
                                        std::string_view method, const codecs::MovableByteBuffer& request,
                                        const GrpcCallOptions& options, Done done);
  void abandonAll();
  const HostAddresses* hosts() const { return options_.hosts.get(); }

 private:
  struct Connection;
  class Call;

  // Gives a call's stream the window back for its blocks' bytes as they are let go of,
  // which may be after the call, its connection and the engine are gone (then nothing).
  // Loop thread.
  struct AnswerWindow {
    std::weak_ptr<Call> call;
    void release(size_t bytes);
  };
  // A block's owner, behind the Buffers handed on of it; `bytes` of it written so far.
  struct AnswerBlock {
    AnswerBlock(codecs::MutableBuffer b, size_t n, std::shared_ptr<AnswerWindow> w)
        : block(std::move(b)), bytes(n), window(std::move(w)) {}
    AnswerBlock(const AnswerBlock&) = delete;
    AnswerBlock& operator=(const AnswerBlock&) = delete;
    ~AnswerBlock() { window->release(bytes); }
    codecs::MutableBuffer block;
    size_t bytes;
    std::shared_ptr<AnswerWindow> window;
  };

  class Call final : public GrpcCallHandle, public std::enable_shared_from_this<Call> {
   public:
    void cancel() override {
      if (loop->inLoopThread()) {
        if (owner != nullptr) owner->cancel(*this);
        return;
      }
      loop->post([self = shared_from_this()] {
        if (self->owner != nullptr) self->owner->cancel(*self);
      });
    }

    http::EventLoop* loop = nullptr;
    Engine* owner = nullptr;  // null once ended (delivered or abandoned)
    Connection* connection = nullptr;
    int32_t stream_id = -1;
    std::string endpoint;  // for messages
    std::string key;       // its connection's key
    config::ListenAddress address;
    std::string method;
    std::vector<std::pair<std::string, std::string>> metadata;  // in send order
    std::optional<std::chrono::system_clock::time_point> deadline;
    event* deadline_timer = nullptr;
    Done done;
    bool resent = false;
    // A host name's addresses its connection tried without success, from address_start
    // (ConnectTarget's attempt and start); 0 once it is on a connection.
    size_t address_tries = 0;
    size_t address_start = 0;
    uint64_t headers_at = UINT64_MAX;  // where its HEADERS start in the connection's output

    // The request's payload, and how much of it the connection framed (bodyReady).
    GrpcOutMessage payload;
    size_t promised = 0;
    // The client's body that the payload references while it still arrives (null: all
    // there): bodyReady defers the stream at its first missing byte, and the
    // arrival's watcher resumes it, or cancels the call when the body never comes.
    std::shared_ptr<http::BodyArrival> arrival;
    uint64_t arrival_watch = 0;
    bool deferred = false;

    // The answer.
    // What the answer's header blocks said. A block's fields are staged in `block` and
    // count only once the whole block arrived intact (onFrameRecv): a block that breaks
    // half-way must say nothing, however the reads fell.
    struct Fields {
      int http_status = 0;
      std::string content_type;
      bool content_type_grpc = false;  // it starts "application/grpc" (then not kept above)
      bool content_type_seen = false;
      std::optional<int> grpc_status;
      std::string grpc_message;
    };
    Fields block;
    int http_status = 0;
    std::string content_type;
    bool content_type_grpc = false;  // it starts "application/grpc" (then not kept above)
    std::optional<int> grpc_status;
    std::string grpc_message;
    uint8_t frame_head[5] = {};
    size_t frame_head_have = 0;
    // The answer's message as it arrives, in one block of its announced size: from
    // codecs::BufferPool from 1 MiB on (a block already mapped, not 16,384 fresh pages for
    // 64 MiB), handed to the answer as a slice.
    codecs::MutableBuffer message;
    size_t message_size = 0, message_have = 0;
    int messages = 0;
    // GrpcCallOptions::answer_progress, and how much of the message it was last told of.
    std::shared_ptr<AnswerProgress> progress;
    size_t progress_told = 0;
    bool progress_due = false;  // in the engine's `progressed_`
    // A call with a progress owns its stream's window (http2::ClientConnection::ownWindow):
    // the bytes read into one buffer are freed as they come, a block's when the block is
    // let go of (`window`). A message the progress takes in blocks (AnswerProgress::
    // takesBlocks) is read into blocks: `filling` (null: none yet), `block_used` of it
    // written, `block_told` of those handed on; what is to be told waits in `handed` for
    // deliver().
    bool owns_window = false;
    bool blocks = false;
    std::shared_ptr<AnswerBlock> filling;
    size_t block_used = 0, block_told = 0;
    std::vector<codecs::Buffer> handed;
    std::shared_ptr<AnswerWindow> window;
    std::optional<codecs::Status> broken;  // the answer broke the protocol (502)
    bool reset_by_upstream = false;        // an RST_STREAM came (not the connection's own close)

    ~Call() = default;
  };

  // A connection is its HTTP/2 state's handler (http2::ClientConnection calls back into
  // it from receive() and send()).
  struct Connection final : http2::ClientConnection::Handler {
    bool canWrite() override;
    void writeBytes(std::string_view bytes) override;
    void beforeHeaders(int32_t stream) override;
    size_t bodyReady(int32_t stream, size_t max, bool& last) override;
    void writeData(int32_t stream, const uint8_t* head, size_t length) override;
    void onField(int32_t stream, std::string_view name, std::string_view value) override;
    void onHeadersEnd(int32_t stream, bool end_stream) override;
    void onData(int32_t stream, const uint8_t* data, size_t size) override;
    void onStreamClose(int32_t stream, uint32_t error_code, bool reset_by_peer) override;
    void onSettings() override;
    void onPingAck() override;
    void onGoaway(uint32_t error_code) override;
    Call* callOf(int32_t stream) {
      auto it = streams.find(stream);
      return it == streams.end() ? nullptr : it->second.get();
    }

    Engine* engine = nullptr;
    std::string key;
    std::string authority;  // :authority
    http_client_detail::ConnectTarget target;  // the address it went to
    size_t attempt = 0;                        // ConnectTarget's attempt that made it
    int fd = -1;
    event* readable = nullptr;
    event* writable = nullptr;
    event* connect_timer = nullptr;
    event* keepalive_timer = nullptr;  // the next PING, or the wait for its ACK
    bool ping_outstanding = false;
    bool connecting = false;
    bool draining = false;  // GOAWAY received, or failed: no new call
    bool paused = false;    // the output refused more (canWrite) in this pump's round
    std::unique_ptr<http2::ClientConnection> h2;
    std::unordered_map<int32_t, std::shared_ptr<Call>> streams;
    SocketOutput out;
    // TLS (options.tls): what reads and writes go through; null for plaintext.
    std::unique_ptr<tls::ClientSession> tls;
    // The handshake completed once (latched: OpenSSL reports a session that failed later
    // as not finished again), and its ALPN was checked.
    bool tls_established = false;
    bool read_wants_write = false;  // a TLS read waits for the socket to take bytes
  };

  struct Ending {
    std::shared_ptr<Call> call;
    codecs::Status status;
    codecs::MovableByteBuffer answer;
    std::vector<codecs::Buffer> blocks;  // not yet told to the call's progress
  };

  // -- calls --
  codecs::StatusOr<Connection*> connectionFor(const Call& call);
  void submit(Connection& c, const std::shared_ptr<Call>& call);
  void cancel(Call& call);
  void finish(Call& call, codecs::Status status, codecs::MovableByteBuffer answer = {});
  codecs::Status outcome(Call& call, uint32_t error_code) const;
  codecs::MovableByteBuffer takeAnswer(Call& call) const;
  // Returns how many of the bytes went into blocks (their window is given back later).
  size_t receiveData(Call& call, const uint8_t* data, size_t size);
  // The current block's bytes written and not yet told go to `handed`; a full block is
  // done with.
  void handOnBlock(Call& call, bool full);
  void breakAnswer(Call& call, std::string_view why);
  // More of the call's body arrived, or it failed.
  void onArrival(Call& call);

  // -- connections --
  codecs::StatusOr<Connection*> open(const Call& call);
  // One connection to `target`; null when its connect failed at once and `more` addresses
  // are left to try.
  codecs::StatusOr<Connection*> openTo(const Call& call, http_client_detail::ConnectTarget target,
                                       size_t attempt, bool more);
  bool startSession(Connection& c);
  bool connected(Connection& c);  // false: `c` failed (gone)
  bool pump(Connection& c);  // lets the connection frame, then writes; false: `c` failed (gone)
  bool flush(Connection& c);  // false: the connection failed (dropped)
  // Whether bytes wait to be written (queued, or taken by the TLS session).
  static bool hasOutput(const Connection& c) {
    return !c.out.empty() || (c.tls != nullptr && c.tls->hasBufferedOutput());
  }
  // Latches the TLS handshake's end and checks that the upstream agreed on HTTP/2. False:
  // `c` failed (gone).
  bool checkHandshake(Connection& c);
  // Whether `c` is still opening: TCP, TLS, no SETTINGS seen yet.
  static bool handshaking(const Connection& c) { return c.tls != nullptr && !c.tls_established; }
  // Reads what the socket (and the TLS session) holds into the connection. False: `c` failed.
  bool readInput(Connection& c);
  enum class Failure { kConnect, kClosed, kBroken };
  // Ends (or resends) every call on `c` and drops it; `why` is named per call.
  void fail(Connection& c, std::string_view why, Failure kind);
  void drop(Connection& c);
  void maybeClose(Connection& c);

  // -- endings --
  void resendRefused();  // the calls refused unread, once, on a fresh connection
  // Tells each answer in `progressed_` what arrived. False: a callee destroyed the client.
  bool tellProgress();
  void deliver();
  void scheduleDelivery();

  // 502: the upstream broke HTTP/2's rules and the stream or the connection was ended.
  codecs::Status brokeHttp2(const Call& call) const {
    return codecs::withOrigin(
        absl::InvalidArgumentError(codecs::strCat("upstream '", options_.upstream_name, "' (", call.endpoint,
                                                  ") broke the HTTP/2 protocol")),
        codecs::ErrorOrigin::kUpstream);
  }
  // 502: the upstream's answer is HTTP/2 but not gRPC (`why`).
  codecs::Status brokeGrpc(const Call& call, std::string_view why) const {
    return codecs::withOrigin(
        absl::InvalidArgumentError(codecs::strCat("upstream '", options_.upstream_name, "' (", call.endpoint,
                                                  ") broke the gRPC protocol: ", why)),
        codecs::ErrorOrigin::kUpstream);
  }
  codecs::Status unavailable(const Call& call, std::string_view why) const {
    return codecs::withOrigin(
        absl::UnavailableError(codecs::strCat("upstream '", options_.upstream_name, "' (", call.endpoint,
                                      ") is unavailable: ", why)),
        codecs::ErrorOrigin::kUpstream);
  }

  // libevent callbacks.
  static void onReadable(evutil_socket_t, short, void* arg);
  static void onWritable(evutil_socket_t, short, void* arg);
  static void onConnectTimeout(evutil_socket_t, short, void* arg);
  static void onDeadline(evutil_socket_t, short, void* arg);
  static void onKeepalive(evutil_socket_t, short, void* arg);

  http::EventLoop& loop_;
  const GrpcLoopClientOptions options_;
  std::unique_ptr<uint8_t[]> read_buffer_;
  std::unordered_map<std::string, Connection*> by_key_;  // the one taking new calls
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<Ending> endings_;
  std::vector<std::shared_ptr<Call>> refused_;  // REFUSED_STREAM before any answer: sent again
  std::vector<std::shared_ptr<Call>> progressed_;  // answers to tell their progress (deliver)
  bool delivery_posted_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace infergate::gateway::upstream
