#include "codecs/grpc_byte_buffer.h"

#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"

namespace infergate::codecs {
namespace {

// A Buffer whose owner reports when it is destroyed.
Buffer trackedBuffer(std::string bytes, std::shared_ptr<std::atomic<bool>> destroyed) {
  auto* storage = new std::string(std::move(bytes));
  std::shared_ptr<const void> owner(storage, [destroyed](const std::string* s) {
    destroyed->store(true);
    delete s;
  });
  return Buffer(std::move(owner), reinterpret_cast<const uint8_t*>(storage->data()),
                storage->size());
}

std::vector<grpc::Slice> slicesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return slices;
}

std::string contentsOf(const grpc::ByteBuffer& buffer) {
  std::string out;
  for (const grpc::Slice& s : slicesOf(buffer)) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

TEST(MovableByteBuffer, AMoveTakesTheMessageAndLeavesNothingBehind) {
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  MovableByteBuffer first = toByteBuffer(BufferChain(trackedBuffer(std::string(1000, 'm'), destroyed)));
  ASSERT_TRUE(first.valid());
  MovableByteBuffer second = std::move(first);
  EXPECT_FALSE(first.valid());  // NOLINT(bugprone-use-after-move): moved, not copied
  EXPECT_EQ(second.length(), 1000u);
  MovableByteBuffer third;
  third = std::move(second);
  EXPECT_FALSE(second.valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(contentsOf(third), std::string(1000, 'm'));
  // The one message there is, through every move: dropping it frees the bytes.
  third = MovableByteBuffer();
  EXPECT_TRUE(destroyed->load());
}

TEST(MovableByteBuffer, ACopyIsASecondReferenceToTheSameSlices) {
  Buffer tensor = Buffer::fromString(std::string(4096, 'c'));
  MovableByteBuffer original = toByteBuffer(BufferChain(tensor));
  MovableByteBuffer copy(original);
  ASSERT_TRUE(original.valid());
  std::vector<grpc::Slice> slices = slicesOf(copy);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].begin(), tensor.data());
}

// A message held as a chain: read as Buffers without grpc's slices, moved and copied as a
// chain, and turned into a grpc::ByteBuffer only when asked, once, referencing the same
// bytes.
TEST(MovableByteBuffer, AChainIsReadAsItIsAndMadeIntoSlicesOnlyWhenAsked) {
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  Buffer glue = Buffer::fromString("\x3a\x80\x20");
  BufferChain chain(glue);
  chain.append(trackedBuffer(std::string(4096, 'x'), destroyed));
  const uint8_t* tensor = chain.segments()[1].data();
  MovableByteBuffer message(std::move(chain));
  EXPECT_TRUE(chain.empty());  // NOLINT(bugprone-use-after-move): a moved chain is empty
  ASSERT_TRUE(message.valid());
  ASSERT_NE(message.chain(), nullptr);
  EXPECT_EQ(message.length(), 4099u);
  EXPECT_EQ(message.toChain().segments()[1].data(), tensor);

  MovableByteBuffer copy(message);  // a chain copied as a chain
  ASSERT_NE(copy.chain(), nullptr);
  EXPECT_EQ(copy.chain()->segments()[1].data(), tensor);

  MovableByteBuffer moved = std::move(message);
  EXPECT_FALSE(message.valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(message.chain(), nullptr);  // NOLINT(bugprone-use-after-move)
  const grpc::ByteBuffer& as_grpc = moved;  // made here, and kept
  EXPECT_EQ(&as_grpc, &moved.grpc());
  std::vector<grpc::Slice> slices = slicesOf(as_grpc);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), tensor);
  EXPECT_EQ(contentsOf(as_grpc), "\x3a\x80\x20" + std::string(4096, 'x'));
  ASSERT_NE(moved.chain(), nullptr) << "asking for the grpc form keeps the chain";

  grpc::ByteBuffer taken;
  taken.Swap(&moved.get());  // get() hands the grpc form over and lets the chain go
  EXPECT_EQ(moved.chain(), nullptr);
  EXPECT_EQ(contentsOf(taken), "\x3a\x80\x20" + std::string(4096, 'x'));
  EXPECT_FALSE(destroyed->load()) << "the copy, the slices still hold the tensor";
  copy = MovableByteBuffer();
  slices.clear();
  taken.Clear();
  EXPECT_TRUE(destroyed->load()) << "the last holder gone: the bytes are freed";
}

TEST(MovableByteBuffer, FromByteBufferReadsAChainWithoutSlices) {
  Buffer tensor = Buffer::fromString(std::string(2048, 'y'));
  auto one = fromByteBuffer(MovableByteBuffer(BufferChain(tensor)));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->data(), tensor.data()) << "one segment: that segment, not a copy";
  BufferChain two(Buffer::fromString("ab"));
  two.append(tensor);
  auto joined = fromByteBuffer(MovableByteBuffer(std::move(two)));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->view(), "ab" + std::string(2048, 'y'));
  auto empty = fromByteBuffer(MovableByteBuffer(BufferChain()));
  ASSERT_TRUE(empty.ok()) << "an empty message is a message";
  EXPECT_EQ(empty->size(), 0u);
  // A grpc::ByteBuffer's slices read as Buffers referencing them.
  MovableByteBuffer held = toByteBuffer(BufferChain(tensor));
  ASSERT_EQ(held.chain(), nullptr);
  BufferChain read = held.toChain();
  ASSERT_EQ(read.segments().size(), 1u);
  EXPECT_EQ(read.segments()[0].data(), tensor.data());
  EXPECT_TRUE(MovableByteBuffer().toChain().empty());
}

TEST(GrpcByteBuffer, SlicesReferenceLargeSegments) {
  Buffer tensor = Buffer::fromString(std::string(4096, 't'));
  BufferChain chain(Buffer::fromString("\x3a\x80\x20"));
  chain.append(tensor);
  grpc::ByteBuffer bytes = toByteBuffer(chain);
  EXPECT_EQ(bytes.Length(), chain.size());
  std::vector<grpc::Slice> slices = slicesOf(bytes);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), tensor.data());  // referenced, not copied
  EXPECT_EQ(contentsOf(bytes), chain.toString());
}

TEST(GrpcByteBuffer, KeepsTheOwnerAliveAfterTheBufferIsDropped) {
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  std::optional<grpc::ByteBuffer> bytes;
  {
    Buffer tensor = trackedBuffer(std::string(1000, 'x'), destroyed);
    bytes = toByteBuffer(BufferChain(tensor));
  }
  EXPECT_FALSE(destroyed->load());
  EXPECT_EQ(contentsOf(*bytes), std::string(1000, 'x'));
  grpc::ByteBuffer copy = *bytes;  // a second reference to the same slices
  bytes.reset();
  EXPECT_FALSE(destroyed->load());
  EXPECT_EQ(contentsOf(copy), std::string(1000, 'x'));
  copy.Clear();
  EXPECT_TRUE(destroyed->load());
}

TEST(GrpcByteBuffer, FromSingleSliceReferencesIt) {
  std::optional<grpc::ByteBuffer> bytes;
  const uint8_t* slice_data = nullptr;
  {
    grpc::Slice slice(std::string(2048, 's'));
    slice_data = slice.begin();
    bytes.emplace(&slice, 1);
  }
  StatusOr<Buffer> buffer = fromByteBuffer(*bytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->data(), slice_data);
  bytes.reset();  // the Buffer alone keeps the slice alive
  EXPECT_EQ(buffer->view(), std::string(2048, 's'));
}

TEST(GrpcByteBuffer, FromManySlicesFlattensOnce) {
  grpc::Slice parts[] = {grpc::Slice(std::string("hello ")), grpc::Slice(std::string(100, 'w')),
                         grpc::Slice(std::string("!"))};
  grpc::ByteBuffer bytes(parts, 3);
  StatusOr<Buffer> buffer = fromByteBuffer(bytes);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->view(), "hello " + std::string(100, 'w') + "!");
}

TEST(GrpcByteBuffer, EmptyChainAndEmptyByteBuffer) {
  grpc::ByteBuffer bytes = toByteBuffer(BufferChain());
  EXPECT_EQ(bytes.Length(), 0u);
  StatusOr<Buffer> buffer = fromByteBuffer(bytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(buffer->empty());
}

TEST(GrpcByteBuffer, RejectsAnUninitialisedByteBuffer) {
  grpc::ByteBuffer none;
  EXPECT_EQ(fromByteBuffer(none).status().code(), absl::StatusCode::kInternal);
}

TEST(GrpcByteBuffer, CarriesAnEncodedRequestIntact) {
  InferRequest request;
  request.model_name = "m";
  for (int i = 0; i < 50; ++i) {
    InferInput in{
        .name = "in" + std::to_string(i), .datatype = DataType::kUint8, .shape = Shape{i * 10}};
    in.data = Buffer::fromString(std::string(static_cast<size_t>(i) * 10, static_cast<char>(i)));
    request.inputs.push_back(std::move(in));
  }
  StatusOr<BufferChain> chain = ProtobufRequestEncoder().encode(request);
  ASSERT_TRUE(chain.ok());
  grpc::ByteBuffer bytes = toByteBuffer(*chain);
  // grpc may merge the small copied glue slices; every tensor segment is referenced.
  std::vector<grpc::Slice> slices = slicesOf(bytes);
  EXPECT_LE(slices.size(), chain->segments().size());
  for (const Buffer& segment : chain->segments()) {
    if (segment.size() <= kInlineCopyBytes) continue;
    bool found = false;
    for (const grpc::Slice& s : slices) found |= s.begin() == segment.data();
    EXPECT_TRUE(found) << segment.size();
  }
  StatusOr<Buffer> message = fromByteBuffer(bytes);
  ASSERT_TRUE(message.ok());
  StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(*message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, request);
}

}  // namespace
}  // namespace infergate::codecs
