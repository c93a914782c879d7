// infergate: a sidecar gateway for KServe v2 / Triton inference servers.

#include <iostream>
#include <string_view>
#include <vector>

#include "gateway/transcode_command.h"
#include "shm/cuda_probe.h"

namespace {

constexpr std::string_view kUsage =
    "usage: infergate <command> [options]\n"
    "commands:\n"
    "  transcode   convert an inference body between JSON, binary-tensor and protobuf\n"
    "  version     print the version\n"
    "Run 'infergate <command> --help' for a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "version" || args[0] == "--version") {
    infergate::shm::CudaStatus cuda = infergate::shm::probeCuda();
    std::cout << "infergate " << INFERGATE_VERSION << "\n"
              << "cuda: " << (cuda.compiled_in ? "built in" : "not built in") << "; "
              << cuda.detail << "\n";
    return 0;
  }
  if (args[0] == "transcode") {
    std::span<const std::string_view> rest(args.begin() + 1, args.end());
    return infergate::gateway::runTranscodeCommand(rest, std::cin, std::cout, std::cerr);
  }
  std::cerr << "infergate: unknown command '" << args[0] << "'\n" << kUsage;
  return 2;
}
