#pragma once

// Per model-version inference statistics, in the shape of Triton's statistics extension
// (PROTOCOL.md 2.1): counters kept under a mutex, read as a snapshot, rendered as the
// JSON object of one `model_stats` entry or as inference::ModelStatistics.
//
// What is measured (the demo models run in microseconds; their delays stand in for
// compute): queue = arrival to execute(), compute_infer = execute() plus the delays of
// every response, compute_output = filtering and classification, success = the whole
// request including the delays. compute_input is counted with 0 ns. Only errors a model
// raised count as failures; refusals before the model (unknown model, bad shape) are not
// recorded, as in Triton.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "codecs/json_writer.h"
#include "grpc_service.pb.h"

namespace infergate::gateway::builtin {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void add(uint64_t n) {
    ++count;
    ns += n;
  }
};

struct ResponseStat {
  DurationStat compute_infer, compute_output, success, fail, empty_response, cancel;
};

struct BatchStat {
  DurationStat compute_input, compute_infer, compute_output;
};

struct StatisticsSnapshot {
  uint64_t last_inference_ms = 0;  // ms since the epoch
  uint64_t inference_count = 0;    // batch items, at least 1 per execution
  uint64_t execution_count = 0;
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output, cache_hit,
      cache_miss;
  std::map<std::string, ResponseStat> responses;  // key: response index, as Triton's map
  std::map<uint64_t, BatchStat> batches;          // key: batch size
};

// The timings of one request that reached its model.
struct RequestTiming {
  uint64_t batch_size = 1;  // max(1, batch)
  uint64_t queue_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
  uint64_t total_ns = 0;
  uint64_t end_ms = 0;  // ms since the epoch
};

class ModelStatistics {
 public:
  void recordSuccess(const RequestTiming& timing);
  void recordFailure(uint64_t total_ns, uint64_t end_ms);
  // Per response of a request: `index` in emission order, `elapsed_ns` since arrival.
  void recordResponse(size_t index, bool ok, bool empty, uint64_t compute_ns, uint64_t elapsed_ns);
  StatisticsSnapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  StatisticsSnapshot stats_;
};

// One `model_stats` entry, keys in Triton's order: name, version, last_inference,
// inference_count, execution_count, inference_stats, response_stats, batch_stats,
// memory_usage (always []).
void writeStatisticsJson(codecs::JsonWriter& writer, std::string_view name,
                         std::string_view version, const StatisticsSnapshot& stats);

void fillStatisticsProto(inference::ModelStatistics* out, std::string_view name,
                         std::string_view version, const StatisticsSnapshot& stats);

// Nanoseconds in a duration, never negative.
inline uint64_t nanosOf(std::chrono::nanoseconds d) {
  return d.count() < 0 ? 0 : static_cast<uint64_t>(d.count());
}

}  // namespace infergate::gateway::builtin
