#pragma once

// HTTP/2 framing (RFC 9113 section 4 and 6): frame types, flags, error codes, settings,
// and the 9-byte frame header.

#include <cstddef>
#include <cstdint>
#include <string>

namespace infergate::gateway::http2 {

inline constexpr size_t kFrameHeaderBytes = 9;
inline constexpr uint32_t kDefaultMaxFrameBytes = 16384;  // SETTINGS_MAX_FRAME_SIZE's initial
inline constexpr uint32_t kLargestMaxFrameBytes = (1u << 24) - 1;
inline constexpr int32_t kDefaultWindow = 65535;
inline constexpr int64_t kLargestWindow = (int64_t{1} << 31) - 1;
inline constexpr int32_t kLargestStreamId = INT32_MAX;

// The client's connection preface (RFC 9113 3.4).
inline constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr size_t kClientPrefaceBytes = sizeof(kClientPreface) - 1;

enum class FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

namespace flags {
inline constexpr uint8_t kEndStream = 0x1;
inline constexpr uint8_t kAck = 0x1;  // SETTINGS, PING
inline constexpr uint8_t kEndHeaders = 0x4;
inline constexpr uint8_t kPadded = 0x8;
inline constexpr uint8_t kPriority = 0x20;
}  // namespace flags

enum ErrorCode : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
};

enum class SettingId : uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
};

struct FrameHeader {
  uint32_t length = 0;
  FrameType type = FrameType::kData;
  uint8_t flags = 0;
  int32_t stream = 0;  // the reserved bit dropped
};

inline FrameHeader readFrameHeader(const uint8_t* p) {
  FrameHeader h;
  h.length = (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
  h.type = static_cast<FrameType>(p[3]);
  h.flags = p[4];
  h.stream = static_cast<int32_t>(((uint32_t{p[5]} << 24) | (uint32_t{p[6]} << 16) | (uint32_t{p[7]} << 8) | p[8]) &
                                  0x7fffffffu);
  return h;
}

inline void writeFrameHeader(uint8_t* p, uint32_t length, FrameType type, uint8_t flags, int32_t stream) {
  p[0] = static_cast<uint8_t>(length >> 16);
  p[1] = static_cast<uint8_t>(length >> 8);
  p[2] = static_cast<uint8_t>(length);
  p[3] = static_cast<uint8_t>(type);
  p[4] = flags;
  p[5] = static_cast<uint8_t>(static_cast<uint32_t>(stream) >> 24);
  p[6] = static_cast<uint8_t>(static_cast<uint32_t>(stream) >> 16);
  p[7] = static_cast<uint8_t>(static_cast<uint32_t>(stream) >> 8);
  p[8] = static_cast<uint8_t>(stream);
}

inline void appendFrameHeader(std::string& out, uint32_t length, FrameType type, uint8_t flags, int32_t stream) {
  uint8_t h[kFrameHeaderBytes];
  writeFrameHeader(h, length, type, flags, stream);
  out.append(reinterpret_cast<const char*>(h), kFrameHeaderBytes);
}

inline void appendU32(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

inline uint32_t readU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace infergate::gateway::http2
