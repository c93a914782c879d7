// The client's side of a CUDA shared-memory region, for end-to-end tests: what a Triton
// client does with tritonclient.utils.cuda_shared_memory (allocate device memory, export
// its IPC handle, write inputs, read outputs), as a small program a test drives over its
// standard input and output. Plain C++ and the CUDA runtime only, like cuda_ipc_check.cc.
//
//   cuda_client_region BYTE_SIZE [DEVICE]
//     allocates BYTE_SIZE bytes on DEVICE (default 0), fills them with 0xa5 and prints
//       handle <128 hex digits: the cudaIpcMemHandle_t>
//     then answers one line per command until `quit` or the end of its input:
//       write OFFSET HEX     copies the bytes into the allocation        -> ok
//       read OFFSET SIZE     copies SIZE bytes out                         -> data HEX
//       fill BYTE            sets every byte (decimal BYTE)               -> ok
//       free                 frees the allocation (its handle stays printed above, so a
//                            test can register a handle whose memory is gone) -> ok
//     a command that fails answers `error <words>` and the program goes on.
//
// Exit status: 0 after quit; 1 the allocation failed; 2 usage; 77 no CUDA device (the
// line "no CUDA device: skipped (...)" on standard output), which tests read as a skip.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "shm/cuda_ipc.h"
#include "shm/cuda_standalone/check_util.h"

namespace {

using infergate::shm::CudaDeviceBuffer;
using infergate::shm::kCudaIpcHandleBytes;
using infergate::shm::standalone::toHex;

constexpr uint8_t kFill = 0xa5;

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool fromHex(const std::string& hex, std::vector<uint8_t>* out) {
  if (hex.size() % 2 != 0) return false;
  out->resize(hex.size() / 2);
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = hexDigit(hex[2 * i]);
    int lo = hexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

// A decimal uint64 that is the whole of `text`.
bool parseUint(const std::string& text, uint64_t* value) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  char* end = nullptr;
  *value = std::strtoull(text.c_str(), &end, 10);
  return end != text.c_str() && *end == '\0';
}

// One command line; the answer line it prints.
std::string answer(const std::string& line, std::unique_ptr<CudaDeviceBuffer>& buffer) {
  std::istringstream words(line);
  std::string verb, a, b, rest;
  words >> verb >> a >> b;
  if (words >> rest) return "error too many words";
  if (verb != "free" && buffer == nullptr) return "error the allocation was freed";
  std::string error;
  if (verb == "write") {
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
    if (!parseUint(a, &offset) || !fromHex(b, &bytes)) return "error usage: write OFFSET HEX";
    if (!buffer->copyFromHost(offset, bytes.data(), bytes.size(), &error)) return "error " + error;
    return "ok";
  }
  if (verb == "read") {
    uint64_t offset = 0, size = 0;
    if (!parseUint(a, &offset) || !parseUint(b, &size)) return "error usage: read OFFSET SIZE";
    if (size > buffer->byteSize()) return "error SIZE is larger than the allocation";
    std::vector<uint8_t> bytes(size);
    if (!buffer->copyToHost(offset, bytes.data(), size, &error)) return "error " + error;
    return "data " + toHex(bytes.data(), bytes.size());
  }
  if (verb == "fill") {
    uint64_t value = 0;
    if (!parseUint(a, &value) || value > 255 || !b.empty()) return "error usage: fill BYTE";
    std::vector<uint8_t> bytes(buffer->byteSize(), static_cast<uint8_t>(value));
    if (!buffer->copyFromHost(0, bytes.data(), bytes.size(), &error)) return "error " + error;
    return "ok";
  }
  if (verb == "free") {
    if (!a.empty()) return "error usage: free";
    buffer.reset();
    return "ok";
  }
  return "error unknown command '" + verb + "'";
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t byte_size = 0, device = 0;
  if (argc < 2 || argc > 3 || !parseUint(argv[1], &byte_size) || byte_size == 0 ||
      (argc == 3 && (!parseUint(argv[2], &device) || device > 1023))) {
    std::fprintf(stderr, "usage: %s BYTE_SIZE [DEVICE]\n", argv[0]);
    return 2;
  }
  if (infergate::shm::standalone::noCudaDevice()) return infergate::shm::standalone::kSkipExit;
  std::string error;
  std::unique_ptr<CudaDeviceBuffer> buffer =
      CudaDeviceBuffer::create(static_cast<int>(device), byte_size, &error);
  if (buffer == nullptr) {
    std::fprintf(stderr, "cuda_client_region: %s\n", error.c_str());
    return 1;
  }
  std::vector<uint8_t> fill(byte_size, kFill);
  if (!buffer->copyFromHost(0, fill.data(), byte_size, &error)) {
    std::fprintf(stderr, "cuda_client_region: %s\n", error.c_str());
    return 1;
  }
  std::cout << "handle " << toHex(buffer->ipcHandle(), kCudaIpcHandleBytes) << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") return 0;
    std::cout << answer(line, buffer) << std::endl;
  }
  return 0;
}
