#pragma once

// HPACK (RFC 7541): the header compression of HTTP/2, both directions, for the gateway's
// own HTTP/2 layer.
//
//   HpackDecoder   turns one whole header block (a HEADERS frame's fragment and its
//                  CONTINUATIONs, joined) into fields, in order, keeping the dynamic table
//                  the peer's encoder drives. Huffman-coded strings are decoded four bits
//                  at a time through a state table built once from the code lengths.
//   HpackEncoder   writes fields: a static or dynamic table hit as one index, otherwise a
//                  literal (never Huffman-coded: on loopback the bytes cost less than the
//                  coding) that the caller may let enter the table.
//
// Errors: a block the decoder cannot read is a COMPRESSION_ERROR, fatal to the connection
// (the table is then out of step with the peer's); the returned status names the first
// fault and the byte offset where it lies. A block that decodes but whose fields exceed
// the caller's list limit is not an error of HPACK: the block is read to its end (the
// table must stay in step), and the result says it was too large.
//
// Threads: one object per connection direction, used by one thread at a time.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "codecs/status.h"

namespace infergate::gateway::http2 {

// RFC 7540 6.5.2: the dynamic table size both ends start with.
inline constexpr size_t kDefaultHeaderTableBytes = 4096;

// RFC 7541 4.1: an entry's size counts its name, its value and 32 bytes.
inline constexpr size_t kEntryOverheadBytes = 32;

// The dynamic table: newest entry first (index 62 when it exists), oldest evicted first.
// Slots are a ring sized for the most entries the limit allows (each entry counts at least
// 32 bytes) and keep their strings' capacity when reused, so a table in steady use does
// not allocate.
class HpackTable {
 public:
  explicit HpackTable(size_t max_bytes);

  struct Entry {
    std::string_view name;
    std::string_view value;
  };

  size_t size() const { return count_; }
  size_t bytes() const { return bytes_; }
  size_t maxBytes() const { return max_bytes_; }
  // 0 is the newest entry. `i` < size().
  Entry at(size_t i) const {
    const Slot& s = slots_[(head_ - 1 - i) & mask_];
    return {std::string_view(s.bytes).substr(0, s.name_len), std::string_view(s.bytes).substr(s.name_len)};
  }

  // The 1-based position of the entry (name, value), 0 when absent; when `name_index`
  // points at 0, it is set to the HPACK index (static entries counted) of the newest entry
  // of that name, if any.
  size_t find(std::string_view name, std::string_view value, size_t* name_index) const;

  // Evicts until the table fits `max_bytes`, which becomes the limit.
  void setMaxBytes(size_t max_bytes);
  // RFC 7541 4.4: an entry larger than the whole table empties it and is not added. The
  // views may point into this table (a name taken from an entry about to be evicted).
  void insert(std::string_view name, std::string_view value);

 private:
  struct Slot {
    std::string bytes;  // name then value
    size_t name_len = 0;
  };
  void evictOldest();

  size_t max_bytes_;
  size_t bytes_ = 0;  // by RFC 7541's measure
  std::vector<Slot> slots_;  // circular, a power of two: head_ is where the next entry goes
  size_t mask_ = 0;  // slots_.size() - 1
  size_t head_ = 0;
  size_t count_ = 0;
};

class HpackDecoder {
 public:
  // `max_table_bytes`: the SETTINGS_HEADER_TABLE_SIZE this end announced, the most the
  // peer's encoder may use.
  explicit HpackDecoder(size_t max_table_bytes = kDefaultHeaderTableBytes);

  // A new announced limit (once the peer acknowledged it). The peer's next block must then
  // start with a size update at or below it when the table it uses is larger.
  void setMaxTableBytes(size_t max_table_bytes);

  struct Result {
    codecs::Status status;  // not OK: COMPRESSION_ERROR, the connection must end
    size_t list_bytes = 0;  // RFC 7540 6.5.2's measure of the decoded list
    bool too_large = false;  // list_bytes passed the limit: fields after it were not handed on
  };

  // Decodes one whole header block, handing each field to `field` in order (the views
  // last only for the call). Fields past `max_list_bytes` are decoded (the table must
  // follow) but not handed on.
  using FieldFn = absl::FunctionRef<void(std::string_view name, std::string_view value)>;
  Result decode(std::span<const uint8_t> block, size_t max_list_bytes, FieldFn field);

  const HpackTable& table() const { return table_; }

 private:
  HpackTable table_;
  size_t max_table_bytes_;
  bool update_required_ = false;  // the limit fell below the table's size: one must come
  std::string name_scratch_;  // Huffman-decoded strings
  std::string value_scratch_;
};

// Huffman-decodes `in` (RFC 7541 5.2, Appendix B) onto the end of `out`. False when the
// input holds EOS or ends in padding that is longer than 7 bits or not all ones.
bool huffmanDecode(std::span<const uint8_t> in, std::string& out);

// Huffman-encodes `in` onto the end of `out` (for tests and for peers' sakes elsewhere).
void huffmanEncode(std::string_view in, std::string& out);
size_t huffmanEncodedLength(std::string_view in);

class HpackEncoder {
 public:
  // How a field that is not in a table may be written.
  enum class Indexing {
    kIndex,  // it enters the dynamic table: worth it when the next blocks repeat it
    kNoIndex,  // a literal that leaves the table alone (a value that changes per request)
    kNeverIndex,  // the same, and marked so that intermediaries never index it (secrets)
  };

  explicit HpackEncoder(size_t max_table_bytes = kDefaultHeaderTableBytes);

  // The peer's SETTINGS_HEADER_TABLE_SIZE. The table used is the smaller of it and the
  // size given at construction; a change is announced at the start of the next block.
  void setPeerMaxTableBytes(size_t peer_max_bytes);

  // Starts a header block in `out`: writes the pending size update, if any.
  void beginBlock(std::string& out);
  // Appends one field (lowercase name, as HTTP/2 requires: not checked here).
  void encode(std::string_view name, std::string_view value, Indexing how, std::string& out);

  const HpackTable& table() const { return table_; }

 private:
  HpackTable table_;
  size_t own_max_bytes_;
  size_t pending_update_ = SIZE_MAX;  // the smallest size to announce (SIZE_MAX: none)
  size_t final_update_ = SIZE_MAX;  // and the size after it
};

// The static table (RFC 7541 Appendix A): 61 entries, index 1 first.
inline constexpr size_t kStaticTableSize = 61;
HpackTable::Entry staticEntry(size_t index);  // 1 <= index <= 61

}  // namespace infergate::gateway::http2
