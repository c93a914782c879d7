// What fresh memory costs a large message, against memory already touched: the first write
// of every byte of a block the process has just taken, the way a message that arrives
// while the buffer pool has no free block of its class is written.
//
//   first_touch [BYTES] [ITERATIONS]     (defaults: 67108864 bytes, 11 iterations)
//
// heap_us:   a new[] block of BYTES (the allocator's own mapping for sizes this large),
//            written once with memset, then freed; median of N.
// pool_us:   the same from codecs::BufferPool with nothing cached (every block fresh), which
//            maps blocks of 2 MiB and more on huge-page boundaries advised MADV_HUGEPAGE.
// warm_us:   memset of a block already written: the floor both are measured against.
// Prints one JSON object {"bytes","iterations","heap_us","pool_us","warm_us","thp"} where
// thp is /sys/kernel/mm/transparent_hugepage/enabled's selected mode ("" if unreadable).
// bench/README.md, "Blocks on huge pages".

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "codecs/buffer_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double medianMicros(int iterations, Fn fn) {
  std::vector<double> runs;
  for (int i = 0; i < iterations; ++i) {
    const Clock::time_point start = Clock::now();
    fn();
    runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// Keeps the compiler from dropping writes to memory that is freed right after them.
void keep(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// The bracketed word of the kernel's THP setting: "always", "madvise" or "never".
std::string thpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{64} << 20;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 11;
  if (bytes == 0 || iterations <= 0) {
    std::fprintf(stderr, "usage: first_touch [BYTES] [ITERATIONS]\n");
    return 2;
  }
  const double heap = medianMicros(iterations, [&] {
    std::unique_ptr<uint8_t[]> block(new uint8_t[bytes]);
    std::memset(block.get(), 1, bytes);
    keep(block.get());
  });
  auto pool = infergate::codecs::BufferPool::create(0);  // keeps nothing: every block fresh
  const double pooled = medianMicros(iterations, [&] {
    infergate::codecs::MutableBuffer block = pool->allocate(bytes);
    std::memset(block.data(), 1, bytes);
    keep(block.data());
  });
  std::unique_ptr<uint8_t[]> warm(new uint8_t[bytes]);
  std::memset(warm.get(), 0, bytes);
  const double touched = medianMicros(iterations, [&] {
    std::memset(warm.get(), 1, bytes);
    keep(warm.get());
  });
  std::printf("{\"bytes\": %zu, \"iterations\": %d, \"heap_us\": %.1f, \"pool_us\": %.1f, \"warm_us\": %.1f, "
              "\"thp\": \"%s\"}\n",
              bytes, iterations, heap, pooled, touched, thpMode().c_str());
  return 0;
}
