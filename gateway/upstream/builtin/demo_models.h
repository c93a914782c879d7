#pragma once

// The demo models that back `infergate --config demo.yaml` and every end-to-end test:
//
//   simple           INPUT0, INPUT1 INT32 [16] -> OUTPUT0 = sum, OUTPUT1 = difference
//   simple_string    the same on BYTES elements holding decimal integers
//   identity_<type>  INPUT0 [-1] -> OUTPUT0, same bytes (the output Buffer is the input's)
//   simple_sequence  INPUT INT32 [1] -> OUTPUT INT32 [1], an accumulator per sequence id
//   repeat_int32     decoupled: IN INT32 [-1], DELAY UINT32 [-1], WAIT UINT32 [1]
//   sleep            INPUT0 INT32 [1] milliseconds -> OUTPUT0 = INPUT0 after that delay
//
// README.md in this folder gives the exact behaviour of each.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/upstream/builtin/model.h"

namespace infergate::gateway::builtin {

using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;

struct DemoOptions {
  // simple_sequence: a sequence idle this long is dropped (the next non-start request
  // for it fails as Triton's does after its reaper ran), ...
  std::chrono::microseconds sequence_idle = std::chrono::seconds(60);
  // ... and past this many live sequences the least recently used one is dropped.
  size_t max_sequences = 65536;
  // The clock the sequence store reads; empty = std::chrono::steady_clock::now. Tests
  // inject their own.
  SteadyClock clock;
};

// Every demo model name, in the order createDemo() lists them.
std::vector<std::string> demoModelNames();

// The named demo model, or nullptr for an unknown name.
std::shared_ptr<Model> makeDemoModel(std::string_view name, const DemoOptions& options = {});

// Factories of the model families (demo_models.cc, sequence_model.cc, repeat_model.cc).
std::shared_ptr<Model> makeSimpleModel();
std::shared_ptr<Model> makeSimpleStringModel();
std::shared_ptr<Model> makeIdentityModel(codecs::DataType datatype);
std::shared_ptr<Model> makeSleepModel();
std::shared_ptr<Model> makeSequenceModel(const DemoOptions& options);
std::shared_ptr<Model> makeRepeatModel();

// "identity_fp32" for kFp32.
std::string identityModelName(codecs::DataType datatype);

// Longest delay the sleep model honours; longer requests are clamped to it.
inline constexpr std::chrono::milliseconds kMaxSleep{60000};

}  // namespace infergate::gateway::builtin
