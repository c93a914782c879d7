#pragma once

// What the standalone CUDA programs here share (plain C++ and the CUDA runtime only).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace infergate::shm::standalone {

// The exit status a program gives when the machine has no CUDA device: ctest and the
// end-to-end tests read it as "skipped".
inline constexpr int kSkipExit = 77;

// True, after printing "no CUDA device: skipped (<why>)" on standard output, when the
// runtime sees no device.
inline bool noCudaDevice() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return false;
  std::printf("no CUDA device: skipped (%s)\n",
              status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  return true;
}

inline std::string toHex(const uint8_t* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace infergate::shm::standalone
