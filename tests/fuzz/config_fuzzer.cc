// Property: the YAML config loader takes any text without crashing or throwing, and
//   - refuses with one INVALID_ARGUMENT whose every line is "fuzz.yaml:LINE:COLUMN: ...",
//     LINE inside the text, no control character in it (what it quotes from the file is
//     escaped), the same message each time (the loader is pure);
//   - or accepts a config the route table builds from (the loader's checks cover
//     everything RouteTable::build() refuses): every target an upstream, weights 100.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codecs/text.h"
#include "config/config_loader.h"
#include "routing/route_table.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate;

namespace {

// "fuzz.yaml:12:3: routes[0].upstream: ..." with 1 <= 12 <= lines + 1.
void checkErrorLine(std::string_view line, size_t text_lines) {
  constexpr std::string_view kFile = "fuzz.yaml:";
  FUZZ_CHECK(line.starts_with(kFile));
  line.remove_prefix(kFile.size());
  size_t colon = line.find(':');
  FUZZ_CHECK(colon != std::string_view::npos);
  std::optional<uint64_t> number = codecs::parseUint64(line.substr(0, colon));
  FUZZ_CHECK(number && *number >= 1 && *number <= text_lines + 1);
  line.remove_prefix(colon + 1);
  colon = line.find(':');
  FUZZ_CHECK(colon != std::string_view::npos && codecs::parseUint64(line.substr(0, colon)));
  FUZZ_CHECK(line.substr(colon).starts_with(": ") && line.size() > colon + 2);
  for (char c : line) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto first = config::parseConfig(text, "fuzz.yaml");
  auto second = config::parseConfig(text, "fuzz.yaml");
  FUZZ_CHECK(first.ok() == second.ok());
  if (!first.ok()) {
    checkIsCleanError(first.status());
    FUZZ_CHECK(first.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(first.status().message() == second.status().message());
    size_t text_lines = 1;
    for (char c : text) text_lines += c == '\n' ? 1 : 0;
    std::string text_of_errors(first.status().message());
    std::string_view message = text_of_errors;
    while (!message.empty()) {
      size_t end = message.find('\n');
      checkErrorLine(message.substr(0, end), text_lines);
      if (end == std::string_view::npos) break;
      message.remove_prefix(end + 1);
    }
    return 0;
  }
  FUZZ_CHECK(!first->routes.empty() && !first->upstreams.empty());
  auto table = routing::RouteTable::build(*first);
  FUZZ_CHECK(table.ok());
  FUZZ_CHECK((*table)->routes().size() == first->routes.size());
  FUZZ_CHECK((*table)->upstreams().size() == first->upstreams.size());
  for (const routing::Route& route : (*table)->routes()) {
    uint32_t total = 0;
    for (const routing::Route::Target& target : route.targets) {
      FUZZ_CHECK(target.upstream < first->upstreams.size());
      total += target.weight;
    }
    FUZZ_CHECK(total == 100);
  }
  return 0;
}
