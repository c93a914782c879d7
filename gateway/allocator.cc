#include "gateway/allocator.h"

#include <dlfcn.h>

namespace infergate::gateway {

std::string_view mallocName() {
  // mimalloc's malloc is an alias of mi_malloc, glibc's of __libc_malloc: the same
  // address as the malloc the process resolves to, whichever took it.
  void* in_use = ::dlsym(RTLD_DEFAULT, "malloc");
  void* mimalloc = ::dlsym(RTLD_DEFAULT, "mi_malloc");
  void* glibc = ::dlsym(RTLD_DEFAULT, "__libc_malloc");
  if (mimalloc != nullptr && in_use == mimalloc) return "mimalloc";
  if (glibc != nullptr && in_use == glibc) return "glibc";
  return "other";
}

}  // namespace infergate::gateway
