// loadgen: the project's load generator for HTTP/1.1 (keep-alive) and gRPC (ModelInfer),
// closed loop (--concurrency) or open loop (--rate), loopback targets only. Prints one
// JSON object on stdout. Usage: loadgen --help; what it is for: bench/README.md.

#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/loadgen.h"
#include "grpc_service.pb.h"

namespace infergate::bench {
namespace {

constexpr char kUsage[] = R"(usage: loadgen TARGET [options]
  TARGET               http://HOST:PORT[/PATH] or grpc://HOST:PORT; HOST must be loopback
                       (127.x.x.x, localhost, [::1])
  --concurrency N      connections (HTTP) or calls in flight (gRPC); closed loop: each
                       keeps one request outstanding (default 1)
  --rate R             open loop: R requests/s in all, latency counted from when each
                       request fell due; --concurrency caps connections/calls (default 0 =
                       closed loop)
  --duration S         measured seconds (default 10)
  --warmup S           seconds of load before measuring (default 0)
  --threads N          event-loop threads, connections split among them (default 1)
  HTTP:
  --body FILE          request body (POST by default when there is one)
  --header 'N: v'      extra request header (repeatable)
  --method M           request method (default POST with a body, GET without)
  --path P             request path (default: the TARGET's, else /)
  gRPC:
  --grpc-request FILE  a serialized inference.ModelInferRequest
  --grpc-method M      full method name (default /inference.GRPCInferenceService/ModelInfer)
  --grpc-channels N    distinct HTTP/2 connections, calls round-robin over them (default 1)
  --grpc-tls-ca FILE   TLS toward the target, its certificate verified against FILE (PEM)
  both:
  --model simple       built-in request for Triton's `simple` model (INT32 INPUT0/INPUT1
                       [1,16]); HTTP: JSON body to /v2/models/simple/infer
  --binary             with --model, HTTP: binary tensors in and out
  --dump-request FILE  write the body (HTTP) or serialized request (gRPC) and exit
Output: {"requests","errors","error_kinds","rps","p50_us","p90_us","p99_us","p999_us",
"max_us",...}; exit 3 when no request succeeded.
)";

// ---- LatencyHistogram and Stats (declared in loadgen.h) --------------------------------

}  // namespace

size_t LatencyHistogram::indexOf(int64_t us) {
  uint64_t v = static_cast<uint64_t>(std::clamp<int64_t>(us, 0, kMaxUs));
  if (v < (uint64_t{2} << kSubBits)) return v;
  int shift = std::bit_width(v) - 1 - kSubBits;
  return (static_cast<size_t>(shift) << kSubBits) + (v >> shift);
}

int64_t LatencyHistogram::upperEdge(size_t index) {
  if (index < (size_t{2} << kSubBits)) return static_cast<int64_t>(index);
  int shift = static_cast<int>(index >> kSubBits) - 1;
  uint64_t base = index - (static_cast<size_t>(shift) << kSubBits);
  return static_cast<int64_t>(((base + 1) << shift) - 1);
}

void LatencyHistogram::record(int64_t us) {
  us = std::max<int64_t>(us, 0);
  ++counts_[indexOf(us)];
  if (us > kMaxUs) ++overflow_;
  ++count_;
  sum_ += us;
  min_ = std::min(min_, us);
  max_ = std::max(max_, us);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  overflow_ += other.overflow_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

int64_t LatencyHistogram::percentile(double percent) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(upperEdge(i), max_);
  }
  return max_;
}

void Stats::merge(const Stats& other) {
  latency.merge(other.latency);
  send_lag.merge(other.send_lag);
  ok += other.ok;
  errors += other.errors;
  for (const auto& [kind, n] : other.error_kinds) error_kinds[kind] += n;
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  if (response_bytes == 0) response_bytes = other.response_bytes;
  if (sample_check.empty()) sample_check = other.sample_check;
  unfinished += other.unfinished;
}

namespace {

// ---- options ---------------------------------------------------------------------------

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

bool isLoopback(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// "http://127.0.0.1:8000/v2/x" -> protocol, host, port, path.
bool parseTarget(const std::string& target, Options* o, std::string* path) {
  std::string rest;
  if (target.rfind("http://", 0) == 0) {
    o->protocol = Protocol::kHttp;
    rest = target.substr(7);
  } else if (target.rfind("grpc://", 0) == 0) {
    o->protocol = Protocol::kGrpc;
    rest = target.substr(7);
  } else {
    return false;
  }
  size_t slash = rest.find('/');
  if (slash != std::string::npos) *path = rest.substr(slash);
  std::string authority = rest.substr(0, slash);
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = authority.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  int port = std::atoi(authority.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  o->host = host;
  o->port = static_cast<uint16_t>(port);
  return true;
}

std::string simpleJsonBody() {
  std::string in0 = "0", in1 = "1";
  for (int i = 1; i < 16; ++i) {
    in0.append(",").append(std::to_string(i));
    in1.append(",1");
  }
  return R"({"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[)" + in0 +
         R"(]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[)" + in1 + "]}]}";
}

void appendInt32s(std::string* out, int first, int step) {
  for (int i = 0; i < 16; ++i) {
    int32_t v = first + i * step;  // little-endian on every target we build for
    out->append(reinterpret_cast<const char*>(&v), 4);
  }
}

// Binary-tensor body: JSON header, then INPUT0 and INPUT1 as 64 raw bytes each.
std::string simpleBinaryBody(size_t* header_length) {
  std::string header =
      R"({"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},)"
      R"({"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],)"
      R"("parameters":{"binary_data_output":true}})";
  *header_length = header.size();
  appendInt32s(&header, 0, 1);
  appendInt32s(&header, 1, 0);
  return header;
}

std::string simpleGrpcRequest() {
  inference::ModelInferRequest request;
  request.set_model_name("simple");
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype("INT32");
    input->add_shape(1);
    input->add_shape(16);
  }
  appendInt32s(request.add_raw_input_contents(), 0, 1);
  appendInt32s(request.add_raw_input_contents(), 1, 0);
  return request.SerializeAsString();
}

bool parseNumber(const char* text, double min, double* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= min)) return false;
  *out = v;
  return true;
}

// Parses argv into *o; on a mistake prints it and returns false. *dump: --dump-request.
bool parseOptions(int argc, char** argv, Options* o, std::string* dump) {
  std::string target, path, body_file, grpc_file, model;
  bool binary = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char** out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto number = [&](double min, double* out) {
      const char* text = nullptr;
      return value(&text) && parseNumber(text, min, out);
    };
    const char* text = nullptr;
    double n = 0;
    bool good = true;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--concurrency") {
      good = number(1, &n) && (o->concurrency = static_cast<int>(n), true);
    } else if (arg == "--rate") {
      good = number(0, &o->rate);
    } else if (arg == "--duration") {
      good = number(0.001, &o->duration_s);
    } else if (arg == "--warmup") {
      good = number(0, &o->warmup_s);
    } else if (arg == "--threads") {
      good = number(1, &n) && (o->threads = static_cast<int>(n), true);
    } else if (arg == "--grpc-channels") {
      good = number(1, &n) && (o->grpc_channels = static_cast<int>(n), true);
    } else if (arg == "--grpc-tls-ca") {
      good = value(&text) && (o->grpc_tls_ca = text, true);
    } else if (arg == "--body") {
      good = value(&text) && (body_file = text, true);
    } else if (arg == "--header") {
      good = value(&text) && std::string(text).find(':') != std::string::npos &&
             (o->headers.emplace_back(text), true);
    } else if (arg == "--method") {
      good = value(&text) && (o->method = text, true);
    } else if (arg == "--path") {
      good = value(&text) && text[0] == '/' && (path = text, true);
    } else if (arg == "--grpc-request") {
      good = value(&text) && (grpc_file = text, true);
    } else if (arg == "--grpc-method") {
      good = value(&text) && (o->grpc_method = text, true);
    } else if (arg == "--model") {
      good = value(&text) && (model = text) == "simple";
    } else if (arg == "--binary") {
      binary = true;
    } else if (arg == "--dump-request") {
      good = value(&text) && (*dump = text, true);
    } else if (arg.rfind("--", 0) != 0 && target.empty()) {
      target = arg;
    } else {
      good = false;
    }
    if (!good) {
      std::cerr << "loadgen: bad or incomplete option " << arg << " (--help)\n";
      return false;
    }
  }
  if (!parseTarget(target, o, &o->path)) {
    std::cerr << "loadgen: TARGET must be http://HOST:PORT[/PATH] or grpc://HOST:PORT\n";
    return false;
  }
  if (!isLoopback(o->host)) {
    std::cerr << "loadgen: " << o->host << " is not a loopback address; loadgen is loopback-only\n";
    return false;
  }
  if (!model.empty() && o->protocol == Protocol::kGrpc) {
    o->grpc_request = simpleGrpcRequest();
  } else if (!model.empty()) {
    o->path = "/v2/models/simple/infer";
    if (binary) {
      size_t header_length = 0;
      o->body = simpleBinaryBody(&header_length);
      o->headers.push_back("Content-Type: application/octet-stream");
      o->headers.push_back("Inference-Header-Content-Length: " + std::to_string(header_length));
    } else {
      o->body = simpleJsonBody();
    }
  }
  if (!path.empty()) o->path = path;
  if (!body_file.empty() && !readFile(body_file, &o->body)) {
    std::cerr << "loadgen: cannot read " << body_file << "\n";
    return false;
  }
  if (!grpc_file.empty() && !readFile(grpc_file, &o->grpc_request)) {
    std::cerr << "loadgen: cannot read " << grpc_file << "\n";
    return false;
  }
  if (o->protocol == Protocol::kGrpc && o->grpc_request.empty() && dump->empty()) {
    std::cerr << "loadgen: gRPC needs --grpc-request FILE or --model simple\n";
    return false;
  }
  o->threads = std::min(o->threads, o->concurrency);
  return true;
}

// ---- the run ---------------------------------------------------------------------------

double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void sleepUntil(int64_t t) {
  int64_t now = nowNs();
  if (t > now) std::this_thread::sleep_for(std::chrono::nanoseconds(t - now));
}

std::string jsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  }
  return out;
}

void printResult(const Options& o, const Stats& s, double cpu_s) {
  const LatencyHistogram& h = s.latency;
  std::ostringstream kinds;
  for (const auto& [kind, n] : s.error_kinds) {
    kinds << (kinds.tellp() > 0 ? "," : "") << '"' << jsonEscape(kind) << "\":" << n;
  }
  char numbers[512];
  std::snprintf(numbers, sizeof(numbers),
                "\"rps\":%.1f,\"p50_us\":%lld,\"p90_us\":%lld,\"p99_us\":%lld,"
                "\"p999_us\":%lld,\"max_us\":%lld,\"min_us\":%lld,\"mean_us\":%.1f,"
                "\"client_cpu_pct\":%.1f",
                static_cast<double>(s.ok) / o.duration_s,
                static_cast<long long>(h.percentile(50)), static_cast<long long>(h.percentile(90)),
                static_cast<long long>(h.percentile(99)), static_cast<long long>(h.percentile(99.9)),
                static_cast<long long>(h.max()), static_cast<long long>(h.min()), h.mean(),
                100.0 * cpu_s / o.duration_s);
  bool http = o.protocol == Protocol::kHttp;
  std::cout << "{\"protocol\":\"" << (http ? "http" : "grpc") << "\",\"target\":\""
            << jsonEscape(o.host) << ':' << o.port << (http ? jsonEscape(o.path) : "")
            << "\",\"mode\":\"" << (o.rate > 0 ? "open" : "closed")
            << "\",\"concurrency\":" << o.concurrency << ",\"rate\":" << o.rate
            << ",\"threads\":" << o.threads << ",\"duration_s\":" << o.duration_s
            << ",\"warmup_s\":" << o.warmup_s << ",\"requests\":" << s.ok
            << ",\"errors\":" << s.errors << ",\"error_kinds\":{" << kinds.str() << "},"
            << numbers << ",\"latency_overflow\":" << h.overflow()
            << ",\"unfinished\":" << s.unfinished
            << ",\"request_bytes\":" << (http ? o.body.size() : o.grpc_request.size())
            << ",\"response_bytes\":" << s.response_bytes
            << ",\"bytes_sent\":" << s.bytes_sent << ",\"bytes_received\":" << s.bytes_received;
  if (o.rate > 0) {
    std::cout << ",\"send_lag_p50_us\":" << s.send_lag.percentile(50)
              << ",\"send_lag_p99_us\":" << s.send_lag.percentile(99)
              << ",\"send_lag_max_us\":" << s.send_lag.max();
  }
  if (!s.sample_check.empty()) std::cout << ",\"sample_check\":\"" << jsonEscape(s.sample_check) << '"';
  std::cout << "}" << std::endl;
}

int run(const Options& o) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  if (o.protocol == Protocol::kGrpc) {
    channels = connectGrpcChannels(o);
    if (channels.empty()) return 2;
  }
  Timeline timeline;
  timeline.start = nowNs();
  timeline.measure_from = timeline.start + static_cast<int64_t>(o.warmup_s * 1e9);
  timeline.end = timeline.measure_from + static_cast<int64_t>(o.duration_s * 1e9);

  std::vector<Stats> stats(o.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    int share = o.concurrency / o.threads + (t < o.concurrency % o.threads ? 1 : 0);
    double rate = o.rate / o.threads;
    // Threads take turns: thread t's sends fall due t/rate after thread 0's.
    auto phase = static_cast<int64_t>(o.rate > 0 ? t * 1e9 / o.rate : 0);
    threads.emplace_back([&, t, share, rate, phase] {
      if (o.protocol == Protocol::kHttp) {
        runHttpThread(o, share, rate, phase, timeline, &stats[t]);
      } else {
        runGrpcThread(o, channels, share, rate, phase, timeline, &stats[t]);
      }
    });
  }
  sleepUntil(timeline.measure_from);
  double cpu_from = cpuSeconds();
  sleepUntil(timeline.end);
  double cpu_s = cpuSeconds() - cpu_from;
  for (auto& thread : threads) thread.join();
  Stats total;
  for (const Stats& s : stats) total.merge(s);
  printResult(o, total, cpu_s);
  return total.ok > 0 ? 0 : 3;
}

}  // namespace
}  // namespace infergate::bench

int main(int argc, char** argv) {
  using namespace infergate::bench;
  std::signal(SIGPIPE, SIG_IGN);
  // Open-loop sends wake on timers: the default 50 us timer slack would make them late
  // (threads inherit the setting).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  Options options;
  std::string dump;
  if (!parseOptions(argc, argv, &options, &dump)) return 1;
  if (!dump.empty()) {
    std::ofstream out(dump, std::ios::binary);
    const std::string& bytes =
        options.protocol == Protocol::kHttp ? options.body : options.grpc_request;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out ? 0 : 1;
  }
  return run(options);
}
