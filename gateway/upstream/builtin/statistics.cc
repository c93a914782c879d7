#include "gateway/upstream/builtin/statistics.h"

namespace infergate::gateway::builtin {

void ModelStatistics::recordSuccess(const RequestTiming& t) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.last_inference_ms = t.end_ms;
  stats_.inference_count += t.batch_size;
  stats_.execution_count += 1;
  stats_.success.add(t.total_ns);
  stats_.queue.add(t.queue_ns);
  stats_.compute_input.add(0);
  stats_.compute_infer.add(t.compute_infer_ns);
  stats_.compute_output.add(t.compute_output_ns);
  BatchStat& batch = stats_.batches[t.batch_size];
  batch.compute_input.add(0);
  batch.compute_infer.add(t.compute_infer_ns);
  batch.compute_output.add(t.compute_output_ns);
}

void ModelStatistics::recordFailure(uint64_t total_ns, uint64_t end_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.last_inference_ms = end_ms;
  stats_.fail.add(total_ns);
}

void ModelStatistics::recordResponse(size_t index, bool ok, bool empty, uint64_t compute_ns,
                                     uint64_t elapsed_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ResponseStat& r = stats_.responses[std::to_string(index)];
  if (!ok) {
    r.fail.add(elapsed_ns);
  } else if (empty) {
    r.empty_response.add(elapsed_ns);
  } else {
    r.compute_infer.add(compute_ns);
    r.compute_output.add(0);
    r.success.add(elapsed_ns);
  }
}

StatisticsSnapshot ModelStatistics::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

namespace {

void writeDuration(codecs::JsonWriter& w, std::string_view key, const DurationStat& d) {
  w.key(key).beginObject().key("count").uint64(d.count).key("ns").uint64(d.ns).endObject();
}

void fillDuration(inference::StatisticDuration* out, const DurationStat& d) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

void writeStatisticsJson(codecs::JsonWriter& w, std::string_view name, std::string_view version,
                         const StatisticsSnapshot& s) {
  w.beginObject();
  w.key("name").string(name);
  w.key("version").string(version);
  w.key("last_inference").uint64(s.last_inference_ms);
  w.key("inference_count").uint64(s.inference_count);
  w.key("execution_count").uint64(s.execution_count);
  w.key("inference_stats").beginObject();
  writeDuration(w, "success", s.success);
  writeDuration(w, "fail", s.fail);
  writeDuration(w, "queue", s.queue);
  writeDuration(w, "compute_input", s.compute_input);
  writeDuration(w, "compute_infer", s.compute_infer);
  writeDuration(w, "compute_output", s.compute_output);
  writeDuration(w, "cache_hit", s.cache_hit);
  writeDuration(w, "cache_miss", s.cache_miss);
  w.endObject();
  w.key("response_stats").beginObject();
  for (const auto& [index, r] : s.responses) {
    w.key(index).beginObject();
    writeDuration(w, "compute_infer", r.compute_infer);
    writeDuration(w, "compute_output", r.compute_output);
    writeDuration(w, "success", r.success);
    writeDuration(w, "fail", r.fail);
    writeDuration(w, "empty_response", r.empty_response);
    writeDuration(w, "cancel", r.cancel);
    w.endObject();
  }
  w.endObject();
  w.key("batch_stats").beginArray();
  for (const auto& [size, b] : s.batches) {
    w.beginObject().key("batch_size").uint64(size);
    writeDuration(w, "compute_input", b.compute_input);
    writeDuration(w, "compute_infer", b.compute_infer);
    writeDuration(w, "compute_output", b.compute_output);
    w.endObject();
  }
  w.endArray();
  w.key("memory_usage").beginArray().endArray();
  w.endObject();
}

void fillStatisticsProto(inference::ModelStatistics* out, std::string_view name,
                         std::string_view version, const StatisticsSnapshot& s) {
  out->set_name(std::string(name));
  out->set_version(std::string(version));
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  inference::InferStatistics* infer = out->mutable_inference_stats();
  fillDuration(infer->mutable_success(), s.success);
  fillDuration(infer->mutable_fail(), s.fail);
  fillDuration(infer->mutable_queue(), s.queue);
  fillDuration(infer->mutable_compute_input(), s.compute_input);
  fillDuration(infer->mutable_compute_infer(), s.compute_infer);
  fillDuration(infer->mutable_compute_output(), s.compute_output);
  fillDuration(infer->mutable_cache_hit(), s.cache_hit);
  fillDuration(infer->mutable_cache_miss(), s.cache_miss);
  for (const auto& [index, r] : s.responses) {
    inference::InferResponseStatistics& rs = (*out->mutable_response_stats())[index];
    fillDuration(rs.mutable_compute_infer(), r.compute_infer);
    fillDuration(rs.mutable_compute_output(), r.compute_output);
    fillDuration(rs.mutable_success(), r.success);
    fillDuration(rs.mutable_fail(), r.fail);
    fillDuration(rs.mutable_empty_response(), r.empty_response);
    fillDuration(rs.mutable_cancel(), r.cancel);
  }
  for (const auto& [size, b] : s.batches) {
    inference::InferBatchStatistics* bs = out->add_batch_stats();
    bs->set_batch_size(size);
    fillDuration(bs->mutable_compute_input(), b.compute_input);
    fillDuration(bs->mutable_compute_infer(), b.compute_infer);
    fillDuration(bs->mutable_compute_output(), b.compute_output);
  }
}

}  // namespace infergate::gateway::builtin
