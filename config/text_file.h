#pragma once

// Reads a whole text file: the configuration, a hosts file for dns: endpoints.
//
// Errors name the path and the reason, "cannot read PATH: <strerror>" or "cannot read
// PATH: larger than N bytes": NOT_FOUND when the file does not exist, FAILED_PRECONDITION
// otherwise (a directory, no permission, too large). Blocking; thread-safe.

#include <cstddef>
#include <string>

#include "codecs/status.h"

namespace infergate::config {

codecs::StatusOr<std::string> readTextFile(const std::string& path, size_t max_bytes);

}  // namespace infergate::config
