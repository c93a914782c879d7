#pragma once

// Whether this process can use CUDA: built with CUDA support, a driver present, and how
// many devices it sees. The binary links the static CUDA runtime, so it starts the same
// with or without a GPU; this probe is how the rest of the gateway asks (CUDA shared-
// memory registration answers UNIMPLEMENTED when `usable` is false).

#include <string>

namespace infergate::shm {

struct CudaStatus {
  bool compiled_in = false;  // built against the CUDA toolkit
  bool usable = false;       // a driver answered and at least one device is visible
  int device_count = 0;
  int runtime_version = 0;   // e.g. 13000 for CUDA 13.0; 0 when not compiled in
  std::string detail;        // why not usable, in words ("no CUDA driver found", ...)
};

// Probes once per call (cheap after the first: the runtime caches the driver state).
CudaStatus probeCuda();

}  // namespace infergate::shm
