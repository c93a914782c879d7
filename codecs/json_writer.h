#pragma once

// A small JSON writer that appends compact JSON to a std::string, in the byte form Triton
// (rapidjson's Writer) produces, so that encoded bodies match Triton's:
//   - strings: `"` `\` and control characters escaped (\b \f \n \r \t, else \u00XX); every
//     other byte, including non-UTF-8 bytes, written as is (Triton does not validate);
//   - integers exact (int64 and uint64, no double round trip);
//   - doubles in shortest round-trip digits laid out as rapidjson does: "1.0", "0.001",
//     "1e21", "1.5e-7"; NaN and infinities as the literals NaN, Infinity, -Infinity.
//
// The writer inserts commas itself; keys and values alternate inside objects.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infergate::codecs {

void appendJsonString(std::string& out, std::string_view value);
void appendJsonInt(std::string& out, int64_t value);
void appendJsonUint(std::string& out, uint64_t value);
void appendJsonDouble(std::string& out, double value);

// Writes `value` (rapidjson layout) to `p`, which has room for kMaxJsonNumberChars bytes;
// returns the end. Bytes between the end and p + kMaxJsonNumberChars may be overwritten.
char* writeJsonDouble(char* p, double value);
// Worst-case characters one writeJsonDouble / integer may write.
inline constexpr size_t kMaxJsonNumberChars = 32;

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);
  JsonWriter& string(std::string_view value);
  JsonWriter& boolean(bool value);
  JsonWriter& int64(int64_t value);
  JsonWriter& uint64(uint64_t value);
  JsonWriter& dbl(double value);
  JsonWriter& null();
  // A JSON text produced elsewhere, written as one value.
  JsonWriter& raw(std::string_view json);

  std::string& out() { return out_; }

 private:
  void separate();

  std::string& out_;
  // Per open container: has it got an element yet? A key sets after_key_.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace infergate::codecs
