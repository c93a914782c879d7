// The model-name rewrite in answers and requests (model_rename.h).
//
//   renameInJson()       scans the text once, checking its structure, and splices the new
//                        value over the old one
//   rewriteModelFields() walks the message's tags once (codecs/protobuf_wire.h), writes new
//                        fields 1 and 2 into one small glue buffer and keeps every other
//                        field as a slice of the caller's Buffer: a tensor is skipped by its
//                        length, never read or copied
//
// Pure functions of their arguments; nothing is shared between calls.

#include "gateway/upstream/model_rename.h"

#include <utility>

#include "codecs/json_value.h"
#include "codecs/json_writer.h"
#include "codecs/protobuf_wire.h"
#include "codecs/text.h"

namespace infergate::gateway::upstream {

using codecs::invalidArgument;
using codecs::JsonValue;
using codecs::Status;
using codecs::StatusOr;

// ==== rewrite: JSON =======================================================================

namespace {

// One pass over a JSON text that checks its structure (strings and their escapes, scalar
// tokens, `"key": value` members, brackets balanced, nothing after the top-level value)
// and collects the [begin, end) of every string value of a top-level member named `key`.
// It does not decode values or validate UTF-8: the bytes are kept, not interpreted.
class TopLevelStringFinder {
 public:
  using Range = std::pair<size_t, size_t>;

  TopLevelStringFinder(std::string_view text, std::string_view key) : text_(text), key_(key) {}

  // nullopt when the text is not one well-formed object, or a `key` member is no string.
  std::optional<std::vector<Range>> run() {
    skipWhitespace();
    if (!at('{')) return std::nullopt;
    std::vector<char> open;  // the closing bracket of every open container
    Expect expect = Expect::kValue;
    bool wanted = false;  // the value being read is that of a top-level `key` member
    while (true) {
      skipWhitespace();
      if (pos_ >= text_.size()) return std::nullopt;
      const char c = text_[pos_];
      switch (expect) {
        case Expect::kFirstKey:
        case Expect::kKey: {
          if (expect == Expect::kFirstKey && c == '}') break;  // {}
          const size_t begin = pos_;
          if (!skipString()) return std::nullopt;
          wanted = open.size() == 1 && keyMatches(text_.substr(begin, pos_ - begin));
          skipWhitespace();
          if (!at(':')) return std::nullopt;
          ++pos_;
          expect = Expect::kValue;
          continue;
        }
        case Expect::kFirstValue:
        case Expect::kValue: {
          if (expect == Expect::kFirstValue && c == ']') break;  // []
          if (wanted && c != '"') return std::nullopt;           // the member is not a string
          if (c == '{' || c == '[') {
            open.push_back(c == '{' ? '}' : ']');
            ++pos_;
            expect = c == '{' ? Expect::kFirstKey : Expect::kFirstValue;
            continue;
          }
          const size_t begin = pos_;
          if (c == '"' ? !skipString() : !skipScalar()) return std::nullopt;
          if (wanted) found_.emplace_back(begin, pos_);
          wanted = false;
          expect = Expect::kCommaOrEnd;
          continue;
        }
        case Expect::kCommaOrEnd:
          if (c == ',') {
            ++pos_;
            expect = open.back() == '}' ? Expect::kKey : Expect::kValue;
            continue;
          }
          break;
      }
      // Only a closing bracket is left to read here.
      if (c != open.back()) return std::nullopt;
      ++pos_;
      open.pop_back();
      if (open.empty()) break;
      expect = Expect::kCommaOrEnd;
    }
    skipWhitespace();
    if (pos_ != text_.size()) return std::nullopt;
    return std::move(found_);
  }

 private:
  enum class Expect { kFirstKey, kKey, kFirstValue, kValue, kCommaOrEnd };

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void skipWhitespace() {
    while (pos_ < text_.size() && codecs::isAsciiSpace(text_[pos_])) ++pos_;
  }

  // Past the string token at pos_ (a '"'); false when it is not terminated.
  bool skipString() {
    if (!at('"')) return false;
    for (++pos_; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '\\') {
        ++pos_;  // the escaped byte; \uXXXX's digits are plain bytes
      } else if (text_[pos_] == '"') {
        ++pos_;
        return true;
      }
    }
    return false;
  }

  // A number or a literal (true, false, null, and the NaN / Infinity Triton may write).
  bool skipScalar() {
    const size_t begin = pos_;
    while (pos_ < text_.size() && !codecs::isAsciiSpace(text_[pos_]) &&
           std::string_view(",:{}[]\"").find(text_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    const std::string_view token = text_.substr(begin, pos_ - begin);
    if (token == "true" || token == "false" || token == "null" || token == "NaN" ||
        token == "Infinity" || token == "-Infinity") {
      return true;
    }
    const std::string_view digits = token.starts_with('-') ? token.substr(1) : token;
    return !digits.empty() && digits.front() >= '0' && digits.front() <= '9' &&
           digits.find_first_not_of("0123456789.eE+-") == std::string_view::npos;
  }

  // `token` is a quoted key; escapes are decoded only when there are any.
  bool keyMatches(std::string_view token) const {
    std::string_view raw = token.substr(1, token.size() - 2);
    if (raw.find('\\') == std::string_view::npos) return raw == key_;
    StatusOr<JsonValue> decoded = codecs::parseJson(token);
    return decoded.ok() && decoded->isString() && decoded->asString() == key_;
  }

  std::string_view text_;
  std::string_view key_;
  size_t pos_ = 0;
  std::vector<Range> found_;
};

}  // namespace

std::optional<std::string> renameInJson(std::string_view json, std::string_view key,
                                        std::string_view value) {
  std::optional<std::vector<TopLevelStringFinder::Range>> found =
      TopLevelStringFinder(json, key).run();
  if (!found || found->empty()) return std::nullopt;
  std::string replacement;
  codecs::appendJsonString(replacement, value);
  // Every top-level occurrence: readers differ on which duplicate wins, and none of them
  // may see the upstream's name.
  std::string out;
  out.reserve(json.size() + found->size() * replacement.size());
  size_t copied = 0;
  for (const auto& [begin, end] : *found) {
    out.append(json.substr(copied, begin - copied)).append(replacement);
    copied = end;
  }
  out.append(json.substr(copied));
  return out;
}

// ==== rewrite: protobuf ===================================================================

namespace {

//   ModelInferRequest / ModelInferResponse       ModelStreamInferResponse
//     1 model_name     LEN   replaced              1 error_message   LEN   kept
//     2 model_version  LEN   replaced or kept      2 infer_response  LEN   rewritten inside
//     3.. anything           kept as slices        3.. anything            kept as slices
constexpr uint32_t kModelNameField = 1;
constexpr uint32_t kModelVersionField = 2;
constexpr uint32_t kInferResponseField = 2;

// A chain of new glue buffers and slices of `source`; slices that touch are joined, so a
// run of kept fields is one segment.
class SliceChain {
 public:
  explicit SliceChain(const codecs::Buffer& source) : source_(source) {}

  void keep(size_t begin, size_t end) {
    if (run_end_ > run_begin_ && run_end_ == begin) {
      run_end_ = end;
      return;
    }
    flush();
    run_begin_ = begin;
    run_end_ = end;
  }
  void add(std::string glue) {
    flush();
    chain_.append(codecs::Buffer::fromString(std::move(glue)));
  }
  codecs::BufferChain finish() && {
    flush();
    return std::move(chain_);
  }

 private:
  void flush() {
    if (run_end_ > run_begin_) chain_.append(source_.slice(run_begin_, run_end_ - run_begin_));
    run_begin_ = run_end_ = 0;
  }

  const codecs::Buffer& source_;
  codecs::BufferChain chain_;
  size_t run_begin_ = 0;
  size_t run_end_ = 0;
};

// The rewrite of one ModelInferRequest / ModelInferResponse: its new fields 1 and 2, and
// the byte ranges (offsets in the source Buffer) of every other field.
struct NameRewrite {
  std::string head;
  std::vector<std::pair<size_t, size_t>> kept;

  size_t size() const {
    size_t n = head.size();
    for (const auto& [begin, end] : kept) n += end - begin;
    return n;
  }
};

// `message` starts at `base` in the source Buffer. Protobuf's rules hold: the last
// model_version wins; a field 1 or 2 of another wire type is an unknown field (kept).
StatusOr<NameRewrite> planNameRewrite(std::span<const uint8_t> message, size_t base,
                                      std::string_view model,
                                      std::optional<std::string_view> version) {
  NameRewrite plan;
  std::string_view old_version;
  codecs::WireReader reader(message);
  while (!reader.done()) {
    const size_t begin = reader.position();
    INFERGATE_ASSIGN_OR_RETURN(codecs::FieldTag tag, reader.readTag());
    const bool name_field = tag.number == kModelNameField || tag.number == kModelVersionField;
    if (name_field && tag.type == codecs::WireType::kLen) {
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
      if (tag.number == kModelVersionField) old_version = codecs::asChars(value);
      continue;
    }
    INFERGATE_RETURN_IF_ERROR(reader.skip(tag));
    plan.kept.emplace_back(base + begin, base + reader.position());
  }
  // proto3 does not write empty strings.
  codecs::WireWriter writer(plan.head);
  const std::string_view new_version = version.value_or(old_version);
  if (!model.empty()) writer.bytesField(kModelNameField, model);
  if (!new_version.empty()) writer.bytesField(kModelVersionField, new_version);
  return plan;
}

void appendPlan(SliceChain& chain, NameRewrite plan) {
  chain.add(std::move(plan.head));
  for (const auto& [begin, end] : plan.kept) chain.keep(begin, end);
}

}  // namespace

StatusOr<codecs::BufferChain> rewriteModelFields(const codecs::Buffer& message,
                                                 std::string_view model,
                                                 std::optional<std::string_view> version) {
  INFERGATE_ASSIGN_OR_RETURN(NameRewrite plan, planNameRewrite(message.span(), 0, model, version));
  SliceChain chain(message);
  appendPlan(chain, std::move(plan));
  return std::move(chain).finish();
}

StatusOr<codecs::BufferChain> rewriteStreamModelFields(const codecs::Buffer& message,
                                                       std::string_view model,
                                                       std::optional<std::string_view> version) {
  SliceChain chain(message);
  codecs::WireReader reader(message.span());
  while (!reader.done()) {
    const size_t begin = reader.position();
    INFERGATE_ASSIGN_OR_RETURN(codecs::FieldTag tag, reader.readTag());
    if (tag.number != kInferResponseField || tag.type != codecs::WireType::kLen) {
      INFERGATE_RETURN_IF_ERROR(reader.skip(tag));
      chain.keep(begin, reader.position());
      continue;
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> inner, reader.readLengthDelimited());
    const size_t base = static_cast<size_t>(inner.data() - message.data());
    StatusOr<NameRewrite> plan = planNameRewrite(inner, base, model, version);
    if (!plan.ok()) return invalidArgument("infer_response: ", codecs::messageOf(plan.status()));
    // The new length goes in front of the new fields 1 and 2: one glue buffer.
    std::string head;
    codecs::WireWriter(head).lengthPrefix(kInferResponseField, plan->size());
    head.append(plan->head);
    plan->head = std::move(head);
    appendPlan(chain, std::move(*plan));
  }
  return std::move(chain).finish();
}

}  // namespace infergate::gateway::upstream
