#pragma once

// Client shared memory is off until the shared-memory issue turns it on: both frontends
// refuse any request that names a region, with the same words.

#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::gateway {

// INVALID_ARGUMENT naming the first input or output that refers to a shared-memory
// region; OK when none does.
codecs::Status refuseSharedMemory(const codecs::InferRequest& request);

}  // namespace infergate::gateway
