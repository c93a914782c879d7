#pragma once

// Which allocator serves malloc in this process. Release builds link mimalloc (when the
// build found it; never under a sanitizer, which brings its own): about 100 instructions
// less than glibc's per allocation and free, 11-15% of a small proxied request's
// instructions (bench/README.md, "The handoff read straight into the pool, and
// mimalloc"). Asked at run time rather than taken from the build, so an LD_PRELOADed
// allocator is reported as what it is.

#include <string_view>

namespace infergate::gateway {

// "mimalloc" or "glibc": whose malloc is the process's; "other" for any other (a
// sanitizer's, an LD_PRELOADed allocator).
std::string_view mallocName();

}  // namespace infergate::gateway
