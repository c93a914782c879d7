// memcpy_count: an LD_PRELOAD library that counts the bytes a process moves with memcpy,
// memmove and mempcpy (and their fortified variants), for bench/run's copies-per-request
// figure (bench/README.md, "The suite").
//
//   LD_PRELOAD=build/release/bench/libmemcpy_count.so MEMCPY_COUNT_FILE=/tmp/counts infergate ...
//   kill -USR2 PID      appends "<bytes> <calls>\n" (totals since start) to MEMCPY_COUNT_FILE
//
// What it sees: every call that goes through the dynamic linker (the gateway's own code,
// libstdc++, grpc, protobuf, libcurl, libevent). What it does not: copies the compiler
// inlined (small, fixed sizes: never a tensor), copies inside glibc itself, and the
// kernel's (read, write, sendmsg), which are not memcpy. Written without <cstring>: this
// file defines the functions that header declares.

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace {

using CopyFn = void* (*)(void*, const void*, size_t);

uint64_t g_bytes = 0;
uint64_t g_calls = 0;
CopyFn g_memcpy = nullptr;
CopyFn g_memmove = nullptr;
CopyFn g_mempcpy = nullptr;
int g_out = -1;

void count(size_t n) {
  __atomic_fetch_add(&g_bytes, n, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_calls, 1, __ATOMIC_RELAXED);
}

// Before the real functions are resolved (dlsym may itself copy): byte by byte, forwards
// or backwards as memmove must.
void* slowMove(void* dst, const void* src, size_t n) {
  auto* d = static_cast<volatile unsigned char*>(dst);
  const auto* s = static_cast<const volatile unsigned char*>(src);
  if (d < s) {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    for (size_t i = n; i > 0; --i) d[i - 1] = s[i - 1];
  }
  return dst;
}

// Async-signal-safe: a fixed buffer, write(2).
size_t appendNumber(char* out, uint64_t value) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

void onReport(int) {
  if (g_out < 0) return;
  char line[64];
  size_t at = appendNumber(line, __atomic_load_n(&g_bytes, __ATOMIC_RELAXED));
  line[at++] = ' ';
  at += appendNumber(line + at, __atomic_load_n(&g_calls, __ATOMIC_RELAXED));
  line[at++] = '\n';
  ssize_t ignored = write(g_out, line, at);
  (void)ignored;
}

__attribute__((constructor)) void start() {
  g_memcpy = reinterpret_cast<CopyFn>(dlsym(RTLD_NEXT, "memcpy"));
  g_memmove = reinterpret_cast<CopyFn>(dlsym(RTLD_NEXT, "memmove"));
  g_mempcpy = reinterpret_cast<CopyFn>(dlsym(RTLD_NEXT, "mempcpy"));
  if (const char* path = std::getenv("MEMCPY_COUNT_FILE")) {
    g_out = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  struct sigaction action = {};
  action.sa_handler = onReport;
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &action, nullptr);
}

}  // namespace

extern "C" {

void* memcpy(void* dst, const void* src, size_t n) {
  count(n);
  return g_memcpy ? g_memcpy(dst, src, n) : slowMove(dst, src, n);
}

void* memmove(void* dst, const void* src, size_t n) {
  count(n);
  return g_memmove ? g_memmove(dst, src, n) : slowMove(dst, src, n);
}

void* mempcpy(void* dst, const void* src, size_t n) {
  count(n);
  if (g_mempcpy) return g_mempcpy(dst, src, n);
  return static_cast<unsigned char*>(slowMove(dst, src, n)) + n;
}

void* __memcpy_chk(void* dst, const void* src, size_t n, size_t) { return memcpy(dst, src, n); }
void* __memmove_chk(void* dst, const void* src, size_t n, size_t) { return memmove(dst, src, n); }

}  // extern "C"
