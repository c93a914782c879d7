#include "gateway/http2/hpack.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <utility>


namespace infergate::gateway::http2 {
namespace {

// RFC 7541 Appendix A.
constexpr std::pair<std::string_view, std::string_view> kStatic[kStaticTableSize] = {
    {":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"},
    {":path", "/index.html"}, {":scheme", "http"}, {":scheme", "https"}, {":status", "200"},
    {":status", "204"}, {":status", "206"}, {":status", "304"}, {":status", "400"},
    {":status", "404"}, {":status", "500"}, {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"}, {"accept-language", ""}, {"accept-ranges", ""},
    {"accept", ""}, {"access-control-allow-origin", ""}, {"age", ""}, {"allow", ""},
    {"authorization", ""}, {"cache-control", ""}, {"content-disposition", ""},
    {"content-encoding", ""}, {"content-language", ""}, {"content-length", ""},
    {"content-location", ""}, {"content-range", ""}, {"content-type", ""}, {"cookie", ""},
    {"date", ""}, {"etag", ""}, {"expect", ""}, {"expires", ""}, {"from", ""}, {"host", ""},
    {"if-match", ""}, {"if-modified-since", ""}, {"if-none-match", ""}, {"if-range", ""},
    {"if-unmodified-since", ""}, {"last-modified", ""}, {"link", ""}, {"location", ""},
    {"max-forwards", ""}, {"proxy-authenticate", ""}, {"proxy-authorization", ""},
    {"range", ""}, {"referer", ""}, {"refresh", ""}, {"retry-after", ""}, {"server", ""},
    {"set-cookie", ""}, {"strict-transport-security", ""}, {"transfer-encoding", ""},
    {"user-agent", ""}, {"vary", ""}, {"via", ""}, {"www-authenticate", ""},
};

// RFC 7541 Appendix B: the code length of each symbol, 0..255 and EOS (256). The code is
// canonical: the codes follow from the lengths (shorter first, then by symbol).
constexpr uint8_t kCodeBits[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10, 13, 6,  7,  7,  7,  7,  7,  7,
    7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,  6,  7,  6,  5,  5,  6,  7,  7,
    7,  7,  7,  15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21,
    23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24,
    21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
};
constexpr int kEos = 256;

// The code of every symbol, from the lengths.
struct HuffmanCodes {
  uint32_t code[257];
  HuffmanCodes() {
    std::array<int, 257> order;
    for (int s = 0; s < 257; ++s) order[s] = s;
    std::stable_sort(order.begin(), order.end(), [](int a, int b) { return kCodeBits[a] < kCodeBits[b]; });
    uint32_t next = 0;
    int bits = kCodeBits[order[0]];
    for (int i = 0; i < 257; ++i) {
      const int s = order[i];
      if (i > 0) next = (next + 1) << (kCodeBits[s] - bits);
      bits = kCodeBits[s];
      code[s] = next;
    }
  }
};
const HuffmanCodes& codes() {
  static const HuffmanCodes c;
  return c;
}

// The decoding automaton: a state is an internal node of the code tree (256 of them for
// 257 leaves, the root 0); from each, 4 input bits lead to another and emit at most one
// symbol (no code is shorter than 5 bits).
struct HuffmanStep {
  uint8_t next;
  uint8_t flags;
  uint8_t symbol;
};
constexpr uint8_t kEmit = 1;
constexpr uint8_t kFail = 2;  // EOS decoded
constexpr uint8_t kAccept = 4;  // `next` may end the string: its path is all ones, < 8 bits

struct HuffmanAutomaton {
  HuffmanStep step[256][16];
  HuffmanAutomaton() {
    // The tree: internal nodes 0..255, children as node ids; a leaf is 256 + symbol.
    int child[256][2];
    for (auto& c : child) c[0] = c[1] = -1;
    int depth[256] = {0};
    bool ones[256] = {true};
    int nodes = 1;
    for (int s = 0; s < 257; ++s) {
      int n = 0;
      for (int b = kCodeBits[s] - 1; b >= 0; --b) {
        const int bit = (codes().code[s] >> b) & 1;
        if (b == 0) {
          child[n][bit] = 256 + s;
        } else {
          if (child[n][bit] < 0) {
            depth[nodes] = depth[n] + 1;
            ones[nodes] = ones[n] && bit == 1;
            child[n][bit] = nodes++;
          }
          n = child[n][bit];
        }
      }
    }
    for (int state = 0; state < 256; ++state) {
      for (int nibble = 0; nibble < 16; ++nibble) {
        HuffmanStep st{0, 0, 0};
        int n = state;
        for (int b = 3; b >= 0; --b) {
          const int c = child[n][(nibble >> b) & 1];
          if (c >= 256) {
            if (c - 256 == kEos) {
              st.flags |= kFail;
              break;
            }
            st.flags |= kEmit;
            st.symbol = static_cast<uint8_t>(c - 256);
            n = 0;
          } else {
            n = c;
          }
        }
        st.next = static_cast<uint8_t>(n);
        if (n == 0 || (ones[n] && depth[n] < 8)) st.flags |= kAccept;
        step[state][nibble] = st;
      }
    }
  }
};
const HuffmanAutomaton& automaton() {
  static const HuffmanAutomaton a;
  return a;
}

// Equality of short strings without a call into libc: eight bytes at a time, inline (the
// encoder compares a few names and values per field, most under 32 bytes).
template <typename Word>
inline bool sameWord(const char* a, const char* b) {
  Word x, y;
  std::memcpy(&x, a, sizeof(Word));
  std::memcpy(&y, b, sizeof(Word));
  return x == y;
}

inline bool sameBytes(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (!sameWord<uint64_t>(p + i, q + i)) return false;
    }
    return sameWord<uint64_t>(p + n - 8, q + n - 8);  // the last word, overlapping
  }
  if (n >= 4) return sameWord<uint32_t>(p, q) && sameWord<uint32_t>(p + n - 4, q + n - 4);
  return n == 0 || (p[0] == q[0] && p[n / 2] == q[n / 2] && p[n - 1] == q[n - 1]);
}

// Name -> its first static index, for the encoder: open addressing over a cheap hash of
// the name's length and three of its bytes (61 names in 256 slots).
class StaticNames {
 public:
  StaticNames() {
    for (size_t i = kStaticTableSize; i >= 1; --i) {
      const bool same_as_next = i < kStaticTableSize && kStatic[i - 1].first == kStatic[i].first;
      last_[i] = static_cast<uint8_t>(same_as_next ? last_[i + 1] : i);
    }
    for (size_t i = 1; i <= kStaticTableSize; ++i) {
      if (i > 1 && kStatic[i - 1].first == kStatic[i - 2].first) continue;
      size_t h = hash(kStatic[i - 1].first);
      while (slot_[h] != 0) h = (h + 1) & 255;
      slot_[h] = static_cast<uint8_t>(i);
    }
  }
  size_t find(std::string_view name) const {
    if (name.empty()) return 0;
    for (size_t h = hash(name); slot_[h] != 0; h = (h + 1) & 255) {
      if (sameBytes(kStatic[slot_[h] - 1].first, name)) return slot_[h];
    }
    return 0;
  }
  // The last static index with the name of index `i` (the entries of a name are consecutive).
  size_t lastOfName(size_t i) const { return last_[i]; }

 private:
  static size_t hash(std::string_view n) {
    const auto b = [&](size_t i) { return static_cast<size_t>(static_cast<uint8_t>(n[i])); };
    return (n.size() * 131 + b(0) * 7 + b(n.size() / 2) * 17 + b(n.size() - 1) * 31) & 255;
  }
  uint8_t slot_[256] = {};
  uint8_t last_[kStaticTableSize + 1] = {};
};
const StaticNames& staticNames() {
  static const StaticNames names;
  return names;
}

size_t slotsFor(size_t max_bytes) { return std::bit_ceil(max_bytes / kEntryOverheadBytes + 2); }

// RFC 7541 5.1: an integer with an N-bit prefix. Values above 2^28 are refused: no table,
// string or index this layer accepts comes near, and the arithmetic stays in range.
constexpr uint64_t kMaxInteger = uint64_t{1} << 28;

constexpr size_t kKeptScratchBytes = 64 * 1024;  // Huffman room kept between blocks

bool readInteger(std::span<const uint8_t> in, size_t& pos, int prefix_bits, uint64_t& value) {
  const uint8_t mask = static_cast<uint8_t>((1u << prefix_bits) - 1);
  value = in[pos++] & mask;
  if (value < mask) return true;
  int shift = 0;
  while (pos < in.size()) {
    const uint8_t b = in[pos++];
    if (shift > 28) return false;
    value += static_cast<uint64_t>(b & 0x7f) << shift;
    if (value > kMaxInteger) return false;
    if ((b & 0x80) == 0) return true;
    shift += 7;
  }
  return false;
}

void writeInteger(uint8_t first_bits, int prefix_bits, uint64_t value, std::string& out) {
  const uint8_t mask = static_cast<uint8_t>((1u << prefix_bits) - 1);
  if (value < mask) {
    out.push_back(static_cast<char>(first_bits | value));
    return;
  }
  out.push_back(static_cast<char>(first_bits | mask));
  value -= mask;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void writeString(std::string_view s, std::string& out) {
  writeInteger(0x00, 7, s.size(), out);
  out.append(s);
}

}  // namespace

HpackTable::Entry staticEntry(size_t index) {
  return {kStatic[index - 1].first, kStatic[index - 1].second};
}

// ---- the table ----

HpackTable::HpackTable(size_t max_bytes)
    : max_bytes_(max_bytes), slots_(slotsFor(max_bytes)), mask_(slots_.size() - 1) {}

void HpackTable::evictOldest() {
  Slot& s = slots_[(head_ - count_) & mask_];
  bytes_ -= s.bytes.size() + kEntryOverheadBytes;
  --count_;
}

void HpackTable::setMaxBytes(size_t max_bytes) {
  max_bytes_ = max_bytes;
  while (bytes_ > max_bytes_) evictOldest();
  if (slotsFor(max_bytes) <= slots_.size()) return;
  // More entries may now fit than the ring holds: lay the ring out again, oldest first.
  std::vector<Slot> grown(slotsFor(max_bytes));
  for (size_t i = 0; i < count_; ++i) {
    grown[i] = std::move(slots_[(head_ - count_ + i) & mask_]);
  }
  slots_ = std::move(grown);
  mask_ = slots_.size() - 1;
  head_ = count_;
}

size_t HpackTable::find(std::string_view name, std::string_view value, size_t* name_index) const {
  const size_t total = name.size() + value.size();
  for (size_t i = 0; i < count_; ++i) {
    const Slot& s = slots_[(head_ - 1 - i) & mask_];
    if (s.name_len != name.size() || !sameBytes(std::string_view(s.bytes.data(), s.name_len), name)) continue;
    if (s.bytes.size() == total && sameBytes(std::string_view(s.bytes.data() + s.name_len, value.size()), value)) {
      return i + 1;
    }
    if (name_index != nullptr && *name_index == 0) *name_index = kStaticTableSize + 1 + i;
  }
  return 0;
}

void HpackTable::insert(std::string_view name, std::string_view value) {
  const size_t size = name.size() + value.size() + kEntryOverheadBytes;
  if (size > max_bytes_) {
    while (count_ > 0) evictOldest();
    return;
  }
  while (bytes_ + size > max_bytes_) evictOldest();
  // The head slot holds no entry (the ring has one slot more than entries can fill), so
  // `name` may still point into an entry just evicted: its bytes are untouched.
  Slot& s = slots_[head_];
  s.bytes.assign(name);
  s.bytes.append(value);
  s.name_len = name.size();
  head_ = (head_ + 1) & mask_;
  ++count_;
  bytes_ += size;
}

// ---- Huffman ----

namespace {

// At most 8 symbols per 5 input bytes: no code is shorter than 5 bits.
size_t huffmanDecodedBound(size_t in) { return in * 8 / 5 + 1; }

// Decodes into `out` (room for huffmanDecodedBound bytes); the length, or -1.
ptrdiff_t huffmanDecodeTo(std::span<const uint8_t> in, char* out) {
  const HuffmanAutomaton& a = automaton();
  char* w = out;
  uint8_t state = 0;
  uint8_t flags = kAccept;
  for (const uint8_t byte : in) {
    HuffmanStep st = a.step[state][byte >> 4];
    if (st.flags & kFail) return -1;
    if (st.flags & kEmit) *w++ = static_cast<char>(st.symbol);
    st = a.step[st.next][byte & 0x0f];
    if (st.flags & kFail) return -1;
    if (st.flags & kEmit) *w++ = static_cast<char>(st.symbol);
    state = st.next;
    flags = st.flags;
  }
  return (flags & kAccept) != 0 ? w - out : -1;
}

}  // namespace

bool huffmanDecode(std::span<const uint8_t> in, std::string& out) {
  const size_t start = out.size();
  out.resize(start + huffmanDecodedBound(in.size()));
  const ptrdiff_t n = huffmanDecodeTo(in, out.data() + start);
  out.resize(n < 0 ? start : start + static_cast<size_t>(n));
  return n >= 0;
}

size_t huffmanEncodedLength(std::string_view in) {
  size_t bits = 0;
  for (const unsigned char c : in) bits += kCodeBits[c];
  return (bits + 7) / 8;
}

void huffmanEncode(std::string_view in, std::string& out) {
  const HuffmanCodes& c = codes();
  uint64_t acc = 0;
  int bits = 0;
  for (const unsigned char ch : in) {
    acc = (acc << kCodeBits[ch]) | c.code[ch];
    bits += kCodeBits[ch];
    while (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits));
    }
    acc &= (uint64_t{1} << bits) - 1;
  }
  if (bits > 0) out.push_back(static_cast<char>((acc << (8 - bits)) | (0xff >> bits)));
}

// ---- the decoder ----

HpackDecoder::HpackDecoder(size_t max_table_bytes) : table_(max_table_bytes), max_table_bytes_(max_table_bytes) {}

void HpackDecoder::setMaxTableBytes(size_t max_table_bytes) {
  max_table_bytes_ = max_table_bytes;
  if (table_.maxBytes() > max_table_bytes) update_required_ = true;
}

namespace {

// A string literal at `pos` (RFC 7541 5.2): a view of the block, or of `scratch` when
// Huffman-coded.
bool readString(std::span<const uint8_t> in, size_t& pos, std::string& scratch, std::string_view& s) {
  if (pos >= in.size()) return false;
  const bool huffman = (in[pos] & 0x80) != 0;
  uint64_t length = 0;
  if (!readInteger(in, pos, 7, length) || length > in.size() - pos) return false;
  const auto bytes = in.subspan(pos, length);
  pos += length;
  if (!huffman) {
    s = std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return true;
  }
  // The scratch only grows: it is written through, never cleared or zero-filled again.
  if (scratch.size() < huffmanDecodedBound(bytes.size())) scratch.resize(huffmanDecodedBound(bytes.size()));
  const ptrdiff_t n = huffmanDecodeTo(bytes, scratch.data());
  if (n < 0) return false;
  s = std::string_view(scratch.data(), static_cast<size_t>(n));
  return true;
}

}  // namespace

HpackDecoder::Result HpackDecoder::decode(std::span<const uint8_t> block, size_t max_list_bytes, FieldFn field) {
  Result r;
  size_t pos = 0;
  bool fields_seen = false;
  auto fail = [&](std::string_view what, size_t at) {
    r.status = codecs::invalidArgument("HPACK: ", what, " at byte ", at, " of the header block");
    return r;
  };
  auto lookup = [&](uint64_t index, HpackTable::Entry& e) {
    if (index == 0) return false;
    if (index <= kStaticTableSize) {
      e = staticEntry(index);
      return true;
    }
    if (index - kStaticTableSize > table_.size()) return false;
    e = table_.at(index - kStaticTableSize - 1);
    return true;
  };
  auto emit = [&](std::string_view name, std::string_view value) {
    r.list_bytes += name.size() + value.size() + kEntryOverheadBytes;
    if (r.list_bytes > max_list_bytes) r.too_large = true;
    if (!r.too_large) field(name, value);
  };
  while (pos < block.size()) {
    const size_t at = pos;
    const uint8_t b = block[pos];
    if (b & 0x80) {  // indexed field
      uint64_t index = 0;
      HpackTable::Entry e;
      if (!readInteger(block, pos, 7, index)) return fail("a malformed index", at);
      if (!lookup(index, e)) return fail(codecs::strCat("index ", index, " is in neither table"), at);
      if (update_required_) return fail("a field before the required table size update", at);
      fields_seen = true;
      emit(e.name, e.value);
      continue;
    }
    if ((b & 0xe0) == 0x20) {  // dynamic table size update
      uint64_t size = 0;
      if (!readInteger(block, pos, 5, size)) return fail("a malformed table size update", at);
      if (fields_seen) return fail("a table size update after a field", at);
      if (size > max_table_bytes_) {
        return fail(codecs::strCat("a table size of ", size, " bytes, over the ", max_table_bytes_, " announced"), at);
      }
      table_.setMaxBytes(size);
      update_required_ = false;
      continue;
    }
    // A literal: with incremental indexing (01), without (0000) or never indexed (0001).
    const bool indexing = (b & 0xc0) == 0x40;
    uint64_t name_index = 0;
    if (!readInteger(block, pos, indexing ? 6 : 4, name_index)) return fail("a malformed name index", at);
    if (update_required_) return fail("a field before the required table size update", at);
    std::string_view name;
    if (name_index != 0) {
      HpackTable::Entry e;
      if (!lookup(name_index, e)) return fail(codecs::strCat("name index ", name_index, " is in neither table"), at);
      name = e.name;
    } else if (!readString(block, pos, name_scratch_, name)) {
      return fail("a malformed name string", at);
    }
    std::string_view value;
    if (!readString(block, pos, value_scratch_, value)) return fail("a malformed value string", at);
    fields_seen = true;
    emit(name, value);
    if (indexing) table_.insert(name, value);
  }
  if (update_required_) return fail("no table size update where one was required", block.size());
  // A rare long Huffman string's room is not kept for every later block.
  for (std::string* scratch : {&name_scratch_, &value_scratch_}) {
    if (scratch->size() > kKeptScratchBytes) std::string().swap(*scratch);
  }
  return r;
}

// ---- the encoder ----

HpackEncoder::HpackEncoder(size_t max_table_bytes) : table_(max_table_bytes), own_max_bytes_(max_table_bytes) {}

void HpackEncoder::setPeerMaxTableBytes(size_t peer_max_bytes) {
  const size_t size = std::min(peer_max_bytes, own_max_bytes_);
  if (size == table_.maxBytes() && pending_update_ == SIZE_MAX) return;
  // RFC 7541 4.2: when the size fell and rose again before a block, the smallest is
  // announced first, then the final one.
  pending_update_ = std::min(pending_update_, size);
  final_update_ = size;
  table_.setMaxBytes(size);
}

void HpackEncoder::beginBlock(std::string& out) {
  if (pending_update_ == SIZE_MAX) return;
  writeInteger(0x20, 5, pending_update_, out);
  if (final_update_ != pending_update_) writeInteger(0x20, 5, final_update_, out);
  pending_update_ = final_update_ = SIZE_MAX;
}

void HpackEncoder::encode(std::string_view name, std::string_view value, Indexing how, std::string& out) {
  size_t name_index = staticNames().find(name);
  if (name_index != 0) {
    // The entries of one name are consecutive: only their values are compared.
    for (size_t i = name_index, last = staticNames().lastOfName(name_index); i <= last; ++i) {
      if (sameBytes(kStatic[i - 1].second, value)) return writeInteger(0x80, 7, i, out);
    }
  }
  if (how != Indexing::kNeverIndex) {
    if (const size_t hit = table_.find(name, value, name_index == 0 ? &name_index : nullptr); hit != 0) {
      return writeInteger(0x80, 7, kStaticTableSize + hit, out);
    }
  }
  const bool indexing =
      how == Indexing::kIndex && name.size() + value.size() + kEntryOverheadBytes <= table_.maxBytes();
  const uint8_t first = indexing ? 0x40 : how == Indexing::kNeverIndex ? 0x10 : 0x00;
  writeInteger(first, indexing ? 6 : 4, name_index, out);
  if (name_index == 0) writeString(name, out);
  writeString(value, out);
  if (indexing) table_.insert(name, value);
}

}  // namespace infergate::gateway::http2
