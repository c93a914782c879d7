// A two-process check of shm/cuda_ipc_cuda.cc on a real GPU. Plain C++ and the CUDA
// runtime only, so it builds alone (see README.md here) as well as in the main tree.
//
//   parent  allocates a CudaDeviceBuffer, fills it with pattern A, starts a fresh copy of
//           this program (posix_spawn of /proc/self/exe: CUDA does not survive fork)
//           with the IPC handle in hex, waits for it, then expects pattern B;
//   child   `--child <hex handle> <byte_size>`: checks that an open asking for more bytes
//           than the allocation has fails, opens the handle, expects pattern A, checks
//           that out-of-bounds copies fail, and writes pattern B.
//
// Exit status: 0 passed; 1 failed (the reason on stderr); 77 no CUDA device (skipped).

#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shm/cuda_ipc.h"
#include "shm/cuda_standalone/check_util.h"

extern char** environ;

namespace {

using infergate::shm::CudaDeviceBuffer;
using infergate::shm::CudaIpcMemory;
using infergate::shm::kCudaIpcHandleBytes;
using infergate::shm::standalone::toHex;

constexpr uint64_t kByteSize = (1u << 20) + 3;  // not a multiple of anything convenient

[[noreturn]] void failWith(const std::string& who, const std::string& why) {
  std::fprintf(stderr, "cuda_ipc_check (%s): FAILED: %s\n", who.c_str(), why.c_str());
  std::exit(1);
}

uint8_t patternA(uint64_t i) { return static_cast<uint8_t>(i * 7 + 1); }
uint8_t patternB(uint64_t i) { return static_cast<uint8_t>(255 - (i * 13) % 251); }

std::vector<uint8_t> filled(uint8_t (*pattern)(uint64_t), uint64_t size) {
  std::vector<uint8_t> bytes(size);
  for (uint64_t i = 0; i < size; ++i) bytes[i] = pattern(i);
  return bytes;
}

// Index of the first byte that differs from the pattern, or -1.
int64_t firstMismatch(const std::vector<uint8_t>& bytes, uint8_t (*pattern)(uint64_t)) {
  for (uint64_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != pattern(i)) return static_cast<int64_t>(i);
  }
  return -1;
}

bool fromHex(const std::string& hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
    char* end = nullptr;
    out[i] = static_cast<uint8_t>(std::strtoul(pair, &end, 16));
    if (end != pair + 2) return false;
  }
  return true;
}

int runChild(const std::string& hex, uint64_t byte_size) {
  uint8_t handle[kCudaIpcHandleBytes];
  if (!fromHex(hex, handle, sizeof(handle))) failWith("child", "malformed handle argument");
  std::string error;

  // An allocation smaller than the registration asks for must be refused at open.
  if (CudaIpcMemory::open(handle, 0, byte_size + 1, &error) != nullptr) {
    failWith("child", "open with byte_size one past the allocation succeeded");
  }
  std::printf("child: open with byte_size %llu refused: %s\n",
              static_cast<unsigned long long>(byte_size + 1), error.c_str());

  std::unique_ptr<CudaIpcMemory> memory = CudaIpcMemory::open(handle, 0, byte_size, &error);
  if (memory == nullptr) failWith("child", "open failed: " + error);

  std::vector<uint8_t> bytes(byte_size);
  if (!memory->copyToHost(0, bytes.data(), byte_size, &error)) {
    failWith("child", "copyToHost failed: " + error);
  }
  if (int64_t at = firstMismatch(bytes, patternA); at >= 0) {
    failWith("child", "pattern A differs at byte " + std::to_string(at));
  }

  uint8_t scratch[2] = {};
  if (memory->copyToHost(byte_size - 1, scratch, 2, &error)) {
    failWith("child", "copyToHost one byte past the end succeeded");
  }
  if (memory->copyFromHost(std::numeric_limits<uint64_t>::max(), scratch, 1, &error)) {
    failWith("child", "copyFromHost at an overflowing offset succeeded");
  }
  if (memory->copyFromHost(byte_size, scratch, 1, &error)) {
    failWith("child", "copyFromHost at the end succeeded");
  }

  std::vector<uint8_t> reply = filled(patternB, byte_size);
  if (!memory->copyFromHost(0, reply.data(), byte_size, &error)) {
    failWith("child", "copyFromHost failed: " + error);
  }
  std::printf("child: read pattern A, wrote pattern B\n");
  return 0;
}

int runParent() {
  if (infergate::shm::standalone::noCudaDevice()) return infergate::shm::standalone::kSkipExit;
  std::string error;
  std::unique_ptr<CudaDeviceBuffer> buffer = CudaDeviceBuffer::create(0, kByteSize, &error);
  if (buffer == nullptr) failWith("parent", "CudaDeviceBuffer::create failed: " + error);

  std::vector<uint8_t> bytes = filled(patternA, kByteSize);
  if (!buffer->copyFromHost(0, bytes.data(), kByteSize, &error)) {
    failWith("parent", "copyFromHost failed: " + error);
  }
  uint8_t scratch[1] = {};
  if (buffer->copyToHost(kByteSize, scratch, 1, &error)) {
    failWith("parent", "copyToHost at the end of the buffer succeeded");
  }

  std::string hex = toHex(buffer->ipcHandle(), kCudaIpcHandleBytes);
  std::string size = std::to_string(kByteSize);
  char self[] = "/proc/self/exe";
  char child_flag[] = "--child";
  char* argv[] = {self, child_flag, hex.data(), size.data(), nullptr};
  pid_t pid = 0;
  if (int rc = posix_spawn(&pid, self, nullptr, nullptr, argv, environ); rc != 0) {
    failWith("parent", std::string("posix_spawn failed: ") + std::strerror(rc));
  }
  int wait_status = 0;
  if (waitpid(pid, &wait_status, 0) != pid) failWith("parent", "waitpid failed");
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    failWith("parent", "the child process failed (status " + std::to_string(wait_status) + ")");
  }

  if (!buffer->copyToHost(0, bytes.data(), kByteSize, &error)) {
    failWith("parent", "copyToHost failed: " + error);
  }
  if (int64_t at = firstMismatch(bytes, patternB); at >= 0) {
    failWith("parent", "pattern B differs at byte " + std::to_string(at));
  }
  std::printf("cuda_ipc_check: passed (%llu bytes across two processes)\n",
              static_cast<unsigned long long>(kByteSize));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) {
    char* end = nullptr;
    unsigned long long size = std::strtoull(argv[3], &end, 10);
    if (end == argv[3] || *end != '\0' || size == 0) failWith("child", "malformed byte_size");
    return runChild(argv[2], size);
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s (the --child form is for the program's own use)\n",
                 argv[0]);
    return 1;
  }
  return runParent();
}
