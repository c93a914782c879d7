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
