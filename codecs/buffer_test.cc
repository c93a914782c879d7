#include "codecs/buffer.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

TEST(Buffer, SliceSharesOwnerAndOutlivesParent) {
  Buffer slice;
  {
    Buffer whole = Buffer::fromString("hello world");
    slice = whole.slice(6, 5);
    EXPECT_EQ(slice.data(), whole.data() + 6);
  }
  EXPECT_EQ(slice.view(), "world");  // the owner is kept alive by the slice (ASan checks)
}

TEST(Buffer, MutableBufferFreezesWithoutCopy) {
  MutableBuffer m = MutableBuffer::allocate(4);
  uint8_t* p = m.data();
  std::memcpy(p, "abcd", 4);
  Buffer b = std::move(m).freeze(3);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.view(), "abc");
  EXPECT_EQ(m.data(), nullptr);
}

TEST(Buffer, SharedWrittenBytesOutliveTheWriter) {
  Buffer first, second;
  {
    MutableBuffer m = MutableBuffer::allocate(8);
    std::memcpy(m.data(), "abcd", 4);
    first = m.shareWritten(0, 4);
    std::memcpy(m.data() + 4, "efgh", 4);  // the writer goes on after what it shared
    second = m.shareWritten(4, 4);
    EXPECT_EQ(first.data(), m.data());
    EXPECT_EQ(second.data(), m.data() + 4);
  }
  // The storage is kept by the shares once the MutableBuffer is gone (ASan checks).
  EXPECT_EQ(first.view(), "abcd");
  EXPECT_EQ(second.view(), "efgh");
}

TEST(BufferChain, FlattensAndSkipsEmptySegments) {
  BufferChain chain;
  chain.append(Buffer::copyOf("ab"));
  chain.append(Buffer());
  chain.append(Buffer::copyOf("cde"));
  EXPECT_EQ(chain.segments().size(), 2u);
  EXPECT_EQ(chain.size(), 5u);
  EXPECT_EQ(chain.flatten().view(), "abcde");
  EXPECT_EQ(chain.toString(), "abcde");
  Buffer single = Buffer::copyOf("x");
  EXPECT_EQ(BufferChain(single).flatten().data(), single.data());
}

}  // namespace
}  // namespace infergate::codecs
