// infergate: a sidecar gateway for KServe v2 / Triton inference servers.

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"
#include "config/config_loader.h"
#include "config/validate_command.h"
#include "gateway/gateway_server.h"
#include "gateway/library_threads.h"
#include "gateway/transcode_command.h"
#include "gateway/allocator.h"
#include "shm/cuda_probe.h"

namespace {

constexpr std::string_view kUsage =
    "usage: infergate --config FILE [--ready-file PATH]   run the gateway\n"
    "       infergate validate FILE                       check a configuration\n"
    "       infergate transcode ...                       convert an inference body\n"
    "       infergate version\n"
    "On start the gateway prints one JSON line with every bound address, e.g.\n"
    "  {\"event\":\"ready\",\"pid\":7,\"http\":\"127.0.0.1:8000\",\"grpc\":\"127.0.0.1:8001\",...}\n"
    "and writes the same line to --ready-file once every listener accepts. SIGHUP reloads\n"
    "the configuration file (as does a change to it, and POST /admin/reload on the metrics\n"
    "listener). SIGTERM or SIGINT drains: not ready, no new connections, requests in\n"
    "flight finish (lifecycle.drain_timeout_ms, 10 s by default), then exit 0.\n";

// Sockets are the gateway's currency: use every descriptor the hard limit allows.
void raiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int serve(infergate::config::GatewayConfig config, std::string_view ready_file,
          const sigset_t& signals) {
  infergate::gateway::GatewayServer server(std::move(config));
  infergate::codecs::Status started = server.start();
  if (!started.ok()) {
    std::cerr << "infergate: cannot start: " << infergate::codecs::messageOf(started) << "\n";
    server.shutdown(std::chrono::milliseconds(0));
    return 1;
  }
  std::string line = server.readyLine();
  std::cout << line << std::endl;
  if (!ready_file.empty()) {
    std::string tmp = std::string(ready_file) + ".tmp";
    { std::ofstream(tmp) << line << "\n"; }
    std::rename(tmp.c_str(), std::string(ready_file).c_str());  // appears whole, at once
  }
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    // reload() logs its outcome; a broken file leaves the old table serving.
    server.reload().IgnoreError();
  }
  std::cerr << "infergate: signal " << signal << ", draining\n";
  server.shutdown(server.drainTimeout());  // the reloaded value, if a reload changed it
  return 0;
}

int runGateway(std::string_view config_path, std::string_view ready_file) {
  // Debian's abseil checks every absl::Mutex acquisition (grpc's locks) for lock-order
  // cycles, a debugging aid: ~1.5% of the gateway's CPU on the gRPC passthrough path
  // (perf record of the gateway under load); it does not change what locks do.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto config = infergate::config::loadConfigFile(std::string(config_path));
  if (!config.ok()) {
    std::cerr << "infergate: " << infergate::codecs::messageOf(config.status()) << "\n";
    return 1;
  }
  raiseFileLimit();
  // Signals are taken synchronously by this thread; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // The gateway holds grpc up from before the server until after it is gone, so grpc
  // winds down here, not in exit-time destructors.
  grpc_init();
  const int code = serve(std::move(*config), ready_file, signals);
  grpc_shutdown_blocking();
  infergate::gateway::awaitLibraryThreads(std::chrono::seconds(1));
  return code;
}

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
              << cuda.detail << "\n"
              << "malloc: " << infergate::gateway::mallocName() << "\n";
    return 0;
  }
  std::span<const std::string_view> rest(args.begin() + 1, args.end());
  if (args[0] == "transcode") {
    return infergate::gateway::runTranscodeCommand(rest, std::cin, std::cout, std::cerr);
  }
  if (args[0] == "validate") {
    return infergate::config::runValidateCommand(rest, std::cout, std::cerr);
  }
  if (args[0] == "--config") {
    std::string_view config, ready_file;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--config" && i + 1 < args.size()) {
        config = args[++i];
      } else if (args[i] == "--ready-file" && i + 1 < args.size()) {
        ready_file = args[++i];
      } else {
        std::cerr << "infergate: unknown or incomplete option '" << args[i] << "'\n" << kUsage;
        return 2;
      }
    }
    return runGateway(config, ready_file);
  }
  std::cerr << "infergate: unknown command '" << args[0] << "'\n" << kUsage;
  return 2;
}
