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
