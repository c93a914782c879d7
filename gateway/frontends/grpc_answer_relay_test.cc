// GrpcAnswerRelay on its own: an HTTP upstream's binary answer handed over as the native
// HTTP client hands it (a head, then consecutive slices of one buffer of the body's length),
// and what reaches its sink. The end-to-end path (a real gateway in front of a real HTTP
// upstream, a gRPC client) is tests/e2e/test_upstream_faults.py's GrpcAnswerAsItArrives.
// PassthroughAnswerRelay likewise, told in blocks as the native gRPC client tells them; its end-to-end
// path is GrpcPassthroughAsItArrives there.

#include "gateway/frontends/grpc_answer_relay.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codecs/binary_tensor.h"
#include "codecs/protobuf_response_encoder.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

struct Sink final : GrpcAnswerRelay::Sink {
  void sendAhead(codecs::BufferChain m, std::shared_ptr<http::BodyArrival> a) override {
    ++calls;
    message = std::move(m);
    arrival = std::move(a);
    received_at_start = arrival->received();
  }
  void sendGrowing(size_t length) override {
    ++calls;
    growing_length = length;
  }
  void sendPiece(codecs::Buffer piece) override { pieces.push_back(std::move(piece)); }
  int calls = 0;
  codecs::BufferChain message;
  std::shared_ptr<http::BodyArrival> arrival;
  uint64_t received_at_start = 0;
  size_t growing_length = 0;
  std::vector<codecs::Buffer> pieces;
};

std::string outputJson(const std::string& name, const std::string& datatype, const std::string& shape,
                       size_t bytes) {
  return R"({"name":")" + name + R"(","datatype":")" + datatype + R"(","shape":)" + shape +
         R"(,"parameters":{"binary_data_size":)" + std::to_string(bytes) + "}}";
}

// An answer as an upstream sends it: its JSON header and tensor bytes, written into one
// buffer of its length that the test hands over in pieces, as the client would.
class Answer {
 public:
  Answer(std::string header, std::string tensors)
      : header_(std::move(header)),
        bytes_(header_ + tensors),
        storage_(codecs::MutableBuffer::allocate(bytes_.size())),
        start_(storage_.data()) {
    std::memset(storage_.data(), 0xee, bytes_.size());  // not written yet
  }
  // The default: FP32 [1,100000] (400,000 bytes), an empty INT8 output, INT16 [3].
  static Answer standard() {
    std::string tensors(400000 + 6, '\0');
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i] = static_cast<char>(i * 7 + 1);
    return Answer(R"({"model_name":"upstream_name","model_version":"3","id":"r1","outputs":[)" +
                      outputJson("A", "FP32", "[1,100000]", 400000) + "," + outputJson("E", "INT8", "[0]", 0) + "," +
                      outputJson("B", "INT16", "[3]", 6) + "]}",
                  tensors);
  }

  size_t length() const { return bytes_.size(); }
  size_t headerLength() const { return header_.size(); }
  http::HeaderList headers(bool binary = true) const {
    http::HeaderList h;
    h.add("Content-Type", "application/octet-stream");
    if (binary) h.add("Inference-Header-Content-Length", std::to_string(header_.size()));
    return h;
  }
  // Writes the next `n` bytes and hands them to `relay` as one piece.
  void deliver(GrpcAnswerRelay& relay, size_t n) {
    n = std::min(n, bytes_.size() - at_);
    std::memcpy(storage_.data() + at_, bytes_.data() + at_, n);
    relay.onPiece(storage_.shareWritten(at_, n));
    at_ += n;
  }
  void deliverAll(GrpcAnswerRelay& relay, size_t step) {
    while (at_ < bytes_.size()) deliver(relay, step);
  }
  const uint8_t* start() const { return start_; }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string header_, bytes_;
  codecs::MutableBuffer storage_;
  const uint8_t* start_;
  size_t at_ = 0;
};

// The message a whole answer of the same bytes is answered with (the path the relay saves).
std::string wholeMessage(const Answer& answer, const std::string& model, const std::string& version) {
  auto decoded = codecs::BinaryTensorDecoder().decodeResponse(codecs::Buffer::copyOf(answer.bytes()),
                                                              answer.headerLength());
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  decoded->model_name = model;
  if (!version.empty()) decoded->model_version = version;
  auto chain = codecs::ProtobufResponseEncoder().encode(*decoded);
  EXPECT_TRUE(chain.ok()) << chain.status();
  return chain->toString();
}

constexpr uint64_t kNoLimit = INT32_MAX;

TEST(GrpcAnswerRelay, SendsTheMessageAheadWithTheBytesOfAWholeAnswer) {
  for (const std::string version : {"", "7"}) {
    SCOPED_TRACE(version);
    Sink sink;
    GrpcAnswerRelay relay(sink, "public_name", version, {}, kNoLimit);
    Answer answer = Answer::standard();
    relay.onHead(200, answer.headers(), answer.length());
    EXPECT_EQ(sink.calls, 0);
    answer.deliver(relay, 256 * 1024);
    ASSERT_EQ(sink.calls, 1);
    EXPECT_TRUE(relay.sentOn());
    EXPECT_EQ(sink.received_at_start, 256u * 1024);
    EXPECT_FALSE(relay.arrivedWhole());
    // What is referenced lies in the body's own buffer: not a byte was copied.
    const codecs::Buffer& tensor = sink.message.segments()[1];
    EXPECT_EQ(tensor.data(), answer.start() + answer.headerLength());
    EXPECT_EQ(tensor.size(), 400000u);
    EXPECT_EQ(sink.arrival->arrivedOf(tensor.data(), tensor.size()), 256u * 1024 - answer.headerLength());

    answer.deliverAll(relay, 100000);
    EXPECT_TRUE(relay.arrivedWhole());
    EXPECT_EQ(sink.calls, 1);
    EXPECT_EQ(relay.messageBytes(), sink.message.size());
    EXPECT_TRUE(sink.message.toString() == wholeMessage(answer, "public_name", version));
  }
}

TEST(GrpcAnswerRelay, WaitsForAHeaderThatSpansPieces) {
  Sink sink;
  GrpcAnswerRelay relay(sink, "m", "", {}, kNoLimit);
  Answer answer = Answer::standard();
  relay.onHead(200, answer.headers(), answer.length());
  size_t sent = 0;
  while (sent + 10 < answer.headerLength()) {
    answer.deliver(relay, 10);
    sent += 10;
    ASSERT_EQ(sink.calls, 0) << sent;
  }
  answer.deliver(relay, 10);
  EXPECT_EQ(sink.calls, 1);
  answer.deliverAll(relay, 65536);
  EXPECT_TRUE(relay.arrivedWhole());
  EXPECT_TRUE(sink.message.toString() == wholeMessage(answer, "m", ""));
}

// Every answer the relay must leave to the whole path: nothing reaches the sink, and the
// body comes back whole from its pieces, in place.
TEST(GrpcAnswerRelay, LeavesEveryOtherAnswerWholeWithoutACopy) {
  struct Case {
    const char* what;
    int status = 200;
    bool binary = true;
    const char* encoding = nullptr;
    std::string output = outputJson("A", "FP32", "[1,100000]", 400000);
    uint64_t limit = kNoLimit;
    bool detached = false;
    bool ahead = false;  // the one case here that does go ahead
  };
  std::vector<Case> cases(8);
  cases[0].what = "an error status";
  cases[0].status = 500;
  cases[1].what = "a JSON answer";
  cases[1].binary = false;
  cases[2].what = "a compressed answer";
  cases[2].encoding = "gzip";
  cases[3].what = "a BYTES output";
  cases[3].output = outputJson("A", "BYTES", "[1]", 400000);
  cases[4].what = "a size that disagrees with the shape";
  cases[4].output = outputJson("A", "FP32", "[1,99999]", 400000);
  cases[5].what = "over the client's message limit";
  cases[5].limit = 400000;
  cases[6].what = "a call done with the relay";
  cases[6].detached = true;
  cases[7].what = "identity is no encoding";
  cases[7].encoding = "identity";
  cases[7].ahead = true;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Sink sink;
    GrpcAnswerRelay relay(sink, "m", "", {}, c.limit);
    if (c.detached) relay.detach();
    Answer answer(R"({"outputs":[)" + c.output + "]}", std::string(400000, 'x'));
    http::HeaderList headers = answer.headers(c.binary);
    if (c.encoding != nullptr) headers.add("Content-Encoding", c.encoding);
    EXPECT_FALSE(relay.body().has_value());  // no head yet
    relay.onHead(c.status, headers, answer.length());
    answer.deliverAll(relay, 256 * 1024);
    if (c.ahead) {
      EXPECT_EQ(sink.calls, 1);
      EXPECT_TRUE(relay.arrivedWhole());
      continue;
    }
    EXPECT_EQ(sink.calls, 0);
    EXPECT_FALSE(relay.sentOn());
    std::optional<codecs::Buffer> body = relay.body();
    ASSERT_TRUE(body.has_value());
    EXPECT_EQ(body->data(), answer.start());
    EXPECT_TRUE(body->view() == answer.bytes());
  }
}

TEST(GrpcAnswerRelay, PiecesOutOfPlaceFailTheArrival) {
  Sink sink;
  GrpcAnswerRelay relay(sink, "m", "", {}, kNoLimit);
  Answer answer = Answer::standard();
  relay.onHead(200, answer.headers(), answer.length());
  answer.deliver(relay, 256 * 1024);
  ASSERT_EQ(sink.calls, 1);
  relay.onPiece(codecs::Buffer::copyOf("elsewhere"));  // not where the message looks
  EXPECT_TRUE(sink.arrival->failed());
  EXPECT_FALSE(relay.arrivedWhole());
}

// PassthroughAnswerRelay, told as the native gRPC client tells a message it takes in blocks.
TEST(PassthroughAnswerRelayBlocks, SendsTheLengthThenEachBlockAndCompletesWhenAllWent) {
  Sink sink;
  PassthroughAnswerRelay relay(sink, kNoLimit);
  const size_t length = (2 << 20) + 1000;
  ASSERT_TRUE(relay.takesBlocks(length));
  EXPECT_FALSE(relay.sentAhead());
  const std::string bytes(length, 'b');
  codecs::Buffer whole = codecs::Buffer::copyOf(bytes);
  relay.onBlock(whole.slice(0, 1 << 20));
  EXPECT_TRUE(relay.sentAhead());
  EXPECT_EQ(sink.calls, 1);
  EXPECT_EQ(sink.growing_length, length);
  relay.onBlock(whole.slice(1 << 20, 1 << 20));
  EXPECT_FALSE(relay.complete(codecs::MovableByteBuffer())) << "a block is still to come";
  relay.onBlock(whole.slice(2 << 20, 1000));
  EXPECT_EQ(sink.calls, 1);
  ASSERT_EQ(sink.pieces.size(), 3u);
  std::string sent;
  for (const codecs::Buffer& piece : sink.pieces) sent += piece.view();
  EXPECT_TRUE(sent == bytes);
  EXPECT_EQ(relay.messageBytes(), length);
  EXPECT_TRUE(relay.complete(codecs::MovableByteBuffer()));
}

TEST(PassthroughAnswerRelayBlocks, PastTheClientsLimitOrDetachedItTakesNoBlocks) {
  Sink sink;
  PassthroughAnswerRelay over(sink, (1 << 20) - 1);
  EXPECT_FALSE(over.takesBlocks(1 << 20));
  // Taken whole instead, the message is told as progress: nothing of it goes ahead.
  codecs::MutableBuffer whole = codecs::MutableBuffer::allocate(1 << 20);
  over.onProgress(whole, 300000, 1 << 20);
  EXPECT_EQ(sink.calls, 0);
  EXPECT_FALSE(over.sentAhead());
  PassthroughAnswerRelay detached(sink, kNoLimit);
  detached.detach();
  EXPECT_FALSE(detached.takesBlocks(1 << 20));
  PassthroughAnswerRelay late(sink, kNoLimit);
  ASSERT_TRUE(late.takesBlocks(1 << 20));
  late.detach();  // the call ended: blocks still told are dropped
  late.onBlock(codecs::Buffer::copyOf(std::string(1000, 'x')));
  EXPECT_EQ(sink.calls, 0);
  EXPECT_TRUE(sink.pieces.empty());
}

}  // namespace
}  // namespace infergate::gateway::frontends::grpc_detail
