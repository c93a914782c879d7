#pragma once

// simple_sequence: Triton's sequence example. One int32 accumulator per correlation ID:
// a request flagged sequence_start sets it to INPUT, any other adds INPUT to it, and the
// reply is the accumulator; sequence_end drops the state after answering.
//
// Errors, with Triton's sequence batcher's messages (INVALID_ARGUMENT):
//   batch size other than 1     "inference request to model 'simple_sequence' must specify
//                                batch-size 1 due to requirements of sequence batcher"
//   no / zero / empty sequence_id "... must specify a non-zero or non-empty correlation ID"
//   not a start, id not live    "inference request for sequence <id> to model
//                                'simple_sequence' must specify the START flag on the first
//                                request of the sequence"
//
// State lives in a SequenceStore: a mutex-protected map with an LRU list. A sequence idle
// for longer than DemoOptions::sequence_idle is dropped (checked lazily on every call, no
// timer), and past DemoOptions::max_sequences live sequences the least recently used is
// dropped, so the map never grows without bound.

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codecs/parameters.h"
#include "codecs/status.h"
#include "gateway/upstream/builtin/demo_models.h"

namespace infergate::gateway::builtin {

// A correlation ID as Triton keeps it: a uint64 or a string (5 and "5" differ).
struct CorrelationId {
  bool is_string = false;
  uint64_t number = 0;
  std::string text;

  bool inSequence() const { return is_string ? !text.empty() : number != 0; }
  // The map key ("u5", "s5") and the form error messages show ("5").
  std::string key() const;
  std::string display() const;
};

// The request's sequence_id parameter: an int64 or uint64 number, or a string. Absent or
// of another kind reads as "not in a sequence".
CorrelationId correlationIdOf(const codecs::Parameters& parameters);

class SequenceStore {
 public:
  SequenceStore(std::chrono::microseconds idle, size_t max_sequences, SteadyClock clock);

  // Applies one request of sequence `id` and returns the accumulator after it. A
  // non-start request for a sequence that is not live fails (INVALID_ARGUMENT naming
  // `model`). Thread-safe.
  codecs::StatusOr<int32_t> apply(const CorrelationId& id, bool start, bool end, int32_t value,
                                  std::string_view model);

  size_t size() const;
  void clear();

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct State {
    int32_t total = 0;
    TimePoint last_used;
    std::list<std::string>::iterator lru;
  };

  void evictLocked(TimePoint now);
  void dropLocked(std::unordered_map<std::string, State>::iterator it);

  const std::chrono::microseconds idle_;
  const size_t max_sequences_;
  const SteadyClock clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, State> states_;
  std::list<std::string> lru_;  // front: most recently used
};

}  // namespace infergate::gateway::builtin
